//! SFT rounds in which the judge only decides membership (VeriFine's
//! navigation setting): every pool problem offers its target and, when
//! configured, the newest policy's sampled answers; the live judge keeps a
//! candidate when its total reaches `min_score`, and the curriculum's weight
//! of the problem sets how often a kept candidate is drawn (a problem the
//! curriculum dropped contributes nothing). Training never sees a score:
//! the judge's only lever is what is trained on. The fixed evaluator marks
//! each candidate right or wrong for the record (`sft_selection.jsonl`'s
//! `noisy`), never for the decision.

use super::Evolve;
use crate::cases::Case;
use crate::curriculum::PoolItem;
use crate::error::{EvolveError, Result};
use verifine_train::hooks::SftTargets;
use verifine_train::sft_data::SftItem;

impl Evolve {
    /// The round's SFT candidates with the live judge's decisions.
    /// `answers` holds the newest policy's answers per pool item, `weights`
    /// the curriculum's weight per item (all 1 for a random curriculum).
    pub(super) fn membership(
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
