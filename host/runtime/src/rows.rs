//! The JSONL rows of scoring: what `verifine score` reads (and snapshot
//! cases and canary sets reuse) and what it writes.

use crate::builders::EMPTY_JSON;
use crate::error::{Result, RuntimeError};
use crate::judgments::{CriterionRef, Items, SubScoreRef, VerdictRef};
use crate::scoring::{ScoredRef, ScoredSample};
use crate::{Criterion, Provenance, Sample, SubScore, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use verifine_base::files::{id_string, read_jsonl};

/// One input row.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InputRow {
    id: serde_json::Value,
    prompt: String,
    response: String,
    #[serde(default)]
    reference: Option<String>,
    #[serde(default)]
    context: Option<serde_json::Value>,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
    /// A gold or human label (canary sets); ignored when scoring.
    #[serde(default)]
    label: Option<serde_json::Value>,
}

/// One output row: the judgment, the total and where it came from.
#[derive(Debug, Serialize, Deserialize)]
pub struct OutputRow {
    /// The input row's id, as a string.
    pub id: String,
    /// The reward; `None` on error or when the rubric defines no score.
    pub total: Option<f64>,
    /// The rubric's own total, when an explicit aggregator replaced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rubric_total: Option<f64>,
    /// The rubric's verdicts (empty when judging failed).
    pub verdicts: Vec<Verdict>,
    /// The rubric's named sub-scores.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sub_scores: Vec<SubScore>,
    /// Row-level criteria the verdicts refer to; omitted when they refer to the described ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub criteria: Vec<Criterion>,
    /// The rubric's overall explanation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<String>,
    /// The rubric that judged the row.
    pub plugin: Provenance,
    /// The aggregator, named only when it produced the total.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregator: Option<Provenance>,
    /// Why the row has no total, when scoring failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// [`OutputRow`] borrowed from its sample and a judgment read in place
/// ([`output_row_in_place`]); it serializes exactly as the owned row does.
#[derive(Debug, Serialize)]
pub struct OutputRowRef<'a> {
    id: &'a str,
    total: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rubric_total: Option<f64>,
    verdicts: Items<'a, VerdictRef<'a>>,
    #[serde(skip_serializing_if = "Items::is_empty")]
    sub_scores: Items<'a, SubScoreRef<'a>>,
    #[serde(skip_serializing_if = "Items::is_empty")]
    criteria: Items<'a, CriterionRef<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    explanation: Option<&'a str>,
    plugin: &'a Provenance,
    #[serde(skip_serializing_if = "Option::is_none")]
    aggregator: Option<&'a Provenance>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
}

/// Reads score input rows (`id`, `prompt`, `response`, `reference`?, `context`?,
/// `metadata`?) as samples; errors name `file:line`, and ids must be unique.
pub fn read_samples(path: &Path) -> Result<Vec<Sample>> {
    Ok(read_rows(path)?.into_iter().map(|(s, _)| s).collect())
}

/// Reads labelled rows (a canary set): input rows with a `label` that is a
/// boolean, or a number counted as true at or above `threshold`.
pub fn read_labelled(path: &Path, threshold: f64) -> Result<Vec<(Sample, bool)>> {
    read_rows(path)?
        .into_iter()
        .enumerate()
        .map(|(i, (sample, label))| {
            let label = match label {
                Some(serde_json::Value::Bool(b)) => b,
                Some(serde_json::Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN) >= threshold,
                other => {
                    return Err(RuntimeError::Row {
                        path: path.to_path_buf(),
                        row: i + 1,
                        message: format!("`label` must be a boolean or a number, found {other:?}"),
                    });
                }
            };
            Ok((sample, label))
        })
        .collect()
}

/// Reads input rows with their `label` where they have one (a boolean;
/// anything else is an error naming `file:line`).
pub fn read_labelled_optional(path: &Path) -> Result<Vec<(Sample, Option<bool>)>> {
    read_rows(path)?
        .into_iter()
        .enumerate()
        .map(|(i, (sample, label))| match label {
            None => Ok((sample, None)),
            Some(serde_json::Value::Bool(b)) => Ok((sample, Some(b))),
            Some(other) => Err(RuntimeError::Row {
                path: path.to_path_buf(),
                row: i + 1,
                message: format!("`label` must be a boolean, found {other}"),
            }),
        })
        .collect()
}

fn read_rows(path: &Path) -> Result<Vec<(Sample, Option<serde_json::Value>)>> {
    let rows: Vec<InputRow> = read_jsonl(path)?;
    rows_to_samples(rows).map_err(|(row, message)| RuntimeError::Row {
        path: path.to_path_buf(),
        row,
        message,
    })
}

