//! `verifine judge distill`: a student judge from a teacher's verdicts.
//!
//! The teacher's labels are a `verifine score` output (any rubric, any
//! judge: its per-criterion verdicts), joined by id with the input rows the
//! teacher saw. The student learns each criterion's verdict from the
//! (prompt, response) pair alone; on held-out pairs its sub-scores are
//! turned into totals by the aggregator plugin — the totals are never a
//! training target — and compared with the teacher's totals (Pearson, MAE).
//! Its latency per sample is measured; the teacher's comes from the
//! teacher run's `--summary` when given.

use crate::commands::score::OutputRow;
use anyhow::{Context, Result, bail};
use clap::Args;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;
use verifine_base::PASS_MARK;
use verifine_base::PluginSpec;
use verifine_judge::student::train::{Example, Settings, train};
use verifine_judge::student::{StudentModel, StudentSpec};
use verifine_runtime::{
    Context as PluginContext, Criterion, Judgment, PluginKind, Runtime, Scoring, Verdict,
};

/// `verifine judge distill`.
#[derive(Args, Debug, Clone)]
pub struct DistillArgs {
    /// The rows the teacher judged (`verifine score` input).
    #[arg(long, value_parser = crate::commands::absolute_path)]
    pub rows: PathBuf,
    /// The teacher's verdicts (`verifine score --output`).
    #[arg(long, value_parser = crate::commands::absolute_path)]
    pub teacher: PathBuf,
    /// The teacher run's `--summary` JSON, for its seconds per sample.
    #[arg(long, value_parser = crate::commands::absolute_path)]
    pub teacher_summary: Option<PathBuf>,
    /// The rubric that described the teacher's criteria (for their weights
    /// when the output rows do not carry them).
    #[arg(long)]
    pub rubric: Option<PluginSpec>,
    /// The criterion trained with label smoothing 0.1.
    #[arg(long)]
    pub gate: Option<String>,
    /// Turns the student's sub-scores into totals.
    #[arg(long, default_value = "weighted-sum")]
    pub aggregator: PluginSpec,
    /// Share of pairs held out for the report.
    #[arg(long, default_value_t = 0.2)]
    pub heldout: f64,
    /// Passes over the training pairs.
    #[arg(long, default_value_t = 40)]
    pub epochs: usize,
    /// Hidden width.
    #[arg(long, default_value_t = 64)]
    pub hidden: usize,
    /// Feature buckets.
    #[arg(long, default_value_t = 4096)]
    pub buckets: usize,
    /// AdamW's learning rate.
    #[arg(long, default_value_t = 0.01)]
    pub learning_rate: f64,
    /// Seeds the split, the weights and the order of pairs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Where the student and its report go.
    #[arg(long, value_parser = crate::commands::absolute_path)]
    pub run_dir: PathBuf,
}

/// What a distillation found (`summary.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DistillSummary {
    /// Pairs trained on / held out.
    pub train_pairs: usize,
    /// Pairs held out.
    pub heldout_pairs: usize,
    /// Per criterion: id, text, held-out accuracy, share met by the teacher.
    pub criteria: Vec<CriterionReport>,
    /// Student totals (aggregated) against the teacher's, held out.
    pub pearson: Option<f64>,
    /// Mean absolute error of the same.
    pub mae: Option<f64>,
    /// Held-out rows with both totals.
    pub compared_totals: usize,
    /// The student's seconds per sample (features and forward, one at a time).
    pub student_seconds_per_sample: f64,
    /// The teacher's, from its run's summary.
    pub teacher_seconds_per_sample: Option<f64>,
    /// Teacher / student.
    pub speedup: Option<f64>,
    /// Mean training loss per epoch.
    pub losses: Vec<f64>,
}

