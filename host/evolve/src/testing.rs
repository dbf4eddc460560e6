//! What the unit tests of several modules build from: judged cases, labels
//! and scores small enough to reason about, and scratch directories.

use crate::cases::Case;
use crate::judge::JudgeScore;
use crate::labels::{Label, LabelAction};

/// A scratch directory for test `name`, removed by the test that passes.
pub(crate) fn scratch(name: &str) -> verifine_test_support::ScratchDir {
    verifine_test_support::scratch_path(&format!("evolve-{name}"))
}

/// Case `c<i>` with a placeholder prompt and response.
pub(crate) fn case(i: usize) -> Case {
    Case {
        id: format!("c{i}"),
        scenario: "s".into(),
        prompt: format!("p{i}"),
        response: "r".into(),
        reference: "GOLD-SOLUTION".into(),
    }
}

/// A label of case `c<i>` scoring one dimension, `grounded`, at `total`.
pub(crate) fn label(i: usize, total: f64) -> Label {
    Label {
        case_id: format!("c{i}"),
        annotator: "a".into(),
        dimensions: [("grounded".to_string(), total)].into(),
        total,
        revision: 0,
        action: LabelAction::Score,
        note: None,
    }
}

/// Judge scores with these totals, each its only dimension.
pub(crate) fn scored(totals: Vec<f64>) -> Vec<JudgeScore> {
    totals
        .into_iter()
        .map(|t| JudgeScore {
            total: t,
            dimensions: [("grounded".to_string(), t)].into(),
            explanation: String::new(),
            error: None,
        })
        .collect()
}
