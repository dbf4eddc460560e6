//! Coactive calibration: the revision agent proposes, the human labels
//! decide. A proposal is accepted only if the judge's agreement with the
//! labels on the newest batch improves, no earlier case gets worse by more
//! than a margin, and agreement on the whole accumulated set does not fall
//! (neither its Pearson correlation nor its mean absolute error worsens),
//! so a revision cannot buy today's cases with yesterday's competence — one
//! case at a time or spread thinly over many; optionally, the judge's
//! reward on labelled wrong answers may not rise ([`wrong`]). At most `max_versions` proposals per round; when
//! agreement stops rising, the loop asks for human review instead of
//! churning. Every proposal, its scores and the decision go to the log.

use crate::agent::{Disputed, Proposal, RevisionAgent, RevisionRequest};
use crate::cases::Case;
use crate::error::Result;
use crate::judge::code::{CodeSubmission, HandedIn};
use crate::judge::{JudgeRevision, JudgeScore};
use crate::labels::{Clarification, Label};
use serde::{Deserialize, Serialize};
use verifine_runtime::stats::{mae, pearson};

mod accept;
#[cfg(test)]
mod code_tests;
mod replay;
#[cfg(test)]
mod tests;
mod wrong;
use accept::refused_before_scoring;
pub use accept::{Decision, decide};
use replay::check_replayed;

/// The accept rule and the loop's limits (`[calibration]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CalibrationConfig {
    /// Most proposals per round.
    pub max_versions: usize,
    /// How much worse (absolute error against the label) any earlier case may get.
    pub margin: f64,
    /// How much the Pearson correlation on the newest batch must rise.
    pub min_gain: f64,
    /// How far the Pearson correlation on the whole accumulated set (earlier
    /// batches and the newest) may fall: many small regressions, each within
    /// `margin`, still lose competence.
    pub max_accumulated_drop: f64,
    /// How far the mean absolute error on the whole accumulated set may
    /// rise: a revision that ranks cases better but scores them further
    /// from the labels (a reweighting that overshoots) is not an improvement.
    pub max_accumulated_mae_rise: f64,
    /// How far the judge's mean reward on labelled answers with a wrong
    /// final answer may rise (`None`: not checked; see `wrong.rs`).
    pub max_wrong_reward_rise: Option<f64>,
    /// Iterations over which agreement must rise by `review_min_gain`…
    pub review_window: usize,
    /// …or the loop asks for human review and pauses.
    pub review_min_gain: f64,
    /// A case is disputed (shown to the agent) when |judge − label| exceeds this.
    pub dispute_threshold: f64,
    /// Whether an open review request pauses the later judge loops too
    /// (until a person deletes the review file). Off, a review request ends
    /// only the loop that made it, and the next loop calibrates on its new
    /// batch of labels (for runs with no person to review: the simulated
    /// annotator).
    pub pause_on_review: bool,
}

impl Default for CalibrationConfig {
    fn default() -> Self {
        CalibrationConfig {
            max_versions: 20,
            margin: 0.25,
            min_gain: 0.0,
            max_accumulated_drop: 0.0,
            max_accumulated_mae_rise: 0.0,
            max_wrong_reward_rise: None,
            review_window: 10,
            review_min_gain: 0.2,
            dispute_threshold: 0.25,
            pause_on_review: true,
        }
    }
}

/// Agreement of judge totals with human totals.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Alignment {
    /// Pearson correlation (0 when undefined: a constant side).
    pub pearson: f64,
    /// Mean absolute error.
    pub mae: f64,
    /// Cases compared.
    pub n: usize,
}

/// Agreement over the indexed cases.
pub fn alignment(judge: &[f64], human: &[f64], indices: &[usize]) -> Alignment {
    let r = pearson(judge, human, indices);
    Alignment {
        pearson: if r.is_finite() { r } else { 0.0 },
        mae: mae(judge, human, indices),
        n: indices.len(),
    }
}

/// The labelled cases calibration works on: the accumulated judge
/// evaluation set. The frozen test labels are never part of it.
#[derive(Debug, Clone, Default)]
pub struct LabelledSet {
    /// The cases.
    pub cases: Vec<Case>,
    /// The newest human label of each case.
    pub labels: Vec<Label>,
    /// Indices of the newest batch.
    pub current: Vec<usize>,
    /// Indices of the cases from earlier batches.
    pub earlier: Vec<usize>,
}

