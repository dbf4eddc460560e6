//! Judge models for plugins: the host answers `judge-model` queries with
//! the judge each query names, from the disk cache when it can, within the
//! judge's budget, and counts what every judge spent. The runtime sees only
//! its [`verifine_runtime::JudgeModels`] trait; this crate implements it.

#![warn(missing_docs)]

pub mod budget;
pub mod cache;
pub mod config;
pub mod cost;
pub mod error;
pub mod http;
#[cfg(feature = "local")]
pub mod local;
pub mod screen;
pub mod scripted_server;
#[cfg(feature = "local")]
pub mod student;

pub use config::{
    BackendConfig, Budget, HttpConfig, JudgeConfig, JudgesConfig, LocalConfig, Price,
    PromptTemplate,
};
pub use cost::Ledger;
pub use error::{JudgeError, Result};

use budget::CallAllowance;
use cache::DiskCache;
use http::{Exchange, HttpBackend};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use verifine_runtime::judge_models::{JudgeModels, ModelAnswer, ModelRequest, TokenLogprob};

/// The configured judges, by name.
pub struct Judges {
    judges: BTreeMap<String, Judge>,
}

/// Who answers a judge's queries.
enum Backend {
    Http(HttpBackend),
    #[cfg(feature = "local")]
    Local(Box<local::LocalBackend>),
    #[cfg(feature = "local")]
    Student(Box<student::StudentBackend>),
}

impl Backend {
    fn new(config: &BackendConfig) -> Result<Self> {
        match config {
            BackendConfig::OpenaiHttp(http) => Ok(Backend::Http(HttpBackend::new(http)?)),
            #[cfg(feature = "local")]
            BackendConfig::LocalGguf(local) => {
                Ok(Backend::Local(Box::new(local::LocalBackend::new(local)?)))
            }
            #[cfg(feature = "local")]
            BackendConfig::LocalSafetensors(local) => Ok(Backend::Local(Box::new(
                local::LocalBackend::from_safetensors(local)?,
            ))),
            #[cfg(feature = "local")]
            BackendConfig::Student { path } => Ok(Backend::Student(Box::new(
                student::StudentBackend::new(path).map_err(JudgeError::Config)?,
            ))),
            #[cfg(not(feature = "local"))]
            BackendConfig::LocalGguf(LocalConfig { path, .. })
            | BackendConfig::LocalSafetensors(LocalConfig { path, .. })
            | BackendConfig::Student { path } => Err(JudgeError::Config(format!(
                "{}: this build has no local judges (build verifine-judge with the `local` feature)",
                path.display()
            ))),
        }
    }

    /// Local backends answer in turn and take no retries: the call each
    /// query was admitted with is all they spend, and they do not stop
    /// at a caller's deadline.
    fn exchange_all(
        &self,
        requests: &[&ModelRequest],
        allowance: &CallAllowance,
        deadline: Option<Instant>,
    ) -> Vec<Exchange> {
        match self {
            Backend::Http(http) => http.exchange_all(requests, allowance, deadline),
            #[cfg(feature = "local")]
            Backend::Local(local) => local.exchange_all(requests),
            #[cfg(feature = "local")]
            Backend::Student(student) => student.exchange_all(requests),
        }
    }

    /// Local backends spend device time; an HTTP one waits on someone
    /// else's.
    fn is_local(&self) -> bool {
        !matches!(self, Backend::Http(_))
    }
}

/// What identifies a backend's answers in the disk cache.
fn cache_identity(config: &BackendConfig) -> (String, String) {
    match config {
        BackendConfig::OpenaiHttp(http) => (http.base_url.clone(), http.model.clone()),
        BackendConfig::LocalGguf(local) | BackendConfig::LocalSafetensors(local) => (
            format!("local:{}", local.path.display()),
            format!("{:?}", local.template),
        ),
        BackendConfig::Student { path } => (format!("student:{}", path.display()), String::new()),
    }
}

/// One judge: its backend, prices, budget and spending.
struct Judge {
    backend: Backend,
    base_url: String,
    model: String,
    price: Price,
    /// The ledger and budget, shared with the backend's request tasks.
    allowance: CallAllowance,
    cache: Option<DiskCache>,
}

