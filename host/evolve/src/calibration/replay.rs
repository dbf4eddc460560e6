//! Resuming a judge loop replays its calibration log; a replayed entry is
//! checked against what the accept rule decides now.

use super::{CalibrationEntry, Decision};
use crate::error::{EvolveError, Result};

/// Refuses a replayed log entry that this loop would not have written:
/// another round or position, or a decision (and revision number) that the
/// accept rule does not give on the labels now.
pub(super) fn check_replayed(
    entry: &CalibrationEntry,
    round: u32,
    iteration: usize,
    decision: &Decision,
    next_number: u32,
) -> Result<()> {
    let expected_revision = decision.accepted.then_some(next_number);
    let verdict = |accepted: bool| if accepted { "accepted" } else { "rejected" };
    let problem = if entry.round != round || entry.iteration != iteration {
        Some(format!(
            "it says round {} iteration {}, where round {round} iteration {iteration} belongs",
            entry.round, entry.iteration
        ))
    } else if entry.decision.accepted != decision.accepted || entry.revision != expected_revision {
        Some(format!(
            "it records the proposal as {} (revision {:?}), but the accept rule, run again on \
             the labels, {} it (revision {expected_revision:?})",
            verdict(entry.decision.accepted),
            entry.revision,
            if decision.accepted {
                "accepts"
            } else {
                "rejects"
            }
        ))
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(EvolveError::Invalid(format!(
            "judge/calibration.jsonl, round {round} entry {iteration}: {problem}; \
             the log was not written by this run's calibration, so nothing is replayed"
        ))),
    }
}
