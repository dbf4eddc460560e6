//! One query's attempts against the server: each takes a call from the
//! budget before it is sent (the first was taken when the query was
//! admitted), runs for at most what is left of the query's deadline, and
//! reads at most `max_response_bytes` of the answer. A wait (backoff or
//! `Retry-After`) that would pass the deadline ends the query at once.

use super::Exchange;
use super::wire::{parse_answer, snippet};
use crate::budget::CallAllowance;
use crate::config::HttpConfig;
use std::sync::Arc;
use std::time::{Duration, Instant};
use verifine_base::SplitMix64;
use verifine_runtime::ModelError;

/// The most of an error response's body read: only its start is shown.
const ERROR_BODY_BYTES: u64 = 16 * 1024;

/// The longest `Retry-After` honoured at all; the query's deadline usually
/// ends a wait long before.
const MAX_RETRY_AFTER_SECONDS: f64 = 300.0;

/// What one request task needs.
pub(super) struct Sender {
    pub(super) client: reqwest::Client,
    pub(super) url: Arc<str>,
    pub(super) api_key: Option<Arc<str>>,
    pub(super) config: Arc<HttpConfig>,
    pub(super) allowance: CallAllowance,
}

/// Whether a failed attempt is worth repeating, and how long the server
/// asked us to wait.
enum Failure {
    Retry(String, Option<Duration>),
    Final(ModelError),
}

impl Sender {
    /// Attempts until an answer, a final failure, the last retry, the
    /// budget or the deadline, whichever comes first.
    pub(super) async fn send(&self, body: String, stream: u64, deadline: Instant) -> Exchange {
        let started = Instant::now();
        let allowed = deadline.saturating_duration_since(started);
        let mut rng = SplitMix64::new(stream ^ 0x4A17_7E55);
        let mut calls = 0;
        let reason = loop {
            // A retry was only scheduled with time left, and its call is
            // already taken: it is sent however little remains.
            let left = deadline.saturating_duration_since(Instant::now());
            if calls == 0 && left.is_zero() {
                // Only a caller's deadline can pass while a query waits
                // for its turn: its own starts when its turn comes.
                break ModelError::Transport(
                    "the caller's deadline passed before the query's turn came; not sent".into(),
                );
            }
            calls += 1;
            let per_attempt = Duration::from_secs_f64(self.config.timeout_seconds);
            let failure =
                match tokio::time::timeout(left.min(per_attempt), self.attempt(&body)).await {
                    Ok(Ok(bytes)) => {
                        let seconds = started.elapsed().as_secs_f64();
                        return Exchange {
                            answer: parse_answer(&bytes, &self.config.model, seconds),
                            calls,
                            seconds,
                        };
                    }
                    Ok(Err(failure)) => failure,
                    Err(_) if left < per_attempt => Failure::Final(ModelError::Transport(format!(
                        "timed out at the query's deadline ({:.1} s)",
                        allowed.as_secs_f64()
                    ))),
                    Err(_) => Failure::Retry(self.timed_out(), None),
                };
            let (message, wait) = match failure {
                Failure::Final(message) => break message,
                Failure::Retry(message, retry_after) => {
                    let wait = retry_after.unwrap_or_else(|| {
                        let base = self
                            .config
                            .backoff_ms
                            .saturating_mul(1 << (calls - 1).min(16));
                        Duration::from_millis(base + rng.below(base.max(1) as usize) as u64)
                    });
                    (message, wait)
                }
            };
            if calls > u64::from(self.config.retries) {
                break ModelError::Transport(message);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if wait >= left {
                break ModelError::Transport(format!(
                    "{message}; not retried: waiting {:.1} s would pass the query's deadline \
                     ({:.1} s left of {:.1} s)",
                    wait.as_secs_f64(),
                    left.as_secs_f64(),
                    allowed.as_secs_f64()
                ));
            }
            if let Err(refusal) = self.allowance.take() {
                break ModelError::Transport(format!("{message}; not retried: {refusal}"));
            }
            tokio::time::sleep(wait).await;
        };
        let after = format!(
            "(after {calls} attempt{})",
            if calls == 1 { "" } else { "s" }
        );
        Exchange {
            answer: Err(match reason {
                ModelError::Transport(m) => ModelError::Transport(format!("{m} {after}")),
                ModelError::BadAnswer(m) => ModelError::BadAnswer(format!("{m} {after}")),
                other => other,
            }),
            calls,
            seconds: started.elapsed().as_secs_f64(),
        }
    }

    async fn attempt(&self, body: &str) -> Result<Vec<u8>, Failure> {
        let mut request = self
            .client
            .post(&*self.url)
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let mut response = request.send().await.map_err(|e| self.transport(e))?;
        let status = response.status();
        if status.is_success() {
            let cap = self.config.max_response_bytes;
            if let Some(length) = response.content_length().filter(|&n| n > cap) {
                return Err(Failure::Final(ModelError::BadAnswer(format!(
                    "the answer is {length} bytes, over max_response_bytes = {cap}; not read"
                ))));
            }
            let (bytes, cut) = read_capped(&mut response, cap)
                .await
                .map_err(|e| self.transport(e))?;
            if cut {
                return Err(Failure::Final(ModelError::BadAnswer(format!(
                    "the answer is over max_response_bytes = {cap}; not read further"
                ))));
            }
            return Ok(bytes);
        }
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| Duration::from_secs_f64(s.min(MAX_RETRY_AFTER_SECONDS)));
        let cap = ERROR_BODY_BYTES.min(self.config.max_response_bytes);
        let (bytes, _) = read_capped(&mut response, cap)
            .await
            .map_err(|e| self.transport(e))?;
        let message = format!("HTTP {status}: {}", snippet(&bytes));
        if status.as_u16() == 429 || status.is_server_error() {
            Err(Failure::Retry(message, retry_after))
        } else {
            Err(Failure::Final(ModelError::Transport(message)))
        }
    }

    fn timed_out(&self) -> String {
        format!("timed out after {} s", self.config.timeout_seconds)
    }

    fn transport(&self, e: reqwest::Error) -> Failure {
        if e.is_redirect() {
            // The policy's reason is the error's source.
            let reason =
                std::error::Error::source(&e).map_or_else(|| e.to_string(), ToString::to_string);
            Failure::Final(ModelError::Transport(format!(
                "request to {}: {reason}",
                self.url
            )))
        } else if e.is_timeout() {
            Failure::Retry(self.timed_out(), None)
        } else if e.is_connect() || e.is_request() || e.is_body() {
            Failure::Retry(format!("connection to {} failed: {e}", self.url), None)
        } else {
            Failure::Final(ModelError::Transport(format!(
                "request to {} failed: {e}",
                self.url
            )))
        }
    }
}

/// Reads a body up to `cap` bytes, chunk by chunk, and says whether there
/// was more: what is beyond the cap is never read (the connection is
/// dropped with the response), so memory stays within the cap and one
/// chunk.
async fn read_capped(
    response: &mut reqwest::Response,
    cap: u64,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = cap - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}
