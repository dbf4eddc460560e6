//! The hand-written pass against candle's autograd (value and gradient of
//! every weight) and against finite differences.

use crate::model::kernels::{Mat, MatMut, matmul};
use crate::model::{Decoder, ModelConfig, sorted_vars};
use crate::sequences::{Backward, Sequence, SequenceBatch, batch, policy_log_probs};
use candle_core::backprop::GradStore;
use candle_core::{Device, Tensor};
use candle_nn::VarMap;
use verifine_base::SplitMix64;
use verifine_models::ops::exp;

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
    let flat = masked.flatten_all().unwrap().to_vec1::<f32>().unwrap();
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
    let (a, b) = (
        a.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
        b.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
    );
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
    assert!(super::supports(&model));
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
    let head = varmap
        .get(
            (VOCAB, 16),
            "lm_head",
            candle_nn::Init::Randn {
                mean: 0.0,
                stdev: 0.3,
            },
            candle_core::DType::F32,
            &Device::Cpu,
        )
        .unwrap();
    model.lm_head = Some(head);
    assert_matches_autograd(&model, &varmap);
}

#[test]
fn frozen_weights_get_no_gradient() {
    let (model, _) = model(ModelConfig::tiny(VOCAB), 3);
    let frozen = model.frozen_copy().unwrap();
    assert!(super::supports(&frozen));
    let (_, grads) = loss_and_grads(&frozen, &conversations(), Backward::Fastest);
    let block = &frozen.blocks[0];
    for weight in [&frozen.embed, &block.q.weight, &block.down.weight] {
        assert!(
            grads.get(weight).is_none(),
            "a frozen weight got a gradient"
        );
    }
}

#[test]
fn frozen_norms_get_no_gradient_on_either_pass() {
    let (model, varmap) = model(ModelConfig::tiny(VOCAB), 8);
    let mut frozen = model.frozen_copy().unwrap();
    attach_adapters(&mut frozen, &varmap, 0..2);
    assert!(super::supports(&frozen));
    assert_eq!(
        super::first_trained_block(&frozen),
        0,
        "every block is reached"
    );
    let blocks = frozen.blocks.iter();
    let norms: Vec<&Tensor> = blocks
        .flat_map(|b| [&b.attn_norm, &b.mlp_norm])
        .chain([&frozen.final_norm])
        .collect();
    let adapter = &frozen.blocks[0].q.adapter.as_ref().unwrap().a;
    for (pass, backward) in [
        ("by hand", Backward::Fastest),
        ("autograd", Backward::Autograd),
    ] {
        let (_, grads) = loss_and_grads(&frozen, &conversations(), backward);
        assert!(grads.get(adapter).is_some(), "{pass}: the adapter trains");
        for (i, norm) in norms.iter().enumerate() {
            assert!(
                grads.get(norm).is_none(),
                "{pass}: frozen norm {i} got a gradient"
            );
        }
    }
}

/// Rank-3 adapters on q, v and down of `layers`, their base weights frozen.
fn attach_adapters(model: &mut Decoder, varmap: &VarMap, layers: std::ops::Range<usize>) {
    let init = candle_nn::Init::Randn {
        mean: 0.0,
        stdev: 0.3,
    };
    let var = |name: String, shape: (usize, usize)| {
        let dtype = candle_core::DType::F32;
        varmap.get(shape, &name, init, dtype, &Device::Cpu).unwrap()
    };
    for l in layers {
        let block = &mut model.blocks[l];
        // Attention and MLP projections of every shape.
        for (name, linear) in [
            ("q", &mut block.q),
            ("v", &mut block.v),
            ("down", &mut block.down),
        ] {
            let (out, inner) = linear.weight.dims2().unwrap();
            linear.adapter = Some(crate::model::block::Adapter {
                a: var(format!("layers.{l}.{name}.lora_a"), (3, inner)),
                b: var(format!("layers.{l}.{name}.lora_b"), (out, 3)),
                scale: 1.5,
            });
            linear.frozen = true;
        }
    }
}

#[test]
fn lora_adapters_on_frozen_projections_match_autograd() {
    let (mut model, varmap) = model(ModelConfig::tiny(VOCAB), 6);
    attach_adapters(&mut model, &varmap, 0..2);
    assert!(super::supports(&model));
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
    for block in &mut model.blocks[..2] {
        for linear in [
            &mut block.q,
            &mut block.k,
            &mut block.v,
            &mut block.o,
            &mut block.gate,
            &mut block.up,
            &mut block.down,
        ] {
            linear.frozen = true;
        }
    }
    assert_eq!(
        super::first_trained_block(&model),
        0,
        "the embedding trains"
    );
    model.embed_frozen = true;
    assert_eq!(super::first_trained_block(&model), 2);
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
    let zeros = |n| Tensor::zeros(n, candle_core::DType::F32, &Device::Cpu).unwrap();
    model.blocks[1].biases = Some([zeros(16), zeros(8), zeros(8)]);
    assert!(!super::supports(&model));
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
        let grad = grads
            .get(var.as_tensor())
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let original = var
            .as_tensor()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
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

#[test]
fn exp_is_accurate_over_the_range_softmax_uses() {
    let mut worst = 0f64;
    for i in -20_000..=20_000 {
        let x = i as f32 * 0.0043;
        let exact = f64::from(x).exp();
        worst = worst.max((f64::from(exp(x)) - exact).abs() / exact);
    }
    assert!(worst < 5e-7, "worst relative error {worst}");
    assert!(exp(-1e9) < 1e-37 && exp(-1e9) >= 0.0);
    assert!(exp(100.0).is_finite());
}

#[test]
fn strided_products_match_the_definition() {
    let mut rng = SplitMix64::new(9);
    let mut random =
        |n: usize| -> Vec<f32> { (0..n).map(|_| rng.below(100) as f32 / 10.0 - 5.0).collect() };
    // a: columns 2..5 of a [4, 7] matrix; b: the transpose of a [6, 3] matrix.
    let (a, b) = (random(4 * 7), random(6 * 3));
    let mut out = random(4 * 9);
    let before = out.clone();
    let a_view = Mat::strided(&a[2..], 4, 3, 7);
    let b_view = Mat::rows(&b, 6, 3).t();
    matmul(
        MatMut::strided(&mut out[1..], 4, 6, 9),
        a_view,
        b_view,
        true,
    );
    for i in 0..4 {
        for j in 0..9 {
            let expected = if (1..7).contains(&j) {
                let jj = j - 1;
                before[i * 9 + j]
                    + (0..3)
                        .map(|k| a[i * 7 + 2 + k] * b[jj * 3 + k])
                        .sum::<f32>()
            } else {
                before[i * 9 + j]
            };
            assert!((out[i * 9 + j] - expected).abs() < 1e-4, "({i}, {j})");
        }
    }
}

#[test]
#[should_panic(expected = "outside its buffer")]
fn a_view_past_its_buffer_is_refused() {
    let (a, b) = (vec![0f32; 6], vec![0f32; 6]);
    let mut out = vec![0f32; 4];
    matmul(
        MatMut::rows(&mut out, 2, 2),
        Mat::strided(&a, 2, 3, 4),
        Mat::rows(&b, 3, 2),
        false,
    );
}
