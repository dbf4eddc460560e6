//! The request and response bodies of the three doors: OpenRLHF's remote
//! reward, slime's remote reward model and verifine's own `/v1/score`.
//! Parsing turns a body into samples or a reason for a 400; building turns
//! scored samples back into the body each client reads.

use crate::pool::Generation;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use verifine_runtime::Sample;
use verifine_runtime::rows::{output_row, samples_from_json};
use verifine_runtime::scoring::ScoredSample;

/// Where a sample's reward comes from when scoring failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum FailurePolicy {
    /// Reward 0 for the failed sample, flagged in `extra_logs.reward_failed`
    /// (OpenRLHF) or `reward_failed` (slime); the batch goes on.
    #[default]
    Zero,
    /// Answer 422 naming the failed sample and why; the trainer's client
    /// retries and, failing that, stops.
    Error,
}

/// End-of-turn markers a decoded OpenRLHF query carries after the response
/// (special tokens are kept when it decodes); removed before scoring.
pub const END_MARKERS: [&str; 7] = [
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|end|>",
    "</s>",
    "<eos>",
    "<end_of_turn>",
];

/// OpenRLHF's `POST /get_reward` body. Fields a newer client adds are
/// ignored, as slime's are: refusing them would break every trainer that
/// upgrades before the server does.
#[derive(Debug, Deserialize)]
struct OpenRlhfRequest {
    query: Vec<String>,
    #[serde(default)]
    prompts: Option<Vec<String>>,
    #[serde(default)]
    labels: Option<Vec<Value>>,
}

/// Reads OpenRLHF's body: each query is the decoded prompt + response; the
/// response is what follows the prompt (the whole query when it does not
/// start with it), without trailing end-of-turn markers; a label is the
/// reference.
pub fn parse_openrlhf(body: &[u8]) -> Result<Vec<Sample>, String> {
    let request: OpenRlhfRequest = parse_json(body)?;
    openrlhf_samples(request.query, request.prompts, request.labels)
}

/// OpenRLHF's three lists as samples (see [`parse_openrlhf`]); its
/// local-function mode (`reward_func(queries, prompts, labels)`) gets the
/// same lists without HTTP.
pub fn openrlhf_samples(
    queries: Vec<String>,
    prompts: Option<Vec<String>>,
    labels: Option<Vec<Value>>,
) -> Result<Vec<Sample>, String> {
    let n = queries.len();
    for (field, len) in [
        ("prompts", prompts.as_ref().map(Vec::len)),
        ("labels", labels.as_ref().map(Vec::len)),
    ] {
        if let Some(len) = len.filter(|&len| len != n) {
            return Err(format!("`{field}` has {len} entries, `query` has {n}"));
        }
    }
    queries
        .iter()
        .enumerate()
        .map(|(i, query)| {
            let prompt = prompts.as_ref().map_or("", |p| p[i].as_str());
            let response = match query.strip_prefix(prompt) {
                Some(rest) if !prompt.is_empty() => rest,
                _ => query.as_str(),
            };
            let reference = labels.as_ref().and_then(|l| label_text(&l[i]));
            Ok(Sample {
                reference,
                ..Sample::new(i.to_string(), prompt, strip_end_markers(response))
            })
        })
        .collect()
}

/// slime's `remote_rm` body: one sample.
#[derive(Debug, Deserialize)]
struct SlimeRequest {
    prompt: Value,
    response: String,
    #[serde(default)]
    label: Value,
}

/// Reads slime's body. `prompt` is a string or a chat message list; a list
/// is rendered as `role: content` paragraphs for the rubric and kept whole
/// in the sample's context as `{"messages": [...]}`.
pub fn parse_slime(body: &[u8]) -> Result<Sample, String> {
    let request: SlimeRequest = parse_json(body)?;
    let (prompt, context) = match &request.prompt {
        Value::String(text) => (text.clone(), None),
        Value::Array(messages) => (
            render_messages(messages)?,
            Some(json!({ "messages": messages })),
        ),
        other => {
            return Err(format!(
                "`prompt` must be a string or a list of chat messages, found {}",
                kind_of(other)
            ));
        }
    };
    let reference = label_text(&request.label);
    let mut sample = Sample::new("0", prompt, strip_end_markers(&request.response));
    sample.reference = reference;
    if let Some(context) = context {
        sample.context = context.to_string();
    }
    Ok(sample)
}

/// Reads `/v1/score`'s body: score input rows, as a list or `{"rows": [...]}`.
pub fn parse_score(body: &[u8]) -> Result<Vec<Sample>, String> {
    let rows = match parse_json::<Value>(body)? {
        Value::Array(rows) => rows,
        Value::Object(mut object) => match object.remove("rows") {
            Some(Value::Array(rows)) if object.is_empty() => rows,
            _ => return Err("expected a list of rows or {\"rows\": [...]}".to_string()),
        },
        other => {
            return Err(format!(
                "expected a list of rows or {{\"rows\": [...]}}, found {}",
                kind_of(&other)
            ));
        }
    };
    samples_from_json(rows).map_err(|(row, reason)| format!("row {row}: {reason}"))
}

