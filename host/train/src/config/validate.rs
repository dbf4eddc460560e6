//! What a config may not say: settings that would fail later, or silently
//! mean nothing, refused before a run starts.

use super::TrainConfig;
use crate::error::InvalidConfig;

/// Refuses with `message` unless `condition` holds.
fn ensure(condition: bool, message: &str) -> Result<(), InvalidConfig> {
    if condition {
        Ok(())
    } else {
        Err(InvalidConfig(message.to_string()))
    }
}

impl TrainConfig {
    /// Refuses settings that would fail later, or silently mean nothing.
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        let share = |x: f64| (0.0..=1.0).contains(&x);
        ensure(
            share(self.sft.noisy_target_share),
            "sft.noisy_target_share must be in [0, 1]",
        )?;
        ensure(
            share(self.self_verification.sft_share),
            "self_verification.sft_share must be in [0, 1]",
        )?;
        ensure(
            self.self_verification.max_turns >= 1,
            "self_verification.max_turns must be at least 1",
        )?;
        ensure(
            self.grpo.objective.num_generations >= 2,
            "grpo.objective.num_generations must be at least 2 (advantages compare within a group)",
        )?;
        ensure(
            self.grpo.objective.rft_batch_size >= 1,
            "grpo.objective.rft_batch_size must be at least 1",
        )?;
        ensure(
            self.sft.batch_size >= 1,
            "sft.batch_size must be at least 1",
        )?;
        ensure(
            self.grpo.temperature > 0.0,
            "grpo.temperature must be positive",
        )?;
        ensure(
            self.grpo.objective.beta >= 0.0,
            "grpo.objective.beta must not be negative",
        )?;
        ensure(
            self.checkpoints.keep >= 1,
            "checkpoints.keep must be at least 1",
        )?;
        for (phase, optim) in [("sft", &self.sft.optim), ("grpo", &self.grpo.optim)] {
            if !share(optim.decay_floor) {
                return Err(InvalidConfig(format!(
                    "{phase}.optim.decay_floor must be in [0, 1], not {}",
                    optim.decay_floor
                )));
            }
        }
        for (table, task) in [
            ("task", Some(&self.task)),
            ("sft.task", self.sft.task.as_ref()),
        ] {
            let Some(task) = task else { continue };
            if task.min_steps < 1 || task.min_steps > task.max_steps {
                return Err(InvalidConfig(format!(
                    "{table}.min_steps must be at least 1 and at most max_steps ({}), not {}",
                    task.max_steps, task.min_steps
                )));
            }
        }
        for (phase, budget) in [
            ("sft", self.sft.max_seconds),
            ("grpo", self.grpo.max_seconds),
        ] {
            if budget.is_some_and(|s| !(s.is_finite() && s > 0.0)) {
                return Err(InvalidConfig(format!(
                    "{phase}.max_seconds must be a positive number of seconds"
                )));
            }
        }
        let [low, high] = self.reward.range;
        ensure(
            low.is_finite() && high.is_finite() && low < high,
            "reward.range must be two finite numbers, low < high",
        )?;
        Ok(())
    }
}
