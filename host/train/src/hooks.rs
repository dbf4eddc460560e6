//! What training asks of the host above it. Training knows no plugin: the
//! reward, the step-boundary hook (where hot-swap happens), the SFT
//! curriculum and progress reporting reach it through these traits, and the
//! host (the CLI, the co-evolution loop) implements them with the plugin
//! runtime. A hook's own state travels in checkpoints as an opaque record.

use std::collections::BTreeMap;
use verifine_base::Provenance;

pub use crate::error::HookError;
pub use crate::prompt_pool::PromptPool;
pub use crate::sft_targets::SftTargets;

/// A final answer to judge: the policy's response to a problem, with the
/// problem's worked solution as the reference.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Unique within one call (`<step>-<i>`, `heldout-<i>`, `sft-<problem>`).
    pub id: String,
    /// The problem as the policy saw it.
    pub prompt: String,
    /// The answer turn that is rewarded.
    pub response: String,
    /// The gold worked solution.
    pub reference: Option<String>,
}

/// The reward of one answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reward {
    /// The scalar reward; `None` when it could not be computed (the run's
    /// `on_reward_failure` decides what happens then).
    pub total: Option<f64>,
    /// Score per criterion, for the metrics' per-criterion means.
    pub criteria: Vec<(String, f64)>,
}

/// Scores answers. Never fails as a whole: a sample whose reward failed
/// gets `total: None`, so a bad plugin cannot stop a run.
pub trait RewardFunction {
    /// One reward per answer, in order. `step` is the training step (0 for
    /// SFT targets and evaluation).
    fn score(&mut self, step: usize, answers: &[Answer]) -> Vec<Reward>;

    /// The revisions that produce the rewards now, named on every metrics
    /// line.
    fn provenance(&self) -> Vec<Provenance>;

    /// What scoring spent since the last call (judge-model calls, tokens,
    /// USD, device seconds …, by name), for the step's metrics line.
    /// Rewards that spend nothing keep the default.
    fn take_costs(&mut self) -> BTreeMap<String, f64> {
        BTreeMap::new()
    }
}

/// Where a step boundary falls.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepBoundary {
    /// Steps completed so far (SFT and GRPO together).
    pub step: usize,
    /// GRPO steps completed so far.
    pub grpo_steps: usize,
    /// Steps of the whole run.
    pub total_steps: usize,
    /// Set on the steps where a held-out evaluation ran: every
    /// `eval_every` GRPO steps, the last GRPO step of the run, and every
    /// `sft.eval_every` SFT steps.
    pub monitor: Option<Monitor>,
    /// Seconds spent in each phase's steps so far, this step included.
    pub phase_seconds: PhaseSeconds,
}

/// Seconds spent in each phase's steps (evaluations and checkpoints not
/// counted): what a phase's `max_seconds` is measured against and what the
/// summary reports, so arms can be compared at equal training time.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PhaseSeconds {
    /// SFT steps.
    pub sft: f64,
    /// GRPO steps.
    pub grpo: f64,
}

/// What a held-out evaluation at a step boundary measured, for a host
/// that reacts to progress (the co-evolution loop's trigger).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Monitor {
    /// Greedy held-out accuracy (pure run): the share of held-out answers
    /// the evaluator (or, without one, the training reward) scores ≥ 0.5.
    pub heldout_accuracy: f64,
    /// Mean evaluator total over the greedy held-out answers (a failed or
    /// out-of-range total counts 0).
    pub heldout_score: f64,
    /// Mean GRPO training reward of the rollouts since the previous reading
    /// (rollouts whose reward failed and abstained are left out). During
    /// SFT, which has no rollouts, the training reward's mean over the
    /// greedy held-out answers: how the reward sees the policy now.
    pub mean_reward: f64,
}

/// What a hook did at a boundary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BoundaryOutcome {
    /// The hook decided something a checkpoint must record now (e.g. a
    /// promotion, accepted or refused); training writes one before calling
    /// [`StepHook::after_checkpoint`].
    pub needs_checkpoint: bool,
    /// The reward function changed: provenance is asked again.
    pub reward_changed: bool,
}

/// Runs at every step boundary, between reward calls: the one place where
/// the reward may change (hot-swap).
pub trait StepHook {
    /// Called after each step.
    fn at_boundary(&mut self, boundary: StepBoundary) -> Result<BoundaryOutcome, HookError>;

