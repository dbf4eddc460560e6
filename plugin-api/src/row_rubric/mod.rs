//! Rubric items that come with each data row (HealthBench, PRBench), graded
//! by the host's judge model with the grader template HealthBench
//! describes: up to `batch` items per query, answered as an ordered JSON
//! list of verdicts; with `batch = 1`, one JSON object with an explanation
//! and `criteria_met`.
//!
//! Every query of a sample starts with the same text — the introduction,
//! the conversation and the `# Rubric items` marker — and only the items
//! after the marker differ, so a provider's prompt cache or the local
//! judge's prefix reuse encodes that shared prefix once per sample.
//!
//! A plugin author's whole judge-backed rubric is then a [`Grader`] and a
//! scoring rule over [`JudgedRow::met`] and [`JudgedRow::points`].

use crate::verdicts::PrejudgedVerdict;
use crate::{Criterion, JudgeQuery, Sample, Verdict, ask_judges};
use serde::Deserialize;

mod answers;

pub use answers::{parse_verdicts, verdict_schema};

/// Where the shared prefix of a sample's grading queries ends.
pub const RUBRIC_ITEMS_MARKER: &str = "# Rubric items";

/// One rubric item that came with a data row (HealthBench / PRBench format).
#[derive(Debug, Clone, Deserialize)]
pub struct RubricItem {
    /// The criterion text; becomes the description the judge model is asked about.
    pub criterion: String,
    /// Signed weight (`weight` is accepted too); negative points penalize.
    #[serde(alias = "weight")]
    pub points: f64,
    /// Free-form tags; an `axis:NAME` tag sets the criterion's dimension.
    #[serde(default)]
    pub tags: Vec<String>,
    /// A pre-judged verdict for this item.
    #[serde(default)]
    pub met: Option<PrejudgedVerdict>,
}

/// The part of a sample's context holding row-level rubric items:
/// `{"rubrics": [...], "verdicts": [...]?}` (verdicts parallel to the items,
/// as an alternative to `met` on each item).
#[derive(Debug, Clone, Deserialize)]
pub struct RowRubric {
    /// The row's items, in order; item i becomes criterion `item-i`.
    pub rubrics: Vec<RubricItem>,
    /// Verdicts parallel to `rubrics` (same length); an item's own `met` wins.
    #[serde(default)]
    pub verdicts: Option<Vec<PrejudgedVerdict>>,
}

/// Row-level items after judging: criteria `item-0`, `item-1`, … in row order.
#[derive(Debug, Clone)]
pub struct JudgedRow {
    /// One criterion per item, its dimension taken from an `axis:` tag.
    pub criteria: Vec<Criterion>,
    /// One verdict per item, in row order.
    pub verdicts: Vec<Verdict>,
    /// Each item's points, in row order.
    pub points: Vec<f64>,
    /// Whether each item was met; a verdict without `met` counts as met at score ≥ 0.5.
    pub met: Vec<bool>,
    /// Items the judge model could not answer about even when asked
    /// alone: `(criterion id, why)`. They are left out of the four lists
    /// above, so the row is scored over the items that were judged, and a
    /// plugin names them in its explanation.
    pub unjudged: Vec<(String, String)>,
}

impl JudgedRow {
    /// "; unjudged: item-4 (why), …", or nothing when every item was judged.
    pub fn unjudged_note(&self) -> String {
        if self.unjudged.is_empty() {
            return String::new();
        }
        let names: Vec<String> = self
            .unjudged
            .iter()
            .map(|(id, why)| format!("{id} ({why})"))
            .collect();
        format!("; unjudged: {}", names.join(", "))
    }
}

/// How the judge answers about rubric items.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnswerFormat {
    /// JSON: a list of verdicts for a batch, an object with an explanation
    /// for one item (HealthBench's template).
    #[default]
    Json,
    /// One item per query, the answer constrained to YES or NO; the
    /// verdict's confidence is the judge's probability of its answer.
    YesNo,
}

/// `[rubric.config]` of a row-rubric plugin (`healthbench`, `prbench`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowRubricConfig {
    /// Rubric items per query (JSON answers only).
    #[serde(default = "default_batch")]
    pub batch: usize,
    /// The configured judge to ask (none: `judge`).
    #[serde(default)]
    pub judge: Option<String>,
    /// How the judge answers.
    #[serde(default)]
    pub answer: AnswerFormat,
}

fn default_batch() -> usize {
    3
}

impl Default for RowRubricConfig {
    fn default() -> Self {
        RowRubricConfig {
            batch: default_batch(),
            judge: None,
            answer: AnswerFormat::default(),
        }
    }
}

