//! Tests of the GRPO objective: advantages and the loss.

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
}