    /// Called after the boundary's checkpoint (if any) is on disk, so what the
    /// hook decided leaves its inbox only once a checkpoint records it.
    fn after_checkpoint(&mut self) -> Result<(), HookError>;

    /// The hook's state, saved in every checkpoint.
    fn state(&self) -> serde_json::Value;

    /// Puts back a state from [`StepHook::state`] when a run resumes at `step`.
    fn restore(&mut self, state: &serde_json::Value, step: usize) -> Result<(), HookError>;
}

/// A reward function that is also the run's step-boundary hook (the host's
/// live reward: the revisions that score are the ones the hook swaps).
pub trait HookedReward: RewardFunction + StepHook {}

impl<T: RewardFunction + StepHook> HookedReward for T {}

/// A fixed reward function never changes at a boundary.
#[derive(Debug)]
pub struct Fixed<R>(pub R);

impl<R: RewardFunction> RewardFunction for Fixed<R> {
    fn score(&mut self, step: usize, answers: &[Answer]) -> Vec<Reward> {
        self.0.score(step, answers)
    }

    fn provenance(&self) -> Vec<Provenance> {
        self.0.provenance()
    }

    fn take_costs(&mut self) -> BTreeMap<String, f64> {
        self.0.take_costs()
    }
}

impl<R> StepHook for Fixed<R> {
    fn at_boundary(&mut self, _: StepBoundary) -> Result<BoundaryOutcome, HookError> {
        Ok(BoundaryOutcome::default())
    }

    fn after_checkpoint(&mut self) -> Result<(), HookError> {
        Ok(())
    }

    fn state(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    fn restore(&mut self, _: &serde_json::Value, _: usize) -> Result<(), HookError> {
        Ok(())
    }
}

/// One SFT target as the curriculum sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct SftCandidate {
    /// `sft-<problem>`.
    pub id: String,
    /// Scenario tags (`steps:N`, `form:story|instructions`).
    pub tags: Vec<String>,
    /// The reward function's score of the target against the gold answer
    /// (`None` when judging failed).
    pub judge_score: Option<f64>,
}

/// The curriculum's decision on one SFT target.
#[derive(Debug, Clone, PartialEq)]
pub struct SftDecision {
    /// Kept with this sampling weight (must be positive and finite), or
    /// dropped (`None`).
    pub weight: Option<f64>,
    /// Why, in the curriculum's words.
    pub reason: String,
}

/// Keeps, drops or weights SFT targets after the reward judged them. The
/// judge never enters the loss: it only decides what is trained on.
pub trait SftCurriculum {
    /// The revision that decides, recorded in checkpoints and the summary.
    fn provenance(&self) -> Provenance;

    /// One decision per candidate, in order.
    fn select(&mut self, candidates: &[SftCandidate]) -> Result<Vec<SftDecision>, HookError>;
}

/// Progress of a run, for a bar or a log.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// The run starts (or resumes) with `done` of `total` steps behind it.
    Started {
        /// Steps of the whole run.
        total: usize,
        /// Steps already done (non-zero on resume).
        done: usize,
    },
    /// A step finished.
    Step {
        /// Steps completed.
        step: usize,
        /// A one-line summary ("sft loss 1.234", "grpo reward 0.5 …").
        message: String,
    },
    /// Training is over; final evaluation and outputs follow.
    Finished,
}

/// What the host supplies to a run.
pub struct Host {
    /// Rewards, and the step-boundary hook.
    pub reward: Box<dyn HookedReward>,
    /// GRPO prompts drawn by weight; `None` draws uniformly from the
    /// generated training problems. Checkpoints record its fingerprint and
    /// a resume with another pool is refused.
    pub prompts: Option<PromptPool>,
    /// Scores held-out answers instead of the training reward (a fixed,
    /// reference-based evaluator while the training reward evolves); `None`
    /// evaluates with the training reward.
    pub evaluator: Option<Box<dyn RewardFunction>>,
    /// The SFT curriculum, when one is configured.
    pub curriculum: Option<Box<dyn SftCurriculum>>,
    /// SFT targets the host chose (with the judge's membership decisions),
    /// trained on instead of the generated training problems; not together
    /// with `curriculum`. Checkpoints record their fingerprint and a resume
    /// with other targets is refused.
    pub sft_targets: Option<SftTargets>,
    /// Told about progress (a terminal bar, a log, nothing).
    pub progress: Box<dyn FnMut(Progress)>,
}
