//! The fixed library of sub-criteria, grouped in three dimensions. Each
//! scores a response in [0, 1] with a short note; per-step checks score the
//! fraction of steps that pass, and a response without steps scores 0 on them.

use crate::problem::{self, Problem};
use crate::response::{self, Response, Step};

/// The three fixed dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Dimension {
    /// The steps use the problem's quantities.
    Grounded,
    /// Each step computes correctly.
    Valid,
    /// A marked final answer that follows from the steps.
    Complete,
}

impl Dimension {
    /// All dimensions, in report order.
    pub const ALL: [Dimension; 3] = [Dimension::Grounded, Dimension::Valid, Dimension::Complete];

    /// The dimension's id in configs and reports.
    pub fn id(self) -> &'static str {
        match self {
            Dimension::Grounded => "grounded",
            Dimension::Valid => "valid",
            Dimension::Complete => "complete",
        }
    }

    /// The sub-criteria of the library that belong to this dimension.
    pub fn subs(self) -> impl Iterator<Item = Sub> {
        Sub::ALL.into_iter().filter(move |s| s.dimension() == self)
    }
}

/// A sub-criterion of the library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Sub {
    /// At least one step line.
    HasSteps,
    /// Every step's second operand occurs as a number in the prompt.
    NumbersAppear,
    /// The first step starts from the problem's starting quantity.
    StartsFromProblem,
    /// The steps' second operands are the problem's operands, in order.
    OperandsInOrder,
    /// The steps' operators are the problem's operations, in order.
    OperationsMatch,
    /// As many steps as the problem has operations.
    StepCountMatches,
    /// Each step's arithmetic is right.
    StepsCompute,
    /// Each step after the first starts from the previous step's result.
    ChainContinues,
    /// A final line `#### N` with an integer N.
    FinalMarked,
    /// The final answer equals the last step's result.
    FinalFollows,
    /// No non-blank text after the final line.
    NothingAfterFinal,
}

impl Sub {
    /// The whole library, in report order (grouped by dimension).
    pub const ALL: [Sub; 11] = [
        Sub::HasSteps,
        Sub::NumbersAppear,
        Sub::StartsFromProblem,
        Sub::OperandsInOrder,
        Sub::OperationsMatch,
        Sub::StepCountMatches,
        Sub::StepsCompute,
        Sub::ChainContinues,
        Sub::FinalMarked,
        Sub::FinalFollows,
        Sub::NothingAfterFinal,
    ];

    /// The sub-criterion's id within its dimension.
    pub fn id(self) -> &'static str {
        match self {
            Sub::HasSteps => "has-steps",
            Sub::NumbersAppear => "numbers-appear",
            Sub::StartsFromProblem => "starts-from-problem",
            Sub::OperandsInOrder => "operands-in-order",
            Sub::OperationsMatch => "operations-match",
            Sub::StepCountMatches => "step-count-matches",
            Sub::StepsCompute => "steps-compute",
            Sub::ChainContinues => "chain-continues",
            Sub::FinalMarked => "final-marked",
            Sub::FinalFollows => "final-follows",
            Sub::NothingAfterFinal => "nothing-after-final",
        }
    }

    /// The sub-criterion with id `id`, bare (`final-marked`) or qualified
    /// by its dimension (`complete/final-marked`).
    pub fn from_id(id: &str) -> Option<Sub> {
        let bare = match id.split_once('/') {
            Some((dimension, bare)) => {
                let sub = Sub::from_id(bare)?;
                return (sub.dimension().id() == dimension).then_some(sub);
            }
            None => id,
        };
        Sub::ALL.into_iter().find(|s| s.id() == bare)
    }

    /// The dimension it belongs to.
    pub fn dimension(self) -> Dimension {
        match self {
            Sub::HasSteps
            | Sub::NumbersAppear
            | Sub::StartsFromProblem
            | Sub::OperandsInOrder
            | Sub::OperationsMatch
            | Sub::StepCountMatches => Dimension::Grounded,
            Sub::StepsCompute | Sub::ChainContinues => Dimension::Valid,
            Sub::FinalMarked | Sub::FinalFollows | Sub::NothingAfterFinal => Dimension::Complete,
        }
    }

    /// `"<dimension>/<sub-criterion>"`, the criterion id in reports.
    pub fn criterion_id(self) -> String {
        format!("{}/{}", self.dimension().id(), self.id())
    }

    /// One sentence for `describe()`.
    pub fn description(self) -> &'static str {
        match self {
            Sub::HasSteps => "The solution shows at least one step line `a op b = c`",
            Sub::NumbersAppear => "Every step's second operand is a number from the problem",
            Sub::StartsFromProblem => "The first step starts from the problem's starting quantity",
            Sub::OperandsInOrder => "The steps' second operands are the problem's, in order",
            Sub::OperationsMatch => "The steps' operators are the problem's operations, in order",
            Sub::StepCountMatches => "As many steps as the problem has operations",
            Sub::StepsCompute => "Each step's arithmetic is correct",
            Sub::ChainContinues => "Each step starts from the previous step's result",
            Sub::FinalMarked => "A final line `#### N` with an integer N",
            Sub::FinalFollows => "The final answer equals the last step's result",
            Sub::NothingAfterFinal => "No text after the final line",
        }
    }

    /// Whether it needs the problem's operation list (so scores 0 when the
    /// prompt does not parse).
    pub fn needs_problem(self) -> bool {
        matches!(
            self,
            Sub::StartsFromProblem
                | Sub::OperandsInOrder
                | Sub::OperationsMatch
                | Sub::StepCountMatches
        )
    }
}

