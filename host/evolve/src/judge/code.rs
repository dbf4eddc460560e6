//! Judge revisions that are code: an agent may hand in a revised plugin
//! crate (built confined and locked, as hot-swap's agent builds are) or a
//! built component alongside its rules. The code is checked by hot-swap's
//! gate — it loads as a rubric of a contract this host speaks and passes
//! the snapshot cases its crate ships — and stored by content under
//! `judge/revisions/<sha256>.wasm` (its crate under `judge/sources/`, for
//! the next agent to revise); the accept rule then decides, as for rules.
//! Every code proposal, promoted or refused, is an event in
//! `judge/events.jsonl`, in hot-swap's format.

use super::{Judge, JudgeRevision};
use crate::error::{EvolveError, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use verifine_base::{FileError, Provenance, sha256_hex, write_atomically};
use verifine_hotswap::Slot;
use verifine_hotswap::events::{Event, EventKind, append};
use verifine_hotswap::gate::{Gate, GateConfig, Submission};
use verifine_hotswap::revision::{Origin, Revision, RevisionHistory, RevisionRecord};
use verifine_runtime::{Plugin, PluginKind};

/// The component a revision runs when it is not the configured one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JudgeCode {
    /// Name, version and sha256 of the component.
    pub plugin: Provenance,
    /// The contract version it was built against.
    pub api_version: String,
    /// Whether its source crate is kept (`judge/sources/<sha256>/`).
    pub source: bool,
    /// Who handed it in, and in which judge loop (the origin's step).
    pub origin: Origin,
}

/// What an agent handed in besides its rules.
#[derive(Clone, PartialEq)]
pub struct CodeSubmission {
    /// The component's bytes (built here when the agent wrote a crate).
    pub bytes: Vec<u8>,
    /// The snapshot cases its crate ships (cases JSONL, snapshot directory).
    pub cases: Option<(PathBuf, PathBuf)>,
    /// The revised crate, when the agent wrote source.
    pub source: Option<PathBuf>,
}

impl std::fmt::Debug for CodeSubmission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeSubmission")
            .field("bytes", &self.bytes.len())
            .field("cases", &self.cases)
            .field("source", &self.source)
            .finish()
    }
}

/// A code proposal's fate before the accept rule (calibration.jsonl).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum HandedIn {
    /// Checked and stored: the proposal runs this component.
    Admitted(JudgeCode),
    /// Refused before scoring.
    Refused {
        /// The component, when it got as far as loading.
        plugin: Option<Provenance>,
        /// Why: the build's error, the failed snapshot case, the wrong kind.
        reason: String,
    },
}

/// `judge/revisions/<sha256>.wasm`.
pub fn component_path(judge_dir: &Path, sha256: &str) -> PathBuf {
    judge_dir.join("revisions").join(format!("{sha256}.wasm"))
}

/// `judge/sources/<sha256>/`: the crate a component was built from.
pub fn source_path(judge_dir: &Path, sha256: &str) -> PathBuf {
    judge_dir.join("sources").join(sha256)
}

impl Judge {
    /// The component `code` names, loaded once; a stored file whose bytes
    /// no longer hash to its name is refused.
    pub(crate) fn component(&self, code: &JudgeCode) -> Result<Arc<Plugin>> {
        let sha = &code.plugin.sha256;
        if let Some(plugin) = self.loaded().get(sha) {
            return Ok(plugin.clone());
        }
        let path = component_path(self.judge_dir(), sha);
        let bytes = std::fs::read(&path).map_err(|e| FileError::io("reading", &path, e))?;
        if sha256_hex(&bytes) != *sha {
            return Err(EvolveError::Invalid(format!(
                "{}: its bytes do not hash to its name: the stored judge revision was replaced",
                path.display()
            )));
        }
        let plugin = self
            .runtime()
            .load_bytes(&bytes, &path.display().to_string())?;
        self.loaded().insert(sha.clone(), plugin.clone());
        Ok(plugin)
    }

