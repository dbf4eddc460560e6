//! `verifine train`: tokenizer → SFT warm-up → GRPO with plugin rewards,
//! with held-out accuracy before and after GRPO.
//!
//! One run writes to its run directory: `config.toml` (what ran),
//! `tokenizer.json`, `metrics.jsonl` (a line per step, naming the plugin
//! revisions used), `model.safetensors` (final weights), `summary.json` and
//! `report.md`. Every file is written through a temporary file and a rename.
//!
//! Not yet here (issue 3): self-verification rollouts, periodic checkpoints
//! with exact resume, the PNG plot, the frozen-reference KL (`beta` must be 0).

use super::grpo::{GrpoConfig, LossInputs, advantages, loss};
use super::model::{Decoder, ModelConfig, save_weights, sorted_vars};
use super::optim::{AdamW, OptimConfig};
use super::rollout::{Completion, GenerateOptions, Sampling, generate};
use super::sequences::{Sequence, SequenceBatch, batch, log_probs, sft_loss};
use super::task::{Problem, TaskConfig, splits};
use super::tokenizer::ChatTokenizer;
use crate::data::write_atomically;
use crate::runtime::{Limits, Provenance, Runtime, Sample};
use crate::scoring::{PluginSlot, RewardFunction, Scorer};
use crate::stats::SplitMix64;
use anyhow::{Context as _, Result, bail, ensure};
use candle_core::{Device, Tensor};
use candle_nn::VarMap;
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The default run: `examples/arithmetic/train.toml`, embedded.
pub const DEFAULT_CONFIG: &str = include_str!("../../../examples/arithmetic/train.toml");

/// Model size (the vocabulary comes from the trained tokenizer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelSize {
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Decoder blocks.
    pub num_layers: usize,
    /// Query heads.
    pub num_heads: usize,
    /// Key/value heads.
    pub num_kv_heads: usize,
    /// MLP width.
    pub intermediate_size: usize,
    /// Longest conversation in tokens.
    pub max_seq_len: usize,
}

impl Default for ModelSize {
    fn default() -> Self {
        ModelSize {
            hidden_size: 64,
            num_layers: 2,
            num_heads: 4,
            num_kv_heads: 2,
            intermediate_size: 128,
            max_seq_len: 160,
        }
    }
}

/// The SFT warm-up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SftConfig {
    /// Optimizer updates.
    pub steps: usize,
    /// Problems per update.
    pub batch_size: usize,
    /// Optimizer settings.
    pub optim: OptimConfig,
}

impl Default for SftConfig {
    fn default() -> Self {
        SftConfig {
            steps: 800,
            batch_size: 16,
            optim: OptimConfig {
                learning_rate: 5e-3,
                warmup_steps: 20,
                ..OptimConfig::default()
            },
        }
    }
}

/// What happens to a sample whose reward could not be computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RewardFailure {
    /// The sample leaves its group's advantage computation.
    Abstain,
    /// The sample gets reward 0.
    Zero,
}

/// The GRPO phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GrpoPhase {
    /// Optimizer updates.
    pub steps: usize,
    /// Distinct prompts per update (each gets `num_generations` completions).
    pub prompts_per_step: usize,
    /// Longest completion.
    pub max_new_tokens: usize,
    /// Sampling temperature of rollouts.
    pub temperature: f64,
    /// The objective (TRL names).
    pub objective: GrpoConfig,
    /// Optimizer settings.
    pub optim: OptimConfig,
    /// Reward failures: abstain or zero.
    pub on_reward_failure: RewardFailure,
}

impl Default for GrpoPhase {
    fn default() -> Self {
        GrpoPhase {
            steps: 80,
            prompts_per_step: 8,
            max_new_tokens: 48,
            temperature: 1.0,
            objective: GrpoConfig::default(),
            optim: OptimConfig {
                learning_rate: 5e-4,
                warmup_steps: 5,
                ..OptimConfig::default()
            },
            on_reward_failure: RewardFailure::Abstain,
        }
    }
}