/// The note of the checks that need the problem when the prompt does not parse.
pub const UNPARSED: &str = "the prompt could not be parsed as a problem";

/// A sub-criterion's result: a score in [0, 1] and a short note.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// The score.
    pub score: f64,
    /// Why.
    pub note: String,
}

impl Check {
    /// `passed` of `total`, noted as `k/n <what>`; nothing to check scores 0.
    fn ratio(passed: usize, total: usize, what: &str) -> Check {
        Check {
            score: if total == 0 {
                0.0
            } else {
                passed as f64 / total as f64
            },
            note: format!("{passed}/{total} {what}"),
        }
    }

    fn pass_fail(pass: bool, note: String) -> Check {
        Check {
            score: if pass { 1.0 } else { 0.0 },
            note,
        }
    }
}

/// What the checks look at, read once per sample.
pub struct Facts {
    /// The parsed response.
    pub response: Response,
    /// The parsed problem, when the prompt is in one of the task's forms.
    pub problem: Option<Problem>,
    /// The numbers written in the prompt, sorted and deduplicated.
    pub prompt_numbers: Vec<i64>,
}

impl Facts {
    /// Reads a prompt and a response (never the reference).
    pub fn read(prompt: &str, response: &str) -> Facts {
        Facts {
            response: response::parse(response),
            problem: problem::parse(prompt),
            prompt_numbers: problem::numbers_in(prompt),
        }
    }

