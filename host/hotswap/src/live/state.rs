//! What a checkpoint keeps of the live reward — each slot's live and
//! previous revisions, the requests already decided, the watches — and
//! restoring it from the revision bytes kept in the run directory.

use super::LiveReward;
use crate::error::{HotswapError, Result};
use crate::events::{Event, EventKind};
use crate::revision::{Revision, RevisionHistory, RevisionRecord};
use crate::shadow::ShadowRecord;
use crate::slot::Slot;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A slot's revisions as a checkpoint records them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlotRecord {
    /// The live revision.
    pub live: RevisionRecord,
    /// Previous revisions, newest first.
    pub previous: Vec<RevisionRecord>,
}

/// What a checkpoint keeps of the live reward.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LiveState {
    /// By slot.
    pub slots: BTreeMap<Slot, SlotRecord>,
    /// Inbox requests already decided (their directories may survive a kill
    /// between the checkpoint and their removal).
    pub handled: Vec<String>,
    /// Promoted revisions still being watched.
    #[serde(default)]
    pub shadows: Vec<ShadowRecord>,
}

impl LiveReward {
    /// The slots for a checkpoint.
    pub fn state(&self) -> LiveState {
        let record = |slot: &RevisionHistory| SlotRecord {
            live: slot.live().record(),
            previous: slot.previous().iter().map(|r| r.record()).collect(),
        };
        // Only the most recent names matter: older requests are long gone.
        let handled = self
            .handled
            .iter()
            .rev()
            .take(1000)
            .rev()
            .cloned()
            .collect();
        LiveState {
            slots: BTreeMap::from([
                (Slot::Rubric, record(&self.rubric)),
                (Slot::Aggregator, record(&self.aggregator)),
            ]),
            handled,
            shadows: self.shadows.iter().map(|s| s.record.clone()).collect(),
        }
    }

    /// Restores the slots a checkpoint recorded, from the bytes under
    /// `run_dir/revisions/`.
    pub fn restore(&mut self, state: &LiveState, step: usize) -> Result<()> {
        for (&slot, record) in &state.slots {
            let load = |r: &RevisionRecord| -> Result<Revision> {
                let recorded = &r.plugin.sha256;
                // The digest names a file: it must be one, not a path.
                if recorded.len() != 64 || !recorded.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(HotswapError::State(format!(
                        "{slot} revision {} has sha256 {recorded:?}, not 64 hex digits",
                        r.plugin.name
                    )));
                }
                let path = revision_path(&self.run_dir, recorded);
                let bytes =
                    std::fs::read(&path).map_err(|e| HotswapError::io("reading", &path, e))?;
                let actual = verifine_base::sha256_hex(&bytes);
                if &actual != recorded {
                    return Err(HotswapError::RevisionChanged {
                        path,
                        recorded: recorded.clone(),
                        actual,
                    });
                }
                let plugin = self
                    .runtime
                    .load_bytes(&bytes, &path.display().to_string())?;
                Ok(Revision {
                    plugin,
                    origin: r.origin.clone(),
                    loaded_at: r.loaded_at,
                })
            };
            let live = load(&record.live)?;
            let previous = record
                .previous
                .iter()
                .map(load)
                .collect::<Result<Vec<_>>>()?;
            self.slot(slot).restore(live, previous);
        }
        self.handled = state.handled.clone();
        self.rebuild_scorer()?;
        self.restore_shadows(&state.shadows)?;
        for (&slot, record) in &state.slots {
            self.event(Event {
                candidate: Some(record.live.clone()),
                ..Event::new(step, slot, EventKind::Resumed)
            })?;
        }
        Ok(())
    }
}

pub(super) fn revision_path(run_dir: &Path, sha256: &str) -> PathBuf {
    run_dir.join("revisions").join(format!("{sha256}.wasm"))
}

/// Keeps a revision's bytes in the run directory, so a resumed run restores
/// exactly the revision that was live, wherever its file went.
pub(super) fn store_bytes(run_dir: &Path, sha256: &str, bytes: &[u8]) -> Result<()> {
    let path = revision_path(run_dir, sha256);
    if path.exists() {
        return Ok(());
    }
    let dir = path.parent().expect("revisions dir");
    std::fs::create_dir_all(dir).map_err(|e| HotswapError::io("creating", dir, e))?;
    Ok(verifine_base::files::write_atomically(&path, |w| {
        w.write_all(bytes)
    })?)
}
