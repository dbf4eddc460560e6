//! Verdicts that come with the data (pre-judged) or from the host's judge model.
//!
//! Rubric plugins in the VeriFine and HealthBench styles take a verdict per
//! criterion from the sample's context when the data supplies one, and ask the
//! judge model a YES/NO question for the rest.

use crate::{Criterion, ModelQuery, Sample, Verdict, judge_model};
use serde::Deserialize;

/// A verdict as data rows carry it: `true`, `0.5`, or
/// `{"met": true, "score": 1.0, "confidence": 0.9, "explanation": "…"}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum PrejudgedVerdict {
    /// Met or not: a binary verdict scoring 1 or 0.
    Flag(bool),
    /// A graded verdict; the score is clamped to [0, 1].
    Score(f64),
    /// The full form; needs `met` or `score`.
    Detailed {
        /// Whether the criterion is met; alone, it scores 1 or 0.
        met: Option<bool>,
        /// Degree the criterion holds; when given, it sets the score and `met` is kept as is.
        score: Option<f64>,
        /// The grader's confidence, copied as given (not clamped).
        confidence: Option<f64>,
        /// Why the grader decided so.
        explanation: Option<String>,
    },
}

impl PrejudgedVerdict {
    /// The verdict on `criterion`; a detailed verdict needs `met` or `score`.
    pub fn to_verdict(&self, criterion: &str) -> Result<Verdict, String> {
        match self {
            PrejudgedVerdict::Flag(met) => Ok(Verdict::met(criterion, *met)),
            PrejudgedVerdict::Score(score) => Ok(Verdict::scored(criterion, *score)),
            PrejudgedVerdict::Detailed {
                met,
                score,
                confidence,
                explanation,
            } => {
                let mut verdict = match (met, score) {
                    (_, Some(score)) => {
                        let mut v = Verdict::scored(criterion, *score);
                        v.met = *met;
                        v
                    }
                    (Some(met), None) => Verdict::met(criterion, *met),
                    (None, None) => {
                        return Err(format!(
                            "verdict on {criterion:?} has neither met nor score"
                        ));
                    }
                };
                verdict.confidence = *confidence;
                verdict.explanation = explanation.clone();
                Ok(verdict)
            }
        }
    }
}

/// One binary criterion to resolve for a sample.
pub struct BinaryQuestion<'a> {
    /// The criterion id the verdict is about.
    pub criterion: &'a str,
    /// The verdict from the data, if any.
    pub prejudged: Option<&'a PrejudgedVerdict>,
    /// What to ask the judge model when there is no prejudged verdict.
    pub question: String,
}

