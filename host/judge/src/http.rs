//! An OpenAI-compatible chat-completions backend: requests in flight at
//! once up to a limit, a timeout per request, retries with exponential
//! backoff and jitter on 429, 5xx, timeouts and broken connections (a
//! `Retry-After` header wins), JSON-schema answers and log-probabilities.
//! Invalid UTF-8 in an answer is replaced, not fatal.

use crate::config::HttpConfig;
use crate::error::{JudgeError, Result};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use verifine_base::SplitMix64;
use verifine_runtime::judge_models::{ModelAnswer, ModelRequest, TokenLogprob, TokenUsage};

/// What one query's exchange with the server came to.
pub struct Exchange {
    /// The answer, or why there is none.
    pub answer: std::result::Result<ModelAnswer, String>,
    /// Requests sent for it (1 + retries taken).
    pub calls: u64,
    /// Seconds from the first request to the end.
    pub seconds: f64,
}

/// A client for one server and model.
pub struct HttpBackend {
    config: Arc<HttpConfig>,
    url: Arc<str>,
    client: reqwest::Client,
    api_key: Option<Arc<str>>,
    runtime: tokio::runtime::Runtime,
}

impl HttpBackend {
    /// A client; the API key is read from the named variable now (a
    /// missing variable is a config error, said before anything is asked).
    pub fn new(config: &HttpConfig) -> Result<Self> {
        let api_key = match &config.api_key_env {
            Some(var) => Some(Arc::from(std::env::var(var).map_err(|_| {
                JudgeError::Config(format!(
                    "the API key variable {var} (api_key_env) is not set"
                ))
            })?)),
            None => None,
        };
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs_f64(config.timeout_seconds))
            .build()
            .map_err(|e| JudgeError::Client(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| JudgeError::Client(e.to_string()))?;
        Ok(HttpBackend {
            url: Arc::from(format!(
                "{}/chat/completions",
                config.base_url.trim_end_matches('/')
            )),
            config: Arc::new(config.clone()),
            client,
            api_key,
            runtime,
        })
    }

    /// Sends every request (at most `concurrency` at once) and waits for
    /// all of them; results in order.
    pub fn exchange_all(&self, requests: &[&ModelRequest]) -> Vec<Exchange> {
        let run = || {
            self.runtime.block_on(async {
                let limit = Arc::new(tokio::sync::Semaphore::new(self.config.concurrency));
                let handles: Vec<_> = requests
                    .iter()
                    .enumerate()
                    .map(|(i, request)| {
                        let body =
                            request_body(&self.config.model, self.config.temperature, request);
                        let sender = Sender {
                            client: self.client.clone(),
                            url: self.url.clone(),
                            api_key: self.api_key.clone(),
                            config: self.config.clone(),
                        };
                        let limit = limit.clone();
                        self.runtime.spawn(async move {
                            let _permit = limit.acquire_owned().await;
                            match body {
                                Ok(body) => sender.send(body, i as u64).await,
                                Err(e) => Exchange {
                                    answer: Err(e),
                                    calls: 0,
                                    seconds: 0.0,
                                },
                            }
                        })
                    })
                    .collect();
                let mut out = Vec::with_capacity(handles.len());
                for handle in handles {
                    out.push(handle.await.unwrap_or_else(|e| Exchange {
                        answer: Err(format!("the request task failed: {e}")),
                        calls: 0,
                        seconds: 0.0,
                    }));
                }
                out
            })
        };
        // Inside another async runtime (a server scoring), block on ours
        // from a plain thread.
        if tokio::runtime::Handle::try_current().is_ok() {
            std::thread::scope(|s| s.spawn(run).join().expect("the judge client thread"))
        } else {
            run()
        }
    }
}

/// What one request task needs.
struct Sender {
    client: reqwest::Client,
    url: Arc<str>,
    api_key: Option<Arc<str>>,
    config: Arc<HttpConfig>,
}

