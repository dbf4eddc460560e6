//! Running one verifier over the screening slice: every (response,
//! criterion) pair gets its verdict (or none, where the verifier gave
//! none), and what the verifier spent is counted.

use super::config::{SliceFormat, Source, Verifier};
use anyhow::{Context, Result, bail};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;
use verifine_base::PASS_MARK;
use verifine_judge::{Judges, Ledger};
use verifine_runtime::scorer_pool::score_all;
use verifine_runtime::scoring::RewardPlugins;
use verifine_runtime::{Runtime, Sample};

/// The slice: samples with verdict-free contexts, and each row's items.
pub struct Slice {
    /// The rows to judge (their contexts hold only the rubric items).
    pub samples: Vec<Sample>,
    /// Points of each row's items, in order.
    pub points: Vec<Vec<f64>>,
    /// HealthBench's split of each row (`"split": "hard"` in its context),
    /// when the slice says.
    pub hard: Vec<Option<bool>>,
    /// The rows' own `label`s (true/false), for `row-label` verifiers.
    pub labels: Vec<Option<bool>>,
}

#[derive(Deserialize)]
struct RowItems {
    rubrics: Vec<Item>,
    #[serde(default)]
    split: Option<String>,
}

#[derive(Deserialize)]
struct Item {
    criterion: String,
    #[serde(alias = "weight")]
    points: f64,
    #[serde(default)]
    tags: Vec<String>,
}

impl Slice {
    /// Reads the slice (at most `max_tasks` tasks); pre-judged verdicts in
    /// it are dropped.
    pub fn load(path: &Path, format: SliceFormat, max_tasks: Option<usize>) -> Result<Slice> {
        let mut labelled = match format {
            SliceFormat::ScoreRows => verifine_runtime::rows::read_labelled_optional(path)
                .with_context(|| format!("reading the slice {}", path.display()))?,
            SliceFormat::Gsm8kSolutions => gsm8k_solutions(path)?,
        };
        labelled.truncate(max_tasks.unwrap_or(usize::MAX));
        let mut slice = Slice {
            samples: Vec::new(),
            points: Vec::new(),
            hard: Vec::new(),
            labels: Vec::new(),
        };
        for (line, (mut sample, label)) in labelled.into_iter().enumerate() {
            let row: RowItems = serde_json::from_str(&sample.context).with_context(|| {
                format!(
                    "{}:{}: the context needs {{\"rubrics\": [{{criterion, points}}]}}",
                    path.display(),
                    line + 1
                )
            })?;
            let rubrics: Vec<serde_json::Value> = row
                .rubrics
                .iter()
                .map(|i| serde_json::json!({"criterion": i.criterion, "points": i.points, "tags": i.tags}))
                .collect();
            sample.context = serde_json::json!({"rubrics": rubrics}).to_string();
            slice
                .points
                .push(row.rubrics.iter().map(|i| i.points).collect());
            slice.hard.push(row.split.as_deref().map(|s| s == "hard"));
            slice.labels.push(label);
            slice.samples.push(sample);
        }
        if slice.samples.is_empty() {
            bail!("the slice {} has no rows", path.display());
        }
        Ok(slice)
    }

    /// Rows in the slice.
    pub fn tasks(&self) -> usize {
        self.samples.len()
    }
}

/// The rubric item every GSM8K solution is judged on.
pub const GSM8K_ITEM: &str = "The response's final answer is the correct answer to the problem.";

#[derive(Deserialize)]
struct Gsm8kRow {
    question: String,
    ground_truth: String,
    #[serde(flatten)]
    solutions: std::collections::BTreeMap<String, Gsm8kSolution>,
}

#[derive(Deserialize)]
struct Gsm8kSolution {
    solution: String,
    is_correct: bool,
}

/// Each model's solution to each question, as a one-item task labelled
/// with `is_correct`.
fn gsm8k_solutions(path: &Path) -> Result<Vec<(Sample, Option<bool>)>> {
    let rows: Vec<Gsm8kRow> = verifine_base::read_jsonl(path)?;
    let context = serde_json::json!({"rubrics": [{"criterion": GSM8K_ITEM, "points": 1.0}]});
    Ok(rows
        .into_iter()
        .enumerate()
        .flat_map(|(line, row)| {
            let context = context.to_string();
            row.solutions.into_iter().map(move |(model, s)| {
                let mut sample =
                    Sample::new(format!("{}-{model}", line + 1), &row.question, &s.solution)
                        .with_reference(&row.ground_truth);
                sample.context = context.clone();
                (sample, Some(s.is_correct))
            })
        })
        .collect())
}

