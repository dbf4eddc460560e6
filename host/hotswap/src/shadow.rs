//! Watching a revision after it went live. The gate scores a fixed canary,
//! which a plugin can learn to recognise (by its ids, its prompts, or the
//! steps at which it is asked); live rollouts it cannot tell apart from
//! training. For `shadow_steps` steps after a promotion, every batch the new
//! revision scores is scored by the revision it replaced too, and at every
//! step boundary two questions are asked:
//!
//! 1. Does the new revision still agree with the canary labels, in the
//!    current step's context, at least as well as the one it replaced (within
//!    `canary_margin`)? This catches a revision that behaves only at the
//!    steps the gate happened to check.
//! 2. On the live rollouts so far, does the new revision *accept* responses
//!    the replaced one rejected more often than it did on the canary, by more
//!    than `shadow_margin`? This catches a revision that behaves only on the
//!    canary. Only this direction counts: a revision that is stricter on
//!    rollouts than on the canary withholds reward the gate did not vouch
//!    for, it does not pay out reward the gate did not vouch for — and
//!    closing a loophole the policy exploits looks exactly like that.
//!
//! Either failure rolls the slot back, with an `auto-rolled-back` event that
//! gives the figures; a revision that passes the whole window gets a
//! `shadow-passed` event.

use super::slot::Slot;
use serde::{Deserialize, Serialize};
use verifine_runtime::scoring::{RewardPlugins, ScoredSample, Scorer};
use verifine_runtime::stats::agrees;
use verifine_runtime::{RuntimeError, Sample};

/// Rollouts the shadow must have seen before question 2 may roll back: a
/// handful of rollouts says too little about a rate.
pub const MIN_SHADOW_ROLLOUTS: usize = 32;

/// What the shadow of one promotion has seen so far (checkpointed, so a
/// resumed run keeps watching).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShadowRecord {
    /// The slot whose live revision is watched.
    pub slot: Slot,
    /// The sha256 of the watched revision (the shadow ends if it is no
    /// longer live).
    pub watched: String,
    /// The step at whose boundary the revision was promoted.
    pub promoted_at: usize,
    /// The last step boundary at which the revision is checked.
    pub until: usize,
    /// Share of canary cases the new revision accepted and the replaced one
    /// rejected, measured by the gate.
    pub canary_leniency: f64,
    /// Live rollouts scored by both revisions.
    pub rollouts: usize,
    /// Of those, the ones the new revision accepted and the replaced one rejected.
    pub accepted_only_by_new: usize,
}

impl ShadowRecord {
    /// The share of live rollouts accepted only by the new revision.
    pub fn live_leniency(&self) -> f64 {
        if self.rollouts == 0 {
            return 0.0;
        }
        self.accepted_only_by_new as f64 / self.rollouts as f64
    }

    /// Why the live rollouts condemn the new revision, if they do.
    pub fn leniency_failure(&self, margin: f64) -> Option<String> {
        let live = self.live_leniency();
        (self.rollouts >= MIN_SHADOW_ROLLOUTS && live > self.canary_leniency + margin).then(|| {
            format!(
                "on {} live rollouts it accepted {:.3} of responses the revision it replaced \
                 rejected, against {:.3} on the canary (shadow margin {margin})",
                self.rollouts, live, self.canary_leniency
            )
        })
    }
}

/// The watch over one promotion: its record and the replaced revision's
/// reward function, scoring the same rollouts.
pub struct Shadow {
    /// What it has seen.
    pub record: ShadowRecord,
    /// The reward function with the replaced revision in the slot.
    pub replaced: RewardPlugins,
    /// A scorer of `replaced`.
    scorer: Scorer,
}

impl Shadow {
    /// A watch that compares with `replaced`.
    pub fn new(record: ShadowRecord, replaced: RewardPlugins) -> Result<Self, RuntimeError> {
        let scorer = replaced.scorer()?;
        Ok(Shadow {
            record,
            replaced,
            scorer,
        })
    }

    /// Scores `samples` with the replaced revision and counts the ones only
    /// the new revision (whose scores are `live`) accepts.
    pub fn observe(
        &mut self,
        step: u64,
        samples: &[Sample],
        live: &[ScoredSample],
        threshold: f64,
    ) {
        let replaced = self.scorer.score_batch(step, 0, samples);
        for (new, old) in live.iter().zip(&replaced) {
            self.record.rollouts += 1;
            if agrees(new.total, true, threshold) && !agrees(old.total, true, threshold) {
                self.record.accepted_only_by_new += 1;
            }
        }
    }
}

/// The share of `cases` that `new` accepts and `old` rejects.
pub fn leniency(new: &[ScoredSample], old: &[ScoredSample], threshold: f64) -> f64 {
    if new.is_empty() {
        return 0.0;
    }
    let lenient = new
        .iter()
        .zip(old)
        .filter(|(n, o)| agrees(n.total, true, threshold) && !agrees(o.total, true, threshold))
        .count();
    lenient as f64 / new.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(rollouts: usize, lenient: usize) -> ShadowRecord {
        ShadowRecord {
            slot: Slot::Rubric,
            watched: "0".repeat(64),
            promoted_at: 0,
            until: 20,
            canary_leniency: 0.1,
            rollouts,
            accepted_only_by_new: lenient,
        }
    }

    #[test]
    fn only_enough_rollouts_and_more_leniency_than_the_canary_condemn() {
        assert_eq!(record(31, 31).leniency_failure(0.2), None, "too few");
        assert_eq!(record(100, 30).leniency_failure(0.2), None, "within margin");
        let reason = record(100, 31).leniency_failure(0.2).unwrap();
        assert!(
            reason.contains("0.310") && reason.contains("0.100"),
            "{reason}"
        );
        assert_eq!(record(0, 0).live_leniency(), 0.0);
    }
}
