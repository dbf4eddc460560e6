//! The candidate pool and the judge-guided curriculum. Each pool problem
//! carries a training target that may be unreliable (a slipped step, a
//! misread operand); the curriculum plugin sees how the newest policy does
//! on the problem per judged dimension and how the judge scores the target,
//! and keeps (with a priority) or drops it. After a judge update the pool
//! is assessed again: decisions that change are logged as recovered or
//! dropped, with the reason.

use crate::cases::{Case, scenario, steps};
use crate::error::{EvolveError, Result};
use crate::judge::{Judge, JudgeRevision};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use verifine_base::SplitMix64;
use verifine_runtime::{Candidate, Context, DimensionHistory, Plugin, Selection};
use verifine_train::problem::Problem;
use verifine_train::task::{TaskConfig, generate, with_slip};

/// How a pool target is unreliable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetNoise {
    /// One step's result is off and the error carries on.
    Slip,
    /// One operand is misread; the arithmetic is consistent but answers
    /// another problem (what a loose judge misses).
    Misread,
}

/// A pool problem with its training target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolItem {
    /// `pool-<i>`.
    pub id: String,
    /// The problem (with its gold solution).
    pub problem: Problem,
    /// The target the pool offers (the gold solution unless noisy).
    pub target: String,
    /// How the target is wrong, when it is.
    pub noise: Option<TargetNoise>,
}

/// `n` pool problems from `seed`, none of whose prompts is in `exclude`;
/// `noisy_share` of them get an unreliable target.
pub fn pool(
    seed: u64,
    n: usize,
    noisy_share: f64,
    task: &TaskConfig,
    exclude: &[&str],
) -> Vec<PoolItem> {
    let mut rng = SplitMix64::new(seed ^ 0x9001);
    generate(seed ^ 0x9001_5EED, n * 2, task)
        .into_iter()
        .filter(|p| !exclude.contains(&p.prompt.as_str()))
        .take(n)
        .enumerate()
        .map(|(i, problem)| {
            let noisy = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= noisy_share
                && noisy_share > 0.0;
            let noise = noisy.then(|| {
                if rng.below(2) == 0 {
                    TargetNoise::Slip
                } else {
                    TargetNoise::Misread
                }
            });
            let target = match noise {
                None => problem.solution.clone(),
                Some(TargetNoise::Slip) => with_slip(&problem, &mut rng),
                Some(TargetNoise::Misread) => misread(&problem, &mut rng),
            };
            PoolItem {
                id: format!("pool-{i}"),
                problem,
                target,
                noise,
            }
        })
        .collect()
}

/// The problem's solution with one operand read wrong (by 1–3), every step
/// computed correctly from there.
pub fn misread(problem: &Problem, rng: &mut SplitMix64) -> String {
    let gold = steps(&problem.solution);
    let wrong = rng.below(gold.len().max(1));
    let mut value = gold.first().map_or(0, |s| s.from);
    let mut lines = Vec::with_capacity(gold.len() + 1);
    for (i, step) in gold.iter().enumerate() {
        let operand = if i == wrong {
            step.operand + 1 + rng.below(3) as i64
        } else {
            step.operand
        };
        let next = match step.op {
            '+' => value + operand,
            '-' => value - operand,
            _ => value * operand,
        };
        lines.push(format!("{value} {} {operand} = {next}", step.op));
        value = next;
    }
    lines.push(format!("#### {value}"));
    lines.join("\n")
}

/// The curriculum's decision on one pool item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolDecision {
    /// The item.
    pub id: String,
    /// Sampling weight (0 = dropped).
    pub weight: f64,
    /// The plugin's reason.
    pub reason: String,
    /// The judge's score of the item's target.
    pub target_score: f64,
    /// What changed since the previous assessment ("recovered", "dropped"), if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<String>,
}

