//! `verifine score`: judge a JSONL dataset with a rubric plugin.

use super::config::ScoreConfig;
use anyhow::{Context as _, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use verifine_base::files::write_jsonl;
use verifine_base::{PluginSpec, write_atomically};
use verifine_judge::Ledger;
use verifine_runtime::Provenance;
pub use verifine_runtime::rows::OutputRow;
use verifine_runtime::rows::{output_row, read_samples};
use verifine_runtime::scoring::{RewardPlugins, ScoredSample, score_all};
use verifine_runtime::stats::bootstrap_mean_std;

/// Resamples for the bootstrap std of the dataset mean.
pub const BOOTSTRAP_RESAMPLES: usize = 1000;

/// Judge a JSONL dataset with a rubric plugin (flags override the config file).
#[derive(Debug, Clone, Default, Args)]
pub struct ScoreArgs {
    /// Built-in name, path to a .wasm component, or native:PATH (needs --allow-native);
    /// replaces the config's plugin.
    #[arg(long)]
    pub rubric: Option<PluginSpec>,
    /// Aggregator (built-in name, path or native:PATH); default: the rubric's own total,
    /// else weighted-sum. When named, it decides every total.
    #[arg(long)]
    pub aggregator: Option<PluginSpec>,
    /// TOML config with [rubric], [aggregator], [limits] and [scoring] tables.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Rows {"id","prompt","response","reference"?,"context"?,"metadata"?}.
    #[arg(long)]
    pub input: PathBuf,
    /// Where the scored JSONL goes; written atomically (temporary file, then rename).
    #[arg(long)]
    pub output: PathBuf,
    /// Samples per plugin call (overrides `[scoring] batch_size`).
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Worker threads (overrides `[scoring] threads`; 0: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Also write the summary as JSON here.
    #[arg(long)]
    pub summary: Option<PathBuf>,
    /// Judge models for rubrics that ask them (`judges.toml`: a table per
    /// judge name with its backend, price and budget); without it a rubric's
    /// model queries fail with "no judge model configured".
    #[arg(long)]
    pub judges: Option<PathBuf>,
    /// Allow native:PATH plugins. They are NOT sandboxed: they run inside this process
    /// with its privileges and no time or memory limit. Only for code you trust.
    #[arg(long)]
    pub allow_native: bool,
    /// Show a progress bar (set when stderr is a terminal).
    #[arg(skip)]
    pub progress: bool,
}

/// `verifine score`: scores, prints the summary, and writes it to `--summary`.
pub fn run(mut args: ScoreArgs) -> Result<()> {
    args.progress = std::io::stderr().is_terminal();
    let result = score(&args)?;
    println!("{result}");
    if let Some(path) = &args.summary {
        write_atomically(path, |w| {
            Ok(serde_json::to_writer_pretty(&mut *w, &result)?)
        })?;
    }
    Ok(())
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
    /// What each judge model spent, when `--judges` was given.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub judges: BTreeMap<String, JudgeCost>,
}

/// One judge model's spending over a scoring run.
#[derive(Debug, Clone, Serialize)]
pub struct JudgeCost {
    /// The whole run.
    pub total: Ledger,
    /// Scaled to 1 000 rows (tasks).
    pub per_1000_tasks: Ledger,
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
        )?;
        for (name, cost) in &self.judges {
            let t = &cost.total;
            write!(
                f,
                "\njudge {name}: calls={} cache_hits={} failures={} tokens in={} (cached {}) out={} \
                 usd={:.6} seconds={:.2} device_seconds={:.2}; per 1000 tasks: calls={} usd={:.6} \
                 device_seconds={:.2}",
                t.calls,
                t.cache_hits,
                t.failures,
                t.usage.input,
                t.usage.cached_input,
                t.usage.output,
                t.usd,
                t.seconds,
                t.device_seconds,
                cost.per_1000_tasks.calls,
                cost.per_1000_tasks.usd,
                cost.per_1000_tasks.device_seconds,
            )?;
        }
        Ok(())
    }
}

/// Scores `args.input` into `args.output` (written atomically) and returns the summary.
pub fn score(args: &ScoreArgs) -> Result<ScoreSummary> {
    let config = match &args.config {
        Some(path) => ScoreConfig::load(path)?,
        None => ScoreConfig::default(),
    };
    let (rubric, aggregator) = config.slots(args.rubric.as_ref(), args.aggregator.as_ref())?;
    let samples = read_samples(&args.input)?;
    let (runtime, judges) = config.runtime(args.judges.as_deref(), args.allow_native)?;
    let function = RewardPlugins::from_slots(&runtime, &rubric, aggregator.as_ref())?;

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
    let mut summary = summarize(&scored, rubric_provenance, aggregator_provenance);
    if let Some(judges) = judges {
        summary.judges = judges
            .ledgers()
            .into_iter()
            .map(|(name, total)| {
                let per_1000_tasks = total.per_thousand(samples.len());
                (
                    name,
                    JudgeCost {
                        total,
                        per_1000_tasks,
                    },
                )
            })
            .collect();
    }
    Ok(summary)
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
        judges: BTreeMap::new(),
    }
}
