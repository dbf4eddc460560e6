//! `verifine score`: judge a JSONL dataset with a rubric plugin.

use super::config::ScoreConfig;
use crate::data::write_jsonl;
pub use crate::rows::OutputRow;
use crate::rows::{output_row, read_samples};
use crate::runtime::{Provenance, Runtime};
use crate::scoring::{RewardFunction, ScoredSample, score_all};
use crate::stats::bootstrap_mean_std;
use anyhow::{Context as _, Result};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::path::PathBuf;

/// Resamples for the bootstrap std of the dataset mean.
pub const BOOTSTRAP_RESAMPLES: usize = 1000;

/// Arguments of `verifine score`; flags override the config file.
#[derive(Debug, Clone, Default)]
pub struct ScoreArgs {
    /// `--rubric`: a built-in name, `.wasm` path or `native:PATH`; replaces
    /// the config's plugin.
    pub rubric: Option<String>,
    /// `--aggregator`; replaces the config's, and then decides every total.
    pub aggregator: Option<String>,
    /// The TOML config (see [`super::config`]); without it, defaults apply.
    pub config: Option<PathBuf>,
    /// JSONL of samples: `id`, `prompt`, `response`, optional `reference`, `context`, `metadata`.
    pub input: PathBuf,
    /// Where the scored JSONL goes; written atomically.
    pub output: PathBuf,
    /// Overrides `[scoring] batch_size`.
    pub batch_size: Option<usize>,
    /// Overrides `[scoring] threads` (0: one per core).
    pub threads: Option<usize>,
    /// Show a progress bar (only drawn on a terminal).
    pub progress: bool,
    /// `--allow-native`: lets `native:PATH` plugins load. They are not
    /// sandboxed, so this is off unless the user asks.
    pub allow_native: bool,
}

/// What a scoring run produced, for the closing summary.
#[derive(Debug, Clone, Serialize)]
pub struct ScoreSummary {
    /// Rows in the input.
    pub n: usize,
    /// Rows with a total.
    pub scored: usize,
    /// Rows whose scoring failed.
    pub errors: usize,
    /// Judged, but the rubric defines no score (e.g. no positive rubric item).
    pub undefined: usize,
    /// Mean of the totals; `None` when nothing was scored.
    pub mean: Option<f64>,
    /// The dataset mean clipped to [0, 1] (HealthBench's reporting rule).
    pub mean_clipped: Option<f64>,
    /// Std of the mean over bootstrap resamples.
    pub bootstrap_std: Option<f64>,
    /// The rubric that judged every row.
    pub rubric: Provenance,
    /// The aggregator that was loaded, whether or not it decided any total.
    pub aggregator: Provenance,
}

impl std::fmt::Display for ScoreSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let num = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.4}"));
        write!(
            f,
            "n={} scored={} errors={} undefined={} mean={} (clipped {}, bootstrap std {}) \
             rubric={}@{} aggregator={}@{}",
            self.n,
            self.scored,
            self.errors,
            self.undefined,
            num(self.mean),
            num(self.mean_clipped),
            num(self.bootstrap_std),
            self.rubric.name,
            self.rubric.version,
            self.aggregator.name,
            self.aggregator.version,
        )
    }
}

/// Scores `args.input` into `args.output` (written atomically) and returns the summary.
pub fn score(args: &ScoreArgs) -> Result<ScoreSummary> {
    let config = match &args.config {
        Some(path) => ScoreConfig::load(path)?,
        None => ScoreConfig::default(),
    };
    let rubric_slot = config.rubric.as_ref();
    let rubric = args
        .rubric
        .clone()
        .or_else(|| rubric_slot.map(|s| s.plugin.clone()))
        .context("no rubric: pass --rubric NAME|PATH or set [rubric] plugin in the config")?;
    let aggregator = args
        .aggregator
        .clone()
        .or_else(|| config.aggregator.as_ref().map(|s| s.plugin.clone()));
    let empty = serde_json::json!({});
    let rubric_config = rubric_slot.map_or(empty.clone(), |s| s.config_json());
    let aggregator_config = config
        .aggregator
        .as_ref()
        .map_or(empty, |s| s.config_json());

    let samples = read_samples(&args.input)?;
    let runtime = Runtime::new(config.limits)?.allow_native(args.allow_native);
    let function = RewardFunction::load(
        &runtime,
        &rubric,
        &rubric_config,
        aggregator.as_deref(),
        &aggregator_config,
    )?;

    let threads = args.threads.unwrap_or(config.scoring.threads);
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    };
    let batch_size = args.batch_size.unwrap_or(config.scoring.batch_size);
    let bar = if args.progress {
        ProgressBar::new(samples.len() as u64)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} samples  {per_sec}  eta {eta}")
            .expect("valid template"),
    );
    let scored = score_all(&function, &samples, batch_size, threads, &|n| {
        bar.inc(n as u64)
    })?;
    bar.finish_and_clear();

    let rubric_provenance = function.rubric.provenance();
    let aggregator_provenance = function.aggregator.provenance();
    let rows: Vec<OutputRow> = samples
        .iter()
        .zip(&scored)
        .map(|(sample, s)| output_row(sample, s, &rubric_provenance, &aggregator_provenance))
        .collect();
    write_jsonl(&args.output, &rows)
        .with_context(|| format!("writing {}", args.output.display()))?;
    Ok(summarize(&scored, rubric_provenance, aggregator_provenance))
}

fn summarize(scored: &[ScoredSample], rubric: Provenance, aggregator: Provenance) -> ScoreSummary {
    let totals: Vec<f64> = scored.iter().filter_map(|s| s.total).collect();
    let errors = scored.iter().filter(|s| s.error.is_some()).count();
    let (mean, std) = if totals.is_empty() {
        (None, None)
    } else {
        let (m, s) = bootstrap_mean_std(&totals, BOOTSTRAP_RESAMPLES, 0);
        (Some(m), Some(s))
    };
    ScoreSummary {
        n: scored.len(),
        scored: totals.len(),
        errors,
        undefined: scored.len() - totals.len() - errors,
        mean,
        mean_clipped: mean.map(|m| m.clamp(0.0, 1.0)),
        bootstrap_std: std,
        rubric,
        aggregator,
    }
}
