//! The server's tables of a config file, beside `score`'s `[rubric]`,
//! `[aggregator]` and `[limits]`:
//!
//! ```toml
//! [serve]
//! workers = 0              # scoring threads; 0: one per core
//! io_threads = 0           # async runtime threads; 0: one per core
//! batch_size = 64          # samples per plugin call within a request
//! max_in_flight = 512      # scoring requests at once; more get 503 + Retry-After
//! max_body_bytes = 16777216
//! deadline_ms = 60000      # per request, from arrival to answer (504 after)
//! on_failure = "zero"      # or "error": a failed sample makes the request 422
//! swap_interval_ms = 500   # time between swap points
//!
//! [hot_swap]
//! keep_revisions = 5
//! canary = "canary.jsonl"  # labelled rows the gate checks candidates on
//! watch_dir = "incoming"   # <dir>/rubric/*.wasm, <dir>/aggregator/*.wasm
//! gate = { canary_margin = 0.0, canary_threshold = 0.5, shadow_steps = 20, shadow_margin = 0.2 }
//! ```
//! (`shadow_steps` counts swap points here.)

use crate::http::RequestLimits;
use crate::live::SwapOptions;
use crate::protocol::FailurePolicy;
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;
use verifine_hotswap::gate::{CanaryCase, GateConfig};

/// `[serve]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeTable {
    /// Scoring threads; 0: one per core.
    pub workers: usize,
    /// Async runtime threads; 0: one per core.
    pub io_threads: usize,
    /// Samples per plugin call within a request.
    pub batch_size: usize,
    /// Scoring requests at once.
    pub max_in_flight: usize,
    /// Largest accepted body.
    pub max_body_bytes: usize,
    /// Per-request deadline.
    pub deadline_ms: u64,
    /// What a failed sample's reward becomes.
    pub on_failure: FailurePolicy,
    /// Time between swap points.
    pub swap_interval_ms: u64,
}

impl Default for ServeTable {
    fn default() -> Self {
        let limits = RequestLimits::default();
        ServeTable {
            workers: 0,
            io_threads: 0,
            batch_size: 64,
            max_in_flight: limits.max_in_flight,
            max_body_bytes: limits.max_body_bytes,
            deadline_ms: limits.deadline.as_millis() as u64,
            on_failure: FailurePolicy::Zero,
            swap_interval_ms: 500,
        }
    }
}

impl ServeTable {
    /// The request limits it sets.
    pub fn limits(&self) -> RequestLimits {
        RequestLimits {
            max_body_bytes: self.max_body_bytes,
            deadline: Duration::from_millis(self.deadline_ms),
            max_in_flight: self.max_in_flight,
        }
    }
}

/// `[hot_swap]` as the server reads it.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SwapTable {
    /// Previous revisions kept per slot.
    pub keep_revisions: usize,
    /// Labelled canary rows (score input rows with a boolean `label`).
    pub canary: Option<PathBuf>,
    /// A directory watched for candidates.
    pub watch_dir: Option<PathBuf>,
    /// The canary comparison and the watch after a promotion.
    pub gate: GateConfig,
}

impl Default for SwapTable {
    fn default() -> Self {
        SwapTable {
            keep_revisions: 5,
            canary: None,
            watch_dir: None,
            gate: GateConfig::default(),
        }
    }
}

impl SwapTable {
    /// The swap options, with the canary rows read (errors name `file:line`).
    pub fn options(&self, interval_ms: u64) -> verifine_runtime::error::Result<SwapOptions> {
        let canary = match &self.canary {
            Some(path) => verifine_runtime::rows::read_labelled(path, self.gate.canary_threshold)?
                .into_iter()
                .map(|(sample, label)| CanaryCase { sample, label })
                .collect(),
            None => Vec::new(),
        };
        Ok(SwapOptions {
            keep_revisions: self.keep_revisions,
            gate: self.gate.clone(),
            canary,
            watch_dir: self.watch_dir.clone(),
            interval: Duration::from_millis(interval_ms),
        })
    }
}

/// The server's tables of a config file (other tables are left to `score`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ServeFile {
    /// `[serve]`.
    #[serde(default)]
    pub serve: ServeTable,
    /// `[hot_swap]`.
    #[serde(default)]
    pub hot_swap: SwapTable,
}