/// The reward: a rubric and an optional aggregator from the plugin runtime.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RewardConfig {
    /// The rubric slot (default: built-in `math-answer`).
    pub rubric: PluginSlot,
    /// The aggregator slot (default: the rubric's own total).
    #[serde(default)]
    pub aggregator: Option<PluginSlot>,
}

impl Default for RewardConfig {
    fn default() -> Self {
        RewardConfig {
            rubric: PluginSlot {
                plugin: "math-answer".to_string(),
                config: toml::Table::new(),
            },
            aggregator: None,
        }
    }
}

/// A whole run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainConfig {
    /// Seeds data, initialization and sampling.
    pub seed: u64,
    /// Problem difficulty.
    pub task: TaskConfig,
    /// Training problems generated.
    pub train_problems: usize,
    /// Held-out problems for greedy accuracy.
    pub heldout_problems: usize,
    /// Most tokens in the trained vocabulary.
    pub vocab_size: usize,
    /// Model size.
    pub model: ModelSize,
    /// SFT warm-up.
    pub sft: SftConfig,
    /// GRPO phase.
    pub grpo: GrpoPhase,
    /// Reward plugins.
    pub reward: RewardConfig,
    /// Sandbox limits of the reward plugins.
    pub limits: Limits,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            seed: 0,
            task: TaskConfig {
                max_steps: 2,
                max_operand: 9,
            },
            train_problems: 4000,
            heldout_problems: 200,
            vocab_size: 400,
            model: ModelSize::default(),
            sft: SftConfig::default(),
            grpo: GrpoPhase::default(),
            reward: RewardConfig::default(),
            limits: Limits::default(),
        }
    }
}

impl TrainConfig {
    /// Parses a TOML config; errors name the file.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self> {
        let config: TrainConfig =
            toml::from_str(text).with_context(|| format!("invalid training config {origin}"))?;
        ensure!(
            config.grpo.objective.beta == 0.0,
            "{origin}: beta > 0 (KL to a frozen reference) is not implemented yet"
        );
        Ok(config)
    }
}

/// What `summary.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    /// Greedy held-out accuracy after SFT (before GRPO).
    pub heldout_accuracy_sft: f64,
    /// Greedy held-out accuracy at the end.
    pub heldout_accuracy_final: f64,
    /// SFT + GRPO updates.
    pub steps: usize,
    /// Wall-clock seconds of the whole run.
    pub wall_seconds: f64,
    /// Completion tokens generated per second of GRPO time.
    pub tokens_per_second: f64,
    /// Share of GRPO time spent in reward plugins.
    pub plugin_time_share: f64,
    /// The plugin revisions that produced the rewards.
    pub reward_plugins: Vec<Provenance>,
}

/// One line of `metrics.jsonl`.
#[derive(Debug, Serialize)]
struct MetricsLine<'a> {
    phase: &'a str,
    step: usize,
    loss: f64,
    learning_rate: f64,
    grad_norm: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    reward_mean: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reward_failures: Option<usize>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    criteria: BTreeMap<String, f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tokens_per_second: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    heldout_accuracy: Option<f64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    plugins: &'a [Provenance],
}

