//! Held-out evaluations at step boundaries (GRPO, and SFT when
//! `sft.eval_every` is set), and the [`Monitor`] reading each one gives the
//! host's step hook.

use super::Run;
use crate::error::Result;
use crate::hooks::{Answer, Monitor};
use serde::{Deserialize, Serialize};

/// GRPO training rewards since the last monitor reading (checkpointed, so a
/// resumed run gives the same readings).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct RewardTally {
    sum: f64,
    count: usize,
}

impl RewardTally {
    /// Adds one step's rewards (those that count for its mean).
    pub(super) fn add(&mut self, rewards: &[f64]) {
        self.sum += rewards.iter().sum::<f64>();
        self.count += rewards.len();
    }

    /// The mean so far (0 when nothing was rewarded), starting over.
    fn take_mean(&mut self) -> f64 {
        let mean = self.sum / self.count.max(1) as f64;
        *self = RewardTally::default();
        mean
    }
}

impl Run {
    /// After a step: the held-out evaluation due now, if any, logged, and
    /// its reading. In GRPO every `eval_every` steps and at the last step,
    /// where it is the final evaluation the outputs use; in SFT every
    /// `sft.eval_every` steps.
    pub(super) fn evaluate_at_boundary(&mut self) -> Result<Option<Monitor>> {
        if self.state.step <= self.config.sft.steps {
            return self.evaluate_in_sft();
        }
        let total = self.config.total_steps();
        let grpo_done = self.state.step - self.config.sft.steps;
        let every = self.config.eval_every;
        let last = self.state.step == total;
        let periodic = every > 0 && grpo_done.is_multiple_of(every);
        if !(last || periodic) {
            return Ok(None);
        }
        let evaluated = self.evaluate(last)?;
        self.log_eval(evaluated.evaluation)?;
        let monitor = Monitor {
            heldout_accuracy: evaluated.evaluation.pr,
            heldout_score: evaluated.score,
            mean_reward: self.state.rewards_since.take_mean(),
        };
        if last {
            self.state.final_logged = true;
            self.final_eval = Some(evaluated);
        }
        Ok(Some(monitor))
    }

    /// Whether an SFT-phase evaluation runs (and is logged) after `step`.
    pub(super) fn sft_evaluates_at(&self, step: usize) -> bool {
        let every = self.config.sft.eval_every;
        every > 0 && step > 0 && step <= self.config.sft.steps && step.is_multiple_of(every)
    }

    /// During SFT, which has no rollouts to reward: the training reward
    /// scores the greedy held-out answers, so a host's hook sees the reward
    /// and the evaluator on the same answers.
    fn evaluate_in_sft(&mut self) -> Result<Option<Monitor>> {
        if !self.sft_evaluates_at(self.state.step) {
            return Ok(None);
        }
        let evaluated = self.evaluate(false)?;
        self.log_eval(evaluated.evaluation)?;
        let answers: Vec<Answer> = evaluated
            .answers
            .iter()
            .map(|a| Answer {
                id: a.id.clone(),
                prompt: a.prompt.clone(),
                response: a.response.clone(),
                reference: Some(a.reference.clone()),
            })
            .collect();
        let admitted: Vec<f64> = self
            .host
            .reward
            .score(self.state.step, &answers)
            .iter()
            .filter_map(|r| self.config.reward.admit(r.total))
            .collect();
        let monitor = Monitor {
            heldout_accuracy: evaluated.evaluation.pr,
            heldout_score: evaluated.score,
            mean_reward: admitted.iter().sum::<f64>() / admitted.len().max(1) as f64,
        };
        if self.state.step == self.config.sft.steps {
            self.sft_end_eval = Some(evaluated);
        }
        Ok(Some(monitor))
    }
}
