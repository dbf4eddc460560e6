//! A training run wired to plugins: training (`verifine-train`) with the live
//! reward and the SFT curriculum from the plugin runtime and hot-swap.

pub mod config;

pub use config::{DEFAULT_CONFIG, HotSwapConfig, RunConfig};

use anyhow::{Context as _, Result};
use std::path::Path;
use verifine_hotswap::gate::CanaryCase;
use verifine_hotswap::live::LiveReward;
use verifine_reward::{FixedReward, SampleShape, SwappingReward};
use verifine_runtime::Sample;
use verifine_runtime::scoring::RewardPlugins;
use verifine_train::hooks::RewardFunction;
use verifine_train::hooks::{Host, Progress};
use verifine_train::task::TaskConfig;
use verifine_train::{TrainConfig, TrainSummary};

/// Starts a run into `run_dir`, silently (see [`train_with_progress`]).
pub fn train(config: &RunConfig, run_dir: &Path) -> Result<TrainSummary> {
    train_with_progress(config, run_dir, Box::new(|_| {}))
}

/// Starts a run into `run_dir` (which must not hold another run's
/// checkpoints), telling `progress` about every step.
pub fn train_with_progress(
    config: &RunConfig,
    run_dir: &Path,
    progress: Box<dyn FnMut(Progress)>,
) -> Result<TrainSummary> {
    config.training.validate()?;
    verifine_train::ensure_new_run_dir(run_dir)?;
    std::fs::create_dir_all(run_dir).with_context(|| format!("creating {}", run_dir.display()))?;
    let host = host(config, run_dir, progress)?;
    Ok(verifine_train::train(
        &config.training,
        &config.to_toml()?,
        run_dir,
        host,
    )?)
}

/// Continues the run in `run_dir` from its newest checkpoint, silently.
pub fn resume(run_dir: &Path) -> Result<TrainSummary> {
    resume_with_progress(run_dir, Box::new(|_| {}))
}

/// Continues the run in `run_dir` from its newest checkpoint, with its own
/// config: the host's tables from `config.toml`, training's from the
/// checkpoint.
pub fn resume_with_progress(
    run_dir: &Path,
    progress: Box<dyn FnMut(Progress)>,
) -> Result<TrainSummary> {
    let training = verifine_train::checkpointed_config(run_dir)?;
    let config = RunConfig {
        training,
        ..RunConfig::load(&run_dir.join("config.toml"))?
    };
    let host = host(&config, run_dir, progress)?;
    Ok(verifine_train::resume(run_dir, host)?)
}

/// The plugins a run's config names, loaded: the live reward (with its
/// gate and canary) and the SFT curriculum.
fn host(config: &RunConfig, run_dir: &Path, progress: Box<dyn FnMut(Progress)>) -> Result<Host> {
    let swap = &config.hot_swap;
    let reward = &config.training.reward;
    let (runtime, judges) =
        crate::sandbox::judged_runtime(config.limits, config.judges.file.as_deref(), false)?;
    let live = LiveReward::new(
        runtime,
        &reward.rubric,
        reward.aggregator.as_ref(),
        run_dir,
        swap.keep_revisions,
        swap.gate.clone(),
        canary_cases(config)?,
    )?;
    let shape = SampleShape::of(&config.training.reward);
    let reward = SwappingReward::new(live, swap.clone())
        .with_judges(judges)
        .with_shape(shape);
    let curriculum =
        verifine_reward::curriculum(reward.runtime(), config.training.sft.curriculum.as_ref())?;
    let evaluator = match &config.training.reward.evaluator {
        Some(setting) => {
            let plugins = RewardPlugins::from_settings(reward.runtime(), setting, None)?;
            Some(Box::new(FixedReward::new(&plugins, None)?) as Box<dyn RewardFunction>)
        }
        None => None,
    };
    Ok(Host {
        reward: Box::new(reward),
        prompts: None,
        evaluator,
        curriculum: curriculum.map(|c| Box::new(c) as _),
        sft_targets: None,
        progress,
    })
}

/// The canary set: the configured labelled file, or cases generated from
/// the task (see [`generated_canary`]).
fn canary_cases(config: &RunConfig) -> Result<Vec<CanaryCase>> {
    let swap = &config.hot_swap;
    let training: &TrainConfig = &config.training;
    let cases = match &swap.canary {
        Some(path) => verifine_runtime::rows::read_labelled(path, swap.gate.canary_threshold)?
            .into_iter()
            .map(|(sample, label)| CanaryCase { sample, label })
            .collect(),
        None => generated_canary(training.seed, swap.canary_size, &training.task),
    };
    // A revision is gated on what it will be shown in training.
    let shape = SampleShape::of(&training.reward);
    Ok(cases
        .into_iter()
        .map(|case| CanaryCase {
            sample: shape.apply(case.sample),
            label: case.label,
        })
        .collect())
}

/// `n` canary cases generated from the task — right answers, wrong answers,
/// and wrong answers that mention the right number — as the gate takes them.
pub fn generated_canary(seed: u64, n: usize, task: &TaskConfig) -> Vec<CanaryCase> {
    verifine_train::task::canary(seed, n, task)
        .into_iter()
        .enumerate()
        .map(|(i, case)| CanaryCase {
            sample: Sample::new(format!("canary-{i}"), case.problem.prompt, case.response)
                .with_reference(case.problem.solution),
            label: case.label,
        })
        .collect()
}

#[cfg(test)]
mod tests;
