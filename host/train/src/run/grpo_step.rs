//! One GRPO step, top to bottom:
//!
//! 1. draw prompts and roll out `num_generations` completions each (multi-turn
//!    with self-verification when it is on);
//! 2. score the final answers with the host's reward function;
//! 3. group-normalized advantages, dropping uninformative groups;
//! 4. recompute log-probs in one forward pass and take the clipped
//!    surrogate − β·KL(k3) over the loss mask; backward, clip, AdamW;
//! 5. one metrics line naming the plugin revisions that scored the step.

use super::Run;
use super::metrics::{MetricsLine, Phase, skipped};
use crate::config::RewardFailure;
use crate::conversation::{Rollout, RolloutOptions, VerifyReply, rollouts};
use crate::error::Result;
use crate::grpo::{AdvEstimator, LossInputs, advantages, loss};
use crate::hooks::{Answer, Progress, Reward};
use crate::policy::answer_text;
use crate::problem::Problem;
use crate::rollout::Sampling;
use crate::sequences::{Backward, Sequence, policy_log_probs};
use crate::tokenizer::ChatTokenizer;
use candle_core::Tensor;
use std::collections::BTreeMap;
use std::time::Instant;
use verifine_base::PASS_MARK;

/// The update's figures; all `None` when every group was uninformative.
#[derive(Default)]
struct Update {
    loss: Option<f64>,
    grad_norm: Option<f64>,
    learning_rate: Option<f64>,
    kl: Option<f64>,
}

impl Run {
    pub(super) fn grpo_step(&mut self) -> Result<()> {
        let phase = self.config.grpo.clone();
        let g = phase.objective.num_generations;
        let step_started = Instant::now();

        // 1. Rollouts, on prompts from the host's pool when it gave one.
        let problems: Vec<Problem> = (0..phase.prompts_per_step)
            .map(|_| match &self.host.prompts {
                Some(pool) => pool.problems[pool.draw(&mut self.rng)].clone(),
                None => self.train_set[self.rng.below(self.train_set.len())].clone(),
            })
            .collect();
        let prompts: Vec<Vec<u32>> = problems
            .iter()
            .flat_map(|p| std::iter::repeat_n(&p.prompt, g))
            .map(|prompt| self.tokenizer.prompt_ids(prompt))
            .collect::<Result<_>>()?;
        let options = RolloutOptions {
            max_new_tokens: phase.max_new_tokens,
            max_seq_len: self.config.model.max_seq_len,
            sampling: Sampling::Temperature(phase.temperature),
            verification: Some(&self.config.self_verification),
        };
        let policy = self.model.cast(self.config.model.compute_dtype)?;
        let rolled = rollouts(
            &policy,
            &self.tokenizer,
            &prompts,
            options,
            &mut self.rng,
            &self.device,
        )?;
        let generated: usize = rolled
            .iter()
            .map(|r| r.sequence.trainable.iter().filter(|t| **t).count())
            .sum();

        // 2. Rewards.
        let answers: Vec<Answer> = rolled
            .iter()
            .enumerate()
            .map(|(i, r)| {
                final_answer(
                    format!("{}-{i}", self.state.step),
                    &problems[i / g],
                    &self.tokenizer,
                    r,
                )
            })
            .collect::<Result<_>>()?;
        let plugin_started = Instant::now();
        let scored = self.host.reward.score(self.state.step, &answers);
        let plugin_seconds = plugin_started.elapsed().as_secs_f64();
        // Missing, non-finite or out-of-range totals are failed rewards.
        let totals: Vec<Option<f64>> = scored
            .iter()
            .map(|s| self.config.reward.admit(s.total))
            .collect();
        let failures = totals.iter().filter(|t| t.is_none()).count();
        let rewards: Vec<Option<f64>> = totals
            .iter()
            .map(|total| match (*total, phase.on_reward_failure) {
                (Some(t), _) => Some(t),
                (None, RewardFailure::Zero) => Some(0.0),
                (None, RewardFailure::Abstain) => None,
            })
            .collect();
        let present: Vec<f64> = rewards.iter().flatten().copied().collect();
        let reward_mean = present.iter().sum::<f64>() / present.len().max(1) as f64;
        self.state.rewards_since.add(&present);

        // 3. Advantages; rollouts without one leave the batch.
        let advantages = advantages(&rewards, &phase.objective)?;
        let groups = rewards.len().div_ceil(g).max(1) as f64;
        let groups_solved = rewards
            .chunks(g)
            .filter(|group| group.iter().flatten().any(|&r| r >= PASS_MARK))
            .count() as f64
            / groups;
        let groups_informative = rewards
            .chunks(g)
            .filter(|group| {
                let mut present = group.iter().flatten();
                present
                    .next()
                    .is_some_and(|first| present.any(|r| r != first))
            })
            .count() as f64
            / groups;
        let mut sequences = Vec::new();
        let mut kept_advantages = Vec::new();
        for (rollout, advantage) in rolled.iter().zip(&advantages) {
            let Some(advantage) = advantage else { continue };
            if rollout.final_answer.ids.is_empty() {
                continue;
            }
            let mut sequence = rollout.sequence.clone();
            if rollout.final_answer.truncated && phase.objective.mask_truncated_completions {
                sequence.trainable.iter_mut().for_each(|t| *t = false);
            }
            sequences.push(sequence);
            kept_advantages.push(*advantage as f32);
        }

        // 4. The update; rejection sampling waits for a full batch.
        if phase.objective.adv_estimator == AdvEstimator::RejectionSampling {
            self.state.rft_buffer.append(&mut sequences);
            // The oldest full batch: an update's memory stays one batch's
            // (all that waited, 40-odd answers, took a 24 GB machine down).
            let full = phase.objective.rft_batch_size;
            if self.state.rft_buffer.len() >= full {
                sequences = self.state.rft_buffer.drain(..full).collect();
            }
            kept_advantages = vec![1.0; sequences.len()];
        }
        let update = if sequences.is_empty() {
            Update::default()
        } else {
            self.update(&policy, &sequences, &kept_advantages)?
        };

        // 5. Metrics.
        let seconds = step_started.elapsed().as_secs_f64();
        self.state.totals.seconds += seconds;
        self.state.totals.plugin_seconds += plugin_seconds;
        self.state.totals.tokens += generated;
        self.state.totals.rollouts += rolled.len();
        let turns: usize = rolled.iter().map(|r| r.turns).sum();
        self.state.totals.turns += turns;
        let tokens_per_second = generated as f64 / seconds.max(1e-9);
        let svr = self.config.self_verification.enabled;
        let count = |reply: VerifyReply| {
            rolled
                .iter()
                .flat_map(|r| &r.replies)
                .filter(|x| **x == reply)
                .count()
        };
        (self.host.progress)(Progress::Step {
            step: self.state.step + 1,
            message: format!(
                "grpo reward {reward_mean:.3}  kl {}  {tokens_per_second:.0} tok/s",
                update
                    .kl
                    .map_or_else(|| "off (beta 0)".to_string(), |k| format!("{k:.4}"))
            ),
        });
        let plugins = self.plugins.clone();
        let reward_costs = self.host.reward.take_costs();
        self.log.append(&MetricsLine {
            phase: Phase::Grpo,
            step: self.state.step,
            loss: update.loss,
            learning_rate: update.learning_rate,
            grad_norm: update.grad_norm.filter(|n| n.is_finite()),
            skipped: skipped(update.grad_norm),
            reward_mean: Some(reward_mean),
            reward_failures: Some(failures),
            groups_solved: Some(groups_solved),
            groups_informative: Some(groups_informative),
            criteria: criterion_means(&scored),
            reward_costs,
            kl: update.kl,
            mean_turns: svr.then(|| turns as f64 / rolled.len().max(1) as f64),
            verdicts_no: svr.then(|| count(VerifyReply::No)),
            verdicts_unclear: svr.then(|| count(VerifyReply::Unclear)),
            tokens_per_second: Some(tokens_per_second),
            rft_waiting: (phase.objective.adv_estimator == AdvEstimator::RejectionSampling)
                .then_some(self.state.rft_buffer.len()),
            plugins: &plugins,
            ..MetricsLine::default()
        })
    }

