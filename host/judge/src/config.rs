//! `judges.toml`: one table per judge name (`[judges.judge]`,
//! `[judges.golden-1]` …), each naming its backend, its price per million
//! tokens and its budget. API keys are never in the file: a backend names
//! the environment variable that holds one.

use crate::error::{JudgeError, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Every configured judge, by name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgesConfig {
    /// The judges plugins may name (`judge` answers queries that name none).
    #[serde(default)]
    pub judges: BTreeMap<String, JudgeConfig>,
    /// Where answers are cached (`None`: no disk cache).
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
}

/// One judge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeConfig {
    /// Who answers.
    pub backend: BackendConfig,
    /// What its tokens cost.
    #[serde(default)]
    pub price: Price,
    /// When to stop asking.
    #[serde(default)]
    pub budget: Budget,
}

/// A judge's backend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum BackendConfig {
    /// An OpenAI-compatible chat-completions server (OpenAI, vLLM,
    /// llama.cpp's `llama-server` …).
    OpenaiHttp(HttpConfig),
    /// A GGUF model run in this process by candle (needs the `local`
    /// feature, on in the default `verifine` build).
    LocalGguf(LocalConfig),
    /// A Hugging Face checkpoint directory (`config.json`, `*.safetensors`,
    /// `tokenizer.json`; llama or qwen2) run in this process by candle.
    LocalSafetensors(LocalConfig),
    /// A student judge distilled by `verifine judge distill` (its run
    /// directory); answers the row-rubric grader's queries on the items it
    /// was trained on.
    Student {
        /// The directory holding `student.json` and `student.safetensors`.
        path: PathBuf,
    },
}

/// A local GGUF judge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalConfig {
    /// The `.gguf` file (llama, qwen2 or gemma3 architecture; SentencePiece
    /// or GPT-2 BPE vocabulary), or the checkpoint directory; relative paths are
    /// resolved against the config file.
    pub path: PathBuf,
    /// How the system and user messages become one prompt.
    #[serde(default)]
    pub template: PromptTemplate,
    /// Run on the first CUDA device (needs a `cuda` build).
    #[serde(default)]
    pub cuda: bool,
    /// Prompts whose KV caches are kept for prefix reuse (0: none).
    #[serde(default = "defaults::prefix_cache_prompts")]
    pub prefix_cache_prompts: usize,
    /// How the weight matrices multiply token rows on the CPU.
    #[serde(default)]
    pub weight_products: WeightProducts,
}

/// How a local judge multiplies its weights on the CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WeightProducts {
    /// GGUF's 32-value block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) as
    /// integer products with the token rows quantized to bytes, as
    /// llama.cpp does, where the CPU has AVX-512 VNNI; elsewhere `float`.
    #[default]
    Int8,
    /// Float products: blocks candle has no fast kernel for are widened to
    /// f32 (the judge's products before integer ones; for comparisons).
    Float,
}

/// Prompt formats for local models.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PromptTemplate {
    /// The model's own chat template (GGUF `tokenizer.chat_template`,
    /// `chat_template.jinja`, `tokenizer_config.json`), rendered as
    /// transformers renders it; ChatML when the model ships none.
    #[default]
    Model,
    /// `<|im_start|>role\n…<|im_end|>` turns, ending with the assistant's.
    Chatml,
    /// The system message, a blank line, the user message.
    Plain,
}

/// An OpenAI-compatible HTTP backend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// The API root, e.g. `http://127.0.0.1:8080/v1` (`/chat/completions`
    /// is appended).
    pub base_url: String,
    /// The model name sent with every request.
    pub model: String,
    /// The environment variable holding the API key (`None`: no key sent).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Requests in flight at once.
    #[serde(default = "defaults::concurrency")]
    pub concurrency: usize,
    /// Seconds one request may take before it counts as failed.
    #[serde(default = "defaults::timeout_seconds")]
    pub timeout_seconds: f64,
    /// Further attempts after a 429, a 5xx, a timeout or a broken connection.
    #[serde(default = "defaults::retries")]
    pub retries: u32,
    /// The first retry waits about this long; each later one twice as long,
    /// plus up to as much again of jitter (a `Retry-After` header wins).
    #[serde(default = "defaults::backoff_ms")]
    pub backoff_ms: u64,
    /// The most time one query may take, all attempts, waits and
    /// `Retry-After`s together (a caller's own earlier deadline wins):
    /// without it, retries and a server's `Retry-After` would stretch a
    /// query to many minutes. Each attempt gets at most what is left.
    #[serde(default = "defaults::query_deadline_seconds")]
    pub query_deadline_seconds: f64,
    /// The largest answer body read, in bytes: a larger one fails the
    /// query (not retried) and is not read further, so a server cannot
    /// make the host hold an arbitrarily large answer in memory.
    #[serde(default = "defaults::max_response_bytes")]
    pub max_response_bytes: u64,
    /// Sent with every query that names no temperature of its own: a
    /// server's default samples, and a grader's verdicts must not depend
    /// on a draw (0: greedy).
    #[serde(default)]
    pub temperature: f32,
}

