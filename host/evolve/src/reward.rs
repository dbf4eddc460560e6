//! What a round's training run gets from the loop: the judge (under the
//! live revision's rules) as the reward, the fixed evaluator for held-out
//! progress, and a step hook that records each monitoring point and asks
//! the trigger plugin whether the judge loop should run.

use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use verifine_reward::FixedReward;
use verifine_runtime::{Context, MonitorPoint, Plugin, PluginInstance, Provenance};
use verifine_train::hooks::{
    Answer, BoundaryOutcome, HookError, Reward, RewardFunction, StepBoundary, StepHook,
};

/// One monitoring point and what the trigger made of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MonitorRecord {
    /// GRPO step of the round.
    pub step: u64,
    /// Held-out accuracy on the fixed evaluator, in percent (the trigger's unit).
    pub evaluator_score: f64,
    /// Mean judge reward since the previous point, in percent.
    pub judge_reward: f64,
    /// Whether the trigger fired here.
    pub fired: bool,
    /// The trigger's reason (or its error).
    pub reason: String,
}

/// The round's monitor: its records are shared with the loop, which reads
/// them when the round is over.
pub type MonitorLog = Rc<RefCell<Vec<MonitorRecord>>>;

/// A round's reward and step hook: the judge never changes inside a round;
/// at each monitoring point the trigger plugin reads the history.
pub struct RoundReward {
    reward: FixedReward,
    trigger: PluginInstance,
    trigger_config: String,
    round: u32,
    log: MonitorLog,
}

impl RoundReward {
    /// A round's reward with `trigger` (config as JSON) writing to `log`.
    pub fn new(
        reward: FixedReward,
        trigger: &Arc<Plugin>,
        trigger_config: &serde_json::Value,
        round: u32,
        log: MonitorLog,
    ) -> Self {
        RoundReward {
            reward,
            trigger: trigger.instance(),
            trigger_config: trigger_config.to_string(),
            round,
            log,
        }
    }
}

impl RewardFunction for RoundReward {
    fn score(&mut self, step: usize, answers: &[Answer]) -> Vec<Reward> {
        self.reward.score(step, answers)
    }

    fn provenance(&self) -> Vec<Provenance> {
        self.reward.provenance()
    }
}

impl StepHook for RoundReward {
    fn at_boundary(&mut self, boundary: StepBoundary) -> Result<BoundaryOutcome, HookError> {
        let Some(monitor) = boundary.monitor else {
            return Ok(BoundaryOutcome::default());
        };
        // The round's own steps (GRPO, or SFT in membership mode): a round
        // starts from the base, so no steps came before.
        let step = boundary.step as u64;
        let mut history: Vec<MonitorPoint> = self
            .log
            .borrow()
            .iter()
            .map(|r| MonitorPoint {
                step: r.step,
                round: self.round,
                evaluator_score: r.evaluator_score,
                judge_reward: r.judge_reward,
            })
            .collect();
        let point = MonitorPoint {
            step,
            round: self.round,
            evaluator_score: monitor.heldout_accuracy * 100.0,
            judge_reward: monitor.mean_reward * 100.0,
        };
        history.push(point);
        let ctx = Context {
            step,
            round: self.round,
            config: self.trigger_config.clone(),
        };
        let (fired, reason) = match self.trigger.check(&ctx, &history) {
            Ok(Ok(decision)) => (decision.fire, decision.reason),
            Ok(Err(e)) => (false, format!("trigger could not decide: {e}")),
            Err(e) => (false, format!("trigger failed: {e}")),
        };
        tracing::info!(round = self.round, step, fired, %reason, "monitor");
        self.log.borrow_mut().push(MonitorRecord {
            step,
            evaluator_score: point.evaluator_score,
            judge_reward: point.judge_reward,
            fired,
            reason,
        });
        Ok(BoundaryOutcome::default())
    }

    fn after_checkpoint(&mut self) -> Result<(), HookError> {
        Ok(())
    }

    fn state(&self) -> serde_json::Value {
        serde_json::to_value(&*self.log.borrow()).unwrap_or_default()
    }

    fn restore(&mut self, state: &serde_json::Value, _: usize) -> Result<(), HookError> {
        let records: Vec<MonitorRecord> = serde_json::from_value(state.clone())?;
        *self.log.borrow_mut() = records;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use verifine_runtime::scoring::RewardPlugins;
    use verifine_runtime::{Limits, PluginKind, Runtime};
    use verifine_train::hooks::Monitor;

    #[test]
    fn the_trigger_fires_on_a_plateau_and_holds_while_the_evaluator_rises() {
        let runtime = Runtime::new(Limits::default()).unwrap();
        let trigger = runtime
            .load_kind("plateau-trigger", PluginKind::Trigger)
            .unwrap();
        let judge =
            RewardPlugins::load(&runtime, "worked-steps", &json!({}), None, &json!({})).unwrap();
        let run = |accuracies: &[f64]| {
            let log = MonitorLog::default();
            let reward = FixedReward::new(&judge, None).unwrap();
            let mut hook = RoundReward::new(
                reward,
                &trigger,
                &json!({"every": 10, "window": 4, "threshold": 0.5}),
                1,
                log.clone(),
            );
            for (i, &a) in accuracies.iter().enumerate() {
                let monitor = Monitor {
                    heldout_accuracy: a,
                    heldout_score: a,
                    mean_reward: a,
                };
                let step = (i + 1) * 10;
                hook.at_boundary(StepBoundary {
                    step,
                    grpo_steps: step,
                    total_steps: 100,
                    monitor: Some(monitor),
                    phase_seconds: Default::default(),
                })
                .unwrap();
                // A boundary without a reading records nothing.
                hook.at_boundary(StepBoundary {
                    step: step + 1,
                    grpo_steps: step + 1,
                    total_steps: 100,
                    monitor: None,
                    phase_seconds: Default::default(),
                })
                .unwrap();
            }
            log.borrow().clone()
        };
        let flat = run(&[0.4, 0.4, 0.41, 0.4, 0.4]);
        assert_eq!(flat.len(), 5);
        assert!(flat[..4].iter().all(|r| !r.fired));
        assert!(flat[4].fired, "{}", flat[4].reason);
        assert_eq!(
            flat[4].evaluator_score, 40.0,
            "accuracy is passed in percent"
        );
        let rising = run(&[0.2, 0.3, 0.4, 0.5, 0.6]);
        assert!(rising.iter().all(|r| !r.fired), "{:?}", rising.last());
    }
}