    /// One clipped-surrogate update over `sequences` through `policy` (the
    /// cast the rollouts used: the weights have not moved since).
    fn update(
        &mut self,
        policy: &crate::model::Decoder,
        sequences: &[Sequence],
        advantages: &[f32],
    ) -> Result<Update> {
        let b = self.batch(sequences)?;
        // One full forward over the whole conversations.
        let pass = policy_log_probs(policy, &b, Backward::Fastest)?;
        let current = pass.values.clone();
        // One update per rollout batch: the sampling policy is the current
        // one, so its log-probs are these values without the graph. (RFT's
        // buffered samples came from earlier weights; their advantage is 1
        // and unclipped at ratio 1, so the gradient is SFT's on them.)
        let old = current.detach();
        let reference = match &self.reference {
            Some(r) => Some(policy_log_probs(r, &b, Backward::Fastest)?.values.detach()),
            None => None,
        };
        let advantages = Tensor::new(advantages, &self.device)?;
        let inputs = LossInputs {
            log_probs: &current,
            old_log_probs: &old,
            ref_log_probs: reference.as_ref(),
            mask: &b.loss_mask,
            advantages: &advantages,
        };
        let (l, kl) = loss(&inputs, &self.config.grpo.objective)?;
        let learning_rate = self.optimizer.learning_rate();
        let loss_value = l.to_scalar::<f32>()?;
        // An overflowed loss has no meaningful gradient, even where its
        // backward pass gives finite numbers (when no position is trained,
        // every weight's gradient is exactly 0).
        let grad_norm = if loss_value.is_finite() {
            self.optimizer.step(&pass.backward(&l)?)?
        } else {
            tracing::warn!(loss = loss_value, "non-finite loss: update skipped");
            f64::NAN
        };
        let kl = kl
            .map(|k| k.to_scalar::<f32>().map(f64::from))
            .transpose()?;
        Ok(Update {
            loss: Some(f64::from(loss_value)),
            grad_norm: Some(grad_norm),
            learning_rate: Some(learning_rate),
            kl,
        })
    }
}

/// What the reward judges: a rollout's final answer against the problem's
/// worked solution.
pub(super) fn final_answer(
    id: String,
    problem: &Problem,
    tokenizer: &ChatTokenizer,
    rollout: &Rollout,
) -> Result<Answer> {
    Ok(Answer {
        id,
        prompt: problem.prompt.clone(),
        response: answer_text(tokenizer, rollout)?,
        reference: Some(problem.solution.clone()),
    })
}

/// Mean score per criterion over a batch.
fn criterion_means(scored: &[Reward]) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for (criterion, score) in scored.iter().flat_map(|s| &s.criteria) {
        let entry = sums.entry(criterion.clone()).or_default();
        entry.0 += score;
        entry.1 += 1;
    }
    sums.into_iter()
        .map(|(k, (s, n))| (k, s / n as f64))
        .collect()
}
