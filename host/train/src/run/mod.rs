//! A training run: tokenizer → SFT warm-up (samples chosen by an optional
//! curriculum) → GRPO with the host's rewards (optionally with
//! self-verification rollouts), with held-out accuracy along the way,
//! periodic checkpoints and exact resume.
//!
//! A run directory holds `config.toml` (written by the host), `tokenizer.json`,
//! `metrics.jsonl` (appended per step), `sft_selection.jsonl`,
//! `checkpoints/step-NNNNNNNN/`, `reference.safetensors` (when `beta > 0`),
//! and at the end `model.safetensors`, `heldout_answers.jsonl`,
//! `summary.json`, `report.md` and `plot.png`.
//!
//! A run may start from a finished one (`init_from`: its tokenizer and
//! weights, no SFT), draw its GRPO prompts from the host's weighted pool,
//! and measure held-out accuracy with the host's fixed evaluator; the step
//! hook gets a [`crate::hooks::Monitor`] reading after every held-out
//! evaluation.
//!
//! Everything a later step depends on — weights, optimizer moments, the
//! sampling generator, the step, the held-out accuracy after SFT, the line
//! count of `metrics.jsonl`, the host hook's state — is in a checkpoint, so a
//! resumed run takes the same steps as an uninterrupted one and ends with the
//! same weights.
//!
//! This module is the lifecycle; one step of each phase is in [`sft_step`]
//! and [`grpo_step`], evaluation in [`evaluation`] (at step boundaries in
//! [`monitor`]), the outputs at the end in [`report`].

mod evaluation;
mod grpo_step;
pub mod metrics;
mod monitor;
pub(crate) mod pretrained;
mod report;
mod setup;
mod sft_step;

pub use evaluation::{Evaluation, HeldoutAnswer};
pub use report::TrainSummary;

use crate::checkpoint;
use crate::config::TrainConfig;
use crate::error::{Result, TrainError, bail, ensure};
pub use crate::hooks::PhaseSeconds;
use crate::hooks::{Host, Progress, SftCurriculum, StepBoundary};
use crate::metrics_log::MetricsLog;
use crate::model::{Decoder, load_matching_weights, load_weights, save_weights, sorted_vars};
use crate::optim::AdamW;
use crate::problem::Problem;
use crate::sequences::{Sequence, SequenceBatch, batch};
use crate::sft_data::SftPool;
use crate::task::{problems, sft_problems};
use crate::tokenizer::ChatTokenizer;
use candle_core::Device;
use candle_nn::VarMap;
use evaluation::Evaluated;
use monitor::RewardTally;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Instant;
use verifine_base::{Provenance, SplitMix64, write_atomically, write_jsonl};

/// Running totals of the GRPO phase.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct GrpoTotals {
    tokens: usize,
    seconds: f64,
    plugin_seconds: f64,
    rollouts: usize,
    turns: usize,
}

/// What a run carries from step to step and a checkpoint restores as it
/// was: one home, so a new resumable field is written once.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct TrainingState {
    /// Steps completed (SFT and GRPO together).
    step: usize,
    /// Set once SFT has ended; its optimizer is then the GRPO one.
    accuracy_sft: Option<Evaluation>,
    totals: GrpoTotals,
    /// The fingerprint of the host's GRPO prompt pool, if it gave one.
    #[serde(default)]
    prompt_pool: Option<String>,
    /// The fingerprint of the host's SFT targets, if it gave them.
    #[serde(default)]
    sft_targets: Option<String>,
    /// GRPO rewards since the last monitor reading.
    #[serde(default)]
    rewards_since: RewardTally,
    /// The final evaluation (at the last GRPO step) is in `metrics.jsonl`.
    #[serde(default)]
    final_logged: bool,
    /// Time in each phase's steps so far.
    #[serde(default)]
    phase_seconds: PhaseSeconds,
    /// Rejection sampling: passed completions not yet trained on, oldest
    /// first.
    #[serde(default)]
    rft_buffer: Vec<Sequence>,
}

/// The state a checkpoint carries besides weights and optimizer moments:
/// the [`TrainingState`] (flattened: the file's layout is unchanged) and
/// what is read off the run's parts when it is written.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RunState {
    config: TrainConfig,
    #[serde(flatten)]
    state: TrainingState,
    /// The sampling generator (SFT draws, prompt draws, rollouts).
    rng: u64,
    optimizer_steps: usize,
    metrics_lines: usize,
    wall_seconds: f64,
    /// The SFT curriculum that chose the samples (it is asked again on resume).
    curriculum: Option<Provenance>,
    /// The host's live reward: its step hook's own record (live revisions,
    /// decided requests …).
    live: serde_json::Value,
    /// The fingerprint of the pretrained base (`[model] from`).
    #[serde(default)]
    base_model: Option<String>,
}

