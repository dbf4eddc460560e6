//! The GRPO objective, with TRL / verl option names so configs carry over.
//!
//! Advantages are group-relative: each prompt gets `num_generations`
//! completions and a completion's advantage is its reward minus its group's
//! mean, scaled per `scale_rewards`. The per-token loss is the clipped
//! surrogate (DAPO's clip-higher: `epsilon` below, `epsilon_high` above) plus
//! `beta` × the k3 estimate of KL to a frozen reference.

use crate::error::{Result, TrainError, ensure};
use candle_core::Tensor;
use serde::{Deserialize, Serialize};
use verifine_base::PASS_MARK;

/// How rewards are scaled into advantages (`scale_rewards`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScaleRewards {
    /// Divide by the group's std (GRPO).
    Group,
    /// Divide by the std of the whole batch.
    Batch,
    /// Centre only (Dr. GRPO).
    None,
}

/// How per-token losses are reduced (`loss_type`). The names are verl's;
/// TRL's `dapo` and `bnpo` (the same mean on one process) and `grpo` are
/// accepted for them, so a TRL config carries over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LossType {
    /// Mean over every completion token of the batch (DAPO).
    #[serde(alias = "dapo", alias = "bnpo")]
    TokenMean,
    /// Mean over tokens of each sequence, then over sequences (original GRPO).
    #[serde(alias = "grpo")]
    SeqMeanTokenMean,
    /// Sum over tokens divided by batch size × max completion length (Dr. GRPO).
    #[serde(rename = "dr_grpo")]
    DrGrpo,
}

/// Where a completion's advantage comes from (verl's `adv_estimator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AdvEstimator {
    /// Reward minus the group's mean, scaled per `scale_rewards` (GRPO).
    Grpo,
    /// Rejection-sampling fine-tuning (RFT, STaR): a completion the reward
    /// passes (≥ 0.5) gets advantage 1, every other one leaves the batch.
    /// With one update per rollout the surrogate's gradient is then that of
    /// SFT on the passed samples: the control GRPO is measured against,
    /// with the same sampler, reward plugin and step.
    #[serde(alias = "rft")]
    RejectionSampling,
}

/// Objective settings (TRL names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GrpoConfig {
    /// GRPO's group-relative advantages, or rejection sampling (RFT).
    pub adv_estimator: AdvEstimator,
    /// Completions per prompt.
    pub num_generations: usize,
    /// Lower clip range: ratios below 1 − epsilon stop contributing.
    pub epsilon: f64,
    /// Upper clip range (clip-higher); equal to `epsilon` for symmetric clipping.
    pub epsilon_high: f64,
    /// KL coefficient; 0 disables the KL term and the reference forward.
    pub beta: f64,
    /// Advantage scaling.
    pub scale_rewards: ScaleRewards,
    /// Loss reduction.
    pub loss_type: LossType,
    /// Drop groups whose rewards are all equal (they carry no signal).
    pub dynamic_sampling: bool,
    /// Completions cut at the length limit get no loss.
    pub mask_truncated_completions: bool,
    /// Rejection sampling only: passed completions wait until this many are
    /// kept, then the oldest this many train as one batch, as offline RFT
    /// (STaR) fine-tunes on full batches; the rest wait for the next step.
    /// At 1 a step updates on whatever it passed; with one or two passes a
    /// step Adam moves every weight a full step on them, and the policy fell
    /// apart that way (BENCHMARKS.md, issue 39).
    pub rft_batch_size: usize,
}

impl Default for GrpoConfig {
    fn default() -> Self {
        GrpoConfig {
            adv_estimator: AdvEstimator::Grpo,
            num_generations: 8,
            epsilon: 0.2,
            epsilon_high: 0.28,
            beta: 0.0,
            scale_rewards: ScaleRewards::Group,
            loss_type: LossType::TokenMean,
            dynamic_sampling: true,
            mask_truncated_completions: true,
            rft_batch_size: 16,
        }
    }
}

/// Added to std before dividing, as TRL does.
const STD_EPS: f64 = 1e-4;

