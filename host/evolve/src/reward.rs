//! What a round's training run gets from the loop: the judge (under the
//! live revision's rules) as the reward, the fixed evaluator for held-out
//! progress, and a step hook that records each monitoring point and asks
//! the trigger plugin whether the judge loop should run.

use crate::judge::JudgeRevision;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use verifine_runtime::scoring::{RewardPlugins, ScoredSample, Scorer};
use verifine_runtime::{Context, MonitorPoint, Plugin, PluginInstance, Provenance, Sample};
use verifine_train::hooks::{
    Answer, BoundaryOutcome, HookError, Reward, RewardFunction, StepBoundary, StepHook,
};

/// A reward function made of loaded plugins (the judge, or the evaluator).
pub struct PluginsReward {
    scorer: Scorer,
    provenance: Vec<Provenance>,
}

impl PluginsReward {
    /// Scores with `plugins`; `revision` (for the judge) is named in the
    /// provenance every metrics line carries.
    pub fn new(plugins: &RewardPlugins, revision: Option<&JudgeRevision>) -> crate::Result<Self> {
        let mut rubric = plugins.rubric.provenance();
        if let Some(revision) = revision {
            rubric.version = format!("{} rules r{}", rubric.version, revision.number);
        }
        Ok(PluginsReward {
            scorer: plugins.scorer()?,
            provenance: vec![rubric, plugins.aggregator.provenance()],
        })
    }
}

impl RewardFunction for PluginsReward {
    fn score(&mut self, step: usize, answers: &[Answer]) -> Vec<Reward> {
        let samples: Vec<Sample> = answers.iter().map(answer_sample).collect();
        self.scorer
            .score_batch(step as u64, 0, &samples)
            .iter()
            .map(reward_of)
            .collect()
    }

    fn provenance(&self) -> Vec<Provenance> {
        self.provenance.clone()
    }
}

/// The contract's sample for training's answer (the reference travels
/// along; a reference-free judge ignores it).
pub fn answer_sample(answer: &Answer) -> Sample {
    let sample = Sample::new(&answer.id, &answer.prompt, &answer.response);
    match &answer.reference {
        Some(reference) => sample.with_reference(reference),
        None => sample,
    }
}

/// Training's reward from a scored sample: the total and each verdict's score.
pub fn reward_of(scored: &ScoredSample) -> Reward {
    Reward {
        total: scored.total,
        criteria: scored
            .judgment
            .iter()
            .flat_map(|j| &j.verdicts)
            .map(|v| (v.criterion.clone(), v.score))
            .collect(),
    }
}

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
    reward: PluginsReward,
    trigger: PluginInstance,
    trigger_config: String,
    round: u32,
    log: MonitorLog,
}

impl RoundReward {
    /// A round's reward with `trigger` (config as JSON) writing to `log`.
    pub fn new(
        reward: PluginsReward,
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