    /// Checks `submission` with hot-swap's gate (no canary: the accept rule
    /// stands in for it) against the component `live` runs, and stores what
    /// passes.
    pub(crate) fn admit(
        &self,
        submission: &CodeSubmission,
        live: &JudgeRevision,
        origin: Origin,
    ) -> Result<HandedIn> {
        let live_plugin = self.plugins(live)?;
        let slot = RevisionHistory::new(
            Revision::new(live_plugin.rubric.clone(), self.record(live)?.origin),
            1,
        );
        let gate = Gate::new(GateConfig::default(), Vec::new(), live_plugin.clone());
        let checked = gate.check(
            self.runtime(),
            &slot,
            &live_plugin.aggregator,
            &Submission {
                bytes: submission.bytes.clone(),
                origin: origin.clone(),
                cases: submission.cases.clone(),
            },
            0,
        );
        let plugin = checked.revision.as_ref().map(|r| r.plugin.clone());
        if !checked.accepted {
            return Ok(HandedIn::Refused {
                plugin: plugin.map(|p| p.provenance()),
                reason: checked.reasons.join("; "),
            });
        }
        let plugin = plugin.expect("an accepted candidate loaded");
        let provenance = plugin.provenance();
        let path = component_path(self.judge_dir(), &provenance.sha256);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| FileError::io("creating", parent, e))?;
        }
        write_atomically(&path, |w| w.write_all(&submission.bytes))?;
        if let Some(source) = &submission.source {
            let kept = source_path(self.judge_dir(), &provenance.sha256);
            if !kept.exists() {
                copy_crate(source, &kept)?;
            }
        }
        self.loaded()
            .insert(provenance.sha256.clone(), plugin.clone());
        Ok(HandedIn::Admitted(JudgeCode {
            api_version: plugin.metadata.api_version.to_string(),
            plugin: provenance,
            source: submission.source.is_some(),
            origin,
        }))
    }

    /// What events say about the component `revision` runs.
    pub(crate) fn record(&self, revision: &JudgeRevision) -> Result<RevisionRecord> {
        let plugin = self.plugins(revision)?.rubric;
        let origin = match &revision.code {
            Some(code) => code.origin.clone(),
            None => Origin::Config {
                spec: self.configured_spec(),
            },
        };
        Ok(RevisionRecord {
            plugin: plugin.provenance(),
            kind: PluginKind::Rubric,
            api_version: plugin.metadata.api_version.to_string(),
            origin,
            loaded_at: 0,
        })
    }
}

/// Appends an event about the judge's component to `judge/events.jsonl`
/// (the event's step is the judge loop's round): a code proposal promoted
/// or refused, or an earlier component restored when its round's policy is
/// kept (`run/kept.rs`). `reason` is kept for all but promotions.
pub(crate) fn record_event(
    judge_dir: &Path,
    round: u32,
    kind: EventKind,
    live_before: RevisionRecord,
    candidate: Option<RevisionRecord>,
    reason: &str,
) -> Result<()> {
    let mut event = Event::new(round as usize, Slot::Rubric, kind);
    event.live_before = Some(live_before);
    event.candidate = candidate;
    if kind != EventKind::Promoted {
        event.reasons.push(reason.to_string());
    }
    Ok(append(&judge_dir.join("events.jsonl"), &event)?)
}

/// Copies a crate's files (not `target/`) into `dest`, through a temporary
/// directory renamed into place.
fn copy_crate(source: &Path, dest: &Path) -> Result<()> {
    let partial = dest.with_extension("partial");
    if partial.exists() {
        std::fs::remove_dir_all(&partial).map_err(|e| FileError::io("clearing", &partial, e))?;
    }
    copy_tree(source, &partial)?;
    std::fs::rename(&partial, dest).map_err(|e| FileError::io("renaming", &partial, e))?;
    Ok(())
}

fn copy_tree(source: &Path, dest: &Path) -> Result<()> {
    std::fs::create_dir_all(dest).map_err(|e| FileError::io("creating", dest, e))?;
    let entries = std::fs::read_dir(source).map_err(|e| FileError::io("reading", source, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| FileError::io("reading", source, e))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|e| FileError::io("reading", &path, e))?;
        let target = dest.join(entry.file_name());
        if kind.is_dir() && entry.file_name() != "target" {
            copy_tree(&path, &target)?;
        } else if kind.is_file() {
            std::fs::copy(&path, &target).map_err(|e| FileError::io("copying", &path, e))?;
        }
    }
    Ok(())
}
