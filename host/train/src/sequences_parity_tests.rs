//! The hand-written training pass (`model::manual`) against candle's
//! autograd (value and gradient of every weight) and against finite
//! differences, through the log-probs a loss reads. Here rather than under
//! `model`: they build batches with this module, which builds on `model`.

use super::{Backward, Sequence, SequenceBatch, batch, policy_log_probs};
use crate::model::manual::{first_trained_block, supports};
use crate::model::test_models::{
    add_biases, attach_adapters, first_adapter, flat_values, freeze_embedding, freeze_projections,
    norm_weights, some_projection_weights, untie_head,
};
use crate::model::{Decoder, ModelConfig, sorted_vars};
use candle_core::backprop::GradStore;
use candle_core::{Device, Tensor};
use candle_nn::VarMap;
use verifine_base::SplitMix64;

const VOCAB: usize = 23;

/// A decoder with weights far enough from their initial values that every
/// path through it matters (norm weights away from 1, larger projections).
fn model(config: ModelConfig, seed: u64) -> (Decoder, VarMap) {
    let varmap = VarMap::new();
    let model = Decoder::new(config, &varmap, &Device::Cpu).unwrap();
    let mut rng = SplitMix64::new(seed);
    for (_, var) in sorted_vars(&varmap) {
        let values: Vec<f32> = (0..var.elem_count())
            .map(|_| (rng.below(2001) as f32 - 1000.0) / 1000.0 * 0.4)
            .collect();
        let noise = Tensor::from_vec(values, var.shape(), &Device::Cpu).unwrap();
        var.set(&(var.as_tensor() + noise).unwrap()).unwrap();
    }
    (model, varmap)
}

/// Three conversations of different lengths (so padding is hidden from
/// attention and left out of the loss), prompts not trained.
fn conversations() -> SequenceBatch {
    let sequences = [
        Sequence::prompt_response(&[1, 5, 7, 2], &[9, 4, 4, 11, 3]),
        Sequence::prompt_response(&[3, 3], &[8, 22]),
        Sequence::prompt_response(&[6, 1, 0, 12, 19, 2], &[21, 5]),
    ];
    batch(&sequences, 0, &Device::Cpu).unwrap()
}

/// A loss that weighs every trained position differently; also returns the
/// masked log-probs it sums.
fn weighted_loss(values: &Tensor, batch: &SequenceBatch) -> (Tensor, Vec<f32>) {
    let (rows, seq) = batch.input.dims2().unwrap();
    let weights: Vec<f32> = (0..rows * seq)
        .map(|i| 0.3 + (i % 7) as f32 * 0.25 - 1.0)
        .collect();
    let weights = Tensor::from_vec(weights, (rows, seq), &Device::Cpu).unwrap();
    let masked = (values * &batch.loss_mask).unwrap();
    let flat = flat_values(&masked);
    ((masked * weights).unwrap().sum_all().unwrap(), flat)
}

/// [`weighted_loss`]'s masked log-probs and gradients.
fn loss_and_grads(
    model: &Decoder,
    batch: &SequenceBatch,
    backward: Backward,
) -> (Vec<f32>, GradStore) {
    let pass = policy_log_probs(model, batch, backward).unwrap();
    let (loss, values) = weighted_loss(&pass.values, batch);
    (values, pass.backward(&loss).unwrap())
}

/// Largest difference relative to the larger of the two magnitudes (and 1e-3).
fn relative_gap(a: &Tensor, b: &Tensor) -> f32 {
    let (a, b) = (flat_values(a), flat_values(b));
    let scale = a.iter().chain(&b).fold(1e-3f32, |m, x| m.max(x.abs()));
    a.iter()
        .zip(&b)
        .fold(0f32, |m, (x, y)| m.max((x - y).abs()))
        / scale
}

fn assert_matches_autograd(model: &Decoder, varmap: &VarMap) {
    let batch = conversations();
    let (manual_values, manual) = loss_and_grads(model, &batch, Backward::Fastest);
    let (reference_values, reference) = loss_and_grads(model, &batch, Backward::Autograd);
    for (i, (m, r)) in manual_values.iter().zip(&reference_values).enumerate() {
        assert!(
            (m - r).abs() < 1e-4,
            "log-prob {i}: {m} by hand, {r} by autograd"
        );
    }
    for (name, var) in sorted_vars(varmap) {
        let (m, r) = (manual.get(var.as_tensor()), reference.get(var.as_tensor()));
        match (m, r) {
            (Some(m), Some(r)) => {
                let gap = relative_gap(m, r);
                assert!(
                    gap < 1e-3,
                    "{name}: gradients differ by {gap} of their scale"
                );
            }
            (None, None) => {}
            (m, r) => panic!(
                "{name}: gradient by hand {}, by autograd {}",
                m.is_some(),
                r.is_some()
            ),
        }
    }
}

#[test]
fn log_probs_and_every_gradient_match_autograd() {
    let (model, varmap) = model(ModelConfig::tiny(VOCAB), 1);
    assert!(supports(&model));
    assert_matches_autograd(&model, &varmap);
}

#[test]
fn multi_query_attention_and_an_untied_head_match_autograd() {
    let config = ModelConfig {
        num_heads: 4,
        num_kv_heads: 1,
        num_layers: 3,
        ..ModelConfig::tiny(VOCAB)
    };
    let (mut model, varmap) = model(config, 2);
    untie_head(&mut model, &varmap);
    assert_matches_autograd(&model, &varmap);
}