/// Starts a run into `run_dir` (which must not hold another run's
/// checkpoints) and returns the summary. `saved_config` is the whole config
/// as the host read it (it may hold more tables than training's), saved as
/// `config.toml`.
pub fn train(
    config: &TrainConfig,
    saved_config: &str,
    run_dir: &Path,
    host: Host,
) -> Result<TrainSummary> {
    config.validate()?;
    ensure_new_run_dir(run_dir)?;
    std::fs::create_dir_all(run_dir).map_err(|e| TrainError::io("creating", run_dir, e))?;
    write_atomically(&run_dir.join("config.toml"), |w| {
        w.write_all(saved_config.as_bytes())
    })?;
    let mut run = Run::start(config.clone(), run_dir, host)?;
    run.execute()
}

/// Refuses a directory that already holds a run's checkpoints.
pub fn ensure_new_run_dir(run_dir: &Path) -> Result<()> {
    ensure!(
        checkpoint::latest(&run_dir.join("checkpoints")).is_none(),
        "{} already holds a run; continue it with `verifine train --resume {}` or choose another --run-dir",
        run_dir.display(),
        run_dir.display()
    );
    Ok(())
}

/// Continues the run in `run_dir` from its newest complete checkpoint.
pub fn resume(run_dir: &Path, host: Host) -> Result<TrainSummary> {
    let latest = latest_checkpoint(run_dir)?;
    let mut run = Run::restore(run_dir, &latest, host)?;
    run.execute()
}

/// The training config a run's newest checkpoint holds (what a resumed run
/// continues with).
pub fn checkpointed_config(run_dir: &Path) -> Result<TrainConfig> {
    let state: RunState = checkpoint::read_state(&latest_checkpoint(run_dir)?)?;
    Ok(state.config)
}

fn latest_checkpoint(run_dir: &Path) -> Result<PathBuf> {
    checkpoint::latest(&run_dir.join("checkpoints")).ok_or_else(|| {
        TrainError::Invalid(format!(
            "{} has no complete checkpoint to resume from",
            run_dir.display()
        ))
    })
}

/// A run in progress.
struct Run {
    config: TrainConfig,
    run_dir: PathBuf,
    device: Device,
    varmap: VarMap,
    model: Decoder,
    /// The pretrained model the policy started from, if any.
    base: Option<pretrained::Base>,
    reference: Option<Decoder>,
    tokenizer: ChatTokenizer,
    train_set: Vec<Problem>,
    /// The problems SFT targets answer: the training set, or the host's.
    sft_problems: Vec<Problem>,
    heldout: Vec<Problem>,
    pool: SftPool,
    host: Host,
    plugins: Vec<Provenance>,
    rng: SplitMix64,
    optimizer: AdamW,
    log: MetricsLog,
    state: TrainingState,
    wall_before: f64,
    started: Instant,
    resumed_from: Option<usize>,
    /// The final evaluation, when it ran at the last step boundary (or
    /// ended SFT in a run without GRPO).
    final_eval: Option<Evaluated>,
    /// The evaluation at the last SFT step's boundary, for the end of SFT.
    sft_end_eval: Option<Evaluated>,
}

impl Run {
    fn execute(&mut self) -> Result<TrainSummary> {
        (self.host.progress)(Progress::Started {
            total: self.config.total_steps(),
            done: self.state.step,
        });
        loop {
            if self.state.step == self.config.sft.steps && self.state.accuracy_sft.is_none() {
                self.finish_sft()?;
            }
            if self.state.step >= self.config.total_steps() {
                break;
            }
            let step_started = Instant::now();
            if self.state.step < self.config.sft.steps {
                self.sft_step()?;
                self.state.phase_seconds.sft += step_started.elapsed().as_secs_f64();
            } else {
                self.grpo_step()?;
                self.state.phase_seconds.grpo += step_started.elapsed().as_secs_f64();
            }
            self.state.step += 1;
            self.end_phase_when_out_of_time();
            let total = self.config.total_steps();
            let grpo_done = self.state.step.saturating_sub(self.config.sft.steps);
            let monitor = self.evaluate_at_boundary()?;
            let outcome = self
                .host
                .reward
                .at_boundary(StepBoundary {
                    step: self.state.step,
                    grpo_steps: grpo_done,
                    total_steps: total,
                    monitor,
                    phase_seconds: self.state.phase_seconds,
                })
                .map_err(|error| TrainError::Hook {
                    context: format!("at the step boundary after step {}", self.state.step),
                    error,
                })?;
            if outcome.reward_changed {
                self.refresh_plugins();
            }
            let every = self.config.checkpoints.every;
            if self.state.step == total
                || (every > 0 && self.state.step.is_multiple_of(every))
                || outcome.needs_checkpoint
            {
                self.checkpoint()?;
            }
            self.host
                .reward
                .after_checkpoint()
                .map_err(|error| TrainError::Hook {
                    context: format!("after the checkpoint at step {}", self.state.step),
                    error,
                })?;
        }
        (self.host.progress)(Progress::Finished);
        self.finish()
    }

