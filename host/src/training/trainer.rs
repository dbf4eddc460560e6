//! `verifine train`: tokenizer → SFT warm-up (samples chosen by an optional
//! curriculum plugin) → GRPO with plugin rewards (optionally with
//! self-verification rollouts), with held-out accuracy along the way,
//! periodic checkpoints and exact resume.
//!
//! A run directory holds `config.toml`, `tokenizer.json`, `metrics.jsonl`
//! (appended per step), `sft_selection.jsonl`, `checkpoints/step-NNNNNNNN/`,
//! `reference.safetensors` (when `beta > 0`), and at the end
//! `model.safetensors`, `summary.json`, `report.md` and `plot.png`.
//!
//! Everything a later step depends on — weights, optimizer moments, the
//! sampling generator, the step, the held-out accuracy after SFT, the line
//! count of `metrics.jsonl` — is in a checkpoint, so a resumed run takes the
//! same steps as an uninterrupted one and ends with the same weights.

use super::checkpoint;
pub use super::config::*;
use super::conversation::{Rollout, RolloutOptions, Verdict, rollouts, sft_sequence};
use super::grpo::{LossInputs, advantages, loss};
use super::metrics_log::{self, MetricsLog};
use super::model::{Decoder, load_weights, save_weights, sorted_vars};
use super::optim::AdamW;
use super::plot;
use super::rollout::Sampling;
use super::sequences::{Sequence, SequenceBatch, batch, log_probs, sft_loss};
use super::sft_data::SftPool;
use super::task::{Problem, splits};
use super::tokenizer::ChatTokenizer;
use crate::data::write_atomically;
use crate::hotswap::gate::CanaryCase;
use crate::hotswap::live::{LiveReward, LiveState};
use crate::runtime::{Provenance, Runtime, Sample};
use crate::scoring::ScoredSample;
use crate::stats::SplitMix64;
use anyhow::{Context as _, Result, bail, ensure};
use candle_core::{Device, Tensor};
use candle_nn::VarMap;
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What `summary.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    /// Greedy held-out accuracy after SFT (before GRPO), pure run.
    pub heldout_accuracy_sft: f64,
    /// Greedy held-out accuracy at the end, pure run.
    pub heldout_accuracy_final: f64,
    /// With self-verification: held-out accuracy after SFT with final
    /// verification (FV) up to `max_turns`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heldout_accuracy_fv_sft: Option<f64>,
    /// With self-verification: held-out FV accuracy at the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heldout_accuracy_fv_final: Option<f64>,
    /// With self-verification: mean answer turns per GRPO rollout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_turns: Option<f64>,
    /// SFT + GRPO updates.
    pub steps: usize,
    /// Wall-clock seconds of the whole run (all sessions of a resumed run).
    pub wall_seconds: f64,
    /// Completion tokens generated per second of GRPO time.
    pub tokens_per_second: f64,
    /// Share of GRPO time spent in reward plugins.
    pub plugin_time_share: f64,
    /// SFT samples kept by the curriculum, of all candidates.
    pub sft_samples_kept: usize,
    /// SFT candidates.
    pub sft_samples: usize,
    /// The plugin revisions that produced the rewards and the curriculum.
    pub plugins: Vec<Provenance>,
    /// The step this session resumed from, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed_from_step: Option<usize>,
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
}

/// Running totals of the GRPO phase.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct GrpoTotals {
    tokens: usize,
    seconds: f64,
    plugin_seconds: f64,
    rollouts: usize,
    turns: usize,
}

/// The state a checkpoint carries besides weights and optimizer moments.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RunState {
    config: TrainConfig,
    /// Steps completed (SFT and GRPO together).
    step: usize,
    /// The sampling generator (SFT draws, prompt draws, rollouts).
    rng: u64,
    /// Set once SFT has ended; its optimizer is then the GRPO one.
    accuracy_sft: Option<Evaluation>,
    optimizer_steps: usize,
    metrics_lines: usize,
    totals: GrpoTotals,
    wall_seconds: f64,
    /// The SFT curriculum that chose the samples (it is asked again on resume).
    curriculum: Option<Provenance>,
    /// The live reward revisions and the inbox requests already decided.
    live: LiveState,
}

/// One line of `metrics.jsonl`.
#[derive(Debug, Default, Serialize)]
struct MetricsLine<'a> {
    phase: &'a str,
    step: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    loss: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    learning_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    grad_norm: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reward_mean: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reward_failures: Option<usize>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    criteria: BTreeMap<String, f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kl: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    mean_turns: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    verdicts_no: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    verdicts_unclear: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tokens_per_second: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    heldout_accuracy: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    heldout_accuracy_fv: Option<f64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    plugins: &'a [Provenance],
}

/// Starts a run into `run_dir` (which must not hold another run's
/// checkpoints) and returns the summary.
pub fn train(config: &TrainConfig, run_dir: &Path) -> Result<Summary> {
    config.validate()?;
    ensure!(
        checkpoint::latest(&run_dir.join("checkpoints")).is_none(),
        "{} already holds a run; continue it with `verifine train --resume {}` or choose another --run-dir",
        run_dir.display(),
        run_dir.display()
    );
    std::fs::create_dir_all(run_dir).with_context(|| format!("creating {}", run_dir.display()))?;
    let config_text = toml::to_string_pretty(config)?;
    write_atomically(&run_dir.join("config.toml"), |w| {
        Ok(w.write_all(config_text.as_bytes())?)
    })?;
    let mut run = Run::start(config.clone(), run_dir)?;
    run.execute()
}

/// Continues the run in `run_dir` from its newest complete checkpoint.
pub fn resume(run_dir: &Path) -> Result<Summary> {
    let latest = checkpoint::latest(&run_dir.join("checkpoints")).with_context(|| {
        format!(
            "{} has no complete checkpoint to resume from",
            run_dir.display()
        )
    })?;
    let mut run = Run::restore(run_dir, &latest)?;
    run.execute()
}

/// A run in progress.
struct Run {
    config: TrainConfig,
    run_dir: PathBuf,
    device: Device,
    varmap: VarMap,
    model: Decoder,
    reference: Option<Decoder>,
    tokenizer: ChatTokenizer,
    train_set: Vec<Problem>,
    heldout: Vec<Problem>,
    pool: SftPool,
    live: LiveReward,
    plugins: Vec<Provenance>,
    rng: SplitMix64,
    optimizer: AdamW,
    log: MetricsLog,
    step: usize,
    accuracy_sft: Option<Evaluation>,
    totals: GrpoTotals,
    wall_before: f64,
    started: Instant,
    resumed_from: Option<usize>,
}

impl Run {
    fn start(config: TrainConfig, run_dir: &Path) -> Result<Self> {
        let (train_set, _) = splits(config.seed, config.train_problems, 0, &config.task);
        let mut corpus: Vec<&str> = train_set
            .iter()
            .flat_map(|p| [p.prompt.as_str(), p.solution.as_str()])
            .collect();
        let svr = &config.self_verification;
        if svr.enabled {
            corpus.extend([
                svr.verify_prompt.as_str(),
                svr.rethink_prompt.as_str(),
                "YES",
                "NO",
            ]);
        }
        let tokenizer = ChatTokenizer::train(&corpus, config.vocab_size)?;
        tokenizer.save(&run_dir.join("tokenizer.json"))?;
        let log = MetricsLog::create(&run_dir.join("metrics.jsonl"))?;
        let run = Run::assemble(config, run_dir, tokenizer, log)?;
        run.model.reseed(&run.varmap, run.config.seed)?;
        Ok(run)
    }

    fn restore(run_dir: &Path, checkpoint_dir: &Path) -> Result<Self> {
        let state: RunState = checkpoint::read_state(checkpoint_dir)?;
        let tokenizer = ChatTokenizer::load(&run_dir.join("tokenizer.json"))?;
        let log = MetricsLog::resume(&run_dir.join("metrics.jsonl"), state.metrics_lines)?;
        let mut run = Run::assemble(state.config.clone(), run_dir, tokenizer, log)?;
        if let (Some(now), Some(then)) = (&run.pool.curriculum, &state.curriculum) {
            ensure!(
                now.sha256 == then.sha256,
                "the SFT curriculum changed since the checkpoint: it was {} {} (sha256 {}), \
                 now {} {} (sha256 {}); an exact resume needs the same revision",
                then.name,
                then.version,
                then.sha256,
                now.name,
                now.version,
                now.sha256
            );
        }
        run.live.restore(&state.live, state.step)?;
        run.refresh_plugins();
        let (moments, _): (_, serde_json::Value) =
            checkpoint::load(checkpoint_dir, &mut run.varmap, &run.device)?;
        if state.accuracy_sft.is_some() {
            run.enter_grpo()?;
        }
        run.optimizer.restore(&moments, state.optimizer_steps)?;
        run.step = state.step;
        run.rng = SplitMix64::new(state.rng);
        run.accuracy_sft = state.accuracy_sft;
        run.totals = state.totals;
        run.wall_before = state.wall_seconds;
        run.resumed_from = Some(state.step);
        tracing::info!(step = state.step, checkpoint = %checkpoint_dir.display(), "resuming");
        Ok(run)
    }

    /// Everything both a fresh and a resumed run need.
    fn assemble(
        config: TrainConfig,
        run_dir: &Path,
        tokenizer: ChatTokenizer,
        log: MetricsLog,
    ) -> Result<Self> {
        let device = device()?;
        let (train_set, heldout) = splits(
            config.seed,
            config.train_problems,
            config.heldout_problems,
            &config.task,
        );
        let varmap = VarMap::new();
        let model = Decoder::new(
            config.model.model_config(tokenizer.vocab_size()),
            &varmap,
            &device,
        )?;
        let swap = &config.hot_swap;
        let mut live = LiveReward::new(
            Runtime::new(config.limits)?,
            &config.reward.rubric,
            config.reward.aggregator.as_ref(),
            run_dir,
            swap.keep_revisions,
            swap.gate.clone(),
            canary_cases(&config)?,
        )?;
        let (runtime, scorer) = live.runtime_and_scorer();
        let pool = SftPool::build(
            &train_set,
            config.sft.noisy_target_share,
            config.sft.curriculum.as_ref(),
            runtime,
            scorer,
            config.seed,
        )?;
        crate::data::write_jsonl(&run_dir.join("sft_selection.jsonl"), &pool.items)?;
        let mut plugins = live.provenance();
        plugins.extend(pool.curriculum.clone());
        let optimizer = AdamW::new(sorted_vars(&varmap), config.sft.optim.clone())?;
        let rng = SplitMix64::new(config.seed ^ 0xA11CE);
        Ok(Run {
            run_dir: run_dir.to_path_buf(),
            device,
            varmap,
            model,
            reference: None,
            tokenizer,
            train_set,
            heldout,
            pool,
            live,
            plugins,
            rng,
            optimizer,
            log,
            step: 0,
            accuracy_sft: None,
            totals: GrpoTotals::default(),
            wall_before: 0.0,
            started: Instant::now(),
            resumed_from: None,
            config,
        })
    }

    fn execute(&mut self) -> Result<Summary> {
        let total = self.config.total_steps();
        let bar = progress_bar(total as u64, self.step as u64);
        loop {
            if self.step == self.config.sft.steps && self.accuracy_sft.is_none() {
                self.finish_sft()?;
            }
            if self.step >= total {
                break;
            }
            if self.step < self.config.sft.steps {
                self.sft_step(&bar)?;
            } else {
                self.grpo_step(&bar)?;
            }
            self.step += 1;
            let grpo_done = self.step.saturating_sub(self.config.sft.steps);
            if self.step > self.config.sft.steps
                && self.config.eval_every > 0
                && grpo_done.is_multiple_of(self.config.eval_every)
                && self.step < total
            {
                let eval = self.evaluate(false)?;
                self.log_eval(eval)?;
            }
            let swaps = self.swap_point()?;
            let every = self.config.checkpoints.every;
            if self.step == total || (every > 0 && self.step.is_multiple_of(every)) || swaps.any() {
                self.checkpoint()?;
            }
            // Requests leave the inbox only once a checkpoint records them.
            swaps.finish()?;
        }
        bar.finish_and_clear();
        self.finish()
    }

    /// Evaluates the SFT model, freezes the KL reference and switches to
    /// the GRPO optimizer.
    fn finish_sft(&mut self) -> Result<()> {
        let eval = self.evaluate(true)?;
        self.log_eval(eval)?;
        self.accuracy_sft = Some(eval);
        if self.config.grpo.objective.beta > 0.0 {
            save_weights(&self.varmap, &self.run_dir.join("reference.safetensors"))?;
        }
        self.enter_grpo()
    }

    /// The GRPO optimizer, and the frozen reference when `beta > 0` (read
    /// back from disk, so a resumed run has exactly the same one).
    fn enter_grpo(&mut self) -> Result<()> {
        self.optimizer = AdamW::new(sorted_vars(&self.varmap), self.config.grpo.optim.clone())?;
        if self.config.grpo.objective.beta > 0.0 {
            let mut varmap = VarMap::new();
            let reference = Decoder::new(self.model.config().clone(), &varmap, &self.device)?;
            load_weights(&mut varmap, &self.run_dir.join("reference.safetensors"))
                .context("loading the frozen KL reference")?;
            // Frozen, so cast to the compute dtype once, not every step.
            self.reference = Some(
                reference
                    .frozen_copy()?
                    .cast(self.config.model.compute_dtype)?,
            );
        }
        Ok(())
    }

    fn sft_step(&mut self, bar: &ProgressBar) -> Result<()> {
        let sequences = (0..self.config.sft.batch_size)
            .map(|_| {
                let item = self.pool.draw(&mut self.rng);
                let problem = &self.train_set[item.problem];
                sft_sequence(
                    problem,
                    &item.target,
                    &self.tokenizer,
                    &self.config.self_verification,
                    &mut self.rng,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let b = self.batch(&sequences)?;
        let learning_rate = self.optimizer.learning_rate();
        let compute = self.model.cast(self.config.model.compute_dtype)?;
        let loss = sft_loss(&compute, &b, None)?;
        let grad_norm = self.optimizer.step(&loss.backward()?)?;
        let loss = f64::from(loss.to_scalar::<f32>()?);
        bar.set_message(format!("sft  loss {loss:.3}"));
        bar.inc(1);
        self.log.append(&MetricsLine {
            phase: "sft",
            step: self.step,
            loss: Some(loss),
            learning_rate: Some(learning_rate),
            grad_norm: Some(grad_norm),
            ..MetricsLine::default()
        })
    }

    fn grpo_step(&mut self, bar: &ProgressBar) -> Result<()> {
        let phase = self.config.grpo.clone();
        let g = phase.objective.num_generations;
        let step_started = Instant::now();
        let problems: Vec<usize> = (0..phase.prompts_per_step)
            .map(|_| self.rng.below(self.train_set.len()))
            .collect();
        let prompts: Vec<Vec<u32>> = problems
            .iter()
            .flat_map(|&p| std::iter::repeat_n(&self.train_set[p].prompt, g))
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

        let samples: Vec<Sample> = rolled
            .iter()
            .enumerate()
            .map(|(i, r)| {
                judged_sample(
                    format!("{}-{i}", self.step),
                    &self.train_set[problems[i / g]],
                    &self.tokenizer,
                    r,
                )
            })
            .collect::<Result<_>>()?;
        let plugin_started = Instant::now();
        let scored = self
            .live
            .scorer()
            .score_batch(self.step as u64, 0, &samples);
        let plugin_seconds = plugin_started.elapsed().as_secs_f64();
        let failures = scored.iter().filter(|s| s.total.is_none()).count();
        let rewards: Vec<Option<f64>> = scored
            .iter()
            .map(|s| match (s.total, phase.on_reward_failure) {
                (Some(t), _) => Some(t),
                (None, RewardFailure::Zero) => Some(0.0),
                (None, RewardFailure::Abstain) => None,
            })
            .collect();
        let present: Vec<f64> = rewards.iter().flatten().copied().collect();
        let reward_mean = present.iter().sum::<f64>() / present.len().max(1) as f64;

        let advantages = advantages(&rewards, &phase.objective)?;
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

        let (loss_value, grad_norm, learning_rate, kl) = if sequences.is_empty() {
            // Every group was uninformative: no update this step.
            (None, None, None, None)
        } else {
            let b = self.batch(&sequences)?;
            // One full forward over the whole conversations, through the
            // same cast the rollouts used (the weights have not moved since).
            let current = log_probs(&policy, &b)?;
            // One update per rollout batch: the sampling policy is the current
            // one, so its log-probs are these values without the graph.
            let old = current.detach();
            let reference = match &self.reference {
                Some(r) => Some(log_probs(r, &b)?.detach()),
                None => None,
            };
            let adv = Tensor::new(kept_advantages.as_slice(), &self.device)?;
            let inputs = LossInputs {
                log_probs: &current,
                old_log_probs: &old,
                ref_log_probs: reference.as_ref(),
                mask: &b.loss_mask,
                advantages: &adv,
            };
            let (l, kl) = loss(&inputs, &phase.objective)?;
            let learning_rate = self.optimizer.learning_rate();
            let grad_norm = self.optimizer.step(&l.backward()?)?;
            let kl = kl
                .map(|k| k.to_scalar::<f32>().map(f64::from))
                .transpose()?;
            (
                Some(f64::from(l.to_scalar::<f32>()?)),
                Some(grad_norm),
                Some(learning_rate),
                kl,
            )
        };
        let seconds = step_started.elapsed().as_secs_f64();
        self.totals.seconds += seconds;
        self.totals.plugin_seconds += plugin_seconds;
        self.totals.tokens += generated;
        self.totals.rollouts += rolled.len();
        let turns: usize = rolled.iter().map(|r| r.turns).sum();
        self.totals.turns += turns;
        let tokens_per_second = generated as f64 / seconds.max(1e-9);
        let svr = self.config.self_verification.enabled;
        let count = |v: Verdict| {
            rolled
                .iter()
                .flat_map(|r| &r.verdicts)
                .filter(|x| **x == v)
                .count()
        };
        bar.set_message(format!(
            "grpo reward {reward_mean:.3}  kl {}  {tokens_per_second:.0} tok/s",
            kl.map_or_else(|| "off (beta 0)".to_string(), |k| format!("{k:.4}"))
        ));
        bar.inc(1);
        let plugins = self.plugins.clone();
        self.log.append(&MetricsLine {
            phase: "grpo",
            step: self.step,
            loss: loss_value,
            learning_rate,
            grad_norm,
            reward_mean: Some(reward_mean),
            reward_failures: Some(failures),
            criteria: criterion_means(&scored),
            kl,
            mean_turns: svr.then(|| turns as f64 / rolled.len().max(1) as f64),
            verdicts_no: svr.then(|| count(Verdict::No)),
            verdicts_unclear: svr.then(|| count(Verdict::Unclear)),
            tokens_per_second: Some(tokens_per_second),
            plugins: &plugins,
            ..MetricsLine::default()
        })
    }

    /// Greedy held-out accuracy: pure run, and with final verification when
    /// `with_fv` and self-verification is on.
    fn evaluate(&mut self, with_fv: bool) -> Result<Evaluation> {
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
    /// rubric scores ≥ 0.5, and the mean answer turns.
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
        for chunk in self.heldout.chunks(50) {
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
            let samples: Vec<Sample> = chunk
                .iter()
                .zip(&rolled)
                .enumerate()
                .map(|(i, (p, r))| judged_sample(format!("heldout-{i}"), p, &self.tokenizer, r))
                .collect::<Result<_>>()?;
            correct += self
                .live
                .scorer()
                .score_batch(0, 0, &samples)
                .iter()
                .filter(|s| s.total.is_some_and(|t| t >= 0.5))
                .count();
        }
        let n = self.heldout.len().max(1) as f64;
        Ok((correct as f64 / n, turns as f64 / n))
    }

    fn log_eval(&mut self, eval: Evaluation) -> Result<()> {
        let plugins = self.plugins.clone();
        self.log.append(&MetricsLine {
            phase: "eval",
            step: self.step,
            heldout_accuracy: Some(eval.pr),
            heldout_accuracy_fv: eval.fv,
            mean_turns: eval.fv_turns,
            plugins: &plugins,
            ..MetricsLine::default()
        })
    }

    fn checkpoint(&mut self) -> Result<()> {
        self.log.sync()?;
        let state = RunState {
            config: self.config.clone(),
            step: self.step,
            rng: self.rng.state(),
            accuracy_sft: self.accuracy_sft,
            optimizer_steps: self.optimizer.steps,
            metrics_lines: self.log.lines(),
            totals: self.totals.clone(),
            wall_seconds: self.wall_before + self.started.elapsed().as_secs_f64(),
            curriculum: self.pool.curriculum.clone(),
            live: self.live.state(),
        };
        let dir = self.run_dir.join("checkpoints");
        checkpoint::save(
            &dir,
            &format!("step-{:08}", self.step),
            &self.varmap,
            &self.optimizer.state(),
            &state,
        )?;
        checkpoint::prune(&dir, self.config.checkpoints.keep)
    }

    fn finish(&mut self) -> Result<Summary> {
        let final_eval = self.evaluate(true)?;
        self.log_eval(final_eval)?;
        save_weights(&self.varmap, &self.run_dir.join("model.safetensors"))?;
        let sft = self
            .accuracy_sft
            .context("the run ended before SFT was evaluated")?;
        let totals = &self.totals;
        let svr = self.config.self_verification.enabled;
        let summary = Summary {
            heldout_accuracy_sft: sft.pr,
            heldout_accuracy_final: final_eval.pr,
            heldout_accuracy_fv_sft: sft.fv,
            heldout_accuracy_fv_final: final_eval.fv,
            mean_turns: svr.then(|| totals.turns as f64 / totals.rollouts.max(1) as f64),
            steps: self.config.total_steps(),
            wall_seconds: self.wall_before + self.started.elapsed().as_secs_f64(),
            tokens_per_second: totals.tokens as f64 / totals.seconds.max(1e-9),
            plugin_time_share: totals.plugin_seconds / totals.seconds.max(1e-9),
            sft_samples_kept: self.pool.kept(),
            sft_samples: self.pool.items.len(),
            plugins: self.plugins.clone(),
            resumed_from_step: self.resumed_from,
        };
        write_atomically(&self.run_dir.join("summary.json"), |w| {
            Ok(serde_json::to_writer_pretty(&mut *w, &summary)?)
        })?;
        let report = report(&summary, &self.config);
        write_atomically(&self.run_dir.join("report.md"), |w| {
            Ok(w.write_all(report.as_bytes())?)
        })?;
        let lines = metrics_log::read(&self.run_dir.join("metrics.jsonl"))?;
        plot::draw(
            &plot::Series::from_metrics(&lines),
            &self.run_dir.join("plot.png"),
        )?;
        Ok(summary)
    }

    /// The swap point at a step boundary: candidates from the watched
    /// directory and (every `agent.every` GRPO steps) the revision agent go
    /// into the inbox, then every pending request is decided.
    fn swap_point(&mut self) -> Result<crate::hotswap::live::SwapOutcome> {
        let swap = &self.config.hot_swap;
        if let Some(dir) = &swap.watch_dir {
            self.live.collect_watched(dir)?;
        }
        let grpo_done = self.step.saturating_sub(self.config.sft.steps);
        let agent = &swap.agent;
        if !agent.command.is_empty()
            && grpo_done > 0
            && agent.every > 0
            && grpo_done.is_multiple_of(agent.every)
            && self.step < self.config.total_steps()
        {
            self.live.ask_agent(agent, self.step)?;
        }
        let outcome = self.live.swap_point(self.step)?;
        if outcome.changed {
            self.refresh_plugins();
        }
        Ok(outcome)
    }

    /// The provenance every metrics line names: live reward revisions and
    /// the SFT curriculum.
    fn refresh_plugins(&mut self) {
        self.plugins = self.live.provenance();
        self.plugins.extend(self.pool.curriculum.clone());
    }

    /// A batch, refused when longer than the model's context.
    fn batch(&self, sequences: &[Sequence]) -> Result<SequenceBatch> {
        let b = batch(sequences, self.tokenizer.pad, &self.device)?;
        let len = b.input.dim(1)?;
        if len > self.config.model.max_seq_len {
            bail!(
                "a training sequence of {len} tokens exceeds max_seq_len {}",
                self.config.model.max_seq_len
            );
        }
        Ok(b)
    }
}

/// The canary set: the configured labelled file, or cases generated from
/// the task (see [`super::task::canary`]).
fn canary_cases(config: &TrainConfig) -> Result<Vec<CanaryCase>> {
    let swap = &config.hot_swap;
    if let Some(path) = &swap.canary {
        return Ok(
            crate::rows::read_labelled(path, swap.gate.canary_threshold)?
                .into_iter()
                .map(|(sample, label)| CanaryCase { sample, label })
                .collect(),
        );
    }
    Ok(generated_canary(
        config.seed,
        swap.canary_size,
        &config.task,
    ))
}

/// `n` canary cases generated from the task (see [`super::task::canary`]),
/// as the gate takes them.
pub fn generated_canary(seed: u64, n: usize, task: &super::task::TaskConfig) -> Vec<CanaryCase> {
    super::task::canary(seed, n, task)
        .into_iter()
        .enumerate()
        .map(|(i, case)| CanaryCase {
            sample: Sample {
                id: format!("canary-{i}"),
                prompt: case.problem.prompt,
                response: case.response,
                reference: Some(case.problem.solution),
                context: "{}".to_string(),
                metadata: Vec::new(),
            },
            label: case.label,
        })
        .collect()
}

fn device() -> Result<Device> {
    #[cfg(feature = "cuda")]
    {
        return Ok(Device::new_cuda(0)?);
    }
    #[allow(unreachable_code)]
    Ok(Device::Cpu)
}

/// A bar on a terminal; hidden otherwise (tests, CI, redirected output).
fn progress_bar(steps: u64, done: u64) -> ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(steps);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} step {pos}/{len} {msg} eta {eta}")
            .expect("valid template"),
    );
    bar.set_position(done);
    bar
}

/// What the reward rubric judges: the final answer against the problem's
/// worked solution.
fn judged_sample(
    id: String,
    problem: &Problem,
    tokenizer: &ChatTokenizer,
    rollout: &Rollout,
) -> Result<Sample> {
    Ok(Sample {
        id,
        prompt: problem.prompt.clone(),
        response: tokenizer.decode(&rollout.final_answer.ids)?,
        reference: Some(problem.solution.clone()),
        context: "{}".to_string(),
        metadata: Vec::new(),
    })
}

/// Mean verdict score per criterion over a batch.
fn criterion_means(scored: &[ScoredSample]) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for judgment in scored.iter().filter_map(|s| s.judgment.as_ref()) {
        for v in &judgment.verdicts {
            let entry = sums.entry(v.criterion.clone()).or_default();
            entry.0 += v.score;
            entry.1 += 1;
        }
    }
    sums.into_iter()
        .map(|(k, (s, n))| (k, s / n as f64))
        .collect()
}

fn report(summary: &Summary, config: &TrainConfig) -> String {
    let plugins: Vec<String> = summary
        .plugins
        .iter()
        .map(|p| format!("{} {} ({})", p.name, p.version, &p.sha256[..12]))
        .collect();
    let mut text = format!(
        "# verifine training run\n\n\
         ![reward and held-out accuracy](plot.png)\n\n\
         | | |\n|---|---|\n\
         | held-out accuracy after SFT | {:.3} |\n\
         | held-out accuracy after GRPO | {:.3} |\n",
        summary.heldout_accuracy_sft, summary.heldout_accuracy_final,
    );
    if let (Some(sft), Some(last)) = (
        summary.heldout_accuracy_fv_sft,
        summary.heldout_accuracy_fv_final,
    ) {
        text += &format!(
            "| held-out accuracy with final verification, after SFT → after GRPO | {sft:.3} → {last:.3} |\n\
             | mean answer turns per GRPO rollout | {:.2} |\n",
            summary.mean_turns.unwrap_or(1.0)
        );
    }
    text += &format!(
        "| steps (SFT + GRPO) | {} + {} |\n\
         | SFT samples kept | {} of {} |\n\
         | wall time | {:.1} s |\n\
         | rollout tokens/s | {:.0} |\n\
         | reward plugin share of GRPO time | {:.2}% |\n\
         | plugins | {} |\n\n\
         Held-out accuracy: greedy answers to {} unseen problems scored ≥ 0.5 by the reward rubric.\n",
        config.sft.steps,
        config.grpo.steps,
        summary.sft_samples_kept,
        summary.sft_samples,
        summary.wall_seconds,
        summary.tokens_per_second,
        summary.plugin_time_share * 100.0,
        plugins.join(", "),
        config.heldout_problems,
    );
    if let Some(step) = summary.resumed_from_step {
        text += &format!("\nResumed from the checkpoint at step {step}.\n");
    }
    text
}

/// The run directory for a new run when none is given: `runs/<unix seconds>`.
pub fn default_run_dir() -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    PathBuf::from("runs").join(format!("train-{secs}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scoring::PluginSlot;
    use crate::training::grpo::GrpoConfig;

    /// A run small enough for a unit test (a few seconds).
    pub(crate) fn tiny_config() -> TrainConfig {
        TrainConfig {
            train_problems: 200,
            heldout_problems: 10,
            eval_every: 2,
            vocab_size: 300,
            model: ModelSize {
                hidden_size: 16,
                num_layers: 1,
                num_heads: 2,
                num_kv_heads: 1,
                intermediate_size: 32,
                max_seq_len: 160,
                ..ModelSize::default()
            },
            sft: SftConfig {
                steps: 3,
                batch_size: 4,
                ..SftConfig::default()
            },
            grpo: GrpoPhase {
                steps: 3,
                prompts_per_step: 2,
                max_new_tokens: 8,
                objective: GrpoConfig {
                    num_generations: 2,
                    dynamic_sampling: false,
                    ..GrpoConfig::default()
                },
                ..GrpoPhase::default()
            },
            checkpoints: CheckpointConfig { every: 2, keep: 10 },
            ..TrainConfig::default()
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("verifine-train-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_tiny_run_writes_its_outputs_and_logs_every_step() {
        let dir = scratch("outputs");
        let config = tiny_config();
        let summary = train(&config, &dir).unwrap();
        assert_eq!(summary.steps, 6);
        for file in [
            "config.toml",
            "tokenizer.json",
            "metrics.jsonl",
            "sft_selection.jsonl",
            "model.safetensors",
            "summary.json",
            "report.md",
            "plot.png",
        ] {
            assert!(dir.join(file).exists(), "{file} missing");
        }
        let lines = metrics_log::read(&dir.join("metrics.jsonl")).unwrap();
        let phases: Vec<&str> = lines.iter().map(|l| l["phase"].as_str().unwrap()).collect();
        // 3 SFT steps, eval after SFT, 3 GRPO steps with an eval after the
        // second, and the final eval.
        assert_eq!(
            phases,
            [
                "sft", "sft", "sft", "eval", "grpo", "grpo", "eval", "grpo", "eval"
            ]
        );
        let grpo_line = lines.iter().find(|l| l["phase"] == "grpo").unwrap();
        assert_eq!(
            grpo_line["plugins"][0]["name"], "math-answer",
            "{grpo_line}"
        );
        assert!(grpo_line["criteria"].is_object(), "{grpo_line}");
        assert!(summary.plugin_time_share < 1.0);
        // Checkpoints every 2 steps and at the end.
        let mut names: Vec<String> = std::fs::read_dir(dir.join("checkpoints"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["step-00000002", "step-00000004", "step-00000006"]);

        let again = train(&config, &dir).unwrap_err();
        assert!(format!("{again:#}").contains("--resume"), "{again:#}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn resuming_from_an_earlier_checkpoint_ends_with_the_same_weights() {
        let dir = scratch("resume");
        let mut config = tiny_config();
        config.grpo.objective.beta = 0.04;
        let first = train(&config, &dir).unwrap();
        let weights = std::fs::read(dir.join("model.safetensors")).unwrap();
        let metrics = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
        assert!(metrics.contains("\"kl\""), "beta > 0 logs the KL term");
        assert!(dir.join("reference.safetensors").exists());

        // Roll back to the checkpoint in the middle of GRPO (step 4) and
        // to the one in the middle of SFT (step 2).
        for back_to in [4, 2] {
            for later in (back_to + 1)..=6 {
                let _ = std::fs::remove_dir_all(dir.join(format!("checkpoints/step-{later:08}")));
            }
            let resumed = resume(&dir).unwrap();
            assert_eq!(resumed.resumed_from_step, Some(back_to));
            assert_eq!(
                std::fs::read(dir.join("model.safetensors")).unwrap(),
                weights,
                "resumed from step {back_to}"
            );
            assert_eq!(resumed.heldout_accuracy_final, first.heldout_accuracy_final);
            let strip = |text: &str| -> Vec<serde_json::Value> {
                text.lines()
                    .map(|l| {
                        let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                        v.as_object_mut().unwrap().remove("tokens_per_second");
                        v
                    })
                    .collect()
            };
            assert_eq!(
                strip(&std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap()),
                strip(&metrics)
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn self_verification_runs_report_turns_and_both_evaluation_modes() {
        let dir = scratch("svr");
        let mut config = tiny_config();
        config.self_verification = SelfVerification {
            enabled: true,
            max_turns: 2,
            ..SelfVerification::default()
        };
        config.model.max_seq_len = 200;
        let summary = train(&config, &dir).unwrap();
        let turns = summary.mean_turns.unwrap();
        assert!((1.0..=2.0).contains(&turns), "{turns}");
        assert!(summary.heldout_accuracy_fv_sft.is_some());
        assert!(summary.heldout_accuracy_fv_final.is_some());
        let lines = metrics_log::read(&dir.join("metrics.jsonl")).unwrap();
        let grpo = lines.iter().find(|l| l["phase"] == "grpo").unwrap();
        assert!(
            grpo["mean_turns"].is_number() && grpo["verdicts_no"].is_number(),
            "{grpo}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_sft_curriculum_drops_exactly_the_targets_the_judge_fails() {
        let dir = scratch("curriculum");
        let mut config = tiny_config();
        config.sft.noisy_target_share = 0.3;
        config.sft.curriculum = Some(PluginSlot {
            plugin: "weakness-curriculum".to_string(),
            config: toml::Table::new(),
        });
        let summary = train(&config, &dir).unwrap();
        let items: Vec<crate::training::sft_data::SftItem> =
            crate::data::read_jsonl(&dir.join("sft_selection.jsonl")).unwrap();
        let noisy = items.iter().filter(|i| i.noisy).count();
        assert!(
            noisy > 30 && noisy < 90,
            "about 30% of 200 targets slipped: {noisy}"
        );
        for item in &items {
            assert_eq!(item.weight.is_none(), item.noisy, "{item:?}");
            // math-answer: 1 for the right answer, a small format credit
            // (< min_reference_score 0.5) for a well-formed wrong one.
            let score = item.judge_score.unwrap();
            assert!(
                if item.noisy {
                    score < 0.5
                } else {
                    score == 1.0
                },
                "{item:?}"
            );
        }
        assert_eq!(summary.sft_samples_kept, 200 - noisy);
        assert!(
            summary
                .plugins
                .iter()
                .any(|p| p.name == "weakness-curriculum")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bf16_compute_trains_the_f32_master_weights() {
        let dir = scratch("bf16");
        let mut config = tiny_config();
        config.model.compute_dtype = crate::training::model::ComputeDType::Bf16;
        config.grpo.steps = 1;
        let summary = train(&config, &dir).unwrap();
        assert_eq!(summary.steps, 4);
        let lines = metrics_log::read(&dir.join("metrics.jsonl")).unwrap();
        let losses: Vec<f64> = lines
            .iter()
            .filter(|l| l["phase"] == "sft")
            .map(|l| l["loss"].as_f64().unwrap())
            .collect();
        assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
