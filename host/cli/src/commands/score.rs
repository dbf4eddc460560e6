//! `verifine score`: judge a JSONL dataset with a rubric plugin.

use super::config::ScoreConfig;
use anyhow::{Context as _, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, IsTerminal};
use std::path::PathBuf;
use verifine_base::{PluginSpec, write_atomically};
use verifine_judge::Ledger;
use verifine_runtime::Provenance;
pub use verifine_runtime::rows::OutputRow;
use verifine_runtime::score_stream::{StageSeconds, StreamSettings, score_stream};
use verifine_runtime::scorer_pool::ScorerPool;
use verifine_runtime::scoring::RewardPlugins;

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
    /// TOML config with `[rubric]`, `[aggregator]`, `[limits]` and `[scoring]` tables.
    #[arg(long, value_parser = crate::commands::absolute_path)]
    pub config: Option<PathBuf>,
    /// Rows {"id","prompt","response","reference"?,"context"?,"metadata"?}.
    #[arg(long, value_parser = crate::commands::absolute_path)]
    pub input: PathBuf,
    /// Where the scored JSONL goes; written atomically (temporary file, then rename).
    #[arg(long, value_parser = crate::commands::absolute_path)]
    pub output: PathBuf,
    /// Samples per plugin call (overrides `[scoring] batch_size`).
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Worker threads (overrides `[scoring] threads`; 0: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Also write the summary as JSON here.
    #[arg(long, value_parser = crate::commands::absolute_path)]
    pub summary: Option<PathBuf>,
    /// Judge models for rubrics that ask them (`judges.toml`: a table per
    /// judge name with its backend, price and budget); without it a rubric's
    /// model queries fail with "no judge model configured".
    #[arg(long, value_parser = crate::commands::absolute_path)]
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
    /// Std of the mean as the bootstrap estimates it, in its limit of
    /// infinitely many resamples (the totals' population std over √n).
    pub bootstrap_std: Option<f64>,
    /// The rubric that judged every row.
    pub rubric: Provenance,
    /// The aggregator that was loaded, whether or not it decided any total.
    pub aggregator: Provenance,
    /// What each judge model spent, when `--judges` was given.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub judges: BTreeMap<String, JudgeCost>,
    /// Thread seconds per stage of the pipeline: where the time went.
    pub stage_seconds: StageSeconds,
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

/// Scores `args.input` into `args.output` (written atomically) and returns
/// the summary. The file is streamed: rows are parsed, scored and written
/// by a pipeline on `threads` workers, in order, in memory that does not
/// grow with the file ([`score_stream`]).
pub fn score(args: &ScoreArgs) -> Result<ScoreSummary> {
    let config = match &args.config {
        Some(path) => ScoreConfig::load(path)?,
        None => ScoreConfig::default(),
    };
    let (rubric, aggregator) = config.slots(args.rubric.as_ref(), args.aggregator.as_ref())?;
    let input =
        File::open(&args.input).with_context(|| format!("opening {}", args.input.display()))?;
    let (runtime, judges) = config.runtime(args.judges.as_deref(), args.allow_native)?;
    let pool = ScorerPool::new(RewardPlugins::from_settings(
        &runtime,
        &rubric,
        aggregator.as_ref(),
    )?);
    let threads = args.threads.unwrap_or(config.scoring.threads);
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    };
    let settings = StreamSettings {
        batch_size: args.batch_size.unwrap_or(config.scoring.batch_size),
        threads,
        ids_in_memory: config.scoring.ids_in_memory,
        chunk_rows: verifine_runtime::score_stream::DEFAULT_CHUNK_ROWS,
    };
    let bar = if args.progress {
        ProgressBar::new_spinner()
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} {pos} samples  {per_sec}").expect("valid template"),
    );
    let mut streamed = None;
    let written = write_atomically(&args.output, |w| {
        let input = BufReader::with_capacity(1 << 20, input);
        let on_batch = |n: usize| bar.inc(n as u64);
        let result = score_stream(
            &pool,
            input,
            &args.input,
            (w, &args.output),
            settings,
            &on_batch,
        );
        let failed = result.is_err();
        streamed = Some(result);
        match failed {
            true => Err(std::io::Error::other("scoring stopped")),
            false => Ok(()),
        }
    });
    bar.finish_and_clear();
    let (totals, stages) = match streamed {
        Some(result) => result?,
        None => return Err(written.unwrap_err().into()),
    };
    written.with_context(|| format!("writing {}", args.output.display()))?;

    let function = pool.function();
    let mut summary = ScoreSummary {
        n: totals.rows,
        scored: totals.scored,
        errors: totals.errors,
        undefined: totals.undefined(),
        mean: totals.mean(),
        mean_clipped: totals.mean().map(|m| m.clamp(0.0, 1.0)),
        bootstrap_std: totals.std_of_mean(),
        rubric: function.rubric.provenance(),
        aggregator: function.aggregator.provenance(),
        judges: BTreeMap::new(),
        stage_seconds: stages,
    };
    if let Some(judges) = judges {
        summary.judges = judges
            .ledgers()
            .into_iter()
            .map(|(name, total)| {
                let per_1000_tasks = total.per_thousand(totals.rows);
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