    /// Scores one sub-criterion.
    pub fn check(&self, sub: Sub) -> Check {
        let steps = &self.response.steps;
        if steps.is_empty() && sub != Sub::FinalMarked && sub != Sub::NothingAfterFinal {
            return Check::pass_fail(false, "no step lines".into());
        }
        if sub.needs_problem() && self.problem.is_none() {
            return Check::pass_fail(false, UNPARSED.into());
        }
        let problem = self.problem.as_ref();
        match sub {
            Sub::HasSteps => Check::pass_fail(
                true,
                match steps.len() {
                    1 => "1 step line".to_string(),
                    n => format!("{n} step lines"),
                },
            ),
            Sub::NumbersAppear => fraction(
                steps
                    .iter()
                    .map(|s| self.prompt_numbers.binary_search(&s.b).is_ok()),
                "steps use a number from the prompt",
            ),
            Sub::StartsFromProblem => {
                let start = problem.map_or(0, |p| p.start);
                Check::pass_fail(
                    steps[0].a == start,
                    format!("starts from {}, the problem from {start}", steps[0].a),
                )
            }
            Sub::OperandsInOrder => positionwise(
                steps,
                problem.map_or(&[][..], |p| &p.ops),
                |step, &(_, n)| step.b == n,
                "operands match the problem's",
            ),
            Sub::OperationsMatch => positionwise(
                steps,
                problem.map_or(&[][..], |p| &p.ops),
                |step, &(op, _)| step.op == op,
                "operations match the problem's",
            ),
            Sub::StepCountMatches => {
                let wanted = problem.map_or(0, |p| p.ops.len());
                Check::pass_fail(
                    steps.len() == wanted,
                    format!("{} steps for {wanted} operations", steps.len()),
                )
            }
            Sub::StepsCompute => fraction(steps.iter().map(Step::computes), "steps compute"),
            Sub::ChainContinues => {
                if steps.len() == 1 {
                    return Check::pass_fail(true, "a single step".into());
                }
                fraction(
                    steps.windows(2).map(|w| w[1].a == w[0].c),
                    "later steps continue from the previous result",
                )
            }
            Sub::FinalMarked => match self.response.final_line {
                Some(f) if f.value.is_some() => Check::pass_fail(true, "#### line found".into()),
                Some(_) => Check::pass_fail(false, "#### without an integer".into()),
                None => Check::pass_fail(false, "no #### line".into()),
            },
            Sub::FinalFollows => {
                let last = steps[steps.len() - 1].c;
                match self.response.final_line.and_then(|f| f.value) {
                    Some(n) => {
                        Check::pass_fail(n == last, format!("final {n}, last step gives {last}"))
                    }
                    None => Check::pass_fail(false, "no marked final answer".into()),
                }
            }
            Sub::NothingAfterFinal => match self.response.final_line {
                Some(f) if f.value.is_some() => Check::pass_fail(
                    !f.text_after,
                    if f.text_after {
                        "text after the final line"
                    } else {
                        "ends at the final line"
                    }
                    .into(),
                ),
                _ => Check::pass_fail(false, "no marked final answer".into()),
            },
        }
    }
}

/// The fraction of `passes` that are true, noted as `k/n <what>`.
fn fraction(passes: impl Iterator<Item = bool>, what: &str) -> Check {
    let (mut passed, mut total) = (0usize, 0usize);
    for pass in passes {
        passed += usize::from(pass);
        total += 1;
    }
    Check::ratio(passed, total, what)
}