impl Judges {
    /// Starts a client per judge (reading API keys from the environment).
    pub fn new(config: &JudgesConfig) -> Result<Self> {
        let mut judges = BTreeMap::new();
        let cache = config.cache_dir.clone().and_then(DiskCache::open);
        for (name, judge) in &config.judges {
            let (base_url, model) = cache_identity(&judge.backend);
            judges.insert(
                name.clone(),
                Judge {
                    backend: Backend::new(&judge.backend)?,
                    base_url,
                    model,
                    price: judge.price,
                    allowance: CallAllowance::new(
                        Arc::new(Mutex::new(Ledger::default())),
                        judge.budget,
                    ),
                    cache: cache.clone(),
                },
            );
        }
        Ok(Judges { judges })
    }

    /// What each judge has spent so far.
    pub fn ledgers(&self) -> BTreeMap<String, Ledger> {
        self.judges
            .iter()
            .map(|(name, judge)| (name.clone(), *judge.allowance.lock()))
            .collect()
    }

    /// The judge names, for messages.
    pub fn names(&self) -> Vec<String> {
        self.judges.keys().cloned().collect()
    }

    fn ask_by(
        &self,
        plugin: &str,
        requests: &[ModelRequest],
        deadline: Option<Instant>,
    ) -> Vec<std::result::Result<ModelAnswer, String>> {
        let mut answers: Vec<Option<std::result::Result<ModelAnswer, String>>> =
            vec![None; requests.len()];
        let mut by_judge: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, request) in requests.iter().enumerate() {
            by_judge.entry(request.judge.as_str()).or_default().push(i);
        }
        for (name, indices) in by_judge {
            let Some(judge) = self.judges.get(name) else {
                let known = if self.judges.is_empty() {
                    "none is configured".to_string()
                } else {
                    format!("configured: {}", self.names().join(", "))
                };
                for &i in &indices {
                    answers[i] = Some(Err(format!("no judge named {name:?} ({known})")));
                }
                continue;
            };
            let asked: Vec<&ModelRequest> = indices.iter().map(|&i| &requests[i]).collect();
            tracing::debug!(plugin, judge = name, queries = asked.len(), "judge-model");
            for (i, answer) in indices.into_iter().zip(judge.ask(&asked, deadline)) {
                answers[i] = Some(answer);
            }
        }
        answers
            .into_iter()
            .map(|a| a.unwrap_or_else(|| Err("unanswered".to_string())))
            .collect()
    }
}

impl JudgeModels for Judges {
    /// Queries end within their judge's `query_deadline_seconds`, or the
    /// caller's deadline when it is earlier (a plugin scoring for a server
    /// request: see `verifine_runtime::scoring_bounds`).
    fn ask(
        &self,
        plugin: &str,
        requests: &[ModelRequest],
    ) -> Vec<std::result::Result<ModelAnswer, String>> {
        self.ask_by(plugin, requests, None)
    }

    fn ask_before(
        &self,
        plugin: &str,
        requests: &[ModelRequest],
        deadline: Instant,
    ) -> Vec<std::result::Result<ModelAnswer, String>> {
        self.ask_by(plugin, requests, Some(deadline))
    }
}