    /// Shortens the current phase to the steps taken once its
    /// `max_seconds` are spent. The shortened config is what checkpoints
    /// save, so a resumed run ends its phases where this one did.
    fn end_phase_when_out_of_time(&mut self) {
        let step = self.state.step;
        let spent = self.state.phase_seconds;
        let sft = &mut self.config.sft;
        if step < sft.steps && sft.max_seconds.is_some_and(|budget| spent.sft >= budget) {
            tracing::info!(step, seconds = spent.sft, "SFT's time budget is spent");
            sft.steps = step;
        } else if step > sft.steps
            && step < sft.steps + self.config.grpo.steps
            && (self.config.grpo.max_seconds).is_some_and(|budget| spent.grpo >= budget)
        {
            tracing::info!(step, seconds = spent.grpo, "GRPO's time budget is spent");
            self.config.grpo.steps = step - sft.steps;
        }
    }

    /// Evaluates the SFT model, freezes the KL reference and switches to
    /// the GRPO optimizer.
    fn finish_sft(&mut self) -> Result<()> {
        // The last SFT step's boundary may have evaluated (and logged) these
        // weights already; they are evaluated again only for what that did
        // not measure (final verification, pass@k), or after a resume.
        let measures_more = self.config.self_verification.enabled || self.config.pass_at_k > 0;
        let evaluated = match self.sft_end_eval.take() {
            Some(evaluated) if !measures_more => evaluated,
            _ => {
                let evaluated = self.evaluate(true)?;
                if measures_more || !self.sft_evaluates_at(self.state.step) {
                    self.log_eval(evaluated.evaluation)?;
                }
                evaluated
            }
        };
        // The answers GRPO starts from, beside the final ones, so the gain
        // can be measured per problem.
        write_jsonl(
            &self.run_dir.join("heldout_answers_sft.jsonl"),
            &evaluated.answers,
        )?;
        self.state.accuracy_sft = Some(evaluated.evaluation);
        if self.config.grpo.steps == 0 {
            // Without GRPO this is also the final evaluation: one line, one run.
            self.state.final_logged = true;
            self.final_eval = Some(evaluated);
        }
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
            let reference = match &self.base {
                Some(base) => base.decoder(&self.config, &varmap)?,
                None => Decoder::new(self.model.config().clone(), &varmap, &self.device)?,
            };
            load_weights(&mut varmap, &self.run_dir.join("reference.safetensors"))?;
            // Frozen, so cast to the compute dtype once, not every step.
            self.reference = Some(
                reference
                    .frozen_copy()?
                    .cast(self.config.model.compute_dtype)?,
            );
        }
        Ok(())
    }

    fn checkpoint(&mut self) -> Result<()> {
        self.log.sync()?;
        let state = RunState {
            config: self.config.clone(),
            state: self.state.clone(),
            rng: self.rng.state(),
            optimizer_steps: self.optimizer.steps,
            metrics_lines: self.log.lines(),
            wall_seconds: self.wall_seconds(),
            curriculum: self.pool.curriculum.clone(),
            live: self.host.reward.state(),
            base_model: self.base.as_ref().map(|b| b.fingerprint.clone()),
        };
        let dir = self.run_dir.join("checkpoints");
        checkpoint::save(
            &dir,
            &format!("step-{:08}", self.state.step),
            &self.varmap,
            &self.optimizer.state(),
            &state,
        )?;
        checkpoint::prune(&dir, self.config.checkpoints.keep)
    }

    /// The provenance every metrics line names: the reward's revisions and
    /// the SFT curriculum.
    fn refresh_plugins(&mut self) {
        self.plugins = self.host.reward.provenance();
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

    fn wall_seconds(&self) -> f64 {
        self.wall_before + self.started.elapsed().as_secs_f64()
    }
}
