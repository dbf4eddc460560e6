//! The unit the judge loop works on: one policy output for one problem,
//! with the scenario it belongs to and the gold solution that only the
//! reference-based evaluator and the annotator may see.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use verifine_train::problem::Problem;

/// Scores per judged dimension (`grounded`, `valid`, `complete` for the
/// default task), each in [0, 1]. The dimensions are the judge's; they stay
/// fixed across revisions.
pub type Dimensions = BTreeMap<String, f64>;

/// One response to a problem.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Case {
    /// Unique within a run (`r<round>-<set>-<i>-<copy>`).
    pub id: String,
    /// The problem's scenario (form and length, e.g. `story-3`): the cell
    /// failures and curriculum weights are counted in.
    pub scenario: String,
    /// The problem as the policy saw it.
    pub prompt: String,
    /// The policy's answer.
    pub response: String,
    /// The gold worked solution; never shown to the reference-free judge.
    pub reference: String,
}

impl Case {
    /// A case for `problem` answered with `response`.
    pub fn new(id: impl Into<String>, problem: &Problem, response: impl Into<String>) -> Self {
        Case {
            id: id.into(),
            scenario: scenario(problem),
            prompt: problem.prompt.clone(),
            response: response.into(),
            reference: problem.solution.clone(),
        }
    }
}

/// The scenario of a generated problem: its form (`story` or
/// `instructions`) and its number of operations.
pub fn scenario(problem: &Problem) -> String {
    let form = if problem.prompt.starts_with("Start with") {
        "instructions"
    } else {
        "story"
    };
    let steps = problem
        .solution
        .lines()
        .filter(|l| l.contains(" = "))
        .count();
    format!("{form}-{steps}")
}

pub use verifine_train::task::steps;

/// The number after the last `####`, when there is one.
pub fn final_answer(text: &str) -> Option<i64> {
    let (_, tail) = text.rsplit_once("####")?;
    tail.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use verifine_train::task::{Step, TaskConfig, generate};

    #[test]
    fn gold_solutions_parse_into_computing_steps() {
        for problem in generate(2, 100, &TaskConfig::default()) {
            let parsed = steps(&problem.solution);
            assert!(parsed.len() >= 2);
            assert!(parsed.iter().all(Step::computes));
            assert_eq!(final_answer(&problem.solution), Some(problem.answer));
            let s = scenario(&problem);
            assert!(s.ends_with(&parsed.len().to_string()), "{s}");
        }
    }

    #[test]
    fn malformed_lines_are_not_steps() {
        let text = "3 + = 4\n3 ^ 2 = 9\n99999999999999999999 + 1 = 2\n3 + 4 = 7 extra\n2 * 3 = 6";
        assert_eq!(steps(text).len(), 1);
        assert_eq!(final_answer("#### x"), None);
        assert_eq!(final_answer("no marker"), None);
        assert!(
            !Step {
                from: i64::MAX,
                op: '+',
                operand: 1,
                result: 0
            }
            .computes()
        );
    }
}
