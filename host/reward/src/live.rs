//! The live reward of `verifine train`: the live rubric and aggregator
//! revisions score, and the step boundary is the swap point where pending
//! revisions (watched, handed in, an agent's) are decided.

use crate::convert::{SampleShape, reward_of};
use std::collections::BTreeMap;
use std::sync::Arc;
use verifine_hotswap::HotSwapConfig;
use verifine_hotswap::live::{LiveReward, LiveState, SwapOutcome};
use verifine_judge::{Judges, Ledger};
use verifine_runtime::{Provenance, Runtime, Sample};
use verifine_train::hooks::{
    Answer, BoundaryOutcome, HookError, Reward, RewardFunction, StepBoundary, StepHook,
};

/// The run's reward: the live rubric and aggregator revisions, and the swap
/// point where pending revisions are decided.
pub struct SwappingReward {
    live: LiveReward,
    hot_swap: HotSwapConfig,
    /// Decided at the last boundary; leaves the inbox after the checkpoint.
    pending: Option<SwapOutcome>,
    /// The judge models the plugins ask, and what each had spent when the
    /// costs were last taken.
    judges: Option<(Arc<Judges>, BTreeMap<String, Ledger>)>,
    /// What the rubric is shown of each answer.
    shape: SampleShape,
}

impl SwappingReward {
    /// Wraps a live reward configured by `hot_swap`.
    pub fn new(live: LiveReward, hot_swap: HotSwapConfig) -> Self {
        SwappingReward {
            live,
            hot_swap,
            pending: None,
            judges: None,
            shape: SampleShape::default(),
        }
    }

    /// Shows the rubric each answer as `shape` says (a fixed context, the
    /// reference withheld).
    pub fn with_shape(mut self, shape: SampleShape) -> Self {
        self.shape = shape;
        self
    }

    /// Reports what `judges` spend on each metrics line.
    pub fn with_judges(mut self, judges: Option<Arc<Judges>>) -> Self {
        self.judges = judges.map(|j| (j, BTreeMap::new()));
        self
    }

    /// The runtime the live revisions were loaded with (other plugins of the
    /// run load into it too).
    pub fn runtime(&self) -> &Runtime {
        self.live.runtime()
    }
}

impl RewardFunction for SwappingReward {
    fn score(&mut self, step: usize, answers: &[Answer]) -> Vec<Reward> {
        let samples: Vec<Sample> = answers.iter().map(|a| self.shape.sample(a)).collect();
        self.live
            .score(step, &samples)
            .iter()
            .map(reward_of)
            .collect()
    }

    fn provenance(&self) -> Vec<Provenance> {
        self.live.provenance()
    }

    fn take_costs(&mut self) -> BTreeMap<String, f64> {
        let Some((judges, taken)) = &mut self.judges else {
            return BTreeMap::new();
        };
        judge_costs(judges.ledgers(), taken)
    }
}

/// Each judge's spending since `taken` (which becomes now), as metrics:
/// `judge.NAME.calls`, `.failures`, `.input_tokens`, `.cached_input_tokens`,
/// `.output_tokens`, `.usd`, `.device_seconds`.
pub fn judge_costs(
    now: BTreeMap<String, Ledger>,
    taken: &mut BTreeMap<String, Ledger>,
) -> BTreeMap<String, f64> {
    let mut costs = BTreeMap::new();
    for (name, ledger) in now {
        let spent = ledger.since(&taken.get(&name).copied().unwrap_or_default());
        for (key, value) in [
            ("calls", spent.calls as f64),
            ("failures", spent.failures as f64),
            ("input_tokens", spent.usage.input as f64),
            ("cached_input_tokens", spent.usage.cached_input as f64),
            ("output_tokens", spent.usage.output as f64),
            ("usd", spent.usd),
            ("device_seconds", spent.device_seconds),
        ] {
            costs.insert(format!("judge.{name}.{key}"), value);
        }
        taken.insert(name, ledger);
    }
    costs
}

impl StepHook for SwappingReward {
    /// Candidates from the watched directory and (every `agent.every` GRPO
    /// steps) the revision agent go into the inbox; then every pending
    /// request is decided.
    fn at_boundary(&mut self, boundary: StepBoundary) -> Result<BoundaryOutcome, HookError> {
        if let Some(dir) = &self.hot_swap.watch_dir {
            self.live.collect_watched(dir, boundary.step)?;
        }
        let agent = &self.hot_swap.agent;
        if !agent.command.is_empty()
            && boundary.grpo_steps > 0
            && agent.every > 0
            && boundary.grpo_steps.is_multiple_of(agent.every)
            && boundary.step < boundary.total_steps
        {
            self.live.ask_agent(agent, boundary.step)?;
        }
        let outcome = self.live.swap_point(boundary.step)?;
        let result = BoundaryOutcome {
            needs_checkpoint: outcome.any(),
            reward_changed: outcome.changed,
        };
        self.pending = Some(outcome);
        Ok(result)
    }

    fn after_checkpoint(&mut self) -> Result<(), HookError> {
        if let Some(outcome) = self.pending.take() {
            outcome.finish()?;
        }
        Ok(())
    }

    fn state(&self) -> serde_json::Value {
        serde_json::to_value(self.live.state()).expect("live state serializes")
    }

    fn restore(&mut self, state: &serde_json::Value, step: usize) -> Result<(), HookError> {
        let state: LiveState = serde_json::from_value(state.clone())?;
        self.live.restore(&state, step)?;
        Ok(())
    }
}
