//! One SFT update: draw targets from the pool (by curriculum weight), one
//! masked cross-entropy step on the answer turns, one metrics line.

use super::Run;
use super::metrics::{MetricsLine, Phase, skipped};
use crate::conversation::sft_sequence;
use crate::error::Result;
use crate::hooks::Progress;
use crate::sequences::{Backward, policy_log_probs, sft_loss};

impl Run {
    pub(super) fn sft_step(&mut self) -> Result<()> {
        let sequences = (0..self.config.sft.batch_size)
            .map(|_| {
                let item = self.pool.draw(&mut self.rng);
                let problem = &self.sft_problems[item.problem];
                sft_sequence(
                    problem,
                    &item.target,
                    &self.tokenizer,
                    &self.config.self_verification,
                    &mut self.rng,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let batch = self.batch(&sequences)?;
        let learning_rate = self.optimizer.learning_rate();
        let compute = self.model.cast(self.config.model.compute_dtype)?;
        let pass = policy_log_probs(&compute, &batch, Backward::Fastest)?;
        let loss = sft_loss(&pass.values, &batch, None)?;
        let grad_norm = self.optimizer.step(&pass.backward(&loss)?)?;
        let loss = f64::from(loss.to_scalar::<f32>()?);
        (self.host.progress)(Progress::Step {
            step: self.state.step + 1,
            message: format!("sft  loss {loss:.3}"),
        });
        let reward_costs = self.host.reward.take_costs();
        self.log.append(&MetricsLine {
            phase: Phase::Sft,
            step: self.state.step,
            loss: Some(loss),
            learning_rate: Some(learning_rate),
            grad_norm: Some(grad_norm).filter(|n| n.is_finite()),
            skipped: skipped(Some(grad_norm)),
            reward_costs,
            ..MetricsLine::default()
        })
    }
}
