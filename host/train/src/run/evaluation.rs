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

/// Held-out answers decoded per batch.
const CHUNK: usize = 50;

/// Mixed into the seed for pass@k's sampling generator.
const PASS_AT_K_STREAM: u64 = 0x7061_7373_406b;

/// How many held-out problems were solved, and the mean answer turns.
struct Solved {
    accuracy: f64,
    turns: f64,
}

/// Held-out accuracies at one point.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// Pure run: one greedy answer.
    pub pr: f64,
    /// Final verification: greedy answer, verify, rethink up to the cap.
    pub fv: Option<f64>,
    /// Mean answer turns in the FV evaluation.
    pub fv_turns: Option<f64>,
    /// Share of held-out problems solved by at least one of `pass_at_k`
    /// sampled answers.
    pub pass_at_k: Option<f64>,
}

impl Run {
    /// Greedy held-out accuracy: pure run, and with final verification when
    /// `with_fv` and self-verification is on; pass@k too when `with_fv` and
    /// `pass_at_k` is set (before and after GRPO).
    pub(super) fn evaluate(&mut self, with_fv: bool) -> Result<Evaluation> {
        // Greedy decoding draws nothing; evaluation never touches the
        // training generator.
        let mut unused = SplitMix64::new(0);
        let greedy = self.heldout_solved(Sampling::Greedy, false, 1, &mut unused)?;
        let (fv, fv_turns) = if with_fv && self.config.self_verification.enabled {
            let verified = self.heldout_solved(Sampling::Greedy, true, 1, &mut unused)?;
            (Some(verified.accuracy), Some(verified.turns))
        } else {
            (None, None)
        };
        let k = self.config.pass_at_k;
        let pass_at_k = if with_fv && k > 0 {
            // Its own generator, the same at every evaluation: the before
            // and after figures differ by the policy alone.
            let mut rng = SplitMix64::new(self.config.seed ^ PASS_AT_K_STREAM);
            let sampling = Sampling::Temperature(self.config.grpo.temperature);
            Some(self.heldout_solved(sampling, false, k, &mut rng)?.accuracy)
        } else {
            None
        };
        Ok(Evaluation {
            pr: greedy.accuracy,
            fv,
            fv_turns,
            pass_at_k,
        })
    }

    /// Answers every held-out problem `copies` times and counts a problem as
    /// solved when one of its final answers the reward scores ≥ 0.5.
    fn heldout_solved(
        &mut self,
        sampling: Sampling,
        verify: bool,
        copies: usize,
        rng: &mut SplitMix64,
    ) -> Result<Solved> {
        let compute = self.model.cast(self.config.model.compute_dtype)?;
        let options = RolloutOptions {
            max_new_tokens: self.config.grpo.max_new_tokens,
            max_seq_len: self.config.model.max_seq_len,
            sampling,
            verification: verify.then_some(&self.config.self_verification),
        };
        let (mut solved, mut turns) = (0usize, 0usize);
        let per_chunk = (CHUNK / copies).max(1);
        for (c, chunk) in self.heldout.chunks(per_chunk).enumerate() {
            let prompts: Vec<Vec<u32>> = chunk
                .iter()
                .flat_map(|p| std::iter::repeat_n(&p.prompt, copies))
                .map(|prompt| self.tokenizer.prompt_ids(prompt))
                .collect::<Result<_>>()?;
            let rolled = rollouts(
                &compute,
                &self.tokenizer,
                &prompts,
                options,
                rng,
                &self.device,
            )?;
            turns += rolled.iter().map(|r| r.turns).sum::<usize>();
            let answers: Vec<Answer> = rolled
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let id = format!("heldout-{}", c * per_chunk + i / copies);
                    final_answer(id, &chunk[i / copies], &self.tokenizer, r)
                })
                .collect::<Result<_>>()?;
            let scored = self.host.reward.score(0, &answers);
            let correct: Vec<bool> = scored
                .iter()
                .map(|s| self.config.reward.admit(s.total).is_some_and(|t| t >= 0.5))
                .collect();
            solved += correct
                .chunks(copies)
                .filter(|group| group.iter().any(|&c| c))
                .count();
        }
        let n = self.heldout.len().max(1) as f64;
        Ok(Solved {
            accuracy: solved as f64 / n,
            turns: turns as f64 / (n * copies as f64),
        })
    }

    pub(super) fn log_eval(&mut self, eval: Evaluation) -> Result<()> {
        let plugins = self.plugins.clone();
        self.log.append(&MetricsLine {
            phase: Phase::Eval,
            step: self.step,
            heldout_accuracy: Some(eval.pr),
            heldout_accuracy_fv: eval.fv,
            heldout_pass_at_k: eval.pass_at_k,
            mean_turns: eval.fv_turns,
            plugins: &plugins,
            ..MetricsLine::default()
        })
    }
}
