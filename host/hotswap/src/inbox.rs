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
use super::slot::Slot;
use crate::error::{HotswapError, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use verifine_confined::{MAX_COMPONENT_BYTES, read_regular_file};

/// The largest `request.json`.
const MAX_REQUEST_BYTES: u64 = 64 << 10;

/// Removes a request entry whatever it is (a directory, or a stray file).
pub fn remove_entry(path: &Path) -> Result<()> {
    let removed = match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    };
    removed.map_err(|e| HotswapError::io("removing", path, e))
}

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
    pub slot: Slot,
    /// Its directory (deleted with [`Request::done`]).
    pub dir: PathBuf,
    /// What it asks.
    pub action: Action,
}

impl Request {
    /// The candidate's bytes (promotions).
    pub fn plugin_bytes(&self) -> std::result::Result<Vec<u8>, String> {
        read_regular_file(&self.dir.join("plugin.wasm"), MAX_COMPONENT_BYTES)
    }

    /// The shipped cases and their snapshots, when present.
    pub fn cases(&self) -> Option<(PathBuf, PathBuf)> {
        let cases = self.dir.join("cases.jsonl");
        cases.exists().then(|| (cases, self.dir.join("snapshots")))
    }

    /// Removes the request once its outcome is recorded.
    pub fn done(&self) -> Result<()> {
        remove_entry(&self.dir)
    }
}

/// Puts a request into `run_dir`'s inbox and returns its directory.
pub fn submit(
    run_dir: &Path,
    slot: Slot,
    action: &Action,
    plugin: Option<&[u8]>,
    cases: Option<(&Path, &Path)>,
) -> Result<PathBuf> {
    if !run_dir.join("config.toml").exists() {
        return Err(HotswapError::NotARunDirectory(run_dir.to_path_buf()));
    }
    let slot_dir = run_dir.join("inbox").join(slot.as_str());
    let creating =
        |dir: &Path| std::fs::create_dir_all(dir).map_err(|e| HotswapError::io("creating", dir, e));
    let copy = |from: &Path, to: PathBuf| {
        std::fs::copy(from, to).map_err(|e| HotswapError::io("copying", from, e))
    };
    creating(&slot_dir)?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let sequence = format!("{nanos:024}-{:010}", std::process::id());
    let tmp = slot_dir.join(format!(".{sequence}.tmp"));
    creating(&tmp)?;
    let request = tmp.join("request.json");
    let json = serde_json::to_vec_pretty(action).expect("actions serialize");
    std::fs::write(&request, json).map_err(|e| HotswapError::io("writing", &request, e))?;
    if let Some(bytes) = plugin {
        let path = tmp.join("plugin.wasm");
        std::fs::write(&path, bytes).map_err(|e| HotswapError::io("writing", &path, e))?;
    }
    if let Some((cases, snapshots)) = cases {
        copy(cases, tmp.join("cases.jsonl"))?;
        if snapshots.exists() {
            creating(&tmp.join("snapshots"))?;
            let entries = std::fs::read_dir(snapshots)
                .map_err(|e| HotswapError::io("reading", snapshots, e))?;
            for entry in entries {
                let path = entry
                    .map_err(|e| HotswapError::io("reading", snapshots, e))?
                    .path();
                if let Some(name) = path
                    .file_name()
                    .filter(|_| path.extension().is_some_and(|e| e == "snap"))
                {
                    copy(&path, tmp.join("snapshots").join(name))?;
                }
            }
        }
    }
    let target = slot_dir.join(&sequence);
    std::fs::rename(&tmp, &target).map_err(|e| HotswapError::io("renaming", &tmp, e))?;
    Ok(target)
}

/// A request directory that could not be read: the run records it as
/// refused and drops it.
#[derive(Debug, Clone)]
pub struct Unreadable {
    /// The slot whose inbox held it.
    pub slot: Slot,
    /// Its directory.
    pub dir: PathBuf,
    /// What is wrong with it.
    pub reason: String,
}

/// Every complete request, oldest first. An unreadable request is returned
/// as an error entry so the run can record and drop it.
pub fn pending(run_dir: &Path) -> Result<Vec<Result<Request, Unreadable>>> {
    let mut found = Vec::new();
    for slot in Slot::ALL {
        let slot_dir = run_dir.join("inbox").join(slot.as_str());
        let Ok(entries) = std::fs::read_dir(&slot_dir) else {
            continue;
        };
        for entry in entries {
            let dir = entry
                .map_err(|e| HotswapError::io("reading", &slot_dir, e))?
                .path();
            let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
            if name.as_deref().is_none_or(|n| n.starts_with('.')) {
                continue;
            }
            let sequence = name.unwrap_or_default();
            let request = (if dir.is_dir() && !dir.is_symlink() {
                read_regular_file(&dir.join("request.json"), MAX_REQUEST_BYTES)
            } else {
                Err(format!("{} is not a request directory", dir.display()))
            })
            .and_then(|bytes| serde_json::from_slice::<Action>(&bytes).map_err(|e| e.to_string()))
            .map(|action| Request {
                slot,
                dir: dir.clone(),
                action,
            })
            .map_err(|e| Unreadable {
                slot,
                dir: dir.clone(),
                reason: format!("unreadable request: {e}"),
            });
            found.push((sequence, request));
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(found.into_iter().map(|(_, r)| r).collect())
}
