//! The host side of `judge-model`: plugins ask questions, the host decides
//! which model answers. The runtime knows no backend (no network, no
//! tokio of its own): whoever builds the [`crate::Runtime`] hands it a
//! [`JudgeModels`] (the `verifine-judge` crate's HTTP and local backends),
//! and every plugin instance of that runtime asks through it. Without one,
//! every query answers "no judge model configured".

use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The judge name a query gets when it names none (contract 0.1 cannot).
pub const DEFAULT_JUDGE: &str = "judge";

/// One question for a judge model, independent of the contract version it
/// came through.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// A configured judge name (`judge`, `golden-1` …).
    pub judge: String,
    /// The system message, if any.
    pub system: Option<String>,
    /// The user message.
    pub prompt: String,
    /// Most tokens in the answer.
    pub max_tokens: u32,
    /// Sampling temperature (`None`: the backend's default).
    pub temperature: Option<f32>,
    /// Strings that end the answer.
    pub stop: Vec<String>,
    /// A JSON schema the answer must follow, as JSON text.
    pub json_schema: Option<String>,
    /// Top-k log-probabilities per answer token (0: none).
    pub top_logprobs: u32,
    /// When not empty, the answer is exactly one of these (a local model
    /// scores each and takes the likeliest; an HTTP backend asks for a
    /// JSON string enum). Empty: free text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<String>,
}

impl ModelRequest {
    /// A request to the default judge with the backend's defaults.
    pub fn new(prompt: impl Into<String>, max_tokens: u32) -> Self {
        ModelRequest {
            judge: DEFAULT_JUDGE.to_string(),
            system: None,
            prompt: prompt.into(),
            max_tokens,
            temperature: None,
            stop: Vec::new(),
            json_schema: None,
            top_logprobs: 0,
            choices: Vec::new(),
        }
    }
}

/// Tokens a call used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Prompt tokens.
    pub input: u64,
    /// Of those, served from a prompt cache (cheaper, or free).
    pub cached_input: u64,
    /// Answer tokens.
    pub output: u64,
}

impl std::ops::AddAssign for TokenUsage {
    fn add_assign(&mut self, other: TokenUsage) {
        self.input += other.input;
        self.cached_input += other.cached_input;
        self.output += other.output;
    }
}

/// One answer token's log-probability and its strongest alternatives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    /// The token as text.
    pub token: String,
    /// Its natural-log probability.
    pub logprob: f64,
    /// The top alternatives (token, log-probability), strongest first.
    pub top: Vec<(String, f64)>,
}

/// A judge model's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelAnswer {
    /// The answer text (invalid UTF-8 from a server is replaced, not fatal).
    pub text: String,
    /// Per-token log-probabilities, when asked for.
    pub logprobs: Vec<TokenLogprob>,
    /// Tokens used (zero when served from the host's cache).
    pub usage: TokenUsage,
    /// The model that answered, as the backend names it.
    pub model: String,
    /// Seconds the answer took (0 from the host's cache).
    pub seconds: f64,
    /// Served from the host's disk cache.
    pub cached: bool,
}

/// Why one judge-model query got no answer. A failure of one query, never
/// of the batch; it reaches the plugin as its text (the contract's
/// `result<_, string>`), so each variant says what went wrong in words an
/// author can act on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// The runtime was built without judge models.
    #[error("no judge model configured")]
    NotConfigured,
    /// The query names a judge the config does not have.
    #[error("no judge named {name:?} ({})", known_judges(.known))]
    UnknownJudge {
        /// The name the query gave.
        name: String,
        /// The configured names.
        known: Vec<String>,
    },
    /// The judge's budget (tokens, queries or cost) is spent.
    #[error("{0}")]
    OverBudget(String),
    /// The query itself cannot be asked (a schema that is not JSON, a
    /// prompt with no tokens, one longer than the model's context).
    #[error("{0}")]
    BadQuery(String),
    /// The backend could not be reached or did not answer in time.
    #[error("{0}")]
    Transport(String),
    /// The backend answered something unusable (not JSON, not one of the
    /// offered choices, over the size limit).
    #[error("{0}")]
    BadAnswer(String),
    /// The local model failed while running.
    #[error("the model failed: {0}")]
    Model(String),
    /// The request it was for has ended (abandoned or past its deadline),
    /// so nothing was asked.
    #[error("not asked: the request it was for has ended (abandoned or past its deadline)")]
    RequestEnded,
    /// A backend returned fewer answers than questions (a backend bug).
    #[error("unanswered")]
    Unanswered,
}

fn known_judges(known: &[String]) -> String {
    match known.is_empty() {
        true => "none is configured".to_string(),
        false => format!("configured: {}", known.join(", ")),
    }
}

/// Answers judge-model queries for plugins. Called from inside a plugin
/// call, so it blocks; a batch is answered together (a backend may send it
/// concurrently). Never fails as a whole: each query gets its answer or
/// its error, in order.
pub trait JudgeModels: Send + Sync {
    /// Answers `requests` for `plugin` (named for logs and cost records).
    fn ask(&self, plugin: &str, requests: &[ModelRequest]) -> Vec<Result<ModelAnswer, ModelError>>;

    /// As [`JudgeModels::ask`], but what is not answered by `deadline` (the
    /// caller's: a server request's) fails then, retries and waits included.
    /// Backends without a deadline of their own answer as `ask` does.
    fn ask_before(
        &self,
        plugin: &str,
        requests: &[ModelRequest],
        deadline: std::time::Instant,
    ) -> Vec<Result<ModelAnswer, ModelError>> {
        let _ = deadline;
        self.ask(plugin, requests)
    }
}

/// What a runtime without judge models answers.
pub struct NoJudgeModels;

impl JudgeModels for NoJudgeModels {
    fn ask(
        &self,
        _plugin: &str,
        requests: &[ModelRequest],
    ) -> Vec<Result<ModelAnswer, ModelError>> {
        requests
            .iter()
            .map(|_| Err(ModelError::NotConfigured))
            .collect()
    }
}

/// The judge models a runtime's plugins share.
pub type SharedJudgeModels = Arc<dyn JudgeModels>;
