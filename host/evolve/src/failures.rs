//! Failure discovery: the judge's scores of the policy's answers on the
//! anchor set, counted per scenario × dimension, and told apart as
//! systematic (recurring across problems of the scenario) or isolated.

use crate::cases::Case;
use crate::judge::JudgeScore;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Whether a failure recurs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// Most answers in the cell fail, on more than one problem.
    Systematic,
    /// Some answers fail, not recurrently.
    Isolated,
}

/// Failures in one scenario × dimension cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureCell {
    /// The scenario.
    pub scenario: String,
    /// The judge's dimension.
    pub dimension: String,
    /// Answers scoring below the threshold in this dimension.
    pub failures: usize,
    /// Answers in the cell.
    pub answers: usize,
    /// Distinct problems with at least one failing answer.
    pub problems_failing: usize,
    /// Systematic or isolated.
    pub kind: FailureKind,
}

/// The cells with at least one failure, systematic first, then by failure
/// rate. A dimension score below `threshold` is a failure; a cell is
/// systematic when at least `systematic_share` of its answers fail on at
/// least two problems. `problem` gives each case's problem (answers of one
/// problem share it).
pub fn discover(
    cases: &[Case],
    problem: &[usize],
    scores: &[JudgeScore],
    threshold: f64,
    systematic_share: f64,
) -> Vec<FailureCell> {
    #[derive(Default)]
    struct Count {
        failures: usize,
        answers: usize,
        failing: BTreeSet<usize>,
    }
    let mut cells: BTreeMap<(String, String), Count> = BTreeMap::new();
    for ((case, score), &p) in cases.iter().zip(scores).zip(problem) {
        for (dimension, &value) in &score.dimensions {
            let cell = cells
                .entry((case.scenario.clone(), dimension.clone()))
                .or_default();
            cell.answers += 1;
            if value < threshold {
                cell.failures += 1;
                cell.failing.insert(p);
            }
        }
    }
    let mut out: Vec<FailureCell> = cells
        .into_iter()
        .filter(|(_, c)| c.failures > 0)
        .map(|((scenario, dimension), c)| {
            let share = c.failures as f64 / c.answers as f64;
            let kind = if share >= systematic_share && c.failing.len() >= 2 {
                FailureKind::Systematic
            } else {
                FailureKind::Isolated
            };
            FailureCell {
                scenario,
                dimension,
                failures: c.failures,
                answers: c.answers,
                problems_failing: c.failing.len(),
                kind,
            }
        })
        .collect();
    let rate = |c: &FailureCell| c.failures as f64 / c.answers as f64;
    out.sort_by(|a, b| {
        (a.kind == FailureKind::Isolated)
            .cmp(&(b.kind == FailureKind::Isolated))
            .then(rate(b).total_cmp(&rate(a)))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recurring_failures_are_systematic_and_lone_ones_isolated() {
        let case = |s: &str| Case {
            id: String::new(),
            scenario: s.into(),
            prompt: String::new(),
            response: String::new(),
            reference: String::new(),
        };
        let score = |g: f64| JudgeScore {
            total: g,
            dimensions: [("grounded".to_string(), g)].into(),
            explanation: String::new(),
            error: None,
        };
        let cases = vec![
            case("story-2"),
            case("story-2"),
            case("story-2"),
            case("instructions-2"),
            case("instructions-2"),
        ];
        let scores = vec![score(0.0), score(0.0), score(1.0), score(0.0), score(1.0)];
        let cells = discover(&cases, &[0, 1, 2, 3, 4], &scores, 0.5, 0.5);
        assert_eq!(cells.len(), 2);
        assert_eq!(
            (cells[0].scenario.as_str(), cells[0].kind),
            ("story-2", FailureKind::Systematic)
        );
        assert_eq!(
            (cells[1].scenario.as_str(), cells[1].kind),
            ("instructions-2", FailureKind::Isolated)
        );
    }
}
