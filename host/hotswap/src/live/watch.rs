//! The watch over promoted revisions ([`crate::shadow`]): started at a
//! promotion, fed by every batch the live reward scores, judged at every
//! step boundary, carried through checkpoints.

use super::{LiveReward, SwapOutcome};
use crate::error::Result;
use crate::events::{Event, EventKind, ShadowFigures};
use crate::shadow::{Shadow, ShadowRecord};
use crate::slot::Slot;
use verifine_runtime::scoring::RewardPlugins;

/// Why a watched revision fails (empty: it does not), and its and the
/// replaced revision's canary agreement.
type ShadowCheck = (Vec<String>, Option<(f64, f64)>);

impl LiveReward {
    /// Starts watching the revision just promoted into `slot` at `step`;
    /// any earlier watch ends (the reward function it compared has changed).
    pub(super) fn start_shadow(
        &mut self,
        slot: Slot,
        step: usize,
        canary_leniency: Option<f64>,
    ) -> Result<()> {
        self.shadows.clear();
        let steps = self.gate.config().shadow_steps;
        if steps == 0 {
            return Ok(());
        }
        let record = ShadowRecord {
            slot,
            watched: self.slot(slot).live().plugin.sha256.clone(),
            promoted_at: step,
            until: step + steps,
            canary_leniency: canary_leniency.unwrap_or(0.0),
            rollouts: 0,
            accepted_only_by_new: 0,
        };
        self.shadows.extend(self.shadow_for(record)?);
        Ok(())
    }

    /// Resumes the watches a checkpoint recorded (those whose revision is
    /// still live, with the revision it replaced still at hand).
    pub(super) fn restore_shadows(&mut self, records: &[ShadowRecord]) -> Result<()> {
        self.shadows.clear();
        for record in records {
            let shadow = self.shadow_for(record.clone())?;
            self.shadows.extend(shadow);
        }
        Ok(())
    }

    fn shadow_for(&self, record: ShadowRecord) -> Result<Option<Shadow>> {
        let slot = self.slot(record.slot);
        if slot.live().plugin.sha256 != record.watched {
            return Ok(None);
        }
        let Some(replaced) = slot.previous().first().map(|r| r.plugin.clone()) else {
            return Ok(None);
        };
        let partner = self.slot(record.slot.partner()).live().plugin.clone();
        let (rubric, aggregator) = match record.slot {
            Slot::Rubric => (replaced, partner),
            Slot::Aggregator => (partner, replaced),
        };
        let function = RewardPlugins {
            rubric,
            aggregator,
            ..self.template.clone()
        };
        Ok(Some(Shadow::new(record, function)?))
    }

    /// At the boundary of `step`: rolls back a watched revision that fails
    /// (see [`crate::shadow`]), lets one whose window is over go, keeps
    /// watching the rest.
    pub(super) fn judge_shadows(&mut self, step: usize, outcome: &mut SwapOutcome) -> Result<()> {
        let mut kept = Vec::new();
        for shadow in std::mem::take(&mut self.shadows) {
            if step <= shadow.record.promoted_at {
                kept.push(shadow);
                continue;
            }
            let (reasons, canary) = self.shadow_failures(&shadow, step)?;
            let record = &shadow.record;
            let figures = ShadowFigures {
                rollouts: record.rollouts,
                live_leniency: record.live_leniency(),
                canary_leniency: record.canary_leniency,
            };
            let base = Event {
                shadow: Some(figures),
                canary_live: canary.map(|(_, replaced)| replaced),
                canary_candidate: canary.map(|(watched, _)| watched),
                ..Event::new(step, record.slot, EventKind::ShadowPassed)
            };
            if !reasons.is_empty() {
                let slot = self.slot(record.slot);
                let live_before = slot.live().record();
                let restored = slot.rollback()?;
                self.event(Event {
                    event: EventKind::AutoRolledBack,
                    live_before: Some(live_before),
                    candidate: Some(restored.record()),
                    reasons,
                    ..base
                })?;
                outcome.changed = true;
                outcome.watch_ended = true;
                // The reward function changed: no other watch compares
                // against what is live any more.
                return Ok(());
            }
            if step >= record.until {
                self.event(Event {
                    live_before: Some(self.slot(record.slot).live().record()),
                    ..base
                })?;
                outcome.watch_ended = true;
                continue;
            }
            kept.push(shadow);
        }
        self.shadows = kept;
        Ok(())
    }

    /// Why the watched revision fails at `step` (empty: it does not), and
    /// its and the replaced revision's canary agreement in this step's context.
    fn shadow_failures(&self, shadow: &Shadow, step: usize) -> Result<ShadowCheck> {
        let config = self.gate.config();
        let mut reasons = Vec::new();
        let mut canary = None;
        if self.gate.has_canary() {
            let steps = [step as u64];
            let watched = self.gate.agreement_at(
                &self.rubric.live().plugin,
                &self.aggregator.live().plugin,
                &steps,
            )?;
            let replaced = &shadow.replaced;
            let before = self
                .gate
                .agreement_at(&replaced.rubric, &replaced.aggregator, &steps)?;
            canary = Some((watched, before));
            if watched < before - config.canary_margin {
                reasons.push(format!(
                    "at step {step} its canary agreement {watched:.3} fell below the replaced \
                     revision's {before:.3} by more than the margin {}",
                    config.canary_margin
                ));
            }
        }
        reasons.extend(shadow.record.leniency_failure(config.shadow_margin));
        Ok((reasons, canary))
    }
}