/// Assesses the pool: the judge scores the policy's `answers` (per item)
/// and each target; the curriculum plugin decides; decisions that changed
/// since `previous` are marked.
#[expect(
    clippy::too_many_arguments,
    reason = "each is a separate input the round holds; a struct would only rename them"
)]
pub fn assess(
    judge: &Judge,
    revision: &JudgeRevision,
    items: &[PoolItem],
    answers: &[Vec<String>],
    curriculum: &Arc<Plugin>,
    curriculum_config: &serde_json::Value,
    round: u32,
    previous: &BTreeMap<String, PoolDecision>,
) -> Result<Vec<PoolDecision>> {
    let mut cases = Vec::new();
    for (item, responses) in items.iter().zip(answers) {
        cases.extend(
            responses
                .iter()
                .enumerate()
                .map(|(k, r)| Case::new(format!("{}-{k}", item.id), &item.problem, r)),
        );
    }
    let targets: Vec<Case> = items
        .iter()
        .map(|i| Case::new(format!("{}-target", i.id), &i.problem, &i.target))
        .collect();
    let answer_scores = judge.score(revision, &cases)?;
    let target_scores = judge.score(revision, &targets)?;
    let mut next = 0;
    let candidates: Vec<Candidate> = items
        .iter()
        .zip(answers)
        .zip(&target_scores)
        .map(|((item, responses), target)| {
            let scores = &answer_scores[next..next + responses.len()];
            next += responses.len();
            let mut history: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
            for s in scores {
                for (d, v) in &s.dimensions {
                    history.entry(d).or_default().push(*v);
                }
            }
            let totals: Vec<f64> = scores.iter().map(|s| s.total).collect();
            let mean = totals.iter().sum::<f64>() / totals.len().max(1) as f64;
            let var =
                totals.iter().map(|t| (t - mean).powi(2)).sum::<f64>() / totals.len().max(1) as f64;
            Candidate {
                sample_id: item.id.clone(),
                tags: vec![format!("scenario:{}", scenario(&item.problem))],
                history: history
                    .into_iter()
                    .map(|(d, s)| DimensionHistory {
                        dimension: d.to_string(),
                        scores: s,
                    })
                    .collect(),
                reward_mean: mean,
                reward_std: var.sqrt(),
                rollouts: responses.len() as u32,
                reference_score: Some(target.total),
            }
        })
        .collect();
    let ctx = Context {
        step: 0,
        round,
        config: curriculum_config.to_string(),
    };
    let name = || curriculum.metadata.name.clone();
    let decisions = curriculum
        .instance()
        .select(&ctx, &candidates)
        .map_err(|e| EvolveError::Plugin {
            plugin: name(),
            message: e.to_string(),
        })?
        .map_err(|message| EvolveError::Plugin {
            plugin: name(),
            message,
        })?;
    if decisions.len() != items.len() {
        return Err(EvolveError::Plugin {
            plugin: name(),
            message: format!(
                "{} decisions for {} candidates",
                decisions.len(),
                items.len()
            ),
        });
    }
    Ok(items
        .iter()
        .zip(decisions)
        .zip(&target_scores)
        .map(|((item, d), target)| {
            let weight = match d.selection {
                Selection::Keep(w) if w.is_finite() && w > 0.0 => w,
                _ => 0.0,
            };
            let change =
                previous
                    .get(&item.id)
                    .and_then(|old| match (old.weight > 0.0, weight > 0.0) {
                        (false, true) => Some(format!(
                            "recovered: the judge now scores the target {:.2} (was {:.2})",
                            target.total, old.target_score
                        )),
                        (true, false) => Some(format!(
                            "dropped: the judge now scores the target {:.2} (was {:.2})",
                            target.total, old.target_score
                        )),
                        _ => None,
                    });
            PoolDecision {
                id: item.id.clone(),
                weight,
                reason: d.reason,
                target_score: target.total,
                change,
            }
        })
        .collect())
}

