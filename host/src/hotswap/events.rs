//! `events.jsonl`: every promotion, refusal and rollback of a run, with its
//! reasons, appended and flushed as it happens.

use super::revision::RevisionRecord;
use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

/// One event.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    /// The step boundary it happened at (steps completed).
    pub step: usize,
    /// The slot.
    pub slot: String,
    /// `promoted`, `refused`, `rolled-back`, `rollback-refused`, `agent-failed`,
    /// `agent-no-revision`, `resumed`.
    pub event: String,
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
    /// From the request found to the decision, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub millis: Option<f64>,
}

/// Appends `event` to `path` and flushes it.
pub fn append(path: &Path, event: &Event) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let mut line = serde_json::to_vec(event)?;
    line.push(b'\n');
    file.write_all(&line)
        .with_context(|| format!("appending to {}", path.display()))?;
    match event.event.as_str() {
        "refused" | "rollback-refused" | "agent-failed" => tracing::warn!(
            slot = %event.slot,
            step = event.step,
            reasons = ?event.reasons,
            "{}",
            event.event
        ),
        _ => tracing::info!(slot = %event.slot, step = event.step, "{}", event.event),
    }
    Ok(())
}