/// Whether a failed attempt is worth repeating, and how long the server
/// asked us to wait.
enum Failure {
    Retry(String, Option<Duration>),
    Final(String),
}

impl Sender {
    async fn send(&self, body: String, stream: u64) -> Exchange {
        let started = Instant::now();
        let mut rng = SplitMix64::new(stream ^ 0x4A17_7E55);
        let mut calls = 0;
        let mut last = String::new();
        for attempt in 0..=self.config.retries {
            calls += 1;
            let failure = match self.attempt(&body).await {
                Ok(bytes) => {
                    let seconds = started.elapsed().as_secs_f64();
                    return Exchange {
                        answer: parse_answer(&bytes, &self.config.model, seconds),
                        calls,
                        seconds,
                    };
                }
                Err(failure) => failure,
            };
            let wait = match failure {
                Failure::Final(message) => {
                    last = message;
                    break;
                }
                Failure::Retry(message, retry_after) => {
                    last = message;
                    retry_after.unwrap_or_else(|| {
                        let base = self.config.backoff_ms.saturating_mul(1 << attempt.min(16));
                        Duration::from_millis(base + rng.below(base.max(1) as usize) as u64)
                    })
                }
            };
            if attempt < self.config.retries {
                tokio::time::sleep(wait).await;
            }
        }
        Exchange {
            answer: Err(format!(
                "{last} (after {calls} attempt{})",
                if calls == 1 { "" } else { "s" }
            )),
            calls,
            seconds: started.elapsed().as_secs_f64(),
        }
    }

    async fn attempt(&self, body: &str) -> std::result::Result<Vec<u8>, Failure> {
        let mut request = self
            .client
            .post(&*self.url)
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| self.transport(e))?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| Duration::from_secs_f64(s.min(300.0)));
        let bytes = response.bytes().await.map_err(|e| self.transport(e))?;
        if status.is_success() {
            return Ok(bytes.to_vec());
        }
        let message = format!("HTTP {status}: {}", snippet(&bytes));
        if status.as_u16() == 429 || status.is_server_error() {
            Err(Failure::Retry(message, retry_after))
        } else {
            Err(Failure::Final(message))
        }
    }

    fn transport(&self, e: reqwest::Error) -> Failure {
        if e.is_timeout() {
            Failure::Retry(
                format!("timed out after {} s", self.config.timeout_seconds),
                None,
            )
        } else if e.is_connect() || e.is_request() || e.is_body() {
            Failure::Retry(format!("connection to {} failed: {e}", self.url), None)
        } else {
            Failure::Final(format!("request to {} failed: {e}", self.url))
        }
    }
}

/// The chat-completions request for one query.
pub fn request_body(
    model: &str,
    temperature: f32,
    request: &ModelRequest,
) -> std::result::Result<String, String> {
    let mut messages = Vec::new();
    if let Some(system) = &request.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    messages.push(json!({"role": "user", "content": request.prompt}));
    // A choice comes back as a quoted JSON string: leave room for the
    // longest one even when every byte is a token.
    let longest_choice = request.choices.iter().map(String::len).max().unwrap_or(0) as u32;
    let max_tokens = if request.choices.is_empty() {
        request.max_tokens
    } else {
        request.max_tokens.max(longest_choice + 4)
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
        let schema: Value = serde_json::from_str(schema)
            .map_err(|e| format!("the query's JSON schema is not JSON: {e}"))?;
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
) -> std::result::Result<ModelAnswer, String> {
    let text = String::from_utf8_lossy(bytes);
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| format!("the answer is not JSON ({e}): {}", snippet(bytes)))?;
    let choice = &v["choices"][0];
    let content = choice["message"]["content"].as_str().ok_or_else(|| {
        format!(
            "the answer has no choices[0].message.content: {}",
            snippet(bytes)
        )
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
fn snippet(bytes: &[u8]) -> String {
    verifine_runtime::text::sanitize(&String::from_utf8_lossy(bytes), 200)
}