/// Compares steps with the problem's operations position by position; a
/// length mismatch counts as misses over the longer list.
fn positionwise(
    steps: &[Step],
    ops: &[(problem::Op, i64)],
    same: impl Fn(&Step, &(problem::Op, i64)) -> bool,
    what: &str,
) -> Check {
    let total = steps.len().max(ops.len());
    let passed = steps.iter().zip(ops).filter(|(s, o)| same(s, o)).count();
    Check::ratio(passed, total, what)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROMPT: &str = "Start with 7, then add 5, then multiply by 2. What is the result?";

    fn score(sub: Sub, prompt: &str, response: &str) -> f64 {
        Facts::read(prompt, response).check(sub).score
    }

    #[test]
    fn ids_round_trip_and_group_by_dimension() {
        for sub in Sub::ALL {
            assert_eq!(Sub::from_id(sub.id()), Some(sub));
            assert_eq!(Sub::from_id(&sub.criterion_id()), Some(sub));
        }
        assert_eq!(Sub::from_id("valid/final-marked"), None);
        assert_eq!(Sub::from_id("nope"), None);
        let counts: Vec<usize> = Dimension::ALL.iter().map(|d| d.subs().count()).collect();
        assert_eq!(counts, vec![6, 2, 3]);
    }

    #[test]
    fn the_correct_solution_passes_everything() {
        let facts = Facts::read(PROMPT, "7 + 5 = 12\n12 * 2 = 24\n#### 24");
        for sub in Sub::ALL {
            assert_eq!(facts.check(sub).score, 1.0, "{sub:?}");
        }
    }

    #[test]
    fn grounded_checks() {
        let ungrounded = "1 + 1 = 2\n#### 2";
        assert_eq!(score(Sub::HasSteps, PROMPT, ungrounded), 1.0);
        assert_eq!(score(Sub::HasSteps, PROMPT, "#### 24"), 0.0);
        assert_eq!(score(Sub::NumbersAppear, PROMPT, ungrounded), 0.0);
        assert_eq!(
            score(Sub::NumbersAppear, PROMPT, "7 + 5 = 12\n12 + 9 = 21"),
            0.5
        );
        assert_eq!(score(Sub::StartsFromProblem, PROMPT, ungrounded), 0.0);
        assert_eq!(score(Sub::StartsFromProblem, PROMPT, "7 * 2 = 14"), 1.0);
        // Operands and operations position by position, over the longer list.
        let swapped = "7 * 2 = 14\n14 + 5 = 19";
        assert_eq!(score(Sub::OperandsInOrder, PROMPT, swapped), 0.0);
        assert_eq!(score(Sub::OperationsMatch, PROMPT, swapped), 0.0);
        let extra = "7 + 5 = 12\n12 * 2 = 24\n24 + 0 = 24\n24 * 1 = 24";
        assert_eq!(score(Sub::OperandsInOrder, PROMPT, extra), 0.5);
        assert_eq!(score(Sub::OperationsMatch, PROMPT, extra), 0.5);
        assert_eq!(score(Sub::StepCountMatches, PROMPT, extra), 0.0);
        assert_eq!(score(Sub::OperandsInOrder, PROMPT, "7 + 5 = 12"), 0.5);
        assert_eq!(
            score(Sub::StepCountMatches, PROMPT, "7 + 5 = 12\n1 - 1 = 0"),
            1.0
        );
    }

    #[test]
    fn an_unparsed_prompt_zeroes_only_the_checks_that_need_it() {
        let facts = Facts::read("What is 7 + 5?", "7 + 5 = 12\n#### 12");
        for sub in Sub::ALL {
            let check = facts.check(sub);
            if sub.needs_problem() {
                assert_eq!(check.score, 0.0, "{sub:?}");
                assert!(check.note.contains("could not be parsed"), "{}", check.note);
            } else {
                assert_eq!(check.score, 1.0, "{sub:?}");
            }
        }
    }

    #[test]
    fn valid_checks() {
        assert_eq!(
            score(Sub::StepsCompute, PROMPT, "7 + 5 = 13\n13 * 2 = 26"),
            0.5
        );
        assert_eq!(
            score(Sub::ChainContinues, PROMPT, "7 + 5 = 13\n13 * 2 = 26"),
            1.0
        );
        assert_eq!(
            score(Sub::ChainContinues, PROMPT, "7 + 5 = 12\n7 * 2 = 14"),
            0.0
        );
        assert_eq!(score(Sub::ChainContinues, PROMPT, "7 + 5 = 12"), 1.0);
        let huge = format!("{} * 2 = 0", i64::MAX);
        assert_eq!(score(Sub::StepsCompute, PROMPT, &huge), 0.0);
    }

    #[test]
    fn complete_checks() {
        assert_eq!(score(Sub::FinalMarked, PROMPT, "#### 24"), 1.0);
        assert_eq!(score(Sub::FinalMarked, PROMPT, "7 + 5 = 12\n####"), 0.0);
        assert_eq!(score(Sub::FinalMarked, PROMPT, "the answer is 24"), 0.0);
        assert_eq!(score(Sub::FinalFollows, PROMPT, "7 + 5 = 12\n#### 12"), 1.0);
        assert_eq!(score(Sub::FinalFollows, PROMPT, "7 + 5 = 12\n#### 24"), 0.0);
        assert_eq!(score(Sub::FinalFollows, PROMPT, "#### 24"), 0.0);
        assert_eq!(score(Sub::FinalFollows, PROMPT, "7 + 5 = 12"), 0.0);
        assert_eq!(score(Sub::NothingAfterFinal, PROMPT, "#### 24\n\n"), 1.0);
        assert_eq!(score(Sub::NothingAfterFinal, PROMPT, "#### 24\nsure"), 0.0);
        assert_eq!(score(Sub::NothingAfterFinal, PROMPT, "#### x"), 0.0);
    }

    #[test]
    fn no_steps_scores_zero_on_step_checks() {
        let facts = Facts::read(PROMPT, "");
        for sub in Sub::ALL {
            assert_eq!(facts.check(sub).score, 0.0, "{sub:?}");
        }
    }
}
