//! `verifine agree`: how well predictions (a judge's scores) agree with gold
//! labels (human or golden-verifier), with bootstrap confidence intervals.

use anyhow::{Result, bail};
use clap::Args;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use verifine_base::PASS_MARK;
use verifine_runtime::stats::{Confusion, Estimate, bootstrap_many, mae, pearson, spearman};

mod join;
use join::{Field, Side, join};

/// Agreement of predictions with gold labels, with 95% bootstrap intervals.
#[derive(Debug, Clone, Args)]
pub struct AgreeArgs {
    /// JSONL of predictions, one row per `id`.
    #[arg(long, value_parser = crate::commands::absolute_path)]
    pub pred: PathBuf,
    /// JSONL of gold labels, joined with the predictions on `id`.
    #[arg(long, value_parser = crate::commands::absolute_path)]
    pub gold: PathBuf,
    /// Field of the prediction rows (dotted path, e.g. `sub.score`).
    #[arg(long, default_value = "total")]
    pub pred_field: String,
    /// Field of the gold rows (dotted path).
    #[arg(long, default_value = "label")]
    pub gold_field: String,
    /// Turns numbers into labels (value ≥ threshold is positive). Without it,
    /// two numeric fields are compared as scores.
    #[arg(long)]
    pub threshold: Option<f64>,
    /// Bootstrap resamples per interval; 0 leaves the intervals undefined (null).
    #[arg(long, default_value_t = 1000)]
    pub resamples: usize,
    /// Seeds the bootstrap, so intervals are reproducible.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `verifine agree`: computes and prints the report.
pub fn run(args: AgreeArgs) -> Result<()> {
    let report = agree(&args)?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{report}");
    }
    Ok(())
}

impl AgreeArgs {
    /// Defaults: fields `total` and `label`, 1000 resamples, seed 0.
    pub fn new(pred: PathBuf, gold: PathBuf) -> Self {
        AgreeArgs {
            pred,
            gold,
            pred_field: "total".to_string(),
            gold_field: "label".to_string(),
            threshold: None,
            resamples: 1000,
            seed: 0,
            json: false,
        }
    }
}

/// Whether labels or scores were compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Labels: with a threshold, or when either side holds booleans (threshold 0.5).
    Binary,
    /// Scores: both fields numeric and no threshold given.
    Continuous,
}

/// The agreement report (`--json` prints it as is).
#[derive(Debug, Clone, Serialize)]
pub struct AgreeReport {
    /// Joined rows with both fields present: the rows every metric covers.
    pub n: usize,
    /// Whether labels or scores were compared.
    pub mode: Mode,
    /// The threshold that turned numbers into labels (binary mode only).
    pub threshold: Option<f64>,
    /// Each metric by name, with its bootstrap interval.
    pub metrics: BTreeMap<String, Estimate>,
    /// Prediction rows whose id is not in the gold file.
    pub unmatched_pred: usize,
    /// Gold rows whose id is not in the predictions.
    pub unmatched_gold: usize,
    /// Joined rows where either field was missing or null.
    pub missing_values: usize,
}

impl std::fmt::Display for AgreeReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "n = {} ({:?}{}); unmatched: {} pred, {} gold; missing values: {}",
            self.n,
            self.mode,
            self.threshold
                .map_or(String::new(), |t| format!(", threshold {t}")),
            self.unmatched_pred,
            self.unmatched_gold,
            self.missing_values
        )?;
        for (name, e) in &self.metrics {
            writeln!(
                f,
                "  {name:<12} {:>8.4}   95% CI [{:.4}, {:.4}]",
                e.value, e.ci_low, e.ci_high
            )?;
        }
        Ok(())
    }
}