/// How a plugin asks the judge model about a row's items.
#[derive(Debug, Clone)]
pub struct Grader {
    /// Items per query (at least 1; HealthBench's batched grading uses 3).
    pub batch: usize,
    /// The first paragraph of every query: what the judge is doing.
    pub introduction: &'static str,
    /// The heading over the prompt and response (`Conversation`, `Task` …).
    pub heading: &'static str,
    /// Most answer tokens per item.
    pub tokens_per_item: u32,
    /// The configured judge to ask (none: `judge`).
    pub judge: Option<String>,
    /// How the judge answers.
    pub answer: AnswerFormat,
}

impl Grader {
    /// HealthBench's grader: a conversation, its last turn graded.
    pub fn conversation() -> Grader {
        Grader {
            batch: 3,
            introduction: "Your job is to look at a conversation and rubric items, and score \
                the last turn (i.e., the last assistant response) in the conversation on how \
                well it follows each rubric item.",
            heading: "Conversation",
            tokens_per_item: 96,
            judge: None,
            answer: AnswerFormat::Json,
        }
    }

    /// This grader as a plugin's config asks; refuses a zero batch.
    pub fn configured(self, config: &RowRubricConfig) -> Result<Grader, String> {
        if config.batch == 0 {
            return Err("batch must be at least 1".to_string());
        }
        Ok(Grader {
            batch: config.batch,
            judge: config.judge.clone(),
            answer: config.answer,
            ..self
        })
    }

    /// The part every query of `sample` shares, ending with the marker.
    pub fn prefix(&self, sample: &Sample) -> String {
        format!(
            "{}\n\n# {}\nuser: {}\n\nassistant: {}\n\n{RUBRIC_ITEMS_MARKER}\n",
            self.introduction, self.heading, sample.prompt, sample.response
        )
    }

    /// The whole query for `items` (criterion texts) of `sample`.
    pub fn query(&self, sample: &Sample, items: &[&str]) -> String {
        let mut text = self.prefix(sample);
        // One line per item, so numbering stays unambiguous.
        for (i, item) in items.iter().enumerate() {
            let line: Vec<&str> = item.split_whitespace().collect();
            text += &format!("{}. {}\n", i + 1, line.join(" "));
        }
        text += "\n# Instructions\n";
        text += if self.answer == AnswerFormat::YesNo {
            "Answer YES if the response meets the rubric item, NO if it does not. "
        } else if items.len() == 1 {
            "Return a JSON object with the fields \"explanation\" (one sentence) and \
             \"criteria_met\" (true or false). "
        } else {
            "Return a JSON list with one object per rubric item, in the order given, each \
             {\"criteria_met\": true or false}. "
        };
        text += "A rubric item that describes an undesirable behaviour is met when the response \
             shows that behaviour.";
        text + if self.answer == AnswerFormat::YesNo {
            ""
        } else {
            " Return only JSON."
        }
    }
}

/// Reads the row's rubric items from the sample's context and resolves a
/// verdict for each: from the row when it has one, else from the judge
/// model, `grader.batch` items per query (all of a sample's queries in one
/// host call). A query whose answer cannot be read is asked again item by
/// item; items still without a verdict are reported in
/// [`JudgedRow::unjudged`], and the call fails only when no item has one.
pub fn judge_row_rubric(sample: &Sample, grader: &Grader) -> Result<JudgedRow, String> {
    let row: RowRubric = sample.context_as()?;
    if let Some(verdicts) = &row.verdicts
        && verdicts.len() != row.rubrics.len()
    {
        return Err(format!(
            "{} verdicts for {} rubric items",
            verdicts.len(),
            row.rubrics.len()
        ));
    }
    let ids: Vec<String> = (0..row.rubrics.len())
        .map(|i| format!("item-{i}"))
        .collect();
    let mut verdicts: Vec<Option<Verdict>> = Vec::with_capacity(ids.len());
    let mut to_ask = Vec::new();
    for (i, item) in row.rubrics.iter().enumerate() {
        let prejudged = item
            .met
            .as_ref()
            .or_else(|| row.verdicts.as_ref().map(|v| &v[i]));
        match prejudged {
            Some(p) => verdicts.push(Some(p.to_verdict(&ids[i])?)),
            None => {
                verdicts.push(None);
                to_ask.push(i);
            }
        }
    }
    let yes_no = grader.answer == AnswerFormat::YesNo;
    let per_query = if yes_no { 1 } else { grader.batch.max(1) };
    let batches: Vec<Vec<usize>> = to_ask.chunks(per_query).map(<[usize]>::to_vec).collect();
    // A batch whose answer cannot be read is asked again item by item,
    // once: one bad answer must not cost the other items their verdicts.
    let mut unjudged = Vec::new();
    let retry = ask_and_read(sample, grader, &row, &ids, &batches, &mut verdicts);
    let singles: Vec<Vec<usize>> = retry
        .iter()
        .flat_map(|(b, _)| b.iter().map(|&i| vec![i]))
        .collect();
    for (batch, why) in ask_and_read(sample, grader, &row, &ids, &singles, &mut verdicts) {
        unjudged.extend(batch.iter().map(|&i| (ids[i].clone(), why.clone())));
    }
    if !to_ask.is_empty() && unjudged.len() == to_ask.len() && verdicts.iter().all(Option::is_none)
    {
        let failures: Vec<String> = unjudged
            .iter()
            .map(|(id, why)| format!("{id}: {why}"))
            .collect();
        return Err(format!(
            "no verdict in the sample's context and the judge model could not answer ({})",
            failures.join("; ")
        ));
    }
    let judged: Vec<bool> = verdicts.iter().map(Option::is_some).collect();
    let verdicts: Vec<Verdict> = verdicts.into_iter().flatten().collect();
    let met = verdicts
        .iter()
        .map(|v| v.met.unwrap_or(v.score >= 0.5))
        .collect();
    let criteria = row
        .rubrics
        .iter()
        .zip(&ids)
        .zip(&judged)
        .filter(|(_, judged)| **judged)
        .map(|((item, id), _)| {
            let axis = item
                .tags
                .iter()
                .find_map(|t| t.strip_prefix("axis:"))
                .unwrap_or("overall");
            Criterion::new(id, &item.criterion, item.points)
                .in_dimension(axis)
                .with_tags(item.tags.iter().cloned())
        })
        .collect();
    Ok(JudgedRow {
        criteria,
        verdicts,
        points: row
            .rubrics
            .iter()
            .zip(&judged)
            .filter(|(_, judged)| **judged)
            .map(|(r, _)| r.points)
            .collect(),
        met,
        unjudged,
    })
}

