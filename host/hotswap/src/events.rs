//! `events.jsonl`: every promotion, refusal and rollback of a run, with its
//! reasons, appended and flushed as it happens.

use super::revision::RevisionRecord;
use super::slot::Slot;
use crate::error::{HotswapError, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    /// A candidate passed the gate and went live.
    Promoted,
    /// A candidate (or an unreadable request) was refused.
    Refused,
    /// The slot's previous revision was restored.
    RolledBack,
    /// A rollback had nothing to restore.
    RollbackRefused,
    /// The revision agent failed.
    AgentFailed,
    /// The revision agent ran but handed in nothing.
    AgentNoRevision,
    /// A resumed run restored the slot's live revision.
    Resumed,
    /// A promoted revision misbehaved while watched and the one it replaced
    /// was restored (see `shadow`).
    AutoRolledBack,
    /// A promoted revision was watched for its whole window and stays live.
    ShadowPassed,
}

impl Event {
    /// An event of `kind` in `slot` at `step`, with nothing else filled in.
    pub fn new(step: usize, slot: Slot, kind: EventKind) -> Self {
        Event {
            step,
            slot,
            event: kind,
            live_before: None,
            candidate: None,
            reasons: Vec::new(),
            canary_live: None,
            canary_candidate: None,
            shadow: None,
            millis: None,
        }
    }
}

impl EventKind {
    /// Whether the event reports something that did not go as asked.
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            EventKind::Refused
                | EventKind::RollbackRefused
                | EventKind::AgentFailed
                | EventKind::AutoRolledBack
        )
    }
}

/// One event.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    /// The step boundary it happened at (steps completed).
    pub step: usize,
    /// The slot.
    pub slot: Slot,
    /// What happened.
    pub event: EventKind,
    /// The live revision before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live_before: Option<RevisionRecord>,
    /// The candidate (or the restored revision).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidate: Option<RevisionRecord>,
    /// Why a candidate was refused, or what failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// Canary agreement of the live revision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary_live: Option<f64>,
    /// Canary agreement of the candidate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canary_candidate: Option<f64>,
    /// While watched: live rollouts scored by both revisions, and the share
    /// the new one alone accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow: Option<ShadowFigures>,
    /// From the request found to the decision, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub millis: Option<f64>,
}

/// What the watch over a promoted revision saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShadowFigures {
    /// Live rollouts scored by the new and the replaced revision.
    pub rollouts: usize,
    /// Share of them the new revision accepted and the replaced one rejected.
    pub live_leniency: f64,
    /// The same share on the canary, measured by the gate.
    pub canary_leniency: f64,
}

/// Appends `event` to `path` and flushes it.
pub fn append(path: &Path, event: &Event) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| HotswapError::io("opening", path, e))?;
    let mut line = serde_json::to_vec(event).expect("events serialize");
    line.push(b'\n');
    file.write_all(&line)
        .map_err(|e| HotswapError::io("appending to", path, e))?;
    if event.event.is_failure() {
        tracing::warn!(slot = %event.slot, step = event.step, reasons = ?event.reasons, event = ?event.event);
    } else {
        tracing::info!(slot = %event.slot, step = event.step, event = ?event.event);
    }
    Ok(())
}
