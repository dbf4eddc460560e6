//! The host's functions, as plain Rust calls.

use crate::__private::rubric::verifine::plugin::host;
use crate::{JudgeAnswer, JudgeQuery, LogLevel, ModelQuery};

/// Writes to the host's log (tagged with the plugin's name by the host).
pub fn log(level: LogLevel, message: &str) {
    host::log(level, message);
}

/// Asks the host's judge model. One answer or error per query, in order.
/// Until a model backend is configured the host answers every query with
/// "no judge model configured", so plugins should fall back or report it.
pub fn judge_model(queries: &[ModelQuery]) -> Vec<Result<String, String>> {
    host::judge_model(queries)
}

/// Asks the host's named judges (contract 0.2): each query names its judge
/// (none: `judge`) and may constrain the answer to choices, ask for
/// log-probabilities, set temperature, stop strings and a JSON schema. One
/// answer or error per query, in order; the host batches, caches and
/// enforces budgets.
pub fn ask_judges(queries: &[JudgeQuery]) -> Vec<Result<JudgeAnswer, String>> {
    host::ask_judges(queries)
}

impl JudgeQuery {
    /// A question for the default judge with the backend's defaults.
    pub fn new(prompt: impl Into<String>, max_tokens: u32) -> Self {
        JudgeQuery {
            judge: None,
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

    /// Asks the judge configured under `name` instead.
    pub fn to_judge(mut self, name: impl Into<String>) -> Self {
        self.judge = Some(name.into());
        self
    }

    /// Sets the system message.
    pub fn with_system(mut self, system: impl Into<String>) -> Self {
        self.system = Some(system.into());
        self
    }

    /// Sets the sampling temperature (0: greedy).
    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = Some(temperature);
        self
    }

    /// The answer must be one of `choices` (e.g. `["YES", "NO"]`); its
    /// first log-probability entry then holds each choice's probability.
    pub fn choosing(mut self, choices: &[&str]) -> Self {
        self.choices = choices.iter().map(|c| c.to_string()).collect();
        self
    }

    /// Asks for the top `k` alternatives' log-probabilities per token.
    pub fn with_top_logprobs(mut self, k: u32) -> Self {
        self.top_logprobs = k;
        self
    }

    /// The answer must follow this JSON schema (JSON text).
    pub fn with_json_schema(mut self, schema: impl Into<String>) -> Self {
        self.json_schema = Some(schema.into());
        self
    }
}

impl JudgeAnswer {
    /// The probability the judge gave `choice` (an answer to a query with
    /// choices, or the first token's alternatives otherwise).
    pub fn probability_of(&self, choice: &str) -> Option<f64> {
        let first = self.logprobs.first()?;
        first
            .top
            .iter()
            .find(|(token, _)| token.trim().eq_ignore_ascii_case(choice))
            .map(|(_, logprob)| logprob.exp())
    }
}
