//! The gate a candidate revision passes before it goes live:
//! (a) it loads, declares the slot's kind and a compatible API version;
//! (b) it passes the snapshot cases it ships, if any;
//! (c) on the run's canary set (labelled cases), its agreement with the labels
//!     is not worse than the live revision's by more than the margin.

use super::revision::{Origin, Revision, RevisionHistory};
use super::shadow::leniency;
use crate::error::Result;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use verifine_runtime::cases::{default_aggregator, require_all_match, run_cases};
use verifine_runtime::scoring::RewardPlugins;
use verifine_runtime::stats::{agrees, label_agreement};
use verifine_runtime::{Plugin, PluginKind, Runtime, Sample};

/// A labelled case: the sample and whether a good verifier accepts it.
#[derive(Debug, Clone)]
pub struct CanaryCase {
    /// What the reward function scores.
    pub sample: Sample,
    /// The label (gold or human): should the response be rewarded?
    pub label: bool,
}

/// Gate settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GateConfig {
    /// A candidate may agree with the canary labels this much less than the
    /// live revision and still go live (0: never worse).
    pub canary_margin: f64,
    /// A reward at or above this counts as accepting the response.
    pub canary_threshold: f64,
    /// Steps a promoted revision is watched on live rollouts (0: not
    /// watched); see [`crate::shadow`].
    pub shadow_steps: usize,
    /// How much more often than on the canary a watched revision may accept
    /// live rollouts that the revision it replaced rejected, before it is
    /// rolled back.
    pub shadow_margin: f64,
}

impl Default for GateConfig {
    fn default() -> Self {
        GateConfig {
            canary_margin: 0.0,
            canary_threshold: verifine_base::PASS_MARK,
            shadow_steps: 20,
            shadow_margin: 0.2,
        }
    }
}

/// A candidate revision as handed in (by promote, a watched directory or an agent).
#[derive(Debug, Clone)]
pub struct Submission {
    /// Component bytes.
    pub bytes: Vec<u8>,
    /// Where it came from.
    pub origin: Origin,
    /// Shipped snapshot cases (a cases JSONL and its snapshot directory).
    pub cases: Option<(PathBuf, PathBuf)>,
}

/// What the gate decided.
#[derive(Clone)]
pub struct GateDecision {
    /// The loaded revision, when it loaded.
    pub revision: Option<Revision>,
    /// Whether it may go live.
    pub accepted: bool,
    /// Why not (empty when accepted).
    pub reasons: Vec<String>,
    /// Canary agreement of the live revision.
    pub canary_live: Option<f64>,
    /// Canary agreement of the candidate.
    pub canary_candidate: Option<f64>,
    /// Share of the canary the candidate accepts and the live revision
    /// rejects, at the current step (what the shadow compares live rollouts with).
    pub canary_leniency: Option<f64>,
    /// Time spent in the gate.
    pub millis: f64,
}

/// Checks candidates against a canary set.
pub struct Gate {
    config: GateConfig,
    canary: Vec<CanaryCase>,
    /// The run's reward function: plugin config tables and whether the
    /// aggregator decides totals; its plugins are replaced per check.
    reward: RewardPlugins,
}

impl Gate {
    /// A gate over `canary` (may be empty: then (c) is skipped) for a run
    /// whose reward function is `reward`.
    pub fn new(config: GateConfig, canary: Vec<CanaryCase>, reward: RewardPlugins) -> Self {
        Gate {
            config,
            canary,
            reward,
        }
    }

    /// Runs the three checks. `slot` is the slot the candidate would fill;
    /// `other` is the live plugin of the partner slot (the aggregator for a
    /// rubric and vice versa), so the canary scores the whole reward function.
    ///
    /// The canary is scored in the step contexts the revision would see: the
    /// current `step`, and two more steps a plugin cannot predict; each
    /// revision's agreement is its worst over them, so a candidate that
    /// behaves only at one step is not promoted.
    pub fn check(
        &self,
        runtime: &Runtime,
        slot: &RevisionHistory,
        other: &Arc<Plugin>,
        candidate: &Submission,
        step: usize,
    ) -> GateDecision {
        let started = Instant::now();
        let mut verdict = GateDecision {
            revision: None,
            accepted: false,
            reasons: Vec::new(),
            canary_live: None,
            canary_candidate: None,
            canary_leniency: None,
            millis: 0.0,
        };
        match self.checks(runtime, slot, other, candidate, step, &mut verdict) {
            Ok(()) => verdict.accepted = verdict.reasons.is_empty(),
            Err(e) => verdict.reasons.push(format!("{e:#}")),
        }
        verdict.millis = started.elapsed().as_secs_f64() * 1e3;
        verdict
    }