impl Judge {
    /// Cache hits first; the rest are sent while the budget allows, each
    /// taking its first call under the same lock that checked the budget.
    fn ask(
        &self,
        requests: &[&ModelRequest],
        deadline: Option<Instant>,
    ) -> Vec<std::result::Result<ModelAnswer, String>> {
        // Keys only where there is a cache to look in.
        let keys: Vec<Option<String>> = requests
            .iter()
            .map(|r| {
                self.cache
                    .as_ref()
                    .map(|_| DiskCache::key(&self.base_url, &self.model, r))
            })
            .collect();
        let mut answers: Vec<Option<std::result::Result<ModelAnswer, String>>> =
            vec![None; requests.len()];
        let mut admitted = Vec::new();
        let mut ledger = self.allowance.lock();
        for (i, key) in keys.iter().enumerate() {
            let hit = self.cache.as_ref().zip(key.as_deref());
            if let Some(hit) = hit.and_then(|(cache, key)| cache.get(key)) {
                ledger.cache_hits += 1;
                answers[i] = Some(Ok(hit));
                continue;
            }
            // Token and USD budgets can only be checked against what was
            // spent already; calls are taken here, before anything is sent.
            match budget::take(&mut ledger, self.allowance.budget()) {
                Ok(()) => admitted.push(i),
                Err(reason) => {
                    answers[i] = Some(Err(reason));
                    ledger.failures += 1;
                }
            }
        }
        drop(ledger);
        let sent: Vec<&ModelRequest> = admitted.iter().map(|&i| requests[i]).collect();
        let exchanges = self.backend.exchange_all(&sent, &self.allowance, deadline);
        let mut ledger = self.allowance.lock();
        for (i, exchange) in admitted.into_iter().zip(exchanges) {
            // Retries took their calls as they went; only a query that
            // never reached the server gives back the call it was admitted
            // with.
            if exchange.calls == 0 {
                ledger.calls -= 1;
            }
            if self.backend.is_local() {
                ledger.device_seconds += exchange.seconds;
            }
            // Tokens of an answer that is then refused were still paid for.
            let usage = exchange.answer.as_ref().ok().map(|a| a.usage);
            let answer = exchange
                .answer
                .and_then(|answer| pick_choice(answer, &requests[i].choices));
            match (&answer, usage) {
                (Ok(answer), _) => {
                    ledger.record(answer.usage, exchange.seconds, &self.price);
                    if let (Some(cache), Some(key)) = (&self.cache, &keys[i]) {
                        cache.put(key, answer);
                    }
                }
                (Err(_), Some(usage)) => {
                    ledger.record(usage, exchange.seconds, &self.price);
                    ledger.failures += 1;
                }
                (Err(_), None) => {
                    ledger.seconds += exchange.seconds;
                    ledger.failures += 1;
                }
            }
            answers[i] = Some(answer);
        }
        answers
            .into_iter()
            .map(|a| a.unwrap_or_else(|| Err("unanswered".to_string())))
            .collect()
    }
}

/// An answer to a query with choices, as exactly one of them: the text
/// (or the JSON string an HTTP server was asked for, also inside a
/// markdown code fence or with its closing quote lost, as small models
/// and llama-server give it), trimmed and compared
/// without case. Anything else is the query's failure.
fn pick_choice(
    mut answer: ModelAnswer,
    choices: &[String],
) -> std::result::Result<ModelAnswer, String> {
    if choices.is_empty() {
        return Ok(answer);
    }
    let text = answer.text.trim();
    let unfenced = text
        .strip_prefix("```")
        .and_then(|t| t.strip_suffix("```"))
        .map_or(text, |t| t.trim_start_matches("json").trim());
    // A quote left open (the server's parser took the fence's end and the
    // quote with it) still names the choice.
    let unquoted = serde_json::from_str::<String>(unfenced)
        .unwrap_or_else(|_| unfenced.trim_matches('"').to_string());
    let unquoted = unquoted.trim();
    match choices.iter().find(|c| c.eq_ignore_ascii_case(unquoted)) {
        Some(choice) => {
            answer.text = choice.clone();
            answer.logprobs = choice_confidence(&answer.logprobs, choice, choices);
            Ok(answer)
        }
        None => Err(format!(
            "the answer {:?} is none of the choices {choices:?}",
            verifine_runtime::text::sanitize(text, 80)
        )),
    }
}