impl LabelledSet {
    fn human(&self) -> Vec<f64> {
        self.labels.iter().map(|l| l.total).collect()
    }

    fn all(&self) -> Vec<usize> {
        (0..self.cases.len()).collect()
    }
}

/// One line of the calibration log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationEntry {
    /// The round whose judge loop this is.
    pub round: u32,
    /// 1-based proposal number within the round.
    pub iteration: usize,
    /// The agent.
    pub agent: String,
    /// The proposed rules.
    pub rules: serde_json::Value,
    /// The agent's rationale.
    pub rationale: String,
    /// The code the proposal handed in (its component's name, version and
    /// sha256), and whether it was admitted; absent for rules alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<HandedIn>,
    /// The retrained judge model's checkpoint the proposal brought, when
    /// it retrained one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verifier: Option<std::path::PathBuf>,
    /// The accept rule's decision.
    pub decision: Decision,
    /// The live judge on the whole accumulated set after the decision.
    pub accumulated: Alignment,
    /// The revision number given when accepted.
    pub revision: Option<u32>,
}

/// Why calibration stopped in a round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CalibrationStop {
    /// The agent had nothing more to propose.
    AgentDone,
    /// `max_versions` proposals were made.
    VersionCap,
    /// Agreement stopped rising: a person should look (the judge loop pauses).
    ReviewRequested {
        /// What the loop saw.
        reason: String,
    },
}

/// The result of one round's calibration.
#[derive(Debug, Clone, PartialEq)]
pub struct CalibrationOutcome {
    /// The live revision at the end (the input one when nothing was accepted).
    pub live: JudgeRevision,
    /// Accepted proposals.
    pub accepted: usize,
    /// Why it stopped.
    pub stop: CalibrationStop,
}

/// What calibration does through the judge and the run's records.
pub struct Hooks<'a> {
    /// Scores the labelled set under a revision.
    pub score: &'a mut dyn FnMut(&JudgeRevision) -> Result<Vec<JudgeScore>>,
    /// Checks and stores code an agent handed in, as a revision of the
    /// live one (see [`crate::judge::code`]).
    pub admit: &'a mut dyn FnMut(&CodeSubmission, &JudgeRevision) -> Result<HandedIn>,
    /// Records a new entry, given the live revision it was decided against
    /// and the candidate, before the loop goes on.
    pub log: &'a mut dyn FnMut(&CalibrationEntry, &JudgeRevision, &JudgeRevision) -> Result<()>,
}