/// USD per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Prompt tokens not served from a prompt cache.
    #[serde(default)]
    pub input: f64,
    /// Prompt tokens served from a prompt cache.
    #[serde(default)]
    pub cached_input: f64,
    /// Answer tokens.
    #[serde(default)]
    pub output: f64,
}

/// Limits per run; a judge that reaches one stops asking and every later
/// query fails with the reason (the run's failure policy decides what that
/// sample's reward becomes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Most requests sent.
    #[serde(default)]
    pub max_calls: Option<u64>,
    /// Most tokens (input + output).
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Most USD by the price table.
    #[serde(default)]
    pub max_usd: Option<f64>,
}

mod defaults {
    pub fn concurrency() -> usize {
        4
    }
    pub fn timeout_seconds() -> f64 {
        60.0
    }
    pub fn retries() -> u32 {
        3
    }
    pub fn backoff_ms() -> u64 {
        500
    }
    pub fn query_deadline_seconds() -> f64 {
        120.0
    }
    pub fn max_response_bytes() -> u64 {
        4 * 1024 * 1024
    }
    pub fn prefix_cache_prompts() -> usize {
        8
    }
}

impl JudgesConfig {
    /// Reads and checks a `judges.toml`.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| verifine_base::FileError::io("reading", path, e))?;
        let mut config = Self::parse(&text, &path.display().to_string())?;
        config.resolve_paths(path.parent().unwrap_or(Path::new(".")));
        Ok(config)
    }

    /// Parses and checks a config's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        let config: JudgesConfig =
            toml::from_str(text).map_err(|e| JudgeError::Config(format!("{origin}: {e}")))?;
        config.validate(origin)?;
        Ok(config)
    }

    /// Resolves relative model paths against `dir` (the config file's
    /// folder; [`JudgesConfig::load`] does this).
    pub fn resolve_paths(&mut self, dir: &Path) {
        for judge in self.judges.values_mut() {
            let path = match &mut judge.backend {
                BackendConfig::LocalGguf(local) | BackendConfig::LocalSafetensors(local) => {
                    &mut local.path
                }
                BackendConfig::Student { path } => path,
                BackendConfig::OpenaiHttp(_) => continue,
            };
            if path.is_relative() {
                *path = dir.join(&*path);
            }
        }
    }

    fn validate(&self, origin: &str) -> Result<()> {
        let fail =
            |name: &str, m: String| Err(JudgeError::Config(format!("{origin}: judge {name}: {m}")));
        for (name, judge) in &self.judges {
            if let BackendConfig::OpenaiHttp(http) = &judge.backend {
                check_http(http).or_else(|m| fail(name, m))?;
            }
            let p = judge.price;
            if [p.input, p.cached_input, p.output]
                .iter()
                .any(|v| !v.is_finite() || *v < 0.0)
            {
                return fail(name, "prices must be finite and not negative".into());
            }
            if judge
                .budget
                .max_usd
                .is_some_and(|u| !u.is_finite() || u < 0.0)
            {
                return fail(
                    name,
                    "budget.max_usd must be finite and not negative".into(),
                );
            }
        }
        Ok(())
    }
}

fn check_http(http: &HttpConfig) -> std::result::Result<(), String> {
    if http.concurrency == 0 {
        return Err("concurrency must be at least 1".into());
    }
    if !(http.timeout_seconds.is_finite() && http.timeout_seconds > 0.0) {
        return Err(format!(
            "timeout_seconds {} must be positive",
            http.timeout_seconds
        ));
    }
    if !(http.query_deadline_seconds.is_finite() && http.query_deadline_seconds > 0.0) {
        return Err(format!(
            "query_deadline_seconds {} must be positive",
            http.query_deadline_seconds
        ));
    }
    if http.max_response_bytes == 0 {
        return Err("max_response_bytes must be at least 1".into());
    }
    if !http.base_url.starts_with("http://") && !http.base_url.starts_with("https://") {
        return Err(format!(
            "base_url {:?} is not an http(s) URL",
            http.base_url
        ));
    }
    Ok(())
}
