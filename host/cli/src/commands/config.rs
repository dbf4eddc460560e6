//! The user's TOML config for scoring: which plugins, their own tables, limits.
//!
//! ```toml
//! [rubric]
//! plugin = "math-answer"          # a built-in name or a path to a .wasm
//! config = { format_weight = 0.2, correct_weight = 0.8 }
//!
//! [aggregator]
//! plugin = "weighted-sum"
//!
//! [limits]
//! call_timeout_ms = 10000
//! memory_mib = 256
//!
//! [scoring]
//! batch_size = 64
//! threads = 2
//! ```
//! Other top-level tables are left to other commands.

use anyhow::{Context as _, Result};
use serde::Deserialize;
use std::path::Path;
use verifine_runtime::Limits;

pub use verifine_runtime::PluginSlot;

/// Batching and parallelism of `verifine score`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScoringOptions {
    /// Samples per plugin call; the sandbox is crossed once per batch.
    pub batch_size: usize,
    /// Worker threads; 0 means one per core.
    pub threads: usize,
}

impl Default for ScoringOptions {
    fn default() -> Self {
        ScoringOptions {
            batch_size: 64,
            threads: 0,
        }
    }
}

/// The parts of a config file that scoring reads.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ScoreConfig {
    /// `[rubric]`; `--rubric` replaces its plugin but keeps its config.
    pub rubric: Option<PluginSlot>,
    /// `[aggregator]`; when set, it decides every total, not only missing ones.
    pub aggregator: Option<PluginSlot>,
    /// `[limits]`: sandbox limits of every plugin instance.
    #[serde(default)]
    pub limits: Limits,
    /// `[scoring]`: batching and worker threads.
    #[serde(default)]
    pub scoring: ScoringOptions,
}

impl ScoreConfig {
    /// Reads a TOML file; errors name the file (and the line, from toml's message).
    pub fn load(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("invalid config {}", path.display()))
    }
}
