//! Held-out accuracy: greedy answers to unseen problems, judged by the
//! host's evaluator when it supplies one, else by the same reward function
//! that trains the policy.

use super::Run;
use super::grpo_step::final_answer;
use super::metrics::{MetricsLine, Phase};
use crate::conversation::RolloutOptions;
use crate::error::Result;
use crate::hooks::{Answer, RewardFunction};
use crate::policy::{answer_rollouts, problems_per_chunk};
use crate::rollout::Sampling;
use serde::{Deserialize, Serialize};
use verifine_base::PASS_MARK;
use verifine_base::SplitMix64;

/// Mixed into the seed for pass@k's sampling generator.
const PASS_AT_K_STREAM: u64 = 0x7061_7373_406b;

/// How many held-out problems were solved, the mean answer turns, the mean
/// evaluator total, and every answer.
struct Solved {
    accuracy: f64,
    turns: f64,
    score: f64,
    answers: Vec<HeldoutAnswer>,
}

/// One line of `heldout_answers.jsonl`: the final policy's greedy answer
/// to a held-out problem, as the evaluator judged it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeldoutAnswer {
    /// `heldout-<i>`.
    pub id: String,
    /// The problem as the policy saw it.
    pub prompt: String,
    /// The final answer turn.
    pub response: String,
    /// The gold worked solution.
    pub reference: String,
    /// The gold answer.
    pub answer: i64,
    /// The evaluator's total (the training reward's without an evaluator);
    /// `None` when it failed or fell outside `reward.range`.
    pub evaluator_total: Option<f64>,
    /// Whether the total is ≥ 0.5 (what held-out accuracy counts).
    pub correct: bool,
}

/// A held-out evaluation with what the monitor and the run's outputs need
/// besides the accuracies.
pub(super) struct Evaluated {
    /// The accuracies.
    pub evaluation: Evaluation,
    /// Mean evaluator total of the greedy answers (failed = 0).
    pub score: f64,
    /// The greedy (pure run) answers, one per held-out problem.
    pub answers: Vec<HeldoutAnswer>,
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
    /// Mean evaluator total of the greedy answers (failed = 0): the
    /// held-out reward.
    #[serde(default)]
    pub mean_reward: f64,
}

impl Run {
    /// Greedy held-out accuracy: pure run, and with final verification when
    /// `with_fv` and self-verification is on; pass@k too when `with_fv` and
    /// `pass_at_k` is set (before and after GRPO).
    pub(super) fn evaluate(&mut self, with_fv: bool) -> Result<Evaluated> {
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
            let mut rng = SplitMix64::new(self.config.effective_sampling_seed() ^ PASS_AT_K_STREAM);
            let sampling = Sampling::Temperature(self.config.grpo.temperature);
            Some(self.heldout_solved(sampling, false, k, &mut rng)?.accuracy)
        } else {
            None
        };
        Ok(Evaluated {
            evaluation: Evaluation {
                pr: greedy.accuracy,
                fv,
                fv_turns,
                pass_at_k,
                mean_reward: greedy.score,
            },
            score: greedy.score,
            answers: greedy.answers,
        })
    }

    /// Answers every held-out problem `copies` times and counts a problem as
    /// solved when one of its final answers the evaluator (or the training
    /// reward) scores ≥ 0.5.
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
        let rolled = answer_rollouts(
            &compute,
            &self.tokenizer,
            &self.heldout,
            copies,
            options,
            rng,
            &self.device,
        )?;
        let turns: usize = rolled.iter().map(|r| r.turns).sum();
        let scorer: &mut dyn RewardFunction = match self.host.evaluator.as_mut() {
            Some(evaluator) => evaluator.as_mut(),
            None => self.host.reward.as_mut(),
        };
        let (mut solved, mut score_sum) = (0usize, 0.0);
        let mut judged = Vec::with_capacity(rolled.len());
        let per_chunk = problems_per_chunk(copies);
        // Scored a batch at a time, as the rollouts were decoded.
        let batches = self
            .heldout
            .chunks(per_chunk)
            .zip(rolled.chunks(per_chunk * copies));
        for (c, (chunk, rows)) in batches.enumerate() {
            let answers: Vec<Answer> = rows
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let id = format!("heldout-{}", c * per_chunk + i / copies);
                    final_answer(id, &chunk[i / copies], &self.tokenizer, r)
                })
                .collect::<Result<_>>()?;
            let scored = scorer.score(0, &answers);
            let totals: Vec<Option<f64>> = (0..answers.len())
                .map(|i| {
                    self.config
                        .reward
                        .admit(scored.get(i).and_then(|s| s.total))
                })
                .collect();
            let correct: Vec<bool> = totals
                .iter()
                .map(|t| t.is_some_and(|t| t >= PASS_MARK))
                .collect();
            solved += correct
                .chunks(copies)
                .filter(|group| group.iter().any(|&c| c))
                .count();
            score_sum += totals.iter().flatten().sum::<f64>();
            for (i, answer) in answers.into_iter().enumerate() {
                let problem = &chunk[i / copies];
                judged.push(HeldoutAnswer {
                    id: answer.id,
                    prompt: answer.prompt,
                    response: answer.response,
                    reference: problem.solution.clone(),
                    answer: problem.answer,
                    evaluator_total: totals[i],
                    correct: correct[i],
                });
            }
        }
        let n = self.heldout.len().max(1) as f64;
        Ok(Solved {
            accuracy: solved as f64 / n,
            turns: turns as f64 / (n * copies as f64),
            score: score_sum / (n * copies as f64),
            answers: judged,
        })
    }

    pub(super) fn log_eval(&mut self, eval: Evaluation) -> Result<()> {
        let plugins = self.plugins.clone();
        let reward_costs = self.host.reward.take_costs();
        self.log.append(&MetricsLine {
            phase: Phase::Eval,
            step: self.state.step,
            reward_costs,
            train_seconds: Some(self.state.phase_seconds.sft + self.state.phase_seconds.grpo),
            heldout_accuracy: Some(eval.pr),
            heldout_accuracy_fv: eval.fv,
            heldout_pass_at_k: eval.pass_at_k,
            mean_turns: eval.fv_turns,
            plugins: &plugins,
            ..MetricsLine::default()
        })
    }
}
