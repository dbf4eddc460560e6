//! Revision agents propose new judge rules from the disputed cases. The
//! loop decides (see [`crate::calibration`]); an agent only proposes.
//!
//! [`RuleSearchAgent`] is the built-in stand-in for an LLM agent, for the
//! `worked-steps` judge: it reads where the judge's dimension scores sit
//! above or below the human labels on the disputed cases and proposes one
//! edit at a time from the rubric's library of sub-criteria — turn on a
//! stricter check where the judge is too lenient, halve a weight where it is
//! too harsh. It never sees the frozen test labels or the gold answers.

use crate::cases::Case;
use crate::error::Result;
use crate::judge::code::CodeSubmission;
use crate::judge::{JudgeRevision, JudgeScore};
use crate::labels::{Clarification, Label};
use serde_json::{Value, json};

/// A case where the judge and the human label disagree.
#[derive(Debug, Clone, PartialEq)]
pub struct Disputed {
    /// The case.
    pub case: Case,
    /// What the live judge said.
    pub judge: JudgeScore,
    /// What the person said (newest revision).
    pub human: Label,
}

impl Disputed {
    /// The case as an agent may see it: without the gold solution (the
    /// judge is reference-free, and so are its revisions).
    pub fn case_without_reference(&self) -> Case {
        Case {
            reference: String::new(),
            ..self.case.clone()
        }
    }
}

/// What an agent is given.
#[derive(Debug, Clone, Copy)]
pub struct RevisionRequest<'a> {
    /// The live revision.
    pub live: &'a JudgeRevision,
    /// Disputed cases of the accumulated set, largest disagreement first.
    pub disputed: &'a [Disputed],
    /// Clarifications people wrote on criteria.
    pub clarifications: &'a [Clarification],
    /// Rules already proposed in this round (accepted or not).
    pub tried: &'a [Value],
    /// The whole accumulated labelled set (what a retrained judge model
    /// learns from), cases with their references removed.
    pub cases: &'a [Case],
    /// The newest label of each of `cases`.
    pub labels: &'a [Label],
}

/// A proposed revision.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    /// The complete new rules.
    pub rules: Value,
    /// Why, in the agent's words (kept in the calibration log).
    pub rationale: String,
    /// New code for the judge, when the agent wrote some: the component
    /// (built here from its crate), or why it could not be built or read.
    pub code: Option<std::result::Result<CodeSubmission, String>>,
    /// A retrained judge model's checkpoint, when the agent retrained one
    /// (see [`crate::verifier`]).
    pub verifier: Option<std::path::PathBuf>,
}

/// Proposes judge revisions.
pub trait RevisionAgent {
    /// The agent's name, for the calibration log.
    fn name(&self) -> String;

    /// The next proposal, or `None` when it has nothing more to offer.
    fn propose(&mut self, request: &RevisionRequest<'_>) -> Result<Option<Proposal>>;
}

/// `worked-steps`' sub-criteria by dimension, loosest first.
const LIBRARY: [(&str, &[&str]); 3] = [
    (
        "grounded",
        &[
            "has-steps",
            "numbers-appear",
            "starts-from-problem",
            "operands-in-order",
            "operations-match",
            "step-count-matches",
        ],
    ),
    ("valid", &["steps-compute", "chain-continues"]),
    (
        "complete",
        &["final-marked", "final-follows", "nothing-after-final"],
    ),
];

/// The built-in agent for `worked-steps` rules.
#[derive(Debug, Clone, Default)]
pub struct RuleSearchAgent;

impl RevisionAgent for RuleSearchAgent {
    fn name(&self) -> String {
        "rule-search (built-in)".to_string()
    }

