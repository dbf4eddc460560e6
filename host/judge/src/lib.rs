//! Judge models for plugins: the host answers `judge-model` queries with
//! the judge each query names, from the disk cache when it can, within the
//! judge's budget, and counts what every judge spent. The runtime sees only
//! its [`verifine_runtime::JudgeModels`] trait; this crate implements it.

#![warn(missing_docs)]

pub mod asked;
pub mod budget;
pub mod cache;
mod choices;
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
    PromptTemplate, WeightProducts,
};
pub use cost::Ledger;
pub use error::{JudgeError, Result};

use budget::CallAllowance;
use cache::DiskCache;
use http::{Exchange, HttpBackend};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use verifine_runtime::judge_models::{JudgeModels, ModelAnswer, ModelError, ModelRequest};

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
                student::StudentBackend::new(path)
                    .map_err(|e| JudgeError::Config(e.to_string()))?,
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
    ) -> Vec<std::result::Result<ModelAnswer, ModelError>> {
        let mut answers: Vec<Option<std::result::Result<ModelAnswer, ModelError>>> =
            vec![None; requests.len()];
        let mut by_judge: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, request) in requests.iter().enumerate() {
            by_judge.entry(request.judge.as_str()).or_default().push(i);
        }
        for (name, indices) in by_judge {
            let Some(judge) = self.judges.get(name) else {
                for &i in &indices {
                    answers[i] = Some(Err(ModelError::UnknownJudge {
                        name: name.to_string(),
                        known: self.names(),
                    }));
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
            .map(|a| a.unwrap_or(Err(ModelError::Unanswered)))
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
    ) -> Vec<std::result::Result<ModelAnswer, ModelError>> {
        self.ask_by(plugin, requests, None)
    }

    fn ask_before(
        &self,
        plugin: &str,
        requests: &[ModelRequest],
        deadline: Instant,
    ) -> Vec<std::result::Result<ModelAnswer, ModelError>> {
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
    ) -> Vec<std::result::Result<ModelAnswer, ModelError>> {
        // Keys only where there is a cache to look in.
        let keys: Vec<Option<String>> = requests
            .iter()
            .map(|r| {
                self.cache
                    .as_ref()
                    .map(|_| DiskCache::key(&self.base_url, &self.model, r))
            })
            .collect();
        let mut answers: Vec<Option<std::result::Result<ModelAnswer, ModelError>>> =
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
                    answers[i] = Some(Err(ModelError::OverBudget(reason)));
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
                .and_then(|answer| choices::pick_choice(answer, &requests[i].choices));
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
            .map(|a| a.unwrap_or(Err(ModelError::Unanswered)))
            .collect()
    }
}