/// Joins predictions with gold labels on `id` and computes agreement.
pub fn agree(args: &AgreeArgs) -> Result<AgreeReport> {
    if let Some(t) = args.threshold
        && !t.is_finite()
    {
        bail!("--threshold must be a finite number, not {t}");
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pred = Side {
        path: &args.pred,
        field: &args.pred_field,
    };
    let gold = Side {
        path: &args.gold,
        field: &args.gold_field,
    };
    let joined = join(pred, gold, threads)?;
    let pairs = &joined.pairs;
    if pairs.is_empty() {
        bail!(
            "no rows to compare: {} predictions and {} gold rows share {} ids with both fields \
             ({:?} / {:?}) present",
            joined.pred_rows,
            joined.gold_rows,
            joined.matched,
            args.pred_field,
            args.gold_field
        );
    }

    let any_label = pairs
        .iter()
        .any(|(p, g)| matches!(p, Field::Label(_)) || matches!(g, Field::Label(_)));
    let (mode, threshold) = match (args.threshold, any_label) {
        (Some(t), _) => (Mode::Binary, Some(t)),
        (None, true) => (Mode::Binary, Some(PASS_MARK)),
        (None, false) => (Mode::Continuous, None),
    };
    let metrics = match mode {
        Mode::Binary => {
            let t = threshold.unwrap();
            let label = |f: Field| match f {
                Field::Label(b) => b,
                Field::Number(x) => x >= t,
            };
            let pred: Vec<bool> = pairs.iter().map(|(p, _)| label(*p)).collect();
            let gold: Vec<bool> = pairs.iter().map(|(_, g)| label(*g)).collect();
            binary_metrics(&pred, &gold, args.resamples, args.seed)
        }
        Mode::Continuous => {
            let number = |f: Field| match f {
                Field::Label(b) => f64::from(u8::from(b)),
                Field::Number(x) => x,
            };
            let pred: Vec<f64> = pairs.iter().map(|(p, _)| number(*p)).collect();
            let gold: Vec<f64> = pairs.iter().map(|(_, g)| number(*g)).collect();
            continuous_metrics(&pred, &gold, args.resamples, args.seed)
        }
    };
    Ok(AgreeReport {
        n: pairs.len(),
        mode,
        threshold,
        metrics,
        unmatched_pred: joined.pred_rows - joined.matched,
        unmatched_gold: joined.gold_rows - joined.matched,
        missing_values: joined.missing_values,
    })
}

/// A named metric of a confusion matrix.
type BinaryMetric = (&'static str, fn(&Confusion) -> f64);

/// A named metric of the indexed (prediction, gold) pairs.
type ContinuousMetric = (&'static str, fn(&[f64], &[f64], &[usize]) -> f64);

/// Accuracy, precision, recall, F1 and balanced F1 with bootstrap intervals.
pub fn binary_metrics(
    pred: &[bool],
    gold: &[bool],
    resamples: usize,
    seed: u64,
) -> BTreeMap<String, Estimate> {
    let metrics: [BinaryMetric; 5] = [
        ("accuracy", Confusion::accuracy),
        ("precision", Confusion::precision),
        ("recall", Confusion::recall),
        ("f1", Confusion::f1),
        ("balanced_f1", Confusion::balanced_f1),
    ];
    // One confusion matrix per resample serves every metric.
    let estimates = bootstrap_many(pred.len(), resamples, seed, |idx| {
        let confusion = Confusion::from_pairs(pred, gold, idx);
        metrics.map(|(_, metric)| metric(&confusion))
    });
    metrics
        .iter()
        .zip(estimates)
        .map(|((name, _), estimate)| (name.to_string(), estimate))
        .collect()
}

/// Pearson, Spearman and MAE with bootstrap intervals.
pub fn continuous_metrics(
    pred: &[f64],
    gold: &[f64],
    resamples: usize,
    seed: u64,
) -> BTreeMap<String, Estimate> {
    let metrics: [ContinuousMetric; 3] =
        [("pearson", pearson), ("spearman", spearman), ("mae", mae)];
    let estimates = bootstrap_many(pred.len(), resamples, seed, |idx| {
        metrics.map(|(_, metric)| metric(pred, gold, idx))
    });
    metrics
        .iter()
        .zip(estimates)
        .map(|((name, _), estimate)| (name.to_string(), estimate))
        .collect()
}
