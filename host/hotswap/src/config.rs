//! `[hot_swap]`: one table for every host that swaps revisions (`verifine
//! train` and `verifine serve`), with one set of defaults.

use crate::agent::AgentConfig;
use crate::gate::GateConfig;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// How a host keeps, checks and takes in revisions of its plugins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HotSwapConfig {
    /// Previous revisions kept per slot for rollback.
    pub keep_revisions: usize,
    /// Labelled canary cases (score input rows plus a boolean `label`);
    /// `None`: training generates them from its task, the server has none.
    pub canary: Option<PathBuf>,
    /// Cases training generates when no canary file is given.
    pub canary_size: usize,
    /// The canary comparison and the watch after a promotion.
    pub gate: GateConfig,
    /// A directory watched for candidates: `<dir>/rubric/*.wasm`,
    /// `<dir>/aggregator/*.wasm` (looked at every swap point).
    pub watch_dir: Option<PathBuf>,
    /// The revision agent training asks, if any.
    pub agent: AgentConfig,
}

impl Default for HotSwapConfig {
    fn default() -> Self {
        HotSwapConfig {
            keep_revisions: 5,
            canary: None,
            canary_size: 90,
            gate: GateConfig::default(),
            watch_dir: None,
            agent: AgentConfig::default(),
        }
    }
}