/// The round's sampling weights from the curriculum's decisions. A judge
/// that rejects every target (a verifier answering NO to the references
/// themselves) leaves no curriculum: the round then samples the pool
/// evenly, with a warning, rather than stopping the loop.
pub(crate) fn sampling_weights(decisions: &[PoolDecision], round: u32) -> Vec<f64> {
    if decisions.iter().any(|d| d.weight > 0.0) {
        return decisions.iter().map(|d| d.weight).collect();
    }
    tracing::warn!(
        round,
        pool = decisions.len(),
        "the curriculum kept no prompt (the judge rejects every target): \
         the round samples the pool evenly"
    );
    vec![1.0; decisions.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use verifine_runtime::{Limits, PluginKind, Runtime};
    use verifine_train::task::Step;

    #[test]
    fn a_curriculum_that_keeps_nothing_samples_the_pool_evenly() {
        let decision = |weight: f64| PoolDecision {
            id: "p".into(),
            weight,
            reason: String::new(),
            target_score: 0.0,
            change: None,
        };
        let kept = [decision(0.0), decision(3.5), decision(0.0)];
        assert_eq!(sampling_weights(&kept, 1), [0.0, 3.5, 0.0]);
        let none = [decision(0.0), decision(0.0)];
        assert_eq!(sampling_weights(&none, 1), [1.0, 1.0]);
    }

    #[test]
    fn misread_targets_compute_but_answer_another_problem() {
        let mut rng = SplitMix64::new(1);
        for problem in generate(4, 100, &TaskConfig::default()) {
            let wrong = misread(&problem, &mut rng);
            assert!(steps(&wrong).iter().all(Step::computes), "{wrong}");
            assert_ne!(
                crate::cases::final_answer(&wrong),
                Some(problem.answer),
                "{wrong}"
            );
        }
    }

    #[test]
    fn the_pool_avoids_excluded_prompts_and_holds_the_noisy_share() {
        let task = TaskConfig::default();
        let first = pool(3, 10, 0.0, &task, &[]);
        let excluded = [first[0].problem.prompt.as_str()];
        let items = pool(3, 400, 0.25, &task, &excluded);
        assert!(items.iter().all(|i| i.problem.prompt != excluded[0]));
        let noisy = items.iter().filter(|i| i.noise.is_some()).count();
        assert!((60..140).contains(&noisy), "{noisy}");
        assert!(
            items
                .iter()
                .filter(|i| i.noise.is_none())
                .all(|i| i.target == i.problem.solution)
        );
    }

    fn loose() -> JudgeRevision {
        JudgeRevision::initial(json!({
            "grounded": {"has-steps": 1.0},
            "valid": {"steps-compute": 1.0},
            "complete": {"final-marked": 1.0, "final-follows": 1.0},
            "gate": "final-marked"
        }))
    }

    fn strict() -> JudgeRevision {
        let mut rules = loose().rules;
        rules["grounded"] =
            json!({"has-steps": 1.0, "numbers-appear": 1.0, "operands-in-order": 1.0});
        JudgeRevision {
            number: 1,
            rules,
            origin: "test".into(),
            code: None,
            verifier: None,
        }
    }

    #[test]
    fn after_a_judge_update_the_pool_drops_misread_targets_and_recovers_them_when_it_loosens() {
        let runtime = Runtime::new(Limits::default()).unwrap();
        let curriculum = runtime
            .load_kind("weakness-curriculum", PluginKind::Curriculum)
            .unwrap();
        let judge_dir = std::env::temp_dir().join("verifine-loop-parts-judge");
        let judge = Judge::load(runtime, &"worked-steps".into(), 1, &judge_dir).unwrap();
        let config = json!({"min_reference_score": 0.99});
        let items = pool(5, 60, 0.5, &TaskConfig::default(), &[]);
        let answers: Vec<Vec<String>> = items
            .iter()
            .map(|i| vec![i.problem.solution.clone()])
            .collect();
        let decide = |revision: &JudgeRevision, previous: &[PoolDecision]| {
            let previous = previous.iter().map(|d| (d.id.clone(), d.clone())).collect();
            assess(
                &judge,
                revision,
                &items,
                &answers,
                &curriculum,
                &config,
                1,
                &previous,
            )
            .unwrap()
        };
        let first = decide(&loose(), &[]);
        let misread: Vec<usize> = (0..items.len())
            .filter(|&i| items[i].noise == Some(TargetNoise::Misread))
            .collect();
        let slipped: Vec<usize> = (0..items.len())
            .filter(|&i| items[i].noise == Some(TargetNoise::Slip))
            .collect();
        assert!(!misread.is_empty() && !slipped.is_empty());
        // The loose judge misses misread operands but sees slips.
        assert!(misread.iter().all(|&i| first[i].weight > 0.0));
        assert!(slipped.iter().all(|&i| first[i].weight == 0.0));
        assert!(first.iter().all(|d| d.change.is_none()));

        let updated = decide(&strict(), &first);
        for &i in &misread {
            assert_eq!(updated[i].weight, 0.0, "{}", items[i].target);
            assert!(
                updated[i].change.as_deref().unwrap().starts_with("dropped"),
                "{:?}",
                updated[i]
            );
        }
        let clean = (0..items.len())
            .find(|&i| items[i].noise.is_none())
            .unwrap();
        assert!(updated[clean].weight > 0.0 && updated[clean].change.is_none());

        let loosened = decide(&loose(), &updated);
        for &i in &misread {
            assert!(
                loosened[i]
                    .change
                    .as_deref()
                    .unwrap()
                    .starts_with("recovered"),
                "{:?}",
                loosened[i]
            );
        }
    }
}
