//! The run directory's inbox: how `verifine plugin promote|rollback`, a
//! watched directory and agents hand requests to a running (or stopped) run.
//!
//! Each request is a directory `inbox/<slot>/<sequence>/` holding
//! `request.json` and, for a promotion, `plugin.wasm` (and optionally
//! `cases.jsonl` with `snapshots/`). It is written under a temporary name and
//! renamed, so the run never sees half a request. The run takes requests at
//! step boundaries, in sequence order, and deletes each once its outcome is
//! recorded (and checkpointed); a run killed in between finds it again.

use super::revision::Origin;
use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Slots a run can swap.
pub const SLOTS: [&str; 2] = ["rubric", "aggregator"];

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Action {
    /// Gate `plugin.wasm` and make it live if it passes.
    Promote {
        /// Where the candidate came from.
        origin: Origin,
    },
    /// Restore the slot's previous revision.
    Rollback,
}

/// A request found in the inbox.
#[derive(Debug, Clone)]
pub struct Request {
    /// The slot it targets.
    pub slot: String,
    /// Its directory (deleted with [`Request::done`]).
    pub dir: PathBuf,
    /// What it asks.
    pub action: Action,
}

impl Request {
    /// The candidate's bytes (promotions).
    pub fn plugin_bytes(&self) -> Result<Vec<u8>> {
        let path = self.dir.join("plugin.wasm");
        std::fs::read(&path).with_context(|| format!("reading {}", path.display()))
    }

    /// The shipped cases and their snapshots, when present.
    pub fn cases(&self) -> Option<(PathBuf, PathBuf)> {
        let cases = self.dir.join("cases.jsonl");
        cases.exists().then(|| (cases, self.dir.join("snapshots")))
    }

    /// Removes the request once its outcome is recorded.
    pub fn done(&self) -> Result<()> {
        std::fs::remove_dir_all(&self.dir)
            .with_context(|| format!("removing {}", self.dir.display()))
    }
}

fn check_slot(slot: &str) -> Result<()> {
    if !SLOTS.contains(&slot) {
        bail!(
            "unknown slot {slot:?}; a run's swappable slots are {}",
            SLOTS.join(", ")
        );
    }
    Ok(())
}

/// Puts a request into `run_dir`'s inbox and returns its directory.
pub fn submit(
    run_dir: &Path,
    slot: &str,
    action: &Action,
    plugin: Option<&[u8]>,
    cases: Option<(&Path, &Path)>,
) -> Result<PathBuf> {
    check_slot(slot)?;
    if !run_dir.join("config.toml").exists() {
        bail!(
            "{} is not a run directory (no config.toml)",
            run_dir.display()
        );
    }
    let slot_dir = run_dir.join("inbox").join(slot);
    std::fs::create_dir_all(&slot_dir)?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let sequence = format!("{nanos:024}-{:010}", std::process::id());
    let tmp = slot_dir.join(format!(".{sequence}.tmp"));
    std::fs::create_dir_all(&tmp)?;
    std::fs::write(tmp.join("request.json"), serde_json::to_vec_pretty(action)?)?;
    if let Some(bytes) = plugin {
        std::fs::write(tmp.join("plugin.wasm"), bytes)?;
    }
    if let Some((cases, snapshots)) = cases {
        std::fs::copy(cases, tmp.join("cases.jsonl"))
            .with_context(|| format!("copying {}", cases.display()))?;
        if snapshots.exists() {
            std::fs::create_dir_all(tmp.join("snapshots"))?;
            for entry in std::fs::read_dir(snapshots)? {
                let path = entry?.path();
                if path.extension().is_some_and(|e| e == "snap") {
                    std::fs::copy(&path, tmp.join("snapshots").join(path.file_name().unwrap()))?;
                }
            }
        }
    }
    let target = slot_dir.join(&sequence);
    std::fs::rename(&tmp, &target)?;
    Ok(target)
}

/// Every complete request, oldest first. An unreadable request is returned
/// as an error entry so the run can record and drop it.
pub fn pending(run_dir: &Path) -> Result<Vec<Result<Request, (PathBuf, String)>>> {
    let mut found = Vec::new();
    for slot in SLOTS {
        let slot_dir = run_dir.join("inbox").join(slot);
        let Ok(entries) = std::fs::read_dir(&slot_dir) else {
            continue;
        };
        for entry in entries {
            let dir = entry?.path();
            let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
            if name.as_deref().is_none_or(|n| n.starts_with('.')) {
                continue;
            }
            let sequence = name.unwrap_or_default();
            let request = std::fs::read(dir.join("request.json"))
                .map_err(|e| e.to_string())
                .and_then(|bytes| {
                    serde_json::from_slice::<Action>(&bytes).map_err(|e| e.to_string())
                })
                .map(|action| Request {
                    slot: slot.to_string(),
                    dir: dir.clone(),
                    action,
                })
                .map_err(|e| (dir.clone(), format!("unreadable request: {e}")));
            found.push((sequence, request));
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(found.into_iter().map(|(_, r)| r).collect())
}
