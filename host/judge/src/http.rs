//! An OpenAI-compatible chat-completions backend: requests in flight at
//! once up to a limit, a timeout per request, retries with exponential
//! backoff and jitter on 429, 5xx, timeouts and broken connections (a
//! `Retry-After` header wins), JSON-schema answers and log-probabilities.
//! Invalid UTF-8 in an answer is replaced, not fatal.
//!
//! A server is not trusted with the host's resources: every query has one
//! deadline that its attempts, backoffs and `Retry-After`s all respect
//! (`query_deadline_seconds`, or the caller's earlier one), an answer body
//! is read only up to `max_response_bytes`, every attempt (retries too)
//! takes a call from the judge's budget before it is sent, and redirects
//! are followed only within the configured server's origin (its answers
//! are cached under that server's name, so another origin must not answer
//! for it).

mod sender;
mod wire;

pub use wire::{parse_answer, request_body};

use crate::budget::CallAllowance;
use crate::config::HttpConfig;
use crate::error::{JudgeError, Result};
use sender::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};
use verifine_runtime::judge_models::{ModelAnswer, ModelError, ModelRequest};

/// Same-origin redirects followed in a row before the query fails: a
/// server behind a proxy may redirect once or twice, never in a loop.
const MAX_REDIRECTS: usize = 5;

/// What one query's exchange with the server came to.
pub struct Exchange {
    /// The answer, or why there is none.
    pub answer: std::result::Result<ModelAnswer, ModelError>,
    /// Requests sent for it (1 + retries taken; 0 when none was sent).
    pub calls: u64,
    /// Seconds from the first request to the end.
    pub seconds: f64,
}

impl Exchange {
    /// A query that failed before anything was sent.
    pub(crate) fn unsent(reason: ModelError) -> Self {
        Exchange {
            answer: Err(reason),
            calls: 0,
            seconds: 0.0,
        }
    }
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
            .redirect(same_origin_redirects())
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
    /// all of them; results in order. The first attempt of each request
    /// was already taken from `allowance` by the caller (so a batch is
    /// admitted under one lock); retries take theirs as they go. A query
    /// ends by `caller_deadline` when one is given, and in any case within
    /// `query_deadline_seconds` of being sent.
    pub fn exchange_all(
        &self,
        requests: &[&ModelRequest],
        allowance: &CallAllowance,
        caller_deadline: Option<Instant>,
    ) -> Vec<Exchange> {
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
                            allowance: allowance.clone(),
                        };
                        let limit = limit.clone();
                        self.runtime.spawn(async move {
                            let _permit = limit.acquire_owned().await;
                            let own = Duration::from_secs_f64(sender.config.query_deadline_seconds);
                            let own = Instant::now() + own;
                            let deadline = caller_deadline.map_or(own, |d| d.min(own));
                            match body {
                                Ok(body) => sender.send(body, i as u64, deadline).await,
                                Err(e) => Exchange::unsent(e),
                            }
                        })
                    })
                    .collect();
                let mut out = Vec::with_capacity(handles.len());
                for handle in handles {
                    out.push(handle.await.unwrap_or_else(|e| {
                        // A task that panicked may have sent its request:
                        // the call it held stays spent.
                        Exchange {
                            answer: Err(ModelError::Transport(format!(
                                "the request task failed: {e}"
                            ))),
                            calls: 1,
                            seconds: 0.0,
                        }
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

/// Follows a redirect only to the origin (scheme, host and port) of the
/// configured URL, and at most [`MAX_REDIRECTS`] in a row. Another origin
/// would be sent the prompt (a 307 re-sends the body) and its answer would
/// be trusted and cached as this server's; refusing is the only safe
/// answer, and an OpenAI-compatible API has no reason to send a client
/// elsewhere.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let Some(first) = attempt.previous().first() else {
            return attempt.stop();
        };
        if attempt.url().origin() != first.origin() {
            let refusal = format!(
                "refused a redirect to another origin ({} from {})",
                verifine_base::text::sanitize(attempt.url().as_str(), 120),
                first.origin().ascii_serialization()
            );
            return attempt.error(refusal);
        }
        if attempt.previous().len() > MAX_REDIRECTS {
            return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
        }
        attempt.follow()
    })
}