/// Resolves every question: prejudged verdicts first, then one batched
/// judge-model call for the rest. Fails naming each criterion left without a
/// verdict, with the judge model's error.
pub fn resolve_binary(questions: &[BinaryQuestion<'_>]) -> Result<Vec<Verdict>, String> {
    let mut verdicts: Vec<Option<Verdict>> = Vec::with_capacity(questions.len());
    let mut to_ask = Vec::new();
    for (i, q) in questions.iter().enumerate() {
        match q.prejudged {
            Some(prejudged) => verdicts.push(Some(prejudged.to_verdict(q.criterion)?)),
            None => {
                verdicts.push(None);
                to_ask.push(i);
            }
        }
    }
    if !to_ask.is_empty() {
        let queries: Vec<ModelQuery> = to_ask
            .iter()
            .map(|&i| ModelQuery {
                system: Some(
                    "You grade one criterion. Answer YES or NO on the first line, \
                     then one sentence of explanation."
                        .to_string(),
                ),
                prompt: questions[i].question.clone(),
                max_tokens: 128,
            })
            .collect();
        let answers = judge_model(&queries);
        let mut failures = Vec::new();
        for (&i, answer) in to_ask.iter().zip(answers) {
            let criterion = questions[i].criterion;
            match answer.and_then(|text| parse_yes_no(&text).map(|met| (met, text))) {
                Ok((met, text)) => {
                    verdicts[i] = Some(Verdict::met(criterion, met).because(text.trim()))
                }
                Err(e) => failures.push(format!("{criterion}: {e}")),
            }
        }
        if !failures.is_empty() {
            return Err(format!(
                "no verdict in the sample's context and the judge model could not answer ({})",
                failures.join("; ")
            ));
        }
    }
    Ok(verdicts.into_iter().map(Option::unwrap).collect())
}

/// Reads YES/NO (or a JSON `"criteria_met": true|false`) from a model's answer.
pub fn parse_yes_no(answer: &str) -> Result<bool, String> {
    let lower = answer.to_ascii_lowercase();
    if let Some(at) = lower.find("\"criteria_met\"") {
        let rest = lower[at + "\"criteria_met\"".len()..].trim_start_matches([':', ' ']);
        if rest.starts_with("true") {
            return Ok(true);
        }
        if rest.starts_with("false") {
            return Ok(false);
        }
    }
    let first_word = lower
        .split(|c: char| !c.is_ascii_alphabetic())
        .find(|w| !w.is_empty())
        .unwrap_or("");
    match first_word {
        "yes" => Ok(true),
        "no" => Ok(false),
        _ => Err(format!(
            "answer is not YES or NO: {:?}",
            truncate(answer, 60)
        )),
    }
}

fn truncate(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_yes_no_and_json() {
        assert_eq!(parse_yes_no("YES. It is grounded."), Ok(true));
        assert_eq!(parse_yes_no("no"), Ok(false));
        assert_eq!(parse_yes_no("{\"criteria_met\": false}"), Ok(false));
        assert!(parse_yes_no("maybe").is_err());
    }

    #[test]
    fn prejudged_forms() {
        let v: PrejudgedVerdict = serde_json::from_str("true").unwrap();
        assert_eq!(v.to_verdict("c").unwrap().score, 1.0);
        let v: PrejudgedVerdict = serde_json::from_str("0.25").unwrap();
        assert_eq!(v.to_verdict("c").unwrap().score, 0.25);
        let v: PrejudgedVerdict =
            serde_json::from_str(r#"{"met": false, "explanation": "x"}"#).unwrap();
        let verdict = v.to_verdict("c").unwrap();
        assert_eq!(verdict.met, Some(false));
        assert_eq!(verdict.explanation.as_deref(), Some("x"));
        let v: PrejudgedVerdict = serde_json::from_str(r#"{"confidence": 1}"#).unwrap();
        assert!(v.to_verdict("c").is_err());
    }
}

pub use crate::row_rubric::{JudgedRow, RowRubric, RubricItem, judge_row_rubric};

#[derive(Debug, Deserialize)]
struct NamedVerdicts {
    #[serde(default)]
    verdicts: std::collections::BTreeMap<String, PrejudgedVerdict>,
}

/// Resolves a verdict for each described criterion: from the context's
/// `{"verdicts": {"<criterion id>": …}}` when present, else from the judge
/// model, asked whether the response meets the criterion's description.
pub fn judge_described(sample: &Sample, criteria: &[Criterion]) -> Result<Vec<Verdict>, String> {
    let named: NamedVerdicts = sample.context_as()?;
    if let Some(unknown) = named
        .verdicts
        .keys()
        .find(|k| !criteria.iter().any(|c| &c.id == *k))
    {
        return Err(format!(
            "context has a verdict on unknown criterion {unknown:?}"
        ));
    }
    let questions: Vec<BinaryQuestion> = criteria
        .iter()
        .map(|c| BinaryQuestion {
            criterion: &c.id,
            prejudged: named.verdicts.get(&c.id),
            question: format!(
                "Situation and instruction:\n{}\n\nResponse:\n{}\n\nCriterion: {}\n\
                 Does the response meet the criterion?",
                sample.prompt, sample.response, c.description
            ),
        })
        .collect();
    resolve_binary(&questions)
}