/// Runs training into `run_dir` and returns the summary.
pub fn train(config: &TrainConfig, run_dir: &Path) -> Result<Summary> {
    let started = Instant::now();
    std::fs::create_dir_all(run_dir).with_context(|| format!("creating {}", run_dir.display()))?;
    let config_text = toml::to_string_pretty(config)?;
    write_atomically(&run_dir.join("config.toml"), |w| {
        Ok(w.write_all(config_text.as_bytes())?)
    })?;
    let device = device()?;

    let (train_set, heldout) = splits(
        config.seed,
        config.train_problems,
        config.heldout_problems,
        &config.task,
    );
    let corpus: Vec<&str> = train_set
        .iter()
        .flat_map(|p| [p.prompt.as_str(), p.solution.as_str()])
        .collect();
    let tokenizer = ChatTokenizer::train(&corpus, config.vocab_size)?;
    tokenizer.save(&run_dir.join("tokenizer.json"))?;

    let size = &config.model;
    let model_config = ModelConfig {
        vocab_size: tokenizer.vocab_size(),
        hidden_size: size.hidden_size,
        num_layers: size.num_layers,
        num_heads: size.num_heads,
        num_kv_heads: size.num_kv_heads,
        intermediate_size: size.intermediate_size,
        max_seq_len: size.max_seq_len,
        rope_theta: 10_000.0,
        rms_eps: 1e-6,
    };
    let varmap = VarMap::new();
    let model = Decoder::new(model_config, &varmap, &device)?;
    model.reseed(&varmap, config.seed)?;

    let runtime = Runtime::new(config.limits)?;
    let reward = RewardFunction::from_slots(
        &runtime,
        &config.reward.rubric,
        config.reward.aggregator.as_ref(),
    )?;
    let mut scorer = reward.scorer()?;
    let plugins: Vec<Provenance> =
        [reward.rubric.provenance(), reward.aggregator.provenance()].into();

    let mut metrics = Vec::new();
    let mut rng = SplitMix64::new(config.seed ^ 0xA11CE);
    let bar = progress_bar((config.sft.steps + config.grpo.steps) as u64);
    run_sft(
        config,
        &model,
        &varmap,
        &tokenizer,
        &train_set,
        &mut rng,
        &device,
        &mut metrics,
        &bar,
    )?;
    let accuracy_sft =
        heldout_accuracy(&model, &tokenizer, &heldout, &mut scorer, config, &device)?;
    metrics.push(serde_json::to_value(MetricsLine {
        phase: "eval",
        step: config.sft.steps,
        loss: 0.0,
        learning_rate: 0.0,
        grad_norm: 0.0,
        reward_mean: None,
        reward_failures: None,
        criteria: BTreeMap::new(),
        tokens_per_second: None,
        heldout_accuracy: Some(accuracy_sft),
        plugins: &plugins,
    })?);

    let grpo = run_grpo(
        config,
        &model,
        &varmap,
        &tokenizer,
        &train_set,
        &mut scorer,
        &plugins,
        &mut rng,
        &device,
        &mut metrics,
        &bar,
    )?;
    bar.finish_and_clear();
    let accuracy_final =
        heldout_accuracy(&model, &tokenizer, &heldout, &mut scorer, config, &device)?;
    save_weights(&varmap, &run_dir.join("model.safetensors"))?;

    let summary = Summary {
        heldout_accuracy_sft: accuracy_sft,
        heldout_accuracy_final: accuracy_final,
        steps: config.sft.steps + config.grpo.steps,
        wall_seconds: started.elapsed().as_secs_f64(),
        tokens_per_second: grpo.tokens as f64 / grpo.seconds.max(1e-9),
        plugin_time_share: grpo.plugin_seconds / grpo.seconds.max(1e-9),
        reward_plugins: plugins.clone(),
    };
    write_atomically(&run_dir.join("metrics.jsonl"), |w| {
        for line in &metrics {
            serde_json::to_writer(&mut *w, line)?;
            w.write_all(b"\n")?;
        }
        Ok(())
    })?;
    write_atomically(&run_dir.join("summary.json"), |w| {
        Ok(serde_json::to_writer_pretty(&mut *w, &summary)?)
    })?;
    let report = report(&summary, config);
    write_atomically(&run_dir.join("report.md"), |w| {
        Ok(w.write_all(report.as_bytes())?)
    })?;
    Ok(summary)
}

fn device() -> Result<Device> {
    #[cfg(feature = "cuda")]
    {
        return Ok(Device::new_cuda(0)?);
    }
    #[allow(unreachable_code)]
    Ok(Device::Cpu)
}