    fn checks(
        &self,
        runtime: &Runtime,
        slot: &RevisionHistory,
        other: &Arc<Plugin>,
        candidate: &Submission,
        step: usize,
        verdict: &mut GateDecision,
    ) -> Result<()> {
        let origin = format!("{:?}", candidate.origin);
        let plugin = runtime.load_bytes(&candidate.bytes, &origin)?;
        verdict.revision = Some(Revision::new(plugin.clone(), candidate.origin.clone()));
        if plugin.kind() != slot.kind() {
            verdict.reasons.push(format!(
                "{} is a {} plugin; this slot takes {} plugins",
                plugin.metadata.name,
                plugin.kind(),
                slot.kind()
            ));
            return Ok(());
        }
        if let Some((cases, snapshots)) = &candidate.cases {
            if plugin.kind() == PluginKind::Rubric {
                let aggregator = default_aggregator(runtime)?;
                let results = run_cases(&plugin, &aggregator, cases, snapshots, false)?;
                if let Err(e) = require_all_match(&results) {
                    verdict.reasons.push(format!("shipped snapshot cases: {e}"));
                    return Ok(());
                }
            } else {
                verdict
                    .reasons
                    .push("snapshot cases are only defined for rubric plugins".to_string());
                return Ok(());
            }
        }
        if self.canary.is_empty() {
            return Ok(());
        }
        let live = slot.live().plugin.clone();
        let pair = |p: &Arc<Plugin>| match slot.kind() {
            PluginKind::Aggregator => (other.clone(), p.clone()),
            _ => (p.clone(), other.clone()),
        };
        let (live_rubric, live_aggregator) = pair(&live);
        let steps = canary_steps(step);
        let live_agreement = self.agreement_at(&live_rubric, &live_aggregator, &steps)?;
        let (rubric, aggregator) = pair(&plugin);
        let candidate_agreement = self.agreement_at(&rubric, &aggregator, &steps)?;
        let new = self.score_canary(&rubric, &aggregator, step as u64)?;
        let old = self.score_canary(&live_rubric, &live_aggregator, step as u64)?;
        verdict.canary_leniency = Some(leniency(&new, &old, self.config.canary_threshold));
        verdict.canary_live = Some(live_agreement);
        verdict.canary_candidate = Some(candidate_agreement);
        if candidate_agreement < live_agreement - self.config.canary_margin {
            verdict.reasons.push(format!(
                "canary agreement {candidate_agreement:.3} is below the live revision's \
                 {live_agreement:.3} by more than the margin {}",
                self.config.canary_margin
            ));
        }
        Ok(())
    }

    /// The canary cases where the reward function of `rubric` and
    /// `aggregator` disagrees with the label, with what it said: the material
    /// an agent revises from.
    pub fn disputed(
        &self,
        rubric: &Arc<Plugin>,
        aggregator: &Arc<Plugin>,
    ) -> Result<Vec<serde_json::Value>> {
        let scored = self.score_canary(rubric, aggregator, 0)?;
        Ok(self
            .canary
            .iter()
            .zip(&scored)
            .filter(|(case, s)| !agrees(s.total, case.label, self.config.canary_threshold))
            .map(|(case, s)| {
                let judgment = s.judgment.as_ref();
                serde_json::json!({
                    "id": case.sample.id,
                    "prompt": case.sample.prompt,
                    "response": case.sample.response,
                    "reference": case.sample.reference,
                    "label": case.label,
                    "total": s.total,
                    "verdicts": judgment.map(|j| &j.verdicts),
                    "explanation": judgment.and_then(|j| j.explanation.clone()),
                    "error": s.error,
                })
            })
            .collect())
    }

    /// The canary scored by the run's reward function with these plugins.
    fn score_canary(
        &self,
        rubric: &Arc<Plugin>,
        aggregator: &Arc<Plugin>,
        step: u64,
    ) -> Result<Vec<verifine_runtime::scoring::ScoredSample>> {
        let function = RewardPlugins {
            rubric: rubric.clone(),
            aggregator: aggregator.clone(),
            ..self.reward.clone()
        };
        let samples: Vec<Sample> = self.canary.iter().map(|c| c.sample.clone()).collect();
        Ok(function.scorer()?.score_batch(step, 0, &samples))
    }

    /// The settings the gate was made with.
    pub fn config(&self) -> &GateConfig {
        &self.config
    }

    /// Whether there is a canary to check against.
    pub fn has_canary(&self) -> bool {
        !self.canary.is_empty()
    }

    /// The worst canary agreement of `rubric` and `aggregator` over `steps`:
    /// per step, the share of cases where (reward ≥ threshold) equals the
    /// label, a failed score counting as disagreement.
    pub fn agreement_at(
        &self,
        rubric: &Arc<Plugin>,
        aggregator: &Arc<Plugin>,
        steps: &[u64],
    ) -> Result<f64> {
        let mut worst = f64::INFINITY;
        for &step in steps {
            let scored = self.score_canary(rubric, aggregator, step)?;
            let pairs = self
                .canary
                .iter()
                .zip(&scored)
                .map(|(c, s)| (s.total, c.label));
            let agreement = label_agreement(pairs, self.config.canary_threshold).unwrap_or(0.0);
            worst = worst.min(agreement);
        }
        Ok(worst)
    }
}

/// The step contexts a candidate is checked in: the current step and two a
/// plugin cannot predict (drawn from the operating system's randomness).
fn canary_steps(step: usize) -> Vec<u64> {
    let random = verifine_base::os_random_u64();
    let step = step as u64;
    vec![
        step,
        step + 1 + random % 10_000,
        step + 1 + (random >> 32) % 1_000_000,
    ]
}

#[cfg(test)]
#[path = "gate_tests.rs"]
mod tests;
