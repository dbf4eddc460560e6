//! Held-out evaluations at GRPO step boundaries, and the [`Monitor`]
//! reading each one gives the host's step hook.

use super::Run;
use crate::error::Result;
use crate::hooks::Monitor;
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
    /// After a GRPO step: the held-out evaluation due now, if any (every
    /// `eval_every` GRPO steps, and at the last step, where it is the final
    /// evaluation the outputs use), logged, and its reading.
    pub(super) fn evaluate_at_boundary(&mut self) -> Result<Option<Monitor>> {
        let total = self.config.total_steps();
        if self.step <= self.config.sft.steps {
            return Ok(None);
        }
        let grpo_done = self.step - self.config.sft.steps;
        let every = self.config.eval_every;
        let last = self.step == total;
        let periodic = every > 0 && grpo_done.is_multiple_of(every);
        if !(last || periodic) {
            return Ok(None);
        }
        let evaluated = self.evaluate(last)?;
        self.log_eval(evaluated.evaluation)?;
        let monitor = Monitor {
            heldout_accuracy: evaluated.evaluation.pr,
            heldout_score: evaluated.score,
            mean_reward: self.rewards_since.take_mean(),
        };
        if last {
            self.final_logged = true;
            self.final_eval = Some(evaluated);
        }
        Ok(Some(monitor))
    }
}
