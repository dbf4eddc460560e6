//! Which of the newest policy's outputs go to the people: cases where the
//! judge is unsure or its dimensions disagree, where it disagrees with the
//! reference-based evaluator, where a wrong judgment would move training
//! most, and a few of its top and bottom totals to mark the boundary.

use crate::cases::Case;
use crate::judge::JudgeScore;
use crate::labels::QueryReason;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use verifine_base::PASS_MARK;

/// How many cases of each kind (`[queries]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueryConfig {
    /// Uncertain cases per judge loop.
    pub uncertain: usize,
    /// Judge-vs-evaluator disagreements per judge loop.
    pub inconsistent: usize,
    /// High-impact cases per judge loop.
    pub high_impact: usize,
    /// Top- and bottom-scored cases each.
    pub boundary: usize,
    /// A total within this distance of 0.5 is uncertain.
    pub uncertain_band: f64,
    /// Dimension sub-scores this far apart make a case uncertain.
    pub disagreement: f64,
}

impl Default for QueryConfig {
    fn default() -> Self {
        QueryConfig {
            uncertain: 8,
            inconsistent: 8,
            high_impact: 6,
            boundary: 3,
            uncertain_band: 0.2,
            disagreement: 0.5,
        }
    }
}

/// Picks the query set: indices into `cases` with the reason each was
/// picked, each case (and each distinct response to a prompt) at most once,
/// skipping cases whose id is in `labelled`. `evaluator` holds the
/// reference-based evaluator's totals.
pub fn select(
    config: &QueryConfig,
    cases: &[Case],
    judge: &[JudgeScore],
    evaluator: &[f64],
    labelled: &HashSet<String>,
) -> Vec<(usize, QueryReason)> {
    let mut frequency: BTreeMap<&str, usize> = BTreeMap::new();
    for case in cases {
        *frequency.entry(&case.scenario).or_default() += 1;
    }
    let n = cases.len().max(1) as f64;
    let by = |key: &dyn Fn(usize) -> Option<f64>| -> Vec<usize> {
        let mut keyed: Vec<(f64, usize)> = (0..cases.len())
            .filter_map(|i| Some((key(i)?, i)))
            .collect();
        keyed.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        keyed.into_iter().map(|(_, i)| i).collect()
    };
    let uncertain = by(&|i| {
        let s = &judge[i];
        let near = (s.total - PASS_MARK).abs() < config.uncertain_band;
        (near || s.disagreement() >= config.disagreement)
            .then(|| 1.0 - s.confidence() + s.disagreement())
    });
    let inconsistent = by(&|i| {
        ((judge[i].total >= PASS_MARK) != (evaluator[i] >= PASS_MARK))
            .then(|| (judge[i].total - evaluator[i]).abs())
    });
    let high_impact = by(&|i| {
        (judge[i].total >= PASS_MARK)
            .then(|| judge[i].total * frequency[cases[i].scenario.as_str()] as f64 / n)
    });
    let top = by(&|i| Some(judge[i].total));
    let bottom: Vec<usize> = top.iter().rev().copied().collect();

    let mut seen: HashSet<(&str, &str)> = HashSet::new();
    let mut picked = Vec::new();
    for (reason, order, quota) in [
        (QueryReason::Uncertain, uncertain, config.uncertain),
        (QueryReason::Inconsistent, inconsistent, config.inconsistent),
        (QueryReason::HighImpact, high_impact, config.high_impact),
        (QueryReason::Top, top, config.boundary),
        (QueryReason::Bottom, bottom, config.boundary),
    ] {
        let mut taken = 0;
        for i in order {
            if taken == quota {
                break;
            }
            let key = (cases[i].prompt.as_str(), cases[i].response.as_str());
            if labelled.contains(&cases[i].id) || !seen.insert(key) {
                continue;
            }
            picked.push((i, reason));
            taken += 1;
        }
    }
    picked
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(i: usize, scenario: &str) -> Case {
        Case {
            id: format!("c{i}"),
            scenario: scenario.into(),
            prompt: format!("p{i}"),
            response: "r".into(),
            reference: "s".into(),
        }
    }

    fn score(total: f64, dims: [f64; 2]) -> JudgeScore {
        JudgeScore {
            total,
            dimensions: [("a".to_string(), dims[0]), ("b".to_string(), dims[1])].into(),
            explanation: String::new(),
            error: None,
        }
    }

    #[test]
    fn each_reason_finds_its_cases_once() {
        let cases: Vec<Case> = (0..6)
            .map(|i| case(i, if i < 4 { "common" } else { "rare" }))
            .collect();
        let judge = vec![
            score(0.5, [0.5, 0.5]), // uncertain
            score(1.0, [1.0, 1.0]), // inconsistent with the evaluator
            score(0.9, [1.0, 0.8]), // high impact
            score(0.0, [0.0, 0.0]),
            score(0.8, [1.0, 0.0]), // dimensions disagree
            score(0.1, [0.1, 0.1]),
        ];
        let evaluator = [0.0, 0.0, 1.0, 0.0, 1.0, 0.0];
        let config = QueryConfig {
            uncertain: 2,
            inconsistent: 1,
            high_impact: 1,
            boundary: 1,
            ..QueryConfig::default()
        };
        let picked = select(&config, &cases, &judge, &evaluator, &HashSet::new());
        let ids: Vec<(usize, QueryReason)> = picked;
        assert_eq!(
            ids,
            [
                (4, QueryReason::Uncertain),
                (0, QueryReason::Uncertain),
                (1, QueryReason::Inconsistent),
                (2, QueryReason::HighImpact),
                // The top totals are taken already: the highest left.
                (5, QueryReason::Top),
                (3, QueryReason::Bottom),
            ]
        );
    }

    #[test]
    fn labelled_cases_are_not_asked_again() {
        let cases = vec![case(0, "s"), case(1, "s")];
        let judge = vec![score(0.5, [0.5, 0.5]), score(0.5, [0.5, 0.5])];
        let labelled: HashSet<String> = ["c0".to_string()].into();
        let picked = select(
            &QueryConfig::default(),
            &cases,
            &judge,
            &[0.0, 0.0],
            &labelled,
        );
        assert!(picked.iter().all(|(i, _)| *i == 1));
    }
}