    fn propose(&mut self, request: &RevisionRequest<'_>) -> Result<Option<Proposal>> {
        let gaps = dimension_gaps(request.disputed);
        let mut order: Vec<(&str, f64)> = gaps.clone();
        // A person's clarification puts its dimension first.
        order.sort_by(|a, b| {
            let clarified = |d: &str| {
                request
                    .clarifications
                    .iter()
                    .any(|c| c.criterion.starts_with(d))
            };
            clarified(b.0)
                .cmp(&clarified(a.0))
                .then(b.1.abs().total_cmp(&a.1.abs()))
        });
        for (dimension, gap) in order {
            for (rules, rationale) in edits(&request.live.rules, dimension, gap) {
                if !request.tried.contains(&rules) && rules != request.live.rules {
                    return Ok(Some(Proposal {
                        rules,
                        rationale,
                        code: None,
                        verifier: None,
                    }));
                }
            }
        }
        Ok(None)
    }
}

/// Mean (judge − human) per dimension over the disputed cases.
fn dimension_gaps(disputed: &[Disputed]) -> Vec<(&'static str, f64)> {
    LIBRARY
        .iter()
        .filter_map(|(dimension, _)| {
            let gaps: Vec<f64> = disputed
                .iter()
                .filter_map(|d| {
                    Some(d.judge.dimensions.get(*dimension)? - d.human.dimensions.get(*dimension)?)
                })
                .collect();
            (!gaps.is_empty()).then(|| (*dimension, gaps.iter().sum::<f64>() / gaps.len() as f64))
        })
        .collect()
}

/// Candidate single edits of `rules` for a dimension the judge scores `gap`
/// above (positive) or below (negative) the people.
fn edits(rules: &Value, dimension: &str, gap: f64) -> Vec<(Value, String)> {
    let library = LIBRARY
        .iter()
        .find(|(d, _)| *d == dimension)
        .map_or(&[][..], |(_, l)| l);
    let active = |rules: &Value, sub: &str| rules[dimension][sub].as_f64().is_some_and(|w| w > 0.0);
    let mut out = Vec::new();
    if gap > 0.0 {
        for sub in library.iter().filter(|s| !active(rules, s)) {
            let mut next = rules.clone();
            set(&mut next, dimension, sub, 1.0);
            out.push((
                next,
                format!("judge scores {dimension} {gap:+.2} above the labels on disputed cases: also check {dimension}/{sub}"),
            ));
        }
        let weight = rules["dimension_weights"][dimension]
            .as_f64()
            .unwrap_or(1.0);
        let mut heavier = rules.clone();
        set(&mut heavier, "dimension_weights", dimension, weight * 2.0);
        out.push((
            heavier,
            format!("{dimension} misjudged by {gap:+.2}: weigh it twice as much"),
        ));
    } else if gap < 0.0 {
        for sub in library.iter().filter(|s| active(rules, s)) {
            let weight = rules[dimension][*sub].as_f64().unwrap_or(1.0);
            let mut next = rules.clone();
            set(&mut next, dimension, sub, weight / 2.0);
            out.push((
                next,
                format!("judge scores {dimension} {gap:+.2} below the labels: halve {dimension}/{sub}'s weight"),
            ));
        }
        // A model-backed dimension (`worked-steps`' `ask`): its verdict too.
        let asked = rules["ask"][dimension].as_f64().unwrap_or(0.0);
        if asked > 0.0 {
            let mut next = rules.clone();
            set(&mut next, "ask", dimension, asked / 2.0);
            out.push((
                next,
                format!("judge scores {dimension} {gap:+.2} below the labels: halve the judge model's weight there"),
            ));
        }
    }
    out
}

fn set(rules: &mut Value, table: &str, key: &str, value: f64) {
    if !rules.is_object() {
        *rules = json!({});
    }
    let entry = &mut rules[table];
    if !entry.is_object() {
        *entry = json!({});
    }
    entry[key] = json!(value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels::LabelAction;

    fn disputed(judge_grounded: f64, human_grounded: f64) -> Disputed {
        let dims = |g: f64| {
            [
                ("grounded".to_string(), g),
                ("valid".to_string(), 1.0),
                ("complete".to_string(), 1.0),
            ]
            .into()
        };
        Disputed {
            case: Case {
                id: "c".into(),
                scenario: "story-2".into(),
                prompt: "p".into(),
                response: "r".into(),
                reference: "s".into(),
            },
            judge: JudgeScore {
                total: 1.0,
                dimensions: dims(judge_grounded),
                explanation: String::new(),
                error: None,
            },
            human: Label {
                case_id: "c".into(),
                annotator: "a".into(),
                dimensions: dims(human_grounded),
                total: 0.6,
                revision: 0,
                action: LabelAction::Score,
                note: None,
            },
        }
    }

    #[test]
    fn a_lenient_dimension_gets_its_next_check_and_nothing_is_proposed_twice() {
        let live = JudgeRevision::initial(
            json!({"grounded": {"has-steps": 1.0}, "valid": {"steps-compute": 1.0}}),
        );
        let cases = vec![disputed(1.0, 0.0)];
        let mut agent = RuleSearchAgent;
        let mut tried = Vec::new();
        let first = agent
            .propose(&RevisionRequest {
                live: &live,
                disputed: &cases,
                clarifications: &[],
                tried: &tried,
                cases: &[],
                labels: &[],
            })
            .unwrap()
            .unwrap();
        assert_eq!(first.rules["grounded"]["numbers-appear"], json!(1.0));
        tried.push(first.rules.clone());
        let second = agent
            .propose(&RevisionRequest {
                live: &live,
                disputed: &cases,
                clarifications: &[],
                tried: &tried,
                cases: &[],
                labels: &[],
            })
            .unwrap()
            .unwrap();
        assert_ne!(second.rules, first.rules);
        assert_eq!(second.rules["grounded"]["starts-from-problem"], json!(1.0));
    }

    #[test]
    fn with_no_disagreement_there_is_nothing_to_propose() {
        let live = JudgeRevision::initial(json!({}));
        let cases = vec![disputed(0.5, 0.5)];
        let request = RevisionRequest {
            live: &live,
            disputed: &cases,
            clarifications: &[],
            tried: &[],
            cases: &[],
            labels: &[],
        };
        assert_eq!(RuleSearchAgent.propose(&request).unwrap(), None);
    }
}