#[allow(clippy::too_many_arguments)]
fn run_sft(
    config: &TrainConfig,
    model: &Decoder,
    varmap: &VarMap,
    tokenizer: &ChatTokenizer,
    train_set: &[Problem],
    rng: &mut SplitMix64,
    device: &Device,
    metrics: &mut Vec<serde_json::Value>,
    bar: &ProgressBar,
) -> Result<()> {
    let mut opt = AdamW::new(sorted_vars(varmap), config.sft.optim.clone())?;
    for step in 0..config.sft.steps {
        let sequences = (0..config.sft.batch_size)
            .map(|_| {
                let p = &train_set[rng.below(train_set.len())];
                Ok(Sequence::prompt_response(
                    &tokenizer.prompt_ids(&p.prompt)?,
                    &tokenizer.response_ids(&p.solution)?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let b = fit(
            batch(&sequences, tokenizer.pad, device)?,
            config.model.max_seq_len,
        )?;
        let learning_rate = opt.learning_rate();
        let loss = sft_loss(model, &b, None)?;
        let grad_norm = opt.step(&loss.backward()?)?;
        bar.set_message(format!("sft  loss {:.3}", loss.to_scalar::<f32>()?));
        bar.inc(1);
        metrics.push(serde_json::to_value(MetricsLine {
            phase: "sft",
            step,
            loss: f64::from(loss.to_scalar::<f32>()?),
            learning_rate,
            grad_norm,
            reward_mean: None,
            reward_failures: None,
            criteria: BTreeMap::new(),
            tokens_per_second: None,
            heldout_accuracy: None,
            plugins: &[],
        })?);
    }
    Ok(())
}

/// A bar on a terminal; hidden otherwise (tests, CI, redirected output).
fn progress_bar(steps: u64) -> ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(steps);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} step {pos}/{len} {msg} eta {eta}")
            .expect("valid template"),
    );
    bar
}

/// Refuses batches longer than the model's context.
fn fit(b: SequenceBatch, max_seq_len: usize) -> Result<SequenceBatch> {
    let len = b.input.dim(1)?;
    if len > max_seq_len {
        bail!("a training sequence of {len} tokens exceeds max_seq_len {max_seq_len}");
    }
    Ok(b)
}

struct GrpoTotals {
    tokens: usize,
    seconds: f64,
    plugin_seconds: f64,
}

#[allow(clippy::too_many_arguments)]
fn run_grpo(
    config: &TrainConfig,
    model: &Decoder,
    varmap: &VarMap,
    tokenizer: &ChatTokenizer,
    train_set: &[Problem],
    scorer: &mut Scorer,
    plugins: &[Provenance],
    rng: &mut SplitMix64,
    device: &Device,
    metrics: &mut Vec<serde_json::Value>,
    bar: &ProgressBar,
) -> Result<GrpoTotals> {
    let phase = &config.grpo;
    let g = phase.objective.num_generations;
    let mut opt = AdamW::new(sorted_vars(varmap), phase.optim.clone())?;
    let mut totals = GrpoTotals {
        tokens: 0,
        seconds: 0.0,
        plugin_seconds: 0.0,
    };
    for step in 0..phase.steps {
        let step_started = Instant::now();
        let problems: Vec<&Problem> = (0..phase.prompts_per_step)
            .map(|_| &train_set[rng.below(train_set.len())])
            .collect();
        let prompts: Vec<Vec<u32>> = problems
            .iter()
            .flat_map(|p| std::iter::repeat_n(&p.prompt, g))
            .map(|prompt| tokenizer.prompt_ids(prompt))
            .collect::<Result<_>>()?;
        let options = GenerateOptions {
            pad: tokenizer.pad,
            stop: tokenizer.end,
            max_new_tokens: phase.max_new_tokens,
            sampling: Sampling::Temperature(phase.temperature),
        };
        let completions = generate(model, &prompts, options, rng, device)?;
        totals.tokens += completions.iter().map(|c| c.ids.len()).sum::<usize>();

        let samples: Vec<Sample> = completions
            .iter()
            .enumerate()
            .map(|(i, c)| judged_sample(format!("{step}-{i}"), problems[i / g], tokenizer, c))
            .collect::<Result<_>>()?;
        let plugin_started = Instant::now();
        let scored = scorer.score_batch(step as u64, 0, &samples);
        totals.plugin_seconds += plugin_started.elapsed().as_secs_f64();
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
        let criteria = criterion_means(&scored);

        let advantages = advantages(&rewards, &phase.objective)?;
        let mut sequences = Vec::new();
        let mut kept_advantages = Vec::new();
        for ((prompt, completion), advantage) in prompts.iter().zip(&completions).zip(&advantages) {
            let Some(advantage) = advantage else { continue };
            if completion.ids.is_empty() {
                continue;
            }
            let mut sequence = Sequence::prompt_response(prompt, &completion.ids);
            if completion.truncated && phase.objective.mask_truncated_completions {
                sequence.trainable.iter_mut().for_each(|t| *t = false);
            }
            sequences.push(sequence);
            kept_advantages.push(*advantage as f32);
        }

        let (loss_value, grad_norm, learning_rate) = if sequences.is_empty() {
            // Every group was uninformative: no update this step.
            (0.0, 0.0, opt.learning_rate())
        } else {
            let b = fit(
                batch(&sequences, tokenizer.pad, device)?,
                config.model.max_seq_len,
            )?;
            let current = log_probs(model, &b)?;
            // One update per rollout batch: the sampling policy is the current
            // one, so its log-probs are these values without the graph.
            let old = current.detach();
            let adv = Tensor::new(kept_advantages.as_slice(), device)?;
            let inputs = LossInputs {
                log_probs: &current,
                old_log_probs: &old,
                ref_log_probs: None,
                mask: &b.loss_mask,
                advantages: &adv,
            };
            let (l, _) = loss(&inputs, &phase.objective)?;
            let learning_rate = opt.learning_rate();
            let grad_norm = opt.step(&l.backward()?)?;
            (f64::from(l.to_scalar::<f32>()?), grad_norm, learning_rate)
        };
        let seconds = step_started.elapsed().as_secs_f64();
        totals.seconds += seconds;
        let generated: usize = completions.iter().map(|c| c.ids.len()).sum();
        bar.set_message(format!(
            "grpo reward {reward_mean:.3}  kl off (beta 0)  {:.0} tok/s",
            generated as f64 / seconds.max(1e-9)
        ));
        bar.inc(1);
        metrics.push(serde_json::to_value(MetricsLine {
            phase: "grpo",
            step: config.sft.steps + step,
            loss: loss_value,
            learning_rate,
            grad_norm,
            reward_mean: Some(reward_mean),
            reward_failures: Some(failures),
            criteria,
            tokens_per_second: Some(generated as f64 / seconds.max(1e-9)),
            heldout_accuracy: None,
            plugins,
        })?);
    }
    Ok(totals)
}

/// What the reward rubric judges: the decoded completion against the
/// problem's worked solution.
fn judged_sample(
    id: String,
    problem: &Problem,
    tokenizer: &ChatTokenizer,
    completion: &Completion,
) -> Result<Sample> {
    Ok(Sample {
        id,
        prompt: problem.prompt.clone(),
        response: tokenizer.decode(&completion.ids)?,
        reference: Some(problem.solution.clone()),
        context: "{}".to_string(),
        metadata: Vec::new(),
    })
}

/// Mean verdict score per criterion over a batch.
fn criterion_means(scored: &[crate::scoring::ScoredSample]) -> BTreeMap<String, f64> {
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

/// Share of held-out problems whose greedy answer the reward rubric scores
/// ≥ 0.5 (for `math-answer`: the answer is correct).
fn heldout_accuracy(
    model: &Decoder,
    tokenizer: &ChatTokenizer,
    heldout: &[Problem],
    scorer: &mut Scorer,
    config: &TrainConfig,
    device: &Device,
) -> Result<f64> {
    let mut correct = 0usize;
    let mut rng = SplitMix64::new(0);
    for chunk in heldout.chunks(50) {
        let prompts: Vec<Vec<u32>> = chunk
            .iter()
            .map(|p| tokenizer.prompt_ids(&p.prompt))
            .collect::<Result<_>>()?;
        let options = GenerateOptions {
            pad: tokenizer.pad,
            stop: tokenizer.end,
            max_new_tokens: config.grpo.max_new_tokens,
            sampling: Sampling::Greedy,
        };
        let completions = generate(model, &prompts, options, &mut rng, device)?;
        let samples: Vec<Sample> = chunk
            .iter()
            .zip(&completions)
            .enumerate()
            .map(|(i, (p, c))| judged_sample(format!("heldout-{i}"), p, tokenizer, c))
            .collect::<Result<_>>()?;
        correct += scorer
            .score_batch(0, 0, &samples)
            .iter()
            .filter(|s| s.total.is_some_and(|t| t >= 0.5))
            .count();
    }
    Ok(correct as f64 / heldout.len().max(1) as f64)
}

fn report(summary: &Summary, config: &TrainConfig) -> String {
    let plugins: Vec<String> = summary
        .reward_plugins
        .iter()
        .map(|p| format!("{} {} ({})", p.name, p.version, &p.sha256[..12]))
        .collect();
    format!(
        "# verifine training run\n\n\
         | | |\n|---|---|\n\
         | held-out accuracy after SFT | {:.3} |\n\
         | held-out accuracy after GRPO | {:.3} |\n\
         | steps (SFT + GRPO) | {} + {} |\n\
         | wall time | {:.1} s |\n\
         | rollout tokens/s | {:.0} |\n\
         | reward plugin share of GRPO time | {:.2}% |\n\
         | reward plugins | {} |\n\n\
         Held-out accuracy: greedy answers to {} unseen problems scored ≥ 0.5 by the reward rubric.\n",
        summary.heldout_accuracy_sft,
        summary.heldout_accuracy_final,
        config.sft.steps,
        config.grpo.steps,
        summary.wall_seconds,
        summary.tokens_per_second,
        summary.plugin_time_share * 100.0,
        plugins.join(", "),
        config.heldout_problems,
    )
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

    #[test]
    fn the_shipped_config_is_the_default() {
        let shipped = TrainConfig::from_toml(DEFAULT_CONFIG, "default").unwrap();
        let defaults = TrainConfig::default();
        assert_eq!(shipped.reward.rubric.plugin, "math-answer");
        assert_eq!(
            toml::to_string(&shipped).unwrap(),
            toml::to_string(&defaults).unwrap()
        );
    }

    #[test]
    fn a_tiny_run_writes_its_outputs() {
        let dir = std::env::temp_dir().join(format!("verifine-train-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let config = TrainConfig {
            train_problems: 200,
            heldout_problems: 10,
            vocab_size: 300,
            model: ModelSize {
                hidden_size: 16,
                num_layers: 1,
                num_heads: 2,
                num_kv_heads: 1,
                intermediate_size: 32,
                max_seq_len: 160,
            },
            sft: SftConfig {
                steps: 3,
                batch_size: 4,
                ..SftConfig::default()
            },
            grpo: GrpoPhase {
                steps: 2,
                prompts_per_step: 2,
                max_new_tokens: 8,
                objective: GrpoConfig {
                    num_generations: 2,
                    dynamic_sampling: false,
                    ..GrpoConfig::default()
                },
                ..GrpoPhase::default()
            },
            ..TrainConfig::default()
        };
        let summary = train(&config, &dir).unwrap();
        assert_eq!(summary.steps, 5);
        for file in [
            "config.toml",
            "tokenizer.json",
            "metrics.jsonl",
            "model.safetensors",
            "summary.json",
            "report.md",
        ] {
            assert!(dir.join(file).exists(), "{file} missing");
        }
        let lines = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
        let grpo_line = lines.lines().find(|l| l.contains("\"grpo\"")).unwrap();
        assert!(
            grpo_line.contains("math-answer"),
            "metrics name the plugin revision: {grpo_line}"
        );
        assert!(summary.plugin_time_share < 1.0);
    }
}