/// Advantages for rewards laid out group by group (`num_generations` each).
/// With rejection sampling, 1 for a passed completion and `None` for the
/// rest. Otherwise a `None` reward (the judge abstained) leaves its group's statistics and
/// gets no advantage; so does every member of a dropped group.
pub fn advantages(rewards: &[Option<f64>], config: &GrpoConfig) -> Result<Vec<Option<f64>>> {
    let g = config.num_generations;
    ensure!(g > 0, "num_generations must be at least 1");
    ensure!(
        rewards.len().is_multiple_of(g),
        "{} rewards do not split into groups of {g}",
        rewards.len()
    );
    if config.adv_estimator == AdvEstimator::RejectionSampling {
        return Ok(rewards
            .iter()
            .map(|r| r.filter(|&r| r >= PASS_MARK).map(|_| 1.0))
            .collect());
    }
    let present: Vec<f64> = rewards.iter().flatten().copied().collect();
    let batch_std = std_dev(&present);
    let mut out = Vec::with_capacity(rewards.len());
    for group in rewards.chunks(g) {
        let values: Vec<f64> = group.iter().flatten().copied().collect();
        let all_equal = values.windows(2).all(|w| w[0] == w[1]);
        if values.is_empty() || (config.dynamic_sampling && all_equal) {
            out.extend(group.iter().map(|_| None));
            continue;
        }
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        let scale = match config.scale_rewards {
            ScaleRewards::Group => std_dev(&values) + STD_EPS,
            ScaleRewards::Batch => batch_std + STD_EPS,
            ScaleRewards::None => 1.0,
        };
        out.extend(group.iter().map(|r| r.map(|r| (r - mean) / scale)));
    }
    Ok(out)
}

/// Unbiased standard deviation (0 for fewer than two values).
fn std_dev(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (values.len() - 1) as f64;
    var.sqrt()
}

/// The inputs of one loss evaluation, all `[batch, completion_len]` except
/// `advantages` (`[batch]`).
pub struct LossInputs<'a> {
    /// Log-probs of the sampled tokens under the current policy (with graph).
    pub log_probs: &'a Tensor,
    /// Log-probs under the policy that generated the samples (no graph).
    pub old_log_probs: &'a Tensor,
    /// Log-probs under the frozen reference; needed when `beta > 0`.
    pub ref_log_probs: Option<&'a Tensor>,
    /// 1 for tokens that enter the loss (completion, not padding, not
    /// verification turns), 0 otherwise.
    pub mask: &'a Tensor,
    /// One advantage per sequence.
    pub advantages: &'a Tensor,
}

/// The GRPO loss (to minimize) and its KL term for logging.
pub fn loss(inputs: &LossInputs<'_>, config: &GrpoConfig) -> Result<(Tensor, Option<Tensor>)> {
    let advantages = inputs.advantages.unsqueeze(1)?;
    let ratio = (inputs.log_probs - inputs.old_log_probs)?.exp()?;
    let clipped = ratio.clamp(1.0 - config.epsilon, 1.0 + config.epsilon_high)?;
    let objective = ratio
        .broadcast_mul(&advantages)?
        .minimum(&clipped.broadcast_mul(&advantages)?)?;
    let mut per_token = objective.neg()?;
    let mut kl = None;
    if config.beta > 0.0 {
        let reference = inputs
            .ref_log_probs
            .ok_or_else(|| TrainError::Invalid("beta > 0 needs reference log-probs".into()))?;
        // k3: exp(ref − logp) − (ref − logp) − 1 ≥ 0, unbiased for KL(π‖ref).
        let delta = (reference - inputs.log_probs)?;
        let k3 = ((delta.exp()? - &delta)? - 1.0)?;
        per_token = (per_token + (&k3 * config.beta)?)?;
        kl = Some(masked_mean(&k3, inputs.mask)?);
    }
    Ok((reduce(&per_token, inputs.mask, config.loss_type)?, kl))
}

/// Mean of `values` where `mask` is 1.
pub fn masked_mean(values: &Tensor, mask: &Tensor) -> Result<Tensor> {
    let total = (values * mask)?.sum_all()?;
    let count = mask.sum_all()?.maximum(1.0)?;
    Ok(total.div(&count)?)
}

fn reduce(per_token: &Tensor, mask: &Tensor, loss_type: LossType) -> Result<Tensor> {
    match loss_type {
        LossType::TokenMean => masked_mean(per_token, mask),
        LossType::SeqMeanTokenMean => {
            let sums = (per_token * mask)?.sum(1)?;
            let counts = mask.sum(1)?.maximum(1.0)?;
            Ok((sums / counts)?.mean_all()?)
        }
        LossType::DrGrpo => {
            let (batch, len) = mask.dims2()?;
            Ok(((per_token * mask)?.sum_all()? / (batch * len) as f64)?)
        }
    }
}

#[cfg(test)]
#[path = "grpo_tests.rs"]
mod tests;