/// One verifier's verdicts and spending.
pub struct VerifierRun {
    /// Per row, per item: the verdict, `None` where there is none.
    pub verdicts: Vec<Vec<Option<bool>>>,
    /// What its judge spent (zero for plugins and labels).
    pub ledger: Ledger,
    /// Seconds of this machine spent (local judges and plugins).
    pub device_seconds: f64,
    /// Rows it could not judge, with the first reason.
    pub failed_rows: usize,
    /// The first failure, for the report.
    pub first_error: Option<String>,
}

/// Runs `verifier` over `slice`.
pub fn run(
    verifier: &Verifier,
    slice: &Slice,
    rubric: &verifine_base::PluginSpec,
    runtime: &Runtime,
    judges: Option<&Judges>,
) -> Result<VerifierRun> {
    match &verifier.source {
        Source::Judge {
            judge,
            batch,
            answer,
            reference,
        } => {
            let judges = judges.context("no judges file")?;
            let before = judges.ledgers().get(judge).copied();
            let Some(before) = before else {
                bail!(
                    "{}: no judge named {judge:?} in the judges file (configured: {})",
                    verifier.name,
                    judges.names().join(", ")
                );
            };
            let config = serde_json::json!({"judge": judge, "batch": batch, "answer": answer});
            let guided;
            let slice = match reference {
                true => {
                    guided = with_reference_in_items(slice);
                    &guided
                }
                false => slice,
            };
            let mut run = score_rows(runtime, rubric.clone(), &config, slice, None)?;
            let spent = judges.ledgers()[judge].since(&before);
            run.device_seconds = spent.device_seconds;
            run.ledger = spent;
            Ok(run)
        }
        Source::Plugin {
            plugin,
            criterion,
            config,
        } => {
            let config = serde_json::to_value(config.clone().unwrap_or_default())?;
            let started = Instant::now();
            let mut run = score_rows(
                runtime,
                plugin.clone(),
                &config,
                slice,
                criterion.as_deref(),
            )?;
            run.device_seconds = started.elapsed().as_secs_f64();
            Ok(run)
        }
        Source::Labels { path } => labels_file(path, slice),
        Source::RowLabel => {
            let verdicts = slice
                .labels
                .iter()
                .zip(&slice.points)
                .map(|(label, points)| match points.len() {
                    1 => vec![*label],
                    n => vec![None; n],
                })
                .collect();
            Ok(VerifierRun::free(verdicts))
        }
    }
}

/// `slice` with each row's reference answer written into its rubric
/// items ("… The reference answer is: 42."); rows without one unchanged.
fn with_reference_in_items(slice: &Slice) -> Slice {
    let samples = slice.samples.iter().map(with_reference_in_item).collect();
    Slice {
        samples,
        points: slice.points.clone(),
        hard: slice.hard.clone(),
        labels: slice.labels.clone(),
    }
}

/// `sample` with its reference answer written into its rubric items;
/// unchanged without a reference.
pub(crate) fn with_reference_in_item(sample: &Sample) -> Sample {
    let mut sample = sample.clone();
    let Some(reference) = sample.reference.clone() else {
        return sample;
    };
    if let Ok(mut context) = serde_json::from_str::<serde_json::Value>(&sample.context)
        && let Some(items) = context["rubrics"].as_array_mut()
    {
        for item in items {
            if let Some(text) = item["criterion"].as_str() {
                let answer = stated_answer(&reference);
                item["criterion"] = format!("{text} The reference answer is: {answer}.").into();
            }
        }
        sample.context = context.to_string();
    }
    sample
}

/// What a reference-guided item names: the reference's final answer where
/// its last line marks one (GSM8K's `#### 18`, the model-solutions file's
/// `A: 18`), else the whole reference. Told that a worked solution is "the
/// reference answer", a judge compares wording; told the number, answers.
fn stated_answer(reference: &str) -> &str {
    let last = reference.trim_end().lines().last().unwrap_or("").trim();
    ["####", "A:"]
        .iter()
        .find_map(|marker| last.strip_prefix(marker).map(str::trim))
        .filter(|answer| !answer.is_empty())
        .unwrap_or(reference)
}

impl VerifierRun {
    fn free(verdicts: Vec<Vec<Option<bool>>>) -> Self {
        let failed_rows = verdicts.iter().filter(|v| v.contains(&None)).count();
        VerifierRun {
            verdicts,
            ledger: Ledger::default(),
            device_seconds: 0.0,
            failed_rows,
            first_error: None,
        }
    }
}

