//! The SFT pool: one target per training problem (a worked solution, or a
//! slipped one when the config simulates noisy data), and — when a
//! curriculum plugin is configured — the plugin's keep / drop / weight
//! decision for each, made after the reward rubric judged the target against
//! the problem's gold answer. The judge never enters the loss: it only decides
//! which samples are trained on, and how often (sampling ∝ keep weight).
//!
//! Every decision is written to `sft_selection.jsonl` in the run directory.

use super::problem::Problem;
use super::task::with_slip;
use crate::config::RewardConfig;
use crate::error::{Result, TrainError, bail, ensure};
use crate::hooks::{Answer, RewardFunction, SftCandidate, SftCurriculum};
use verifine_base::{Provenance, SplitMix64};

/// Hosts name the pool's samples from here; they are defined beside the
/// host's targets, which the hooks carry.
pub use crate::sft_targets::SftItem;

/// Mixed into the seed for the SFT data's draws (which targets are noisy),
/// apart from the other streams of the same seed.
const SFT_DATA_STREAM: u64 = 0x5F7_DA7A;

/// Candidates per curriculum call.
const BATCH: usize = 256;

/// The kept samples with a sampler over their weights.
pub struct SftPool {
    /// Every candidate, kept or dropped, in problem order.
    pub items: Vec<SftItem>,
    kept: Vec<usize>,
    cumulative: Vec<f64>,
    /// All kept weights are equal: draws are exactly uniform.
    uniform: bool,
    /// The curriculum plugin that decided, if any.
    pub curriculum: Option<Provenance>,
}

impl SftPool {
    /// Builds the pool; `reward` judges targets when a curriculum is given.
    pub fn build(
        problems: &[Problem],
        noisy_share: f64,
        curriculum: Option<&mut dyn SftCurriculum>,
        reward: &mut dyn RewardFunction,
        reward_config: &RewardConfig,
        seed: u64,
    ) -> Result<Self> {
        let mut rng = SplitMix64::new(seed ^ SFT_DATA_STREAM);
        let mut items: Vec<SftItem> = problems
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let noisy = super::conversation::unit(&mut rng) < noisy_share;
                SftItem {
                    problem: i,
                    target: if noisy {
                        with_slip(p, &mut rng)
                    } else {
                        p.solution.clone()
                    },
                    noisy,
                    judge_score: None,
                    weight: Some(1.0),
                    reason: "no curriculum: every sample kept".to_string(),
                }
            })
            .collect();
        let Some(curriculum) = curriculum else {
            return Self::from_items(items, None);
        };
        let provenance = curriculum.provenance();
        let name = &provenance.name;
        for chunk in items.chunks_mut(BATCH) {
            let answers: Vec<Answer> = chunk
                .iter()
                .map(|item| judged_target(item, &problems[item.problem]))
                .collect();
            let rewards = reward.score(0, &answers);
            let candidates: Vec<SftCandidate> = chunk
                .iter_mut()
                .zip(&rewards)
                .map(|(item, r)| {
                    item.judge_score = reward_config.admit(r.total);
                    candidate(item, &problems[item.problem])
                })
                .collect();
            let decisions = curriculum
                .select(&candidates)
                .map_err(|error| TrainError::Hook {
                    context: format!("SFT curriculum {name}"),
                    error,
                })?;
            ensure!(
                decisions.len() == candidates.len(),
                "SFT curriculum {name} returned {} decisions for {} samples",
                decisions.len(),
                candidates.len()
            );
            for (item, decision) in chunk.iter_mut().zip(decisions) {
                item.weight = match decision.weight {
                    None => None,
                    Some(w) if w.is_finite() && w > 0.0 => Some(w),
                    Some(w) => {
                        bail!(
                            "SFT curriculum {name} kept sample {} with weight {w}; weights must be positive",
                            item.problem
                        );
                    }
                };
                item.reason = decision.reason;
            }
        }
        Self::from_items(items, Some(provenance))
    }

    /// A pool of the host's candidates, decided already
    /// ([`crate::sft_targets::SftTargets`]).
    pub fn from_targets(items: Vec<SftItem>) -> Result<Self> {
        Self::from_items(items, None)
    }

    fn from_items(items: Vec<SftItem>, curriculum: Option<Provenance>) -> Result<Self> {
        let kept: Vec<usize> = (0..items.len())
            .filter(|&i| items[i].weight.is_some())
            .collect();
        ensure!(
            !kept.is_empty(),
            "every one of the {} SFT samples was dropped",
            items.len()
        );
        let mut total = 0.0;
        let cumulative = kept
            .iter()
            .map(|&i| {
                total += items[i].weight.unwrap_or(0.0);
                total
            })
            .collect();
        let first = kept.first().and_then(|&i| items[i].weight);
        let uniform = kept.iter().all(|&i| items[i].weight == first);
        Ok(SftPool {
            items,
            kept,
            cumulative,
            uniform,
            curriculum,
        })
    }

    /// Draws one kept sample, with probability proportional to its weight.
    pub fn draw(&self, rng: &mut SplitMix64) -> &SftItem {
        if self.uniform {
            return &self.items[self.kept[rng.below(self.kept.len())]];
        }
        let total = *self.cumulative.last().expect("pool is never empty");
        let x = super::conversation::unit(rng) * total;
        let at = self
            .cumulative
            .partition_point(|c| *c <= x)
            .min(self.kept.len() - 1);
        &self.items[self.kept[at]]
    }

    /// Samples kept.
    pub fn kept(&self) -> usize {
        self.kept.len()
    }
}

/// The rubric's view of an SFT target: judged against the gold solution.
fn judged_target(item: &SftItem, problem: &Problem) -> Answer {
    Answer {
        id: format!("sft-{}", item.problem),
        prompt: problem.prompt.clone(),
        response: item.target.clone(),
        reference: Some(problem.solution.clone()),
    }
}

/// The curriculum's view of an SFT target: scenario tags and the judge's score.
fn candidate(item: &SftItem, problem: &Problem) -> SftCandidate {
    let steps = problem.solution.lines().count().saturating_sub(1);
    let form = if problem.prompt.starts_with("Start with") {
        "instructions"
    } else {
        "story"
    };
    SftCandidate {
        id: format!("sft-{}", item.problem),
        tags: vec![format!("steps:{steps}"), format!("form:{form}")],
        judge_score: item.judge_score,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(weight: Option<f64>) -> SftItem {
        SftItem {
            problem: 0,
            target: String::new(),
            noisy: false,
            judge_score: None,
            weight,
            reason: String::new(),
        }
    }

    #[test]
    fn draws_follow_the_weights_and_never_pick_dropped_samples() {
        let pool =
            SftPool::from_items(vec![item(Some(1.0)), item(None), item(Some(3.0))], None).unwrap();
        let mut rng = SplitMix64::new(0);
        let mut counts = [0usize; 3];
        for _ in 0..40_000 {
            let drawn = pool.draw(&mut rng) as *const SftItem;
            let index = pool
                .items
                .iter()
                .position(|i| std::ptr::eq(i, drawn))
                .unwrap();
            counts[index] += 1;
        }
        assert_eq!(counts[1], 0);
        let ratio = counts[2] as f64 / counts[0] as f64;
        assert!((ratio - 3.0).abs() < 0.2, "{counts:?}");
        assert!(SftPool::from_items(vec![item(None)], None).is_err());
    }
}