/// One criterion's held-out figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CriterionReport {
    /// The key the student knows it by.
    pub id: String,
    /// The text the grader shows for it.
    pub text: String,
    /// Held-out verdicts the student got right.
    pub heldout_accuracy: Option<f64>,
    /// Held-out share the teacher called met (the majority-class baseline
    /// is max(this, 1 − this)).
    pub heldout_met_share: Option<f64>,
}

#[derive(Deserialize)]
struct TeacherSummary {
    n: usize,
    #[serde(default)]
    judges: HashMap<String, TeacherCost>,
}

#[derive(Deserialize)]
struct TeacherCost {
    total: verifine_judge::Ledger,
}

/// A criterion's key: its text where the rows carry their own criteria
/// (row rubrics: ids like `item-0` mean different items in different rows),
/// else its id.
fn criterion_key(row: &OutputRow, id: &str) -> (String, String) {
    match row.criteria.iter().find(|c| c.id == id) {
        Some(c) => (c.description.clone(), c.description.clone()),
        None => (id.to_string(), id.to_string()),
    }
}

/// Trains, evaluates, writes the run directory, returns the summary.
pub fn distill(args: &DistillArgs) -> Result<DistillSummary> {
    if !(0.0..1.0).contains(&args.heldout) {
        bail!("--heldout {} is not in [0, 1)", args.heldout);
    }
    let samples = verifine_runtime::rows::read_samples(&args.rows)?;
    let by_id: HashMap<&str, &verifine_runtime::Sample> =
        samples.iter().map(|s| (s.id.as_str(), s)).collect();
    let teacher: Vec<OutputRow> = verifine_base::read_jsonl(&args.teacher)?;
    let mut keys: Vec<(String, String)> = Vec::new();
    let mut joined = Vec::new();
    for (line, row) in teacher.iter().enumerate() {
        if row.error.is_some() || row.verdicts.is_empty() {
            continue;
        }
        let Some(sample) = by_id.get(row.id.as_str()) else {
            bail!(
                "{}:{}: row {} is not in {}",
                args.teacher.display(),
                line + 1,
                row.id,
                args.rows.display()
            );
        };
        for v in &row.verdicts {
            let key = criterion_key(row, &v.criterion);
            if !keys.iter().any(|(k, _)| *k == key.0) {
                keys.push(key);
            }
        }
        joined.push((*sample, row));
    }
    if joined.is_empty() {
        bail!(
            "{} has no judged rows to learn from",
            args.teacher.display()
        );
    }
    let examples: Vec<Example> = joined
        .iter()
        .map(|(sample, row)| {
            let mut labels = vec![None; keys.len()];
            for v in &row.verdicts {
                let key = criterion_key(row, &v.criterion).0;
                let c = keys
                    .iter()
                    .position(|(k, _)| *k == key)
                    .expect("collected above");
                labels[c] = Some(v.met.unwrap_or(v.score >= PASS_MARK));
            }
            Example {
                prompt: sample.prompt.clone(),
                response: sample.response.clone(),
                labels,
            }
        })
        .collect();
    // A pair is held out by a hash of its id, so the split does not depend
    // on row order.
    let held = |id: &str| {
        let h = id.bytes().fold(0xcbf2_9ce4_8422_2325 ^ args.seed, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        (h % 10_000) as f64 / 10_000.0 < args.heldout
    };
    let (mut fit, mut heldout) = (Vec::new(), Vec::new());
    for (i, (sample, _)) in joined.iter().enumerate() {
        if held(&sample.id) {
            heldout.push(i)
        } else {
            fit.push(i)
        }
    }
    let spec = StudentSpec {
        criteria: keys.clone(),
        gate: args.gate.clone(),
        buckets: args.buckets.max(2),
        hidden: args.hidden.max(1),
    };
    let train_set: Vec<Example> = fit.iter().map(|&i| examples[i].clone()).collect();
    let settings = Settings {
        epochs: args.epochs,
        learning_rate: args.learning_rate,
        batch_size: 32,
        seed: args.seed,
    };
    let (student, losses) = train(spec, &train_set, settings).map_err(anyhow::Error::msg)?;
    student.save(&args.run_dir).map_err(anyhow::Error::msg)?;

    // Held-out: per-criterion accuracy, latency one sample at a time.
    let started = Instant::now();
    let mut predictions = Vec::with_capacity(heldout.len());
    for &i in &heldout {
        let x = &examples[i];
        predictions.push(
            student
                .predict(&[(&x.prompt, &x.response)])
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .remove(0),
        );
    }
    let student_seconds = started.elapsed().as_secs_f64() / heldout.len().max(1) as f64;
    let criteria = keys
        .iter()
        .enumerate()
        .map(|(c, (id, text))| {
            let labelled: Vec<(bool, f64)> = heldout
                .iter()
                .zip(&predictions)
                .filter_map(|(&i, p)| examples[i].labels[c].map(|y| (y, p[c])))
                .collect();
            let n = labelled.len() as f64;
            CriterionReport {
                id: id.clone(),
                text: text.clone(),
                heldout_accuracy: (n > 0.0).then(|| {
                    labelled
                        .iter()
                        .filter(|(y, p)| *y == (*p >= PASS_MARK))
                        .count() as f64
                        / n
                }),
                heldout_met_share: (n > 0.0)
                    .then(|| labelled.iter().filter(|(y, _)| *y).count() as f64 / n),
            }
        })
        .collect();
    let totals = aggregate_totals(args, &student, &joined, &heldout, &predictions)?;
    let (pearson, mae) = agreement(&totals);
    let teacher_seconds = match &args.teacher_summary {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            let summary: TeacherSummary = serde_json::from_str(&text).with_context(|| {
                format!("{} is not a `verifine score --summary`", path.display())
            })?;
            let seconds: f64 = summary.judges.values().map(|j| j.total.seconds).sum();
            (summary.n > 0 && seconds > 0.0).then(|| seconds / summary.n as f64)
        }
        None => None,
    };
    let summary = DistillSummary {
        train_pairs: fit.len(),
        heldout_pairs: heldout.len(),
        criteria,
        pearson,
        mae,
        compared_totals: totals.len(),
        student_seconds_per_sample: student_seconds,
        teacher_seconds_per_sample: teacher_seconds,
        speedup: teacher_seconds.map(|t| t / student_seconds.max(1e-12)),
        losses,
    };
    let json = serde_json::to_vec_pretty(&summary)?;
    verifine_base::write_atomically(&args.run_dir.join("summary.json"), |w| w.write_all(&json))?;
    let report = report(&summary);
    verifine_base::write_atomically(&args.run_dir.join("report.md"), |w| {
        w.write_all(report.as_bytes())
    })?;
    Ok(summary)
}

