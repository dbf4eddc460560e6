//! `verifine agree`: how well predictions (a judge's scores) agree with gold
//! labels (human or golden-verifier), with bootstrap confidence intervals.

use anyhow::{Result, anyhow, bail};
use clap::Args;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use verifine_base::files::{id_string, read_jsonl};
use verifine_runtime::stats::{Confusion, Estimate, bootstrap, mae, pearson, spearman};

/// Agreement of predictions with gold labels, with 95% bootstrap intervals.
#[derive(Debug, Clone, Args)]
pub struct AgreeArgs {
    /// JSONL of predictions, one row per `id`.
    #[arg(long)]
    pub pred: PathBuf,
    /// JSONL of gold labels, joined with the predictions on `id`.
    #[arg(long)]
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

/// A field's value: a label or a number.
#[derive(Debug, Clone, Copy)]
enum Field {
    Label(bool),
    Number(f64),
}

fn lookup<'a>(row: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(row, |v, key| v.get(key))
}

fn read_field(row: &Value, path: &str, file: &Path, line: usize) -> Result<Option<Field>> {
    match lookup(row, path) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(Field::Label(*b))),
        Some(Value::Number(n)) => Ok(n.as_f64().map(Field::Number)),
        Some(other) => bail!(
            "{}:{line}: field {path:?} must be a number or a boolean, found {other}",
            file.display()
        ),
    }
}

/// Rows keyed by id, keeping file order and line numbers.
fn rows_by_id(path: &Path) -> Result<Vec<(String, usize, Value)>> {
    let rows: Vec<Value> = read_jsonl(path)?;
    rows.into_iter()
        .enumerate()
        .map(|(i, row)| {
            let id = row.get("id").and_then(id_string).ok_or_else(|| {
                anyhow!(
                    "{}: row {}: no string or number `id`",
                    path.display(),
                    i + 1
                )
            })?;
            Ok((id, i + 1, row))
        })
        .collect()
}

/// Joins predictions with gold labels on `id` and computes agreement.
pub fn agree(args: &AgreeArgs) -> Result<AgreeReport> {
    if let Some(t) = args.threshold
        && !t.is_finite()
    {
        bail!("--threshold must be a finite number, not {t}");
    }
    let pred_rows = rows_by_id(&args.pred)?;
    let gold_rows = rows_by_id(&args.gold)?;
    let mut gold_index: HashMap<&str, (usize, &Value)> = HashMap::new();
    for (id, line, row) in &gold_rows {
        if gold_index.insert(id, (*line, row)).is_some() {
            bail!("{}:{line}: duplicate id {id:?}", args.gold.display());
        }
    }
    // A duplicate id is an error in either file, whether or not the other
    // file has that id.
    let mut pred_ids = std::collections::HashSet::new();
    for (id, line, _) in &pred_rows {
        if !pred_ids.insert(id.as_str()) {
            bail!("{}:{line}: duplicate id {id:?}", args.pred.display());
        }
    }

    let mut pairs = Vec::new();
    let mut matched = std::collections::HashSet::new();
    let mut missing_values = 0;
    for (id, line, row) in &pred_rows {
        let Some((gold_line, gold_row)) = gold_index.get(id.as_str()) else {
            continue;
        };
        matched.insert(id.as_str());
        let pred = read_field(row, &args.pred_field, &args.pred, *line)?;
        let gold = read_field(gold_row, &args.gold_field, &args.gold, *gold_line)?;
        match (pred, gold) {
            (Some(p), Some(g)) => pairs.push((p, g)),
            _ => missing_values += 1,
        }
    }
    if pairs.is_empty() {
        bail!(
            "no rows to compare: {} predictions and {} gold rows share {} ids with both fields \
             ({:?} / {:?}) present",
            pred_rows.len(),
            gold_rows.len(),
            matched.len(),
            args.pred_field,
            args.gold_field
        );
    }

    let any_label = pairs
        .iter()
        .any(|(p, g)| matches!(p, Field::Label(_)) || matches!(g, Field::Label(_)));
    let (mode, threshold) = match (args.threshold, any_label) {
        (Some(t), _) => (Mode::Binary, Some(t)),
        (None, true) => (Mode::Binary, Some(0.5)),
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
        unmatched_pred: pred_rows.len() - matched.len(),
        unmatched_gold: gold_rows.len() - matched.len(),
        missing_values,
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
    metrics
        .iter()
        .map(|(name, metric)| {
            let estimate = bootstrap(pred.len(), resamples, seed, |idx| {
                metric(&Confusion::from_pairs(pred, gold, idx))
            });
            (name.to_string(), estimate)
        })
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
    metrics
        .iter()
        .map(|(name, metric)| {
            let estimate = bootstrap(pred.len(), resamples, seed, |idx| metric(pred, gold, idx));
            (name.to_string(), estimate)
        })
        .collect()
}