/// Longest failure reason a client is sent, in characters.
pub const CLIENT_REASON_CHARS: usize = 200;

/// A failure as a client sees it: the first line, without what the plugin
/// wrote to stderr (a panic's message and source path) or a wasm
/// backtrace, at most [`CLIENT_REASON_CHARS`] characters.
pub fn client_reason(detail: &str) -> String {
    let mut line = detail.lines().next().unwrap_or("").trim();
    for marker in [" (plugin stderr:", "wasm backtrace"] {
        if let Some(cut) = line.find(marker) {
            line = line[..cut].trim_end();
        }
    }
    match line.char_indices().nth(CLIENT_REASON_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_string(),
    }
}

/// Logs the first failure of a batch whole (the operator's copy, with the
/// plugin's stderr) and shortens every failure reason to what a client is
/// sent ([`client_reason`]).
pub fn keep_details_in_the_log(samples: &[Sample], scored: &mut [ScoredSample]) {
    let mut failures = samples
        .iter()
        .zip(scored.iter())
        .filter_map(|(sample, s)| s.error.as_deref().map(|error| (sample, error)));
    if let Some((sample, error)) = failures.next() {
        let others = failures.count();
        tracing::warn!(
            "sample {} failed ({others} more in its request): {error}",
            sample.id
        );
    }
    for s in scored.iter_mut() {
        if let Some(error) = &mut s.error {
            *error = client_reason(error);
        }
    }
}

/// The first failed sample and why, when the policy makes failures errors.
pub fn first_failure(
    policy: FailurePolicy,
    samples: &[Sample],
    scored: &[ScoredSample],
) -> Option<String> {
    if policy == FailurePolicy::Zero {
        return None;
    }
    samples.iter().zip(scored).find_map(|(sample, s)| {
        s.total.is_none().then(|| {
            let why = s.error.as_deref().unwrap_or("the rubric defines no score");
            format!("sample {}: {why}", sample.id)
        })
    })
}

/// OpenRLHF's answer: rewards, the scores it filters on, and per-sample
/// logs (each criterion's score, whether scoring failed, and the revision
/// generation that scored it, which `/metrics` and the response header name).
pub fn openrlhf_response(generation: u64, scored: &[ScoredSample]) -> Value {
    let rewards: Vec<f64> = scored.iter().map(|s| s.total.unwrap_or(0.0)).collect();
    let mut logs: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (i, s) in scored.iter().enumerate() {
        for (name, value) in criterion_scores(s) {
            logs.entry(name).or_insert_with(|| vec![0.0; scored.len()])[i] = value;
        }
    }
    logs.insert(
        "reward_failed".to_string(),
        scored
            .iter()
            .map(|s| f64::from(u8::from(s.total.is_none())))
            .collect(),
    );
    logs.insert(
        "revision_generation".to_string(),
        vec![generation as f64; scored.len()],
    );
    json!({ "rewards": rewards, "scores": rewards, "extra_logs": logs })
}

/// slime's answer: a dict from which `--reward-key reward` picks the reward.
pub fn slime_response(generation: &Generation, scored: &ScoredSample) -> Value {
    let criteria: Map<String, Value> = criterion_scores(scored)
        .into_iter()
        .map(|(name, value)| (name, json!(value)))
        .collect();
    json!({
        "reward": scored.total.unwrap_or(0.0),
        "reward_failed": scored.total.is_none(),
        "error": scored.error,
        "criteria": criteria,
        "revisions": generation.revisions_json(),
    })
}

/// `/v1/score`'s answer: output rows with provenance.
pub fn score_response(
    generation: &Generation,
    samples: &[Sample],
    scored: &[ScoredSample],
) -> Value {
    let [rubric, aggregator] = &generation.revisions;
    let rows: Vec<_> = samples
        .iter()
        .zip(scored)
        .map(|(sample, s)| output_row(sample, s, rubric, aggregator))
        .collect();
    json!({ "rows": rows, "revisions": generation.revisions_json() })
}

/// Each criterion's score in a judgment; a criterion judged more than once
/// (a rubric may return one verdict per occurrence) gets its mean.
pub fn criterion_scores(scored: &ScoredSample) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, (f64, u32)> = BTreeMap::new();
    for verdict in scored.judgment.iter().flat_map(|j| &j.verdicts) {
        if verdict.score.is_finite() {
            let entry = sums.entry(verdict.criterion.clone()).or_default();
            entry.0 += verdict.score;
            entry.1 += 1;
        }
    }
    sums.into_iter()
        .map(|(name, (sum, n))| (name, sum / f64::from(n)))
        .collect()
}

fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    if body.is_empty() {
        return Err("empty body: expected JSON".to_string());
    }
    serde_json::from_slice(body).map_err(|e| format!("invalid JSON body: {e}"))
}

/// A label as the reference text: strings as they are (empty: none),
/// numbers and booleans printed, lists and objects as JSON.
pub fn label_text(label: &Value) -> Option<String> {
    match label {
        Value::Null => None,
        Value::String(text) if text.is_empty() => None,
        Value::String(text) => Some(text.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        other @ (Value::Array(_) | Value::Object(_)) => Some(other.to_string()),
    }
}

/// Chat messages as `role: content` paragraphs (how a rubric sees a
/// conversational prompt); each must have string `role` and `content`.
pub fn render_messages(messages: &[Value]) -> Result<String, String> {
    let mut text = String::new();
    for (i, message) in messages.iter().enumerate() {
        let field = |name: &str| message.get(name).and_then(Value::as_str);
        let (Some(role), Some(content)) = (field("role"), field("content")) else {
            return Err(format!(
                "prompt[{i}] must be a message {{\"role\": string, \"content\": string}}"
            ));
        };
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(role);
        text.push_str(": ");
        text.push_str(content);
    }
    Ok(text)
}

/// `response` without trailing end-of-turn markers ([`END_MARKERS`]) and
/// the whitespace between them.
pub fn strip_end_markers(response: &str) -> String {
    let mut text = response.trim_end();
    while let Some(marker) = END_MARKERS.iter().find(|m| text.ends_with(*m)) {
        text = text[..text.len() - marker.len()].trim_end();
    }
    text.to_string()
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openrlhf_queries_lose_their_prompt_and_end_markers() {
        let body = br#"{"query": ["<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n#### 4<|im_end|>", "free"],
                        "prompts": ["<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n", "other"],
                        "labels": ["4", ""]}"#;
        let samples = parse_openrlhf(body).unwrap();
        assert_eq!(samples[0].response, "#### 4");
        assert_eq!(samples[0].reference.as_deref(), Some("4"));
        assert_eq!(samples[1].response, "free");
        assert_eq!(samples[1].reference, None);
    }

    #[test]
    fn fields_a_newer_client_adds_are_ignored() {
        let samples =
            parse_openrlhf(br#"{"query": ["A: 1"], "labels": ["1"], "datasource": ["x"]}"#)
                .unwrap();
        assert_eq!(samples[0].reference.as_deref(), Some("1"));
        let sample = parse_slime(br#"{"prompt": "p", "response": "r", "metadata": {}}"#).unwrap();
        assert_eq!(sample.response, "r");
    }

    #[test]
    fn mismatched_lengths_and_wrong_types_are_reasons() {
        let reason = parse_openrlhf(br#"{"query": ["a"], "prompts": []}"#).unwrap_err();
        assert_eq!(reason, "`prompts` has 0 entries, `query` has 1");
        assert!(
            parse_openrlhf(br#"{"query": "a"}"#)
                .unwrap_err()
                .contains("invalid JSON body")
        );
        assert!(parse_openrlhf(b"").unwrap_err().contains("empty body"));
        let reason = parse_slime(br#"{"prompt": 3, "response": "x"}"#).unwrap_err();
        assert!(reason.contains("found a number"), "{reason}");
        let reason =
            parse_slime(br#"{"prompt": [{"role": "user"}], "response": "x"}"#).unwrap_err();
        assert!(reason.contains("prompt[0]"), "{reason}");
        let reason = parse_score(br#"{"rows": [{"id": 1, "prompt": "p"}]}"#).unwrap_err();
        assert!(reason.starts_with("row 1:"), "{reason}");
    }

    #[test]
    fn clients_get_the_first_line_without_stderr_or_backtrace() {
        let detail = "plugin `p` trapped: unreachable (plugin stderr: panicked at src/lib.rs:13:13:\nboom)\nwasm backtrace:\n  0: 0x1 - p::judge";
        assert_eq!(client_reason(detail), "plugin `p` trapped: unreachable");
        let long = "x".repeat(1000);
        assert_eq!(
            client_reason(&long).chars().count(),
            CLIENT_REASON_CHARS + 1
        );
    }

    #[test]
    fn slime_chat_prompts_are_rendered_and_kept_in_the_context() {
        let body =
            br#"{"prompt": [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}],
                        "response": "A</s>", "label": 7}"#;
        let sample = parse_slime(body).unwrap();
        assert_eq!(sample.prompt, "system: S\n\nuser: Q");
        assert_eq!(sample.response, "A");
        assert_eq!(sample.reference.as_deref(), Some("7"));
        let context: Value = serde_json::from_str(&sample.context).unwrap();
        assert_eq!(context["messages"][1]["content"], "Q");
    }
}