/// (student total, teacher total) for held-out rows where both exist: the
/// student's sub-scores (P(met) per criterion) through the aggregator.
fn aggregate_totals(
    args: &DistillArgs,
    student: &StudentModel,
    joined: &[(&verifine_runtime::Sample, &OutputRow)],
    heldout: &[usize],
    predictions: &[Vec<f64>],
) -> Result<Vec<(f64, f64)>> {
    let runtime = Runtime::new(Default::default())?;
    let described: Vec<Criterion> = match &args.rubric {
        Some(rubric) => {
            runtime
                .load_kind(rubric.clone(), PluginKind::Rubric)?
                .instance()
                .describe()?
                .criteria
        }
        None => Vec::new(),
    };
    let aggregator = runtime.load_kind(args.aggregator.clone(), PluginKind::Aggregator)?;
    let mut items = Vec::new();
    let mut teacher_totals = Vec::new();
    for (&i, p) in heldout.iter().zip(predictions) {
        let row = joined[i].1;
        let Some(teacher_total) = row.total else {
            continue;
        };
        let criteria: Vec<Criterion> = if row.criteria.is_empty() {
            described.clone()
        } else {
            row.criteria.clone()
        };
        let verdicts: Vec<Verdict> = row
            .verdicts
            .iter()
            .map(|v| {
                let key = criterion_key(row, &v.criterion).0;
                let c = student
                    .spec
                    .criteria
                    .iter()
                    .position(|(k, _)| *k == key)
                    .expect("trained on it");
                Verdict {
                    criterion: v.criterion.clone(),
                    score: p[c],
                    met: Some(p[c] >= PASS_MARK),
                    confidence: Some(p[c].max(1.0 - p[c])),
                    explanation: None,
                }
            })
            .collect();
        items.push(Scoring {
            criteria: criteria.clone(),
            judgment: Judgment {
                total: None,
                verdicts,
                sub_scores: Vec::new(),
                criteria,
                explanation: None,
            },
        });
        teacher_totals.push(teacher_total);
    }
    let results = aggregator
        .instance()
        .aggregate(&PluginContext::empty(), &items)?;
    Ok(results
        .into_iter()
        .zip(teacher_totals)
        .filter_map(|(r, t)| Some((r.ok()??, t)))
        .collect())
}