/// Runs one round's calibration from `live`; the first revision it accepts
/// is numbered `first_number` (above every number the run has given: the
/// live one may be an earlier revision made live again). `done` holds the
/// log entries this round already wrote (a resumed loop replays them
/// instead of asking again).
#[allow(
    clippy::too_many_arguments,
    reason = "the round's inputs, each used once; a struct would only rename them"
)]
pub fn calibrate(
    config: &CalibrationConfig,
    round: u32,
    set: &LabelledSet,
    mut live: JudgeRevision,
    first_number: u32,
    done: &[CalibrationEntry],
    agent: &mut dyn RevisionAgent,
    clarifications: &[Clarification],
    hooks: Hooks<'_>,
) -> Result<CalibrationOutcome> {
    let human = set.human();
    let all = set.all();
    let mut live_scores = (hooks.score)(&live)?;
    let mut series = vec![alignment(&totals(&live_scores), &human, &all).pearson];
    let mut tried: Vec<serde_json::Value> = Vec::new();
    // What an agent may see of the cases: never the gold solution.
    let blind: Vec<Case> = set
        .cases
        .iter()
        .map(|c| Case {
            reference: String::new(),
            ..c.clone()
        })
        .collect();
    let mut accepted = 0;
    let mut next_number = first_number;
    for iteration in 1..=config.max_versions {
        // A replayed entry is decided again, as a new one is: the log is a
        // record, not an authority (something other than this loop may
        // have written it). Its code is not built again: what was stored
        // is loaded by its sha256.
        let replayed = done.get(iteration - 1);
        let (proposal, code) = match replayed {
            Some(entry) => (
                Proposal {
                    rules: entry.rules.clone(),
                    rationale: entry.rationale.clone(),
                    code: None,
                    verifier: entry.verifier.clone(),
                },
                entry.code.clone(),
            ),
            None => {
                let disputed = disputed(config, set, &live_scores);
                let request = RevisionRequest {
                    live: &live,
                    disputed: &disputed,
                    clarifications,
                    tried: &tried,
                    cases: &blind,
                    labels: &set.labels,
                };
                let Some(proposal) = agent.propose(&request)? else {
                    return Ok(CalibrationOutcome {
                        live,
                        accepted,
                        stop: CalibrationStop::AgentDone,
                    });
                };
                let code = match &proposal.code {
                    None => None,
                    Some(Err(reason)) => Some(HandedIn::Refused {
                        plugin: None,
                        reason: reason.clone(),
                    }),
                    Some(Ok(submission)) => Some((hooks.admit)(submission, &live)?),
                };
                (proposal, code)
            }
        };
        let candidate = JudgeRevision {
            number: next_number,
            rules: proposal.rules.clone(),
            origin: proposal.rationale.clone(),
            code: match &code {
                Some(HandedIn::Admitted(admitted)) => Some(admitted.clone()),
                _ => live.code.clone(),
            },
            verifier: proposal.verifier.clone().or(live.verifier.clone()),
        };
        let (decision, scored) = match &code {
            Some(HandedIn::Refused { reason, .. }) => {
                let reason = format!("its code was refused: {reason}");
                let live_totals = totals(&live_scores);
                (refused_before_scoring(set, &live_totals, reason), None)
            }
            _ => {
                let scored = (hooks.score)(&candidate)?;
                let decision = decide(config, set, &totals(&live_scores), &totals(&scored));
                (decision, Some(scored))
            }
        };
        let entry = match replayed {
            Some(entry) => {
                check_replayed(entry, round, iteration, &decision, candidate.number)?;
                entry.clone()
            }
            None => {
                let after = match &scored {
                    Some(scored) if decision.accepted => scored,
                    _ => &live_scores,
                };
                let entry = CalibrationEntry {
                    round,
                    iteration,
                    agent: agent.name(),
                    rules: proposal.rules,
                    rationale: proposal.rationale,
                    code,
                    verifier: proposal.verifier,
                    revision: decision.accepted.then_some(candidate.number),
                    accumulated: alignment(&totals(after), &human, &all),
                    decision,
                };
                (hooks.log)(&entry, &live, &candidate)?;
                entry
            }
        };
        tried.push(entry.rules.clone());
        if let (Some(number), Some(scored)) = (entry.revision, scored) {
            live = JudgeRevision {
                number,
                ..candidate
            };
            live_scores = scored;
            accepted += 1;
            next_number += 1;
        }
        series.push(entry.accumulated.pearson);
        if let Some(reason) = review_needed(config, &series) {
            return Ok(CalibrationOutcome {
                live,
                accepted,
                stop: CalibrationStop::ReviewRequested { reason },
            });
        }
    }
    Ok(CalibrationOutcome {
        live,
        accepted,
        stop: CalibrationStop::VersionCap,
    })
}

/// The totals of a scoring.
pub fn totals(scores: &[JudgeScore]) -> Vec<f64> {
    scores.iter().map(|s| s.total).collect()
}

/// The accumulated cases where the judge and the label disagree by more
/// than the threshold, largest disagreement first.
fn disputed(config: &CalibrationConfig, set: &LabelledSet, scores: &[JudgeScore]) -> Vec<Disputed> {
    let mut out: Vec<(f64, Disputed)> = set
        .cases
        .iter()
        .zip(&set.labels)
        .zip(scores)
        .filter_map(|((case, label), score)| {
            let gap = (score.total - label.total).abs();
            (gap > config.dispute_threshold).then(|| {
                (
                    gap,
                    Disputed {
                        case: case.clone(),
                        judge: score.clone(),
                        human: label.clone(),
                    },
                )
            })
        })
        .collect();
    out.sort_by(|a, b| b.0.total_cmp(&a.0));
    out.into_iter().map(|(_, d)| d).collect()
}

/// A reason to ask for review: over the last `review_window` iterations the
/// accumulated Pearson rose by less than `review_min_gain`.
fn review_needed(config: &CalibrationConfig, series: &[f64]) -> Option<String> {
    let window = config.review_window;
    if window == 0 || series.len() <= window {
        return None;
    }
    let (then, now) = (series[series.len() - 1 - window], series[series.len() - 1]);
    (now - then < config.review_min_gain).then(|| {
        format!(
            "Pearson on the accumulated set {then:.3} → {now:.3} over the last {window} iterations: \
             less than {} gained",
            config.review_min_gain
        )
    })
}
