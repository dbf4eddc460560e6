//! Revisions of a plugin slot: the live one and the last few before it.

use crate::error::{HotswapError, Result};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::{Arc, RwLock};
use verifine_runtime::{Plugin, PluginKind, Provenance};

/// Where a revision came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Origin {
    /// Named in the run's config (a built-in name or a path).
    Config {
        /// The spec as written.
        spec: String,
    },
    /// Handed in with `verifine plugin promote`.
    Command {
        /// The file given to the command.
        path: String,
    },
    /// Dropped into the run's watched plugin directory.
    Watched {
        /// The file that landed.
        path: String,
    },
    /// Written by the configured revision command (an agent).
    Agent {
        /// The command line.
        command: String,
        /// The step at which it was asked.
        step: usize,
    },
}

/// One revision: checked, compiled code plus where and when it came from.
#[derive(Clone)]
pub struct Revision {
    /// The loaded plugin (metadata, sha256, compiled code).
    pub plugin: Arc<Plugin>,
    /// Where it came from.
    pub origin: Origin,
    /// Unix seconds when it was loaded.
    pub loaded_at: u64,
}

impl Revision {
    /// A revision loaded now.
    pub fn new(plugin: Arc<Plugin>, origin: Origin) -> Self {
        let loaded_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Revision {
            plugin,
            origin,
            loaded_at,
        }
    }

    /// Name, version and sha256.
    pub fn provenance(&self) -> Provenance {
        self.plugin.provenance()
    }

    /// A record of it for events and checkpoints.
    pub fn record(&self) -> RevisionRecord {
        RevisionRecord {
            plugin: self.provenance(),
            kind: self.plugin.kind(),
            api_version: self.plugin.metadata.api_version.to_string(),
            origin: self.origin.clone(),
            loaded_at: self.loaded_at,
        }
    }
}

/// What is written about a revision (events.jsonl, checkpoints).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevisionRecord {
    /// Name, version, sha256.
    pub plugin: Provenance,
    /// Its kind.
    pub kind: PluginKind,
    /// The contract version it was built against.
    pub api_version: String,
    /// Where it came from.
    pub origin: Origin,
    /// Unix seconds when it was loaded.
    pub loaded_at: u64,
}

/// The revisions of one [`crate::Slot`] of a run (for instance the reward
/// rubric): the live revision and the previous ones, newest first, for
/// rollback.
///
/// Readers take a snapshot ([`RevisionHistory::live`]) and keep using it: a swap
/// replaces the history's pointer, never a revision a call already holds.
pub struct RevisionHistory {
    kind: PluginKind,
    live: RwLock<Arc<Revision>>,
    previous: RwLock<VecDeque<Arc<Revision>>>,
    keep: usize,
}

impl RevisionHistory {
    /// A history whose first live revision is `initial`; `keep` previous
    /// revisions stay available for rollback.
    pub fn new(initial: Revision, keep: usize) -> Self {
        RevisionHistory {
            kind: initial.plugin.kind(),
            live: RwLock::new(Arc::new(initial)),
            previous: RwLock::new(VecDeque::new()),
            keep,
        }
    }

    /// The kind every revision of this slot must have.
    pub fn kind(&self) -> PluginKind {
        self.kind
    }

    /// A snapshot of the live revision.
    pub fn live(&self) -> Arc<Revision> {
        self.live
            .read()
            .expect("revision history lock poisoned")
            .clone()
    }

    /// The previous revisions, newest first.
    pub fn previous(&self) -> Vec<Arc<Revision>> {
        self.previous
            .read()
            .expect("revision history lock poisoned")
            .iter()
            .cloned()
            .collect()
    }

    /// Makes `revision` live; the old live one becomes the newest previous.
    pub fn promote(&self, revision: Revision) -> Result<()> {
        if revision.plugin.kind() != self.kind {
            return Err(HotswapError::WrongKind {
                actual: revision.plugin.kind(),
                slot: self.kind,
            });
        }
        let mut live = self.live.write().expect("revision history lock poisoned");
        let mut previous = self
            .previous
            .write()
            .expect("revision history lock poisoned");
        let old = std::mem::replace(&mut *live, Arc::new(revision));
        previous.push_front(old);
        previous.truncate(self.keep);
        Ok(())
    }

    /// Restores the newest previous revision and returns it.
    pub fn rollback(&self) -> Result<Arc<Revision>> {
        let mut live = self.live.write().expect("revision history lock poisoned");
        let mut previous = self
            .previous
            .write()
            .expect("revision history lock poisoned");
        let Some(restored) = previous.pop_front() else {
            return Err(HotswapError::NothingToRollBack {
                live: format!(
                    "{} {}",
                    live.plugin.metadata.name, live.plugin.metadata.version
                ),
            });
        };
        *live = restored.clone();
        Ok(restored)
    }

    /// Replaces the whole history (resume from a checkpoint).
    pub fn restore(&self, live: Revision, previous: Vec<Revision>) {
        *self.live.write().expect("revision history lock poisoned") = Arc::new(live);
        *self
            .previous
            .write()
            .expect("revision history lock poisoned") =
            previous.into_iter().map(Arc::new).take(self.keep).collect();
    }
}