fn agreement(totals: &[(f64, f64)]) -> (Option<f64>, Option<f64>) {
    if totals.is_empty() {
        return (None, None);
    }
    let n = totals.len() as f64;
    let mae = totals.iter().map(|(s, t)| (s - t).abs()).sum::<f64>() / n;
    let (ms, mt) = (
        totals.iter().map(|p| p.0).sum::<f64>() / n,
        totals.iter().map(|p| p.1).sum::<f64>() / n,
    );
    let cov: f64 = totals.iter().map(|(s, t)| (s - ms) * (t - mt)).sum();
    let vs: f64 = totals.iter().map(|(s, _)| (s - ms).powi(2)).sum();
    let vt: f64 = totals.iter().map(|(_, t)| (t - mt).powi(2)).sum();
    let pearson = cov / (vs * vt).sqrt();
    (pearson.is_finite().then_some(pearson), Some(mae))
}

/// The command's one line.
pub fn one_line(s: &DistillSummary) -> String {
    let num = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    format!(
        "student trained on {} pairs; held out {}: Pearson {} MAE {} against the teacher's totals; {:.2} ms per sample{}",
        s.train_pairs,
        s.heldout_pairs,
        num(s.pearson),
        num(s.mae),
        s.student_seconds_per_sample * 1e3,
        s.speedup.map_or(String::new(), |x| format!(
            " ({x:.0}x faster than the teacher)"
        ))
    )
}

fn report(s: &DistillSummary) -> String {
    let num = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    let mut out = format!(
        "# Student judge\n\nTrained on {} teacher-labelled pairs, {} held out.\n\n\
         | criterion | held-out accuracy | teacher met (held out) | majority baseline |\n|---|---|---|---|\n",
        s.train_pairs, s.heldout_pairs
    );
    for c in &s.criteria {
        out += &format!(
            "| {} | {} | {} | {} |\n",
            c.text,
            num(c.heldout_accuracy),
            num(c.heldout_met_share),
            num(c.heldout_met_share.map(|m| m.max(1.0 - m)))
        );
    }
    out += &format!(
        "\nTotals (the student's sub-scores through the aggregator, never trained on) against \
         the teacher's on {} held-out rows: Pearson {}, MAE {}.\n\n\
         Latency per sample: student {:.3} ms, teacher {}{}.\n",
        s.compared_totals,
        num(s.pearson),
        num(s.mae),
        s.student_seconds_per_sample * 1e3,
        s.teacher_seconds_per_sample.map_or(
            "not measured (pass --teacher-summary)".to_string(),
            |t| format!("{:.3} s", t)
        ),
        s.speedup.map_or(String::new(), |x| format!(" ({x:.0}×)"))
    );
    out
}