#[test]
fn frozen_weights_get_no_gradient() {
    let (model, _) = model(ModelConfig::tiny(VOCAB), 3);
    let frozen = model.frozen_copy().unwrap();
    assert!(supports(&frozen));
    let (_, grads) = loss_and_grads(&frozen, &conversations(), Backward::Fastest);
    for weight in some_projection_weights(&frozen) {
        assert!(
            grads.get(&weight).is_none(),
            "a frozen weight got a gradient"
        );
    }
}

#[test]
fn frozen_norms_get_no_gradient_on_either_pass() {
    let (model, varmap) = model(ModelConfig::tiny(VOCAB), 8);
    let mut frozen = model.frozen_copy().unwrap();
    attach_adapters(&mut frozen, &varmap, 0..2);
    assert!(supports(&frozen));
    assert_eq!(first_trained_block(&frozen), 0, "every block is reached");
    let norms = norm_weights(&frozen);
    let adapter = first_adapter(&frozen).unwrap();
    for (pass, backward) in [
        ("by hand", Backward::Fastest),
        ("autograd", Backward::Autograd),
    ] {
        let (_, grads) = loss_and_grads(&frozen, &conversations(), backward);
        assert!(grads.get(&adapter).is_some(), "{pass}: the adapter trains");
        for (i, norm) in norms.iter().enumerate() {
            assert!(
                grads.get(norm).is_none(),
                "{pass}: frozen norm {i} got a gradient"
            );
        }
    }
}

#[test]
fn lora_adapters_on_frozen_projections_match_autograd() {
    let (mut model, varmap) = model(ModelConfig::tiny(VOCAB), 6);
    attach_adapters(&mut model, &varmap, 0..2);
    assert!(supports(&model));
    assert_matches_autograd(&model, &varmap);
}

#[test]
fn a_backward_pass_over_frozen_lower_blocks_stops_at_the_first_trained_one() {
    let config = ModelConfig {
        num_layers: 4,
        ..ModelConfig::tiny(VOCAB)
    };
    let (mut model, varmap) = model(config, 7);
    attach_adapters(&mut model, &varmap, 2..4);
    freeze_projections(&mut model, 0..2);
    assert_eq!(first_trained_block(&model), 0, "the embedding trains");
    freeze_embedding(&mut model);
    assert_eq!(first_trained_block(&model), 2);
    let batch = conversations();
    let (manual_values, manual) = loss_and_grads(&model, &batch, Backward::Fastest);
    let (reference_values, reference) = loss_and_grads(&model, &batch, Backward::Autograd);
    for (m, r) in manual_values.iter().zip(&reference_values) {
        assert!(
            (m - r).abs() < 1e-4,
            "log-prob {m} by hand, {r} by autograd"
        );
    }
    for (name, var) in sorted_vars(&varmap) {
        let by_hand = manual.get(var.as_tensor());
        if name.contains("lora") {
            let (m, r) = (by_hand.unwrap(), reference.get(var.as_tensor()).unwrap());
            let gap = relative_gap(m, r);
            assert!(gap < 1e-3, "{name}: gradients differ by {gap}");
        } else if name.starts_with("layers.0.") || name.starts_with("layers.1.") {
            assert!(by_hand.is_none(), "{name}: below the trained blocks");
        }
    }
}

#[test]
fn biases_take_the_autograd_path() {
    let (mut model, _) = model(ModelConfig::tiny(VOCAB), 4);
    add_biases(&mut model, 1);
    assert!(!supports(&model));
}

#[test]
fn gradients_match_finite_differences() {
    let (model, varmap) = model(ModelConfig::tiny(VOCAB), 5);
    let batch = conversations();
    let (_, grads) = loss_and_grads(&model, &batch, Backward::Fastest);
    let loss = || {
        let pass = policy_log_probs(&model, &batch, Backward::Fastest).unwrap();
        let (loss, _) = weighted_loss(&pass.values, &batch);
        f64::from(loss.to_scalar::<f32>().unwrap())
    };
    let mut checked = 0;
    for (name, var) in sorted_vars(&varmap) {
        let grad = flat_values(grads.get(var.as_tensor()).unwrap());
        let original = flat_values(var.as_tensor());
        // The element with the largest gradient, where f32 differences are reliable.
        let i = (0..grad.len())
            .max_by(|&a, &b| grad[a].abs().total_cmp(&grad[b].abs()))
            .unwrap();
        let step = 1e-2f32;
        let at = |delta: f32| {
            let mut moved = original.clone();
            moved[i] += delta;
            var.set(&Tensor::from_vec(moved, var.shape(), &Device::Cpu).unwrap())
                .unwrap();
            loss()
        };
        let numeric = (at(step) - at(-step)) / (2.0 * f64::from(step));
        var.set(&Tensor::from_vec(original.clone(), var.shape(), &Device::Cpu).unwrap())
            .unwrap();
        let analytic = f64::from(grad[i]);
        let gap = (numeric - analytic).abs() / analytic.abs().max(1e-2);
        assert!(
            gap < 2e-2,
            "{name}[{i}]: {analytic} by hand, {numeric} by differences"
        );
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} weights checked");
}