/// Asks the judge model about each batch of item indices (all in one host
/// call) and fills `verdicts`; returns the batches whose answer could not
/// be read, with why.
fn ask_and_read(
    sample: &Sample,
    grader: &Grader,
    row: &RowRubric,
    ids: &[String],
    batches: &[Vec<usize>],
    verdicts: &mut [Option<Verdict>],
) -> Vec<(Vec<usize>, String)> {
    if batches.is_empty() {
        return Vec::new();
    }
    let yes_no = grader.answer == AnswerFormat::YesNo;
    let queries: Vec<JudgeQuery> = batches
        .iter()
        .map(|batch| {
            let items: Vec<&str> = batch
                .iter()
                .map(|&i| row.rubrics[i].criterion.as_str())
                .collect();
            let mut query = JudgeQuery::new(
                grader.query(sample, &items),
                grader.tokens_per_item * batch.len() as u32 + 16,
            );
            query.judge = grader.judge.clone();
            if yes_no {
                query = query.choosing(&["YES", "NO"]);
                // Room for the choice as a quoted JSON string, even in a
                // vocabulary of single bytes.
                query.max_tokens = 8;
            } else {
                query = query.with_json_schema(verdict_schema(batch.len()));
            }
            query
        })
        .collect();
    let mut failed = Vec::new();
    for (batch, answer) in batches.iter().zip(ask_judges(&queries)) {
        let read = answer.and_then(|answer| {
            if yes_no {
                let met = crate::verdicts::parse_yes_no(&answer.text)?;
                let confidence = answer.probability_of(&answer.text);
                Ok(vec![(met, None, confidence)])
            } else {
                parse_verdicts(&answer.text, batch.len())
                    .map(|v| v.into_iter().map(|(m, e)| (m, e, None)).collect())
            }
        });
        match read {
            Ok(read) => {
                for (&i, (met, explanation, confidence)) in batch.iter().zip(read) {
                    let mut verdict = Verdict::met(&ids[i], met);
                    verdict.explanation = explanation;
                    verdict.confidence = confidence;
                    verdicts[i] = Some(verdict);
                }
            }
            Err(e) => failed.push((batch.clone(), e)),
        }
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_query_of_a_sample_shares_the_prefix_up_to_the_marker() {
        let sample = Sample {
            id: "s".into(),
            prompt: "my head hurts".into(),
            response: "drink water".into(),
            reference: None,
            context: "{}".into(),
            metadata: Vec::new(),
        };
        let grader = Grader::conversation();
        let one = grader.query(&sample, &["mentions water"]);
        let three = grader.query(&sample, &["a", "b", "c"]);
        let prefix = grader.prefix(&sample);
        assert!(prefix.ends_with("# Rubric items\n"));
        assert!(one.starts_with(&prefix) && three.starts_with(&prefix));
        assert!(one.contains("\"explanation\"") && three.contains("JSON list"));
    }
}