/// The log-probabilities of a constrained answer as a local judge gives
/// them: one entry, the choices' probabilities at the token where they
/// part ways (a server's answer starts with the quote of a JSON string,
/// whose probability is 1), renormalized over the choices, so `exp` of the
/// chosen one is the verdict's confidence. Empty (no confidence) when the
/// server's log-probabilities do not cover every choice at that token.
fn choice_confidence(
    logprobs: &[TokenLogprob],
    chosen: &str,
    choices: &[String],
) -> Vec<TokenLogprob> {
    let matches = |token: &str, choice: &str| {
        let token = token.trim().trim_matches('"');
        !token.is_empty() && choice.to_lowercase().starts_with(&token.to_lowercase())
    };
    let Some(step) = logprobs.iter().find(|t| matches(&t.token, chosen)) else {
        return Vec::new();
    };
    // A server reports the top tokens before its grammar masks them: a
    // choice missing there has no probability to compare, and then no
    // confidence is claimed.
    let candidates: Vec<(&str, f64)> = std::iter::once((step.token.as_str(), step.logprob))
        .chain(step.top.iter().map(|(t, lp)| (t.as_str(), *lp)))
        .collect();
    let scored: Vec<(String, f64)> = choices
        .iter()
        .map(|choice| {
            let best = candidates
                .iter()
                .filter(|(token, _)| matches(token, choice))
                .map(|(_, lp)| *lp)
                .fold(f64::NEG_INFINITY, f64::max);
            (choice.clone(), best)
        })
        .collect();
    if scored.iter().any(|(_, lp)| !lp.is_finite()) {
        return Vec::new();
    }
    let max = scored
        .iter()
        .map(|(_, lp)| *lp)
        .fold(f64::NEG_INFINITY, f64::max);
    let norm = max
        + scored
            .iter()
            .map(|(_, lp)| (lp - max).exp())
            .sum::<f64>()
            .ln();
    let mut top: Vec<(String, f64)> = scored.into_iter().map(|(c, lp)| (c, lp - norm)).collect();
    top.sort_by(|a, b| b.1.total_cmp(&a.1));
    let logprob = top
        .iter()
        .find(|(c, _)| c == chosen)
        .map_or(f64::NEG_INFINITY, |(_, lp)| *lp);
    vec![TokenLogprob {
        token: chosen.to_string(),
        logprob,
        top,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_choice_is_read_bare_quoted_or_fenced_and_nothing_else() {
        let choices = ["YES".to_string(), "NO".to_string()];
        let answer = |text: &str| ModelAnswer {
            text: text.into(),
            logprobs: Vec::new(),
            usage: verifine_runtime::judge_models::TokenUsage::default(),
            model: "m".into(),
            seconds: 0.0,
            cached: false,
        };
        for text in [
            "YES",
            " yes\n",
            "\"YES\"",
            "```json\n  \"YES\"\n```",
            "```\"yes\"```",
        ] {
            assert_eq!(
                pick_choice(answer(text), &choices).unwrap().text,
                "YES",
                "{text:?}"
            );
        }
        for text in [
            "",
            " \n \t",
            "```json\n\"YES",
            "YES NO",
            "```YES",
            "\"YESNO\"",
        ] {
            assert!(pick_choice(answer(text), &choices).is_err(), "{text:?}");
        }
    }

    fn step(token: &str, logprob: f64, top: &[(&str, f64)]) -> TokenLogprob {
        TokenLogprob {
            token: token.into(),
            logprob,
            top: top.iter().map(|(t, lp)| (t.to_string(), *lp)).collect(),
        }
    }

    #[test]
    fn a_servers_quoted_choice_gets_the_confidence_where_the_choices_part() {
        let choices = ["YES".to_string(), "NO".to_string()];
        // `"` then `YES`: the quote is certain; YES and NO compete after it.
        let answer = [
            step("\"", 0.0, &[("\"", 0.0)]),
            step(
                "YES",
                -0.5,
                &[("YES", -0.5), (" NO", -1.5), ("maybe", -2.0)],
            ),
            step("\"", 0.0, &[]),
        ];
        let confidence = choice_confidence(&answer, "YES", &choices);
        let p = confidence[0].logprob.exp();
        let expected = (-0.5f64).exp() / ((-0.5f64).exp() + (-1.5f64).exp());
        assert!((p - expected).abs() < 1e-12, "{p} vs {expected}");
        assert_eq!(confidence[0].top[1].0, "NO");
    }

    #[test]
    fn no_confidence_is_claimed_when_a_choice_is_missing_from_the_top_tokens() {
        let choices = ["YES".to_string(), "NO".to_string()];
        let answer = [step("N", -8.1, &[(" to", -0.8), ("$", -1.2)])];
        assert!(choice_confidence(&answer, "NO", &choices).is_empty());
    }
}
