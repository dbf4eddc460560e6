//! What `verifine judge train` learns from: labelled (item, question,
//! response) rows, turned into the exact ids the trained verifier will be
//! asked with ([`verifine_judge::asked`]): what the screen, `score` and
//! training later send that model is, byte for byte, what it learnt on.

use crate::commands::verifiers::config::SliceFormat;
use crate::commands::verifiers::run::{GSM8K_ITEM, Slice, with_reference_in_item};
use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use serde::Deserialize;
use std::io::BufReader;
use std::path::Path;
use verifine_base::PluginSpec;
use verifine_base::files::JsonlLines;
use verifine_judge::asked::{single_queries, yes_no_ids};
use verifine_judge::local::LocalBackend;
use verifine_runtime::{ModelRequest, Sample};
use verifine_train::verifier::VerdictExample;

/// Layouts of a labels file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LabelFormat {
    /// GSM8K model solutions (`question`, `ground_truth`, per model
    /// `{"solution", "is_correct"}`), as the verifier screen reads them.
    Gsm8kSolutions,
    /// `verifine score` input rows with one rubric item and a `label`.
    ScoreRows,
    /// A training run's answers (`heldout_answers.jsonl`: `prompt`,
    /// `response`, `correct`, `reference`): the policy's own solutions,
    /// labelled by its evaluator.
    Answers,
}

/// One labelled row, before rendering.
pub struct Labelled {
    /// The sample (its context holds the one rubric item).
    pub sample: Sample,
    /// Met or not.
    pub met: bool,
    /// `file:line` or `file: row ID`.
    pub source: String,
}

/// Reads a labels file.
pub fn read(path: &Path, format: LabelFormat) -> Result<Vec<Labelled>> {
    let slice_format = match format {
        LabelFormat::Answers => return answers(path),
        LabelFormat::Gsm8kSolutions => SliceFormat::Gsm8kSolutions,
        LabelFormat::ScoreRows => SliceFormat::ScoreRows,
    };
    let slice = Slice::load(path, slice_format, None)?;
    slice
        .samples
        .into_iter()
        .zip(slice.labels)
        .map(|(sample, label)| {
            let source = format!("{}: row {}", path.display(), sample.id);
            let Some(met) = label else {
                bail!("{source}: no label (true or false)");
            };
            Ok(Labelled {
                sample,
                met,
                source,
            })
        })
        .collect()
}

#[derive(Deserialize)]
struct AnswerRow {
    #[serde(default)]
    id: Option<String>,
    prompt: String,
    response: String,
    correct: bool,
    #[serde(default)]
    reference: Option<String>,
}

fn answers(path: &Path) -> Result<Vec<Labelled>> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let context = serde_json::json!({"rubrics": [{"criterion": GSM8K_ITEM, "points": 1.0}]});
    let mut rows = Vec::new();
    for line in JsonlLines::new(BufReader::new(file), path) {
        let (line, text) = line?;
        let source = format!("{}:{line}", path.display());
        let row: AnswerRow = serde_json::from_str(&text).with_context(|| {
            format!("{source}: an answer row needs prompt, response and correct")
        })?;
        let id = row.id.unwrap_or_else(|| format!("line-{line}"));
        let mut sample = Sample::new(id, row.prompt, row.response);
        sample.reference = row.reference;
        sample.context = context.to_string();
        rows.push(Labelled {
            sample,
            met: row.correct,
            source,
        });
    }
    if rows.is_empty() {
        bail!("{} holds no labelled rows", path.display());
    }
    Ok(rows)
}

/// The rubric's query for each row (one rubric item asked YES/NO; with
/// `reference_guided`, the item names the row's reference answer, as the
/// verifier screen's reference-guided candidates ask).
pub fn queries(
    rows: &[Labelled],
    rubric: &PluginSpec,
    reference_guided: bool,
) -> Result<Vec<ModelRequest>> {
    let config = serde_json::json!({"judge": "verifier", "batch": 1, "answer": "yes-no"});
    let samples: Vec<Sample> = rows
        .iter()
        .map(|r| match reference_guided {
            true => with_reference_in_item(&r.sample),
            false => r.sample.clone(),
        })
        .collect();
    let queries = single_queries(rubric, &config, &samples)?;
    rows.iter()
        .zip(queries)
        .map(|(row, query)| query.map_err(|why| anyhow::anyhow!("{}: {why}", row.source)))
        .collect()
}

/// Encodes each row's query as `backend` will be asked it.
pub fn examples(
    rows: Vec<Labelled>,
    queries: &[ModelRequest],
    backend: &LocalBackend,
) -> Result<Vec<VerdictExample>> {
    rows.into_iter()
        .zip(queries)
        .map(|(row, query)| {
            let ids = yes_no_ids(backend, query)
                .map_err(|why| anyhow::anyhow!("{}: {why}", row.source))?;
            Ok(VerdictExample {
                group: row.sample.prompt.clone(),
                source: row.source,
                prompt: ids.prompt,
                yes: ids.yes,
                no: ids.no,
                met: row.met,
            })
        })
        .collect()
}