/// Reads score input rows that arrived as JSON values (a request body
/// rather than a file), with the same rules as [`read_samples`]. An error
/// gives the 1-based row number and the reason.
pub fn samples_from_json(
    rows: Vec<serde_json::Value>,
) -> std::result::Result<Vec<Sample>, (usize, String)> {
    let rows = rows
        .into_iter()
        .enumerate()
        .map(|(i, value)| {
            serde_json::from_value::<InputRow>(value).map_err(|e| (i + 1, e.to_string()))
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(rows_to_samples(rows)?.into_iter().map(|(s, _)| s).collect())
}

type RowResult<T> = std::result::Result<T, (usize, String)>;

fn rows_to_samples(rows: Vec<InputRow>) -> RowResult<Vec<(Sample, Option<serde_json::Value>)>> {
    let mut seen = std::collections::HashSet::new();
    rows.into_iter()
        .enumerate()
        .map(|(i, row)| {
            let (sample, label) = sample_of(row).map_err(|message| (i + 1, message))?;
            if !seen.insert(sample.id.clone()) {
                return Err((i + 1, format!("duplicate id {:?}", sample.id)));
            }
            Ok((sample, label))
        })
        .collect()
}

/// One line of a score input file as a sample, or what is wrong with it.
/// Whether its id repeats another row's is the caller's to check.
pub(crate) fn parse_input_line(text: &str) -> std::result::Result<Sample, String> {
    let row: InputRow = serde_json::from_str(text).map_err(|e| e.to_string())?;
    sample_of(row).map(|(sample, _)| sample)
}

fn sample_of(row: InputRow) -> std::result::Result<(Sample, Option<serde_json::Value>), String> {
    let id = id_string(&row.id).ok_or("id must be a string or number")?;
    let sample = Sample {
        id,
        prompt: row.prompt,
        response: row.response,
        reference: row.reference,
        context: row
            .context
            .map_or_else(|| EMPTY_JSON.to_string(), |c| c.to_string()),
        metadata: row.metadata.into_iter().collect(),
    };
    Ok((sample, row.label))
}

/// Whether the aggregator produced the total (then the row names it).
fn aggregated(
    has_judgment: bool,
    rubric_total: Option<f64>,
    judgment_total: Option<f64>,
    error: bool,
) -> bool {
    has_judgment && (rubric_total.is_some() || judgment_total.is_none()) && !error
}

/// The output row of one sample scored in place, borrowing everything.
pub fn output_row_in_place<'a>(
    sample: &'a Sample,
    scored: ScoredRef<'a>,
    rubric: &'a Provenance,
    aggregator: &'a Provenance,
) -> OutputRowRef<'a> {
    let judgment = scored.judgment;
    let aggregated = aggregated(
        judgment.is_some(),
        scored.rubric_total,
        judgment.and_then(|j| j.total()),
        scored.error.is_some(),
    );
    OutputRowRef {
        id: &sample.id,
        total: scored.total,
        rubric_total: scored.rubric_total,
        verdicts: judgment.map_or_else(Items::empty, |j| j.verdicts()),
        sub_scores: judgment.map_or_else(Items::empty, |j| j.sub_scores()),
        criteria: judgment.map_or_else(Items::empty, |j| j.criteria()),
        explanation: judgment.and_then(|j| j.explanation()),
        plugin: rubric,
        aggregator: aggregated.then_some(aggregator),
        error: scored.error,
    }
}

/// The output row of one scored sample.
pub fn output_row(
    sample: &Sample,
    scored: &ScoredSample,
    rubric: &Provenance,
    aggregator: &Provenance,
) -> OutputRow {
    let judgment = scored.judgment.clone();
    let aggregated = aggregated(
        judgment.is_some(),
        scored.rubric_total,
        judgment.as_ref().and_then(|j| j.total),
        scored.error.is_some(),
    );
    let (verdicts, sub_scores, criteria, explanation) = match judgment {
        Some(j) => (j.verdicts, j.sub_scores, j.criteria, j.explanation),
        None => Default::default(),
    };
    OutputRow {
        id: sample.id.clone(),
        total: scored.total,
        rubric_total: scored.rubric_total,
        verdicts,
        sub_scores,
        criteria,
        explanation,
        plugin: rubric.clone(),
        aggregator: aggregated.then(|| aggregator.clone()),
        error: scored.error.clone(),
    }
}

#[cfg(test)]
#[path = "rows_tests.rs"]
mod tests;
