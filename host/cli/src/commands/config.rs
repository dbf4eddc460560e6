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

use crate::sandbox::judged_runtime;
use anyhow::{Context as _, Result};
use serde::Deserialize;
use std::path::Path;
use std::sync::Arc;
use verifine_base::PluginSpec;
use verifine_judge::Judges;
use verifine_runtime::{Limits, Runtime};

pub use verifine_runtime::PluginSetting;

/// Batching and parallelism of `verifine score`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ScoringOptions {
    /// Samples per plugin call; the sandbox is crossed once per batch.
    pub batch_size: usize,
    /// Worker threads; 0 means one per core.
    pub threads: usize,
    /// Row ids held in memory (about 48 bytes each) before they spill to a
    /// scratch file in the temporary directory; a repeated id is found
    /// either way.
    pub ids_in_memory: usize,
}

impl Default for ScoringOptions {
    fn default() -> Self {
        ScoringOptions {
            batch_size: 64,
            threads: 0,
            ids_in_memory: verifine_base::SeenIds::DEFAULT_LIMIT,
        }
    }
}

/// The parts of a config file that scoring reads.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ScoreConfig {
    /// `[rubric]`; `--rubric` replaces its plugin but keeps its config.
    pub rubric: Option<PluginSetting>,
    /// `[aggregator]`; when set, it decides every total, not only missing ones.
    pub aggregator: Option<PluginSetting>,
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

    /// The rubric and aggregator slots to load: a `--rubric` / `--aggregator`
    /// flag replaces the config's plugin and keeps its table.
    pub fn slots(
        &self,
        rubric: Option<&PluginSpec>,
        aggregator: Option<&PluginSpec>,
    ) -> Result<(PluginSetting, Option<PluginSetting>)> {
        let choose = |flag: Option<&PluginSpec>, slot: Option<&PluginSetting>| match (flag, slot) {
            (Some(plugin), Some(slot)) => Some(PluginSetting {
                plugin: plugin.clone(),
                ..slot.clone()
            }),
            (Some(plugin), None) => Some(PluginSetting::new(plugin.clone())),
            (None, slot) => slot.cloned(),
        };
        let rubric = choose(rubric, self.rubric.as_ref())
            .context("no rubric: pass --rubric NAME|PATH or set [rubric] plugin in the config")?;
        Ok((rubric, choose(aggregator, self.aggregator.as_ref())))
    }

    /// The sandbox with the config's limits (see [`crate::sandbox::judged_runtime`]).
    pub fn runtime(
        &self,
        judges: Option<&Path>,
        allow_native: bool,
    ) -> Result<(Runtime, Option<Arc<Judges>>)> {
        judged_runtime(self.limits, judges, allow_native)
    }
}