/// Scores every row with `plugin`, reading the verdict of each item:
/// `item-i` of a row-rubric plugin, or `criterion`'s verdict for a
/// single-item row.
fn score_rows(
    runtime: &Runtime,
    plugin: verifine_base::PluginSpec,
    config: &serde_json::Value,
    slice: &Slice,
    criterion: Option<&str>,
) -> Result<VerifierRun> {
    let function = RewardPlugins::load(runtime, plugin, config, None, &serde_json::json!({}))?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let scored = score_all(&function, &slice.samples, 8, threads, &|_| {})?;
    let mut run = VerifierRun::free(Vec::new());
    for ((sample, scored), points) in slice.samples.iter().zip(scored).zip(&slice.points) {
        let mut row = vec![None; points.len()];
        match (&scored.judgment, criterion) {
            (Some(judgment), Some(criterion)) if points.len() == 1 => {
                row[0] = judgment
                    .verdicts
                    .iter()
                    .find(|v| v.criterion == criterion)
                    .map(|v| v.met.unwrap_or(v.score >= PASS_MARK));
                if row[0].is_none() {
                    let known: Vec<&str> = judgment
                        .verdicts
                        .iter()
                        .map(|v| v.criterion.as_str())
                        .collect();
                    run.note(format!(
                        "row {}: no verdict on {criterion:?} (the plugin gave: {})",
                        sample.id,
                        known.join(", ")
                    ));
                }
            }
            (Some(_), Some(_)) => {
                run.note(format!(
                    "row {}: {} items, but a single criterion decides one item",
                    sample.id,
                    points.len()
                ));
            }
            (Some(judgment), None) => {
                for verdict in &judgment.verdicts {
                    let index = verdict
                        .criterion
                        .strip_prefix("item-")
                        .and_then(|i| i.parse::<usize>().ok());
                    if let Some(slot) = index.and_then(|i| row.get_mut(i)) {
                        *slot = Some(verdict.met.unwrap_or(verdict.score >= PASS_MARK));
                    }
                }
            }
            (None, _) => run.note(format!(
                "row {}: {}",
                sample.id,
                scored.error.as_deref().unwrap_or("no judgment")
            )),
        }
        if row.contains(&None) {
            run.failed_rows += 1;
        }
        run.verdicts.push(row);
    }
    Ok(run)
}

impl VerifierRun {
    fn note(&mut self, error: String) {
        if self.first_error.is_none() {
            self.first_error = Some(error);
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LabelRow {
    id: serde_json::Value,
    verdicts: Vec<Option<bool>>,
}

/// Verdicts from a labels file, matched to the slice by row id.
fn labels_file(path: &Path, slice: &Slice) -> Result<VerifierRun> {
    let rows: Vec<LabelRow> = verifine_base::read_jsonl(path)?;
    let mut by_id = HashMap::new();
    for (line, row) in rows.into_iter().enumerate() {
        let id = verifine_base::files::id_string(&row.id).with_context(|| {
            format!(
                "{}:{}: the id must be a string or a number",
                path.display(),
                line + 1
            )
        })?;
        if by_id.insert(id.clone(), row.verdicts).is_some() {
            bail!("{}:{}: row id {id} appears twice", path.display(), line + 1);
        }
    }
    let mut verdicts = Vec::with_capacity(slice.tasks());
    for (sample, points) in slice.samples.iter().zip(&slice.points) {
        match by_id.get(&sample.id) {
            Some(v) if v.len() == points.len() => verdicts.push(v.clone()),
            Some(v) => bail!(
                "{}: row {} has {} verdicts for {} rubric items",
                path.display(),
                sample.id,
                v.len(),
                points.len()
            ),
            None => verdicts.push(vec![None; points.len()]),
        }
    }
    Ok(VerifierRun::free(verdicts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_guided_items_name_the_rows_reference() {
        let mut with = Sample::new("a", "2+2?", "4").with_reference("4");
        with.context =
            serde_json::json!({"rubrics": [{"criterion": GSM8K_ITEM, "points": 1.0}]}).to_string();
        let mut without = Sample::new("b", "3+3?", "6");
        without.context = with.context.clone();
        let slice = Slice {
            samples: vec![with, without],
            points: vec![vec![1.0], vec![1.0]],
            hard: vec![None, None],
            labels: vec![None, None],
        };
        let guided = with_reference_in_items(&slice);
        let item = |s: &Sample| {
            let context: serde_json::Value = serde_json::from_str(&s.context).unwrap();
            context["rubrics"][0]["criterion"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(
            item(&guided.samples[0]),
            format!("{GSM8K_ITEM} The reference answer is: 4.")
        );
        assert_eq!(item(&guided.samples[1]), GSM8K_ITEM);
    }

    #[test]
    fn a_worked_reference_is_stated_by_its_final_answer() {
        let gsm8k =
            "She sells 16 - 3 - 4 = <<16-3-4=9>>9 eggs.\nShe makes 9 * 2 = $<<9*2=18>>18.\nA: 18";
        assert_eq!(stated_answer(gsm8k), "18");
        assert_eq!(stated_answer("8 * 2 = 16\n16 + 8 = 24\n#### 24\n"), "24");
        // No marked final answer, or an empty one: the whole reference.
        assert_eq!(stated_answer("42"), "42");
        assert_eq!(stated_answer("x = 3\n####"), "x = 3\n####");
        assert_eq!(stated_answer("Answer: 7"), "Answer: 7");
    }
}
