//! Held-out accuracy: greedy answers to unseen problems, judged by the same
//! reward function that trains the policy.

use super::Run;
use super::grpo_step::final_answer;
use super::metrics::{MetricsLine, Phase};
use crate::conversation::{RolloutOptions, rollouts};
use crate::error::Result;
use crate::hooks::Answer;
use crate::rollout::Sampling;
use serde::{Deserialize, Serialize};
use verifine_base::SplitMix64;

/// Held-out problems decoded per batch.
const CHUNK: usize = 50;

/// Held-out accuracies at one point.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// Pure run: one greedy answer.
    pub pr: f64,
    /// Final verification: greedy answer, verify, rethink up to the cap.
    pub fv: Option<f64>,
    /// Mean answer turns in the FV evaluation.
    pub fv_turns: Option<f64>,
}

impl Run {
    /// Greedy held-out accuracy: pure run, and with final verification when
    /// `with_fv` and self-verification is on.
    pub(super) fn evaluate(&mut self, with_fv: bool) -> Result<Evaluation> {
        let (pr, _) = self.heldout_accuracy(false)?;
        let (fv, fv_turns) = if with_fv && self.config.self_verification.enabled {
            let (accuracy, turns) = self.heldout_accuracy(true)?;
            (Some(accuracy), Some(turns))
        } else {
            (None, None)
        };
        Ok(Evaluation { pr, fv, fv_turns })
    }

    /// Share of held-out problems whose final greedy answer the reward
    /// scores ≥ 0.5, and the mean answer turns.
    fn heldout_accuracy(&mut self, verify: bool) -> Result<(f64, f64)> {
        let compute = self.model.cast(self.config.model.compute_dtype)?;
        let options = RolloutOptions {
            max_new_tokens: self.config.grpo.max_new_tokens,
            max_seq_len: self.config.model.max_seq_len,
            sampling: Sampling::Greedy,
            verification: verify.then_some(&self.config.self_verification),
        };
        // Greedy decoding draws nothing; evaluation never touches the
        // training generator.
        let mut unused = SplitMix64::new(0);
        let (mut correct, mut turns) = (0usize, 0usize);
        for chunk in self.heldout.chunks(CHUNK) {
            let prompts: Vec<Vec<u32>> = chunk
                .iter()
                .map(|p| self.tokenizer.prompt_ids(&p.prompt))
                .collect::<Result<_>>()?;
            let rolled = rollouts(
                &compute,
                &self.tokenizer,
                &prompts,
                options,
                &mut unused,
                &self.device,
            )?;
            turns += rolled.iter().map(|r| r.turns).sum::<usize>();
            let answers: Vec<Answer> = chunk
                .iter()
                .zip(&rolled)
                .enumerate()
                .map(|(i, (p, r))| final_answer(format!("heldout-{i}"), p, &self.tokenizer, r))
                .collect::<Result<_>>()?;
            correct += self
                .host
                .reward
                .score(0, &answers)
                .iter()
                .filter(|s| self.config.reward.admit(s.total).is_some_and(|t| t >= 0.5))
                .count();
        }
        let n = self.heldout.len().max(1) as f64;
        Ok((correct as f64 / n, turns as f64 / n))
    }

    pub(super) fn log_eval(&mut self, eval: Evaluation) -> Result<()> {
        let plugins = self.plugins.clone();
        self.log.append(&MetricsLine {
            phase: Phase::Eval,
            step: self.step,
            heldout_accuracy: Some(eval.pr),
            heldout_accuracy_fv: eval.fv,
            mean_turns: eval.fv_turns,
            plugins: &plugins,
            ..MetricsLine::default()
        })
    }
}
