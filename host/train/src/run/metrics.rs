//! The schema of `metrics.jsonl`: one line per step and per evaluation.

use serde::Serialize;
use std::collections::BTreeMap;
use verifine_base::Provenance;

/// Which part of a run a metrics line reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// An SFT update.
    #[default]
    Sft,
    /// A GRPO update.
    Grpo,
    /// A held-out evaluation.
    Eval,
}

/// The `skipped` field of an update whose gradient norm was `grad_norm`: an
/// update whose loss or gradient norm is not finite is skipped, and its norm
/// reported as not finite.
pub fn skipped(grad_norm: Option<f64>) -> Option<&'static str> {
    grad_norm
        .is_some_and(|n| !n.is_finite())
        .then_some("non-finite loss or gradient norm: update skipped")
}

/// One line of `metrics.jsonl`; absent fields are left out.
#[derive(Debug, Default, Serialize)]
pub struct MetricsLine<'a> {
    /// What the line reports.
    pub phase: Phase,
    /// Steps completed before this one (SFT and GRPO together).
    pub step: usize,
    /// The training loss.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss: Option<f64>,
    /// The learning rate of this update.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub learning_rate: Option<f64>,
    /// Gradient norm before clipping.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grad_norm: Option<f64>,
    /// Why the update was skipped (a non-finite loss or gradient norm).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<&'static str>,
    /// Mean reward of the rollouts that got one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reward_mean: Option<f64>,
    /// Rollouts whose reward could not be computed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reward_failures: Option<usize>,
    /// Mean score per rubric criterion.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub criteria: BTreeMap<String, f64>,
    /// What scoring spent since the previous line (judge models' calls,
    /// tokens, USD, device seconds), as the reward reports it.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub reward_costs: BTreeMap<String, f64>,
    /// The k3 KL estimate to the reference (`beta > 0`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kl: Option<f64>,
    /// Mean answer turns (self-verification).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_turns: Option<f64>,
    /// Verification replies that said NO.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdicts_no: Option<usize>,
    /// Verification replies that said neither YES nor NO.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdicts_unclear: Option<usize>,
    /// Rejection sampling: passed completions waiting for a full batch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rft_waiting: Option<usize>,
    /// Completion tokens per second of this step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_per_second: Option<f64>,
    /// Seconds of training steps so far, SFT and GRPO (evaluations and
    /// checkpoints not counted): the x axis of accuracy against time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub train_seconds: Option<f64>,
    /// Held-out accuracy, pure run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heldout_accuracy: Option<f64>,
    /// Held-out accuracy with final verification.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heldout_accuracy_fv: Option<f64>,
    /// Held-out pass@k (`pass_at_k` sampled answers per problem).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heldout_pass_at_k: Option<f64>,
    /// Share of this step's prompt groups with at least one rewarded
    /// rollout (pass@G on training prompts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups_solved: Option<f64>,
    /// Share of this step's prompt groups whose rewards differ, so they
    /// carry a learning signal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups_informative: Option<f64>,
    /// The plugin revisions behind the numbers.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub plugins: &'a [Provenance],
}
