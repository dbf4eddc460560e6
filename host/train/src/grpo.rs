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
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    fn config(g: usize) -> GrpoConfig {
        GrpoConfig {
            num_generations: g,
            ..GrpoConfig::default()
        }
    }

    #[test]
    fn all_equal_group_has_zero_advantage_and_is_dropped_with_dynamic_sampling() {
        let rewards = [Some(1.0), Some(1.0), Some(0.0), Some(1.0)];
        let kept = advantages(
            &rewards,
            &GrpoConfig {
                dynamic_sampling: false,
                ..config(2)
            },
        )
        .unwrap();
        assert_eq!(&kept[..2], &[Some(0.0), Some(0.0)]);
        let dropped = advantages(&rewards, &config(2)).unwrap();
        assert_eq!(&dropped[..2], &[None, None]);
        // The informative group: mean 0.5, unbiased std √0.5.
        let a = dropped[2].unwrap();
        assert!((a + 0.5 / (0.5f64.sqrt() + STD_EPS)).abs() < 1e-12);
        assert!((dropped[3].unwrap() + a).abs() < 1e-12);
    }

    #[test]
    fn rejection_sampling_keeps_the_passed_completions_with_advantage_one() {
        let rewards = [Some(1.0), Some(0.1), None, Some(0.5), Some(1.0), Some(1.0)];
        let a = advantages(
            &rewards,
            &GrpoConfig {
                adv_estimator: AdvEstimator::RejectionSampling,
                ..config(3)
            },
        )
        .unwrap();
        // An all-passed group is kept: RFT imitates every passed sample.
        assert_eq!(
            a,
            vec![Some(1.0), None, None, Some(1.0), Some(1.0), Some(1.0)]
        );
    }

    #[test]
    fn abstained_samples_leave_their_group() {
        let rewards = [Some(1.0), None, Some(0.0)];
        let a = advantages(
            &rewards,
            &GrpoConfig {
                scale_rewards: ScaleRewards::None,
                ..config(3)
            },
        )
        .unwrap();
        assert_eq!(a, vec![Some(0.5), None, Some(-0.5)]);
    }

    #[test]
    fn uneven_groups_are_an_error() {
        assert!(advantages(&[Some(1.0); 5], &config(2)).is_err());
    }

    /// At ratio 1 (current = old log-probs) the clip is inactive, so the
    /// gradient equals the plain policy gradient −A·∇logπ / tokens.
    #[test]
    fn at_ratio_one_the_clipped_gradient_is_the_policy_gradient() {
        let device = Device::Cpu;
        let values = Tensor::new(&[[-1.0f32, -2.0, -0.5], [-0.3, -1.2, -2.2]], &device).unwrap();
        let log_probs = Var::from_tensor(&values).unwrap();
        let old = values.detach();
        let mask = Tensor::new(&[[1.0f32, 1.0, 0.0], [1.0, 1.0, 1.0]], &device).unwrap();
        let adv = Tensor::new(&[0.7f32, -1.3], &device).unwrap();
        let inputs = LossInputs {
            log_probs: log_probs.as_tensor(),
            old_log_probs: &old,
            ref_log_probs: None,
            mask: &mask,
            advantages: &adv,
        };
        let (loss, kl) = loss(&inputs, &config(2)).unwrap();
        assert!(kl.is_none());
        let grad = loss.backward().unwrap();
        let grad: Vec<Vec<f32>> = grad.get(log_probs.as_tensor()).unwrap().to_vec2().unwrap();
        let expected = [
            [-0.7 / 5.0, -0.7 / 5.0, 0.0],
            [1.3 / 5.0, 1.3 / 5.0, 1.3 / 5.0],
        ];
        for (row, want) in grad.iter().zip(expected) {
            for (g, w) in row.iter().zip(want) {
                assert!((g - w).abs() < 1e-6, "{grad:?}");
            }
        }
    }

    #[test]
    fn clipping_stops_the_gradient_beyond_the_trust_region() {
        let device = Device::Cpu;
        // ratio e^0.5 ≈ 1.65 > 1 + epsilon_high with a positive advantage: no gradient.
        let log_probs = Var::from_tensor(&Tensor::new(&[[0.0f32]], &device).unwrap()).unwrap();
        let old = Tensor::new(&[[-0.5f32]], &device).unwrap();
        let mask = Tensor::new(&[[1.0f32]], &device).unwrap();
        let adv = Tensor::new(&[1.0f32], &device).unwrap();
        let inputs = LossInputs {
            log_probs: log_probs.as_tensor(),
            old_log_probs: &old,
            ref_log_probs: None,
            mask: &mask,
            advantages: &adv,
        };
        let (loss, _) = loss(&inputs, &config(1)).unwrap();
        let grad = loss.backward().unwrap();
        let g: Vec<Vec<f32>> = grad.get(log_probs.as_tensor()).unwrap().to_vec2().unwrap();
        assert_eq!(g[0][0], 0.0);
    }

    #[test]
    fn k3_is_zero_at_the_reference_and_positive_elsewhere() {
        let device = Device::Cpu;
        let lp = Tensor::new(&[[-1.0f32, -2.0]], &device).unwrap();
        let mask = Tensor::new(&[[1.0f32, 1.0]], &device).unwrap();
        let adv = Tensor::new(&[0.0f32], &device).unwrap();
        let cfg = GrpoConfig {
            beta: 0.1,
            ..config(1)
        };
        let at = |reference: &Tensor| {
            let inputs = LossInputs {
                log_probs: &lp,
                old_log_probs: &lp,
                ref_log_probs: Some(reference),
                mask: &mask,
                advantages: &adv,
            };
            loss(&inputs, &cfg)
                .unwrap()
                .1
                .unwrap()
                .to_scalar::<f32>()
                .unwrap()
        };
        assert_eq!(at(&lp), 0.0);
        assert!(at(&Tensor::new(&[[-1.5f32, -1.0]], &device).unwrap()) > 0.0);
    }

    /// One GRPO update on a real decoder moves probability toward the
    /// completion with the higher reward and away from the other.
    #[test]
    fn a_grpo_update_favours_the_rewarded_completion() {
        use crate::model::{Decoder, ModelConfig, sorted_vars};
        use crate::optim::{AdamW, OptimConfig};
        use crate::sequences::{Sequence, batch, log_probs};
        use candle_nn::VarMap;

        let device = Device::Cpu;
        let varmap = VarMap::new();
        let model = Decoder::new(ModelConfig::tiny(9), &varmap, &device).unwrap();
        let seqs = [
            Sequence::prompt_response(&[1, 2], &[3, 4]),
            Sequence::prompt_response(&[1, 2], &[5, 6]),
        ];
        let b = batch(&seqs, 0, &device).unwrap();
        let cfg = config(2);
        let adv: Vec<f32> = advantages(&[Some(1.0), Some(0.0)], &cfg)
            .unwrap()
            .into_iter()
            .map(|a| a.unwrap() as f32)
            .collect();
        let adv = Tensor::new(adv.as_slice(), &device).unwrap();
        let completion_log_prob = |lp: &Tensor| -> Vec<f32> {
            (lp * &b.loss_mask)
                .unwrap()
                .sum(1)
                .unwrap()
                .to_vec1()
                .unwrap()
        };
        let old = log_probs(&model.detached(), &b).unwrap();
        let before = completion_log_prob(&old);
        let optim = OptimConfig {
            learning_rate: 1e-2,
            warmup_steps: 0,
            ..OptimConfig::default()
        };
        let mut opt = AdamW::new(sorted_vars(&varmap), optim).unwrap();
        for _ in 0..3 {
            let current = log_probs(&model, &b).unwrap();
            let inputs = LossInputs {
                log_probs: &current,
                old_log_probs: &old,
                ref_log_probs: None,
                mask: &b.loss_mask,
                advantages: &adv,
            };
            let (l, _) = loss(&inputs, &cfg).unwrap();
            opt.step(&l.backward().unwrap()).unwrap();
        }
        let after = completion_log_prob(&log_probs(&model, &b).unwrap());
        assert!(
            after[0] > before[0],
            "rewarded: {} -> {}",
            before[0],
            after[0]
        );
        assert!(
            after[1] < before[1],
            "unrewarded: {} -> {}",
            before[1],
            after[1]
        );
    }

    #[test]
    fn loss_types_reduce_as_named() {
        let device = Device::Cpu;
        let per_token = Tensor::new(&[[1.0f32, 3.0, 0.0], [2.0, 2.0, 2.0]], &device).unwrap();
        let mask = Tensor::new(&[[1.0f32, 1.0, 0.0], [1.0, 1.0, 1.0]], &device).unwrap();
        let value = |t| {
            reduce(&per_token, &mask, t)
                .unwrap()
                .to_scalar::<f32>()
                .unwrap()
        };
        assert!((value(LossType::TokenMean) - 10.0 / 5.0).abs() < 1e-6);
        assert!((value(LossType::SeqMeanTokenMean) - (2.0 + 2.0) / 2.0).abs() < 1e-6);
        assert!((value(LossType::DrGrpo) - 10.0 / 6.0).abs() < 1e-6);
    }

    #[test]
    fn trl_option_names_are_accepted() {
        let loss_type = |name: &str| {
            toml::from_str::<GrpoConfig>(&format!("loss_type = {name:?}"))
                .unwrap()
                .loss_type
        };
        assert_eq!(loss_type("grpo"), LossType::SeqMeanTokenMean);
        assert_eq!(loss_type("dapo"), LossType::TokenMean);
        assert_eq!(loss_type("bnpo"), LossType::TokenMean);
        assert_eq!(loss_type("dr_grpo"), LossType::DrGrpo);
        assert_eq!(loss_type("seq-mean-token-mean"), LossType::SeqMeanTokenMean);
        assert!(toml::from_str::<GrpoConfig>("loss_type = \"sum\"").is_err());
        let phase: crate::config::GrpoPhase = toml::from_str("max_completion_length = 12").unwrap();
        assert_eq!(phase.max_new_tokens, 12);
    }
}
