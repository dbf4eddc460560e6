//! A row written from a judgment read in place is the owned row, byte for
//! byte, whatever the judgment holds and however scoring went.

use super::*;
use crate::judgments::Judgments;
use crate::{Judgment, Verdict};

fn judgment(total: Option<f64>) -> Judgment {
    Judgment {
        total,
        verdicts: vec![Verdict {
            criterion: "cites \"sources\"\n".into(),
            score: -0.5,
            met: Some(false),
            confidence: Some(0.25),
            explanation: Some("é — ünïcode".into()),
        }],
        sub_scores: vec![SubScore {
            name: "style".into(),
            value: 2.0,
        }],
        criteria: vec![Criterion {
            id: "row-1".into(),
            description: "asks".into(),
            weight: -1.0,
            dimension: "safety".into(),
            tags: vec!["a".into(), String::new()],
        }],
        explanation: None,
    }
}

#[test]
fn in_place_rows_are_the_owned_rows() {
    let provenance = |name: &str| Provenance {
        name: name.into(),
        version: "1.2.3".into(),
        sha256: "ab".into(),
    };
    let (rubric, aggregator) = (provenance("rubric"), provenance("weighted-sum"));
    let sample = Sample::new("row \"7\"", "q", "r");
    let bare = Judgment {
        verdicts: vec![],
        sub_scores: vec![],
        criteria: vec![],
        explanation: Some("only this".into()),
        total: Some(0.0),
    };
    let batch = Judgments::from_owned(&[
        Ok(judgment(Some(0.5))),
        Ok(judgment(None)),
        Ok(bare),
        Err("no reference".into()),
    ]);
    // (total, rubric_total, error) as scoring could leave them.
    let outcomes = [
        (Some(0.5), None, None),
        (Some(1.5), Some(0.5), None),
        (None, None, Some("aggregator: broke")),
        (None, None, Some("non-finite total NaN")),
        (Some(0.0), None, None),
        (None, None, Some("no reference")),
    ];
    let mut compared = 0;
    for (index, judged) in [0, 0, 1, 1, 2, 3].into_iter().zip(&outcomes) {
        let (total, rubric_total, error) = *judged;
        let scored = ScoredRef {
            total,
            rubric_total,
            judgment: batch.get(index).unwrap().ok(),
            error,
        };
        let owned = output_row(&sample, &scored.to_scored_sample(), &rubric, &aggregator);
        let in_place = output_row_in_place(&sample, scored, &rubric, &aggregator);
        assert_eq!(
            serde_json::to_string(&in_place).unwrap(),
            serde_json::to_string(&owned).unwrap()
        );
        compared += 1;
    }
    assert_eq!(compared, outcomes.len());
}
