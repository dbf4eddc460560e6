//! SFT rounds in which the judge only decides membership (VeriFine's
//! navigation setting): every pool problem offers its target and, when
//! configured, the newest policy's sampled answers; the live judge keeps a
//! candidate when its total reaches `min_score`, and the curriculum's weight
//! of the problem sets how often a kept candidate is drawn (a problem the
//! curriculum dropped contributes nothing). Training never sees a score:
//! the judge's only lever is what is trained on. The fixed evaluator marks
//! each candidate right or wrong for the record (`sft_selection.jsonl`'s
//! `noisy`), never for the decision.

use crate::cases::Case;
use crate::curriculum::PoolItem;
use crate::error::{EvolveError, Result};
use crate::run::Evolve;
use serde::{Deserialize, Serialize};
use verifine_train::hooks::SftTargets;
use verifine_train::sft_data::SftItem;

/// `[membership]`: how the judge decides what an SFT round trains on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MembershipConfig {
    /// A candidate is kept when the live judge's total is at least this.
    pub min_score: f64,
    /// Whether the newest policy's sampled answers to the pool problems
    /// (`pool_samples` each) are candidates besides the pool's targets.
    pub policy_answers: bool,
}

impl Default for MembershipConfig {
    fn default() -> Self {
        MembershipConfig {
            min_score: 0.9,
            policy_answers: true,
        }
    }
}

/// Kept and wrong counts of one round's candidates (for the report).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MembershipTally {
    /// Candidates judged.
    pub candidates: usize,
    /// Candidates kept.
    pub kept: usize,
    /// Kept candidates whose final answer is wrong (by the fixed evaluator).
    pub kept_wrong: usize,
    /// Dropped candidates whose final answer is right.
    pub dropped_right: usize,
}

impl MembershipTally {
    /// Counts a round's `sft_selection.jsonl` items.
    pub fn of(items: &[SftItem]) -> Self {
        let mut tally = MembershipTally {
            candidates: items.len(),
            ..MembershipTally::default()
        };
        for item in items {
            match (item.weight.is_some(), item.noisy) {
                (true, true) => tally.kept_wrong += 1,
                (false, false) => tally.dropped_right += 1,
                _ => {}
            }
            tally.kept += usize::from(item.weight.is_some());
        }
        tally
    }
}

impl Evolve {
    /// The round's SFT candidates with the live judge's decisions.
    /// `answers` holds the newest policy's answers per pool item, `weights`
    /// the curriculum's weight per item (all 1 for a random curriculum).
    pub(crate) fn membership(
        &self,
        items: &[PoolItem],
        answers: &[Vec<String>],
        weights: &[f64],
    ) -> Result<SftTargets> {
        let config = &self.config.membership;
        let mut cases = Vec::new();
        let mut problem_of = Vec::new();
        for (i, item) in items.iter().enumerate() {
            cases.push(Case::new(
                format!("{}-target", item.id),
                &item.problem,
                &item.target,
            ));
            problem_of.push(i);
            if config.policy_answers {
                for (k, answer) in answers[i].iter().enumerate() {
                    cases.push(Case::new(format!("{}-{k}", item.id), &item.problem, answer));
                    problem_of.push(i);
                }
            }
        }
        let scores = self.judge.score(&self.state.live, &cases)?;
        let reference = self.evaluator_totals(&cases)?;
        let revision = self.state.live.number;
        let decided = cases
            .iter()
            .zip(&problem_of)
            .zip(scores.iter().zip(&reference))
            .map(|((case, &i), (score, &rb))| {
                let (weight, reason) = if weights[i] <= 0.0 {
                    (None, "the curriculum dropped the problem".to_string())
                } else if score.error.is_some() || score.total < config.min_score {
                    (
                        None,
                        format!(
                            "{}: judge r{revision} scores it {:.2} < {}",
                            case.id, score.total, config.min_score
                        ),
                    )
                } else {
                    (
                        Some(weights[i]),
                        format!(
                            "{}: judge r{revision} scores it {:.2} ≥ {}",
                            case.id, score.total, config.min_score
                        ),
                    )
                };
                SftItem {
                    problem: i,
                    target: case.response.clone(),
                    noisy: rb < 1.0,
                    judge_score: Some(score.total),
                    weight,
                    reason,
                }
            })
            .collect::<Vec<_>>();
        if decided.iter().all(|item| item.weight.is_none()) {
            return Err(EvolveError::Invalid(format!(
                "judge r{revision} keeps none of the {} SFT candidates (min_score {})",
                decided.len(),
                config.min_score
            )));
        }
        Ok(SftTargets {
            problems: items.iter().map(|item| item.problem.clone()).collect(),
            items: decided,
        })
    }
}
