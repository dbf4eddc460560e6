//! The chat-completions wire format: the request body for a query and
//! the answer read back from a response body.

use serde_json::{Value, json};
use verifine_runtime::judge_models::{
    ModelAnswer, ModelError, ModelRequest, TokenLogprob, TokenUsage,
};

/// Tokens allowed before a constrained choice: whitespace, a code fence.
const CHOICE_PREAMBLE_TOKENS: u32 = 24;

/// The chat-completions request for one query.
pub fn request_body(
    model: &str,
    temperature: f32,
    request: &ModelRequest,
) -> std::result::Result<String, ModelError> {
    let mut messages = Vec::new();
    if let Some(system) = &request.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    messages.push(json!({"role": "user", "content": request.prompt}));
    // A choice comes back as a quoted JSON string: leave room for the
    // longest one even when every byte is a token, and for the whitespace
    // or code fence a server's JSON grammar lets a small model write
    // first (Gemma 3 270M through llama-server does).
    let longest_choice = request.choices.iter().map(String::len).max().unwrap_or(0) as u32;
    let max_tokens = if request.choices.is_empty() {
        request.max_tokens
    } else {
        request
            .max_tokens
            .max(longest_choice + CHOICE_PREAMBLE_TOKENS)
    };
    let mut body = json!({
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
    });
    body["temperature"] = json!(request.temperature.unwrap_or(temperature));
    if !request.stop.is_empty() {
        body["stop"] = json!(request.stop);
    }
    let choices_schema = (!request.choices.is_empty())
        .then(|| json!({"type": "string", "enum": request.choices}).to_string());
    if let Some(schema) = request.json_schema.as_ref().or(choices_schema.as_ref()) {
        let schema: Value = serde_json::from_str(schema).map_err(|e| {
            ModelError::BadQuery(format!("the query's JSON schema is not JSON: {e}"))
        })?;
        body["response_format"] = json!({
            "type": "json_schema",
            "json_schema": {"name": "answer", "strict": true, "schema": schema},
        });
    }
    // A choice's confidence is read from the log-probabilities of the
    // token where the choices part ways.
    let top_logprobs = match request.choices.len() {
        0 => request.top_logprobs,
        n => request.top_logprobs.max(n.min(20) as u32),
    };
    if top_logprobs > 0 {
        body["logprobs"] = json!(true);
        body["top_logprobs"] = json!(top_logprobs);
    }
    Ok(body.to_string())
}

/// Reads a chat-completions response.
pub fn parse_answer(
    bytes: &[u8],
    model: &str,
    seconds: f64,
) -> std::result::Result<ModelAnswer, ModelError> {
    let text = String::from_utf8_lossy(bytes);
    let v: Value = serde_json::from_str(&text).map_err(|e| {
        ModelError::BadAnswer(format!("the answer is not JSON ({e}): {}", snippet(bytes)))
    })?;
    let choice = &v["choices"][0];
    let content = choice["message"]["content"].as_str().ok_or_else(|| {
        ModelError::BadAnswer(format!(
            "the answer has no choices[0].message.content: {}",
            snippet(bytes)
        ))
    })?;
    let logprobs = choice["logprobs"]["content"]
        .as_array()
        .map(|tokens| {
            tokens
                .iter()
                .map(|t| TokenLogprob {
                    token: t["token"].as_str().unwrap_or_default().to_string(),
                    logprob: t["logprob"].as_f64().unwrap_or(f64::NEG_INFINITY),
                    top: t["top_logprobs"]
                        .as_array()
                        .map(|alts| {
                            alts.iter()
                                .map(|a| {
                                    (
                                        a["token"].as_str().unwrap_or_default().to_string(),
                                        a["logprob"].as_f64().unwrap_or(f64::NEG_INFINITY),
                                    )
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                })
                .collect()
        })
        .unwrap_or_default();
    let usage = &v["usage"];
    let count = |value: &Value| value.as_u64().unwrap_or(0);
    Ok(ModelAnswer {
        text: content.to_string(),
        logprobs,
        usage: TokenUsage {
            input: count(&usage["prompt_tokens"]),
            cached_input: count(&usage["prompt_tokens_details"]["cached_tokens"]),
            output: count(&usage["completion_tokens"]),
        },
        model: v["model"].as_str().unwrap_or(model).to_string(),
        seconds,
        cached: false,
    })
}

/// The start of a body, for an error message: a server's text reaches
/// logs and plugins, so control characters are escaped.
pub(crate) fn snippet(bytes: &[u8]) -> String {
    verifine_base::text::sanitize(&String::from_utf8_lossy(bytes), 200)
}
