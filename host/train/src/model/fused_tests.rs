//! Each fused op against the same maths composed from candle ops, by value
//! and by gradient, and its gradient against finite differences.

use super::fused::*;
use super::heads::{HeadLayout, to_heads, to_rows};
use candle_core::{D, DType, Device, Tensor, Var};
use verifine_base::SplitMix64;
use verifine_models::ops::{Activation, gated, rms_norm};

fn random(shape: &[usize], seed: u64, scale: f32) -> Tensor {
    let mut rng = SplitMix64::new(seed);
    let n: usize = shape.iter().product();
    let values: Vec<f32> = (0..n)
        .map(|_| ((rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 2.0 * scale)
        .collect();
    Tensor::from_vec(values, shape, &Device::Cpu).unwrap()
}

fn max_difference(a: &Tensor, b: &Tensor) -> f32 {
    (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap()
}

/// Value and input gradients of `Σ f(inputs) · weights`.
fn value_and_grads(
    inputs: &[Tensor],
    weights: &Tensor,
    f: impl Fn(&[Tensor]) -> Tensor,
) -> (Tensor, Vec<Tensor>) {
    let vars: Vec<Var> = inputs
        .iter()
        .map(|t| Var::from_tensor(t).unwrap())
        .collect();
    let tensors: Vec<Tensor> = vars.iter().map(|v| v.as_tensor().clone()).collect();
    let out = f(&tensors);
    let grads = (&out * weights)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    let grads = tensors
        .iter()
        .map(|t| grads.get(t).unwrap().clone())
        .collect();
    (out, grads)
}

fn composed_softmax(x: &Tensor) -> Tensor {
    candle_nn::ops::softmax(x, D::Minus1).unwrap()
}

fn composed_rms_norm(x: &Tensor, w: &Tensor, eps: f64) -> Tensor {
    let mean_square = x.sqr().unwrap().mean_keepdim(D::Minus1).unwrap();
    let normed = x
        .broadcast_div(&(mean_square + eps).unwrap().sqrt().unwrap())
        .unwrap();
    normed.broadcast_mul(w).unwrap()
}

fn composed_log_softmax_gather(logits: &Tensor, targets: &Tensor) -> Tensor {
    candle_nn::ops::log_softmax(logits, D::Minus1)
        .unwrap()
        .gather(&targets.unsqueeze(D::Minus1).unwrap(), D::Minus1)
        .unwrap()
        .squeeze(D::Minus1)
        .unwrap()
}

/// Central finite difference of `Σ f(x) · weights` along each of a few
/// coordinates of `x`, against the analytic gradient.
fn check_finite_differences(
    x: &Tensor,
    weights: &Tensor,
    analytic: &Tensor,
    f: impl Fn(&Tensor) -> Tensor,
) {
    let h = 1e-2f32;
    let values = x.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let grad = analytic.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    let objective = |v: &[f32]| -> f32 {
        let t = Tensor::from_slice(v, x.shape(), &Device::Cpu).unwrap();
        (f(&t) * weights)
            .unwrap()
            .sum_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
    };
    for i in (0..values.len()).step_by(values.len() / 7 + 1) {
        let (mut plus, mut minus) = (values.clone(), values.clone());
        plus[i] += h;
        minus[i] -= h;
        let numeric = (objective(&plus) - objective(&minus)) / (2.0 * h);
        assert!(
            (numeric - grad[i]).abs() < 2e-2 * (1.0 + grad[i].abs()),
            "coordinate {i}: finite difference {numeric}, analytic {}",
            grad[i]
        );
    }
}

#[test]
fn softmax_matches_the_composition_in_value_and_gradient() {
    let x = random(&[3, 4, 7, 9], 1, 4.0);
    let weights = random(&[3, 4, 7, 9], 2, 1.0);
    let (fused, fused_grad) = value_and_grads(std::slice::from_ref(&x), &weights, |t| {
        softmax_last_dim(&t[0]).unwrap()
    });
    let (composed, composed_grad) = value_and_grads(std::slice::from_ref(&x), &weights, |t| {
        composed_softmax(&t[0])
    });
    assert!(max_difference(&fused, &composed) < 1e-6);
    assert!(max_difference(&fused_grad[0], &composed_grad[0]) < 1e-6);
    check_finite_differences(&x, &weights, &fused_grad[0], |t| {
        softmax_last_dim(t).unwrap()
    });
}

#[test]
fn log_softmax_gather_matches_the_composition_in_value_and_gradient() {
    let logits = random(&[2, 5, 11], 3, 3.0);
    let targets = Tensor::from_vec(
        (0..10u32).map(|i| (i * 7) % 11).collect::<Vec<_>>(),
        (2, 5),
        &Device::Cpu,
    )
    .unwrap();
    let weights = random(&[2, 5], 4, 1.0);
    let (fused, fused_grad) = value_and_grads(std::slice::from_ref(&logits), &weights, |t| {
        log_softmax_gather(&t[0], &targets).unwrap()
    });
    let (composed, composed_grad) = value_and_grads(std::slice::from_ref(&logits), &weights, |t| {
        composed_log_softmax_gather(&t[0], &targets)
    });
    assert_eq!(fused.dims(), &[2, 5]);
    assert!(max_difference(&fused, &composed) < 1e-5);
    assert!(max_difference(&fused_grad[0], &composed_grad[0]) < 1e-6);
    check_finite_differences(&logits, &weights, &fused_grad[0], |t| {
        log_softmax_gather(t, &targets).unwrap()
    });
}

#[test]
fn a_target_outside_the_vocabulary_is_an_error_not_a_wrong_read() {
    let logits = random(&[2, 4], 5, 1.0);
    let targets = Tensor::new(&[1u32, 4], &Device::Cpu).unwrap();
    let err = log_softmax_gather(&logits, &targets).unwrap_err();
    assert!(err.to_string().contains("target 4"), "{err}");
}

#[test]
fn the_shared_rms_norm_matches_the_composition_in_value_and_both_gradients() {
    let x = random(&[2, 3, 8], 6, 2.0);
    let w = random(&[8], 7, 1.5);
    let weights = random(&[2, 3, 8], 8, 1.0);
    let eps = 1e-6;
    let (fused, fused_grads) = value_and_grads(&[x.clone(), w.clone()], &weights, |t| {
        rms_norm(&t[0], &t[1], eps).unwrap()
    });
    let (composed, composed_grads) = value_and_grads(&[x.clone(), w.clone()], &weights, |t| {
        composed_rms_norm(&t[0], &t[1], eps)
    });
    assert!(max_difference(&fused, &composed) < 1e-5);
    assert!(max_difference(&fused_grads[0], &composed_grads[0]) < 1e-5);
    assert!(max_difference(&fused_grads[1], &composed_grads[1]) < 1e-5);
    check_finite_differences(&x, &weights, &fused_grads[0], |t| {
        rms_norm(t, &w, eps).unwrap()
    });
    check_finite_differences(&w, &weights, &fused_grads[1], |t| {
        rms_norm(&x, t, eps).unwrap()
    });
}

#[test]
fn non_contiguous_inputs_take_the_fused_path_correctly() {
    let x = random(&[4, 6], 9, 2.0).t().unwrap();
    assert!(!x.is_contiguous());
    let fused = softmax_last_dim(&x).unwrap();
    assert!(max_difference(&fused, &composed_softmax(&x.contiguous().unwrap())) < 1e-6);
}

#[test]
fn large_inputs_split_across_threads_give_the_same_results() {
    let x = random(&[70, 500], 10, 3.0);
    let weights = random(&[70, 500], 11, 1.0);
    let (fused, fused_grad) = value_and_grads(std::slice::from_ref(&x), &weights, |t| {
        softmax_last_dim(&t[0]).unwrap()
    });
    let (composed, composed_grad) = value_and_grads(std::slice::from_ref(&x), &weights, |t| {
        composed_softmax(&t[0])
    });
    assert!(max_difference(&fused, &composed) < 1e-6);
    assert!(max_difference(&fused_grad[0], &composed_grad[0]) < 1e-6);
    let targets = Tensor::from_vec((0..70u32).collect::<Vec<_>>(), 70, &Device::Cpu).unwrap();
    let row_weights = random(&[70], 12, 1.0);
    let (fused, fused_grad) = value_and_grads(std::slice::from_ref(&x), &row_weights, |t| {
        log_softmax_gather(&t[0], &targets).unwrap()
    });
    let (composed, composed_grad) = value_and_grads(std::slice::from_ref(&x), &row_weights, |t| {
        composed_log_softmax_gather(&t[0], &targets)
    });
    assert!(max_difference(&fused, &composed) < 1e-5);
    assert!(max_difference(&fused_grad[0], &composed_grad[0]) < 1e-6);
    let w = random(&[500], 13, 1.0);
    let (fused, fused_grads) = value_and_grads(&[x.clone(), w.clone()], &weights, |t| {
        rms_norm(&t[0], &t[1], 1e-6).unwrap()
    });
    let (composed, composed_grads) =
        value_and_grads(&[x, w], &weights, |t| composed_rms_norm(&t[0], &t[1], 1e-6));
    assert!(max_difference(&fused, &composed) < 1e-5);
    assert!(max_difference(&fused_grads[0], &composed_grads[0]) < 1e-5);
    assert!(max_difference(&fused_grads[1], &composed_grads[1]) < 1e-4);
}

fn composed_scaled_masked_softmax(scores: &Tensor, mask: &Tensor, scale: f64) -> Tensor {
    candle_nn::ops::softmax(
        &(scores * scale).unwrap().broadcast_add(mask).unwrap(),
        D::Minus1,
    )
    .unwrap()
}

#[test]
fn scaled_masked_softmax_matches_the_composition_in_value_and_gradient() {
    let scores = random(&[2, 3, 5, 6], 11, 4.0);
    // Causal mask with one padded key in the second sequence, as the model builds it.
    let mask = super::layers::attention_mask(
        2,
        1,
        5,
        Some(&Tensor::new(&[[1u32, 1, 1, 1, 1, 1], [0, 1, 1, 1, 1, 1]], &Device::Cpu).unwrap()),
        &Device::Cpu,
    )
    .unwrap();
    let weights = random(&[2, 3, 5, 6], 12, 1.0);
    let scale = 0.25;
    let (fused, fused_grad) = value_and_grads(std::slice::from_ref(&scores), &weights, |t| {
        scaled_masked_softmax(&t[0], &mask, scale).unwrap()
    });
    let (composed, composed_grad) = value_and_grads(std::slice::from_ref(&scores), &weights, |t| {
        composed_scaled_masked_softmax(&t[0], &mask, scale)
    });
    assert!(max_difference(&fused, &composed) < 1e-6);
    assert!(max_difference(&fused_grad[0], &composed_grad[0]) < 1e-6);
    // Masked keys get no probability and no gradient.
    let first_row = fused.get(1).unwrap().get(0).unwrap().get(0).unwrap();
    let first_row = first_row.to_vec1::<f32>().unwrap();
    assert_eq!(first_row[0], 0.0, "padded key");
    assert_eq!(first_row[1], 1.0, "the only visible key");
    assert!(first_row[2..].iter().all(|&p| p == 0.0), "future keys");
    check_finite_differences(&scores, &weights, &fused_grad[0], |t| {
        scaled_masked_softmax(t, &mask, scale).unwrap()
    });
    // Grouped-query layout: three heads' rows stacked in one block.
    let grouped = scaled_masked_softmax(&scores.reshape((2, 1, 15, 6)).unwrap(), &mask, scale);
    let grouped = grouped.unwrap().reshape((2, 3, 5, 6)).unwrap();
    assert_eq!(max_difference(&grouped, &fused), 0.0);
}

#[test]
fn scaled_masked_softmax_refuses_a_mask_of_another_shape() {
    let scores = random(&[2, 3, 5, 6], 13, 1.0);
    let mask = random(&[2, 3, 5, 6], 14, 1.0);
    let error = scaled_masked_softmax(&scores, &mask, 1.0).unwrap_err();
    assert!(error.to_string().contains("mask"), "{error}");
}

/// What `to_heads` with tables fuses: token rows to `[batch, heads, seq,
/// dim]`, then candle-nn's `rope_slow`.
fn composed_rope_heads(x: &Tensor, layout: HeadLayout, cos: &Tensor, sin: &Tensor) -> Tensor {
    let (b, s, h, d) = (layout.batch, layout.seq, layout.heads, layout.dim);
    let heads = x.reshape((b, s, h, d)).unwrap().transpose(1, 2).unwrap();
    candle_nn::rotary_emb::rope_slow(&heads.contiguous().unwrap(), cos, sin).unwrap()
}

const LAYOUT: HeadLayout = HeadLayout {
    batch: 2,
    seq: 5,
    heads: 4,
    dim: 8,
};

#[test]
fn rope_heads_matches_the_composition_in_value_and_gradient() {
    let x = random(&[10, 32], 21, 2.0);
    // Tables for positions 3..8 of a longer run.
    let angles = random(&[9, 4], 22, 3.0);
    let (cos, sin) = (
        angles.cos().unwrap().narrow(0, 3, 5).unwrap(),
        angles.sin().unwrap().narrow(0, 3, 5).unwrap(),
    );
    let weights = random(&[2, 4, 5, 8], 23, 1.0);
    let rotated = |t: &Tensor| to_heads(t, LAYOUT, 1, Some((&cos, &sin))).unwrap();
    let (fused, fused_grad) =
        value_and_grads(std::slice::from_ref(&x), &weights, |t| rotated(&t[0]));
    let (composed, composed_grad) = value_and_grads(std::slice::from_ref(&x), &weights, |t| {
        composed_rope_heads(&t[0], LAYOUT, &cos, &sin)
    });
    assert_eq!(fused.dims(), &[2, 4, 5, 8]);
    assert!(max_difference(&fused, &composed) < 1e-6);
    assert!(max_difference(&fused_grad[0], &composed_grad[0]) < 1e-6);
    check_finite_differences(&x, &weights, &fused_grad[0], rotated);
    // Grouped: the same elements, two heads stacked per row block.
    let grouped = to_heads(&x, LAYOUT, 2, Some((&cos, &sin))).unwrap();
    assert_eq!(grouped.dims(), &[2, 2, 10, 8]);
    assert!(max_difference(&grouped.reshape((2, 4, 5, 8)).unwrap(), &fused) == 0.0);
}

#[test]
fn moving_heads_there_and_back_is_the_identity_with_a_gradient_both_ways() {
    let x = random(&[10, 32], 26, 2.0);
    let weights = random(&[10, 32], 27, 1.0);
    let there_and_back =
        |t: &[Tensor]| to_rows(&to_heads(&t[0], LAYOUT, 2, None).unwrap(), LAYOUT).unwrap();
    let (value, grad) = value_and_grads(std::slice::from_ref(&x), &weights, there_and_back);
    assert_eq!(max_difference(&value, &x), 0.0);
    assert_eq!(max_difference(&grad[0], &weights), 0.0);
    let plain = to_heads(&x, LAYOUT, 1, None).unwrap();
    let composed = x.reshape((2, 5, 4, 8)).unwrap().transpose(1, 2).unwrap();
    assert_eq!(max_difference(&plain, &composed.contiguous().unwrap()), 0.0);
}

#[test]
fn moving_heads_refuses_shapes_and_tables_that_do_not_fit() {
    let x = random(&[10, 32], 24, 1.0);
    let short = random(&[4, 4], 25, 1.0);
    let error = to_heads(&x, LAYOUT, 1, Some((&short, &short))).unwrap_err();
    assert!(error.to_string().contains("rope"), "{error}");
    let error = to_heads(&x, LAYOUT, 3, None).unwrap_err();
    assert!(error.to_string().contains("to_heads"), "{error}");
    let error = to_rows(&random(&[2, 4, 5, 7], 28, 1.0), LAYOUT).unwrap_err();
    assert!(error.to_string().contains("to_rows"), "{error}");
}

#[test]
fn the_shared_swiglu_matches_the_composition_in_value_and_both_gradients() {
    let gate = random(&[3, 5, 7], 31, 4.0);
    let up = random(&[3, 5, 7], 32, 2.0);
    let weights = random(&[3, 5, 7], 33, 1.0);
    let swiglu = |t: &[Tensor]| gated(&t[0], &t[1], Activation::Silu).unwrap();
    let (fused, fused_grads) = value_and_grads(&[gate.clone(), up.clone()], &weights, swiglu);
    let (composed, composed_grads) = value_and_grads(&[gate.clone(), up.clone()], &weights, |t| {
        (t[0].silu().unwrap() * &t[1]).unwrap()
    });
    assert!(max_difference(&fused, &composed) < 1e-5);
    for (f, c) in fused_grads.iter().zip(&composed_grads) {
        assert!(max_difference(f, c) < 1e-5);
    }
    check_finite_differences(&gate, &weights, &fused_grads[0], |t| {
        gated(t, &up, Activation::Silu).unwrap()
    });
    check_finite_differences(&up, &weights, &fused_grads[1], |t| {
        gated(&gate, t, Activation::Silu).unwrap()
    });
}

/// `f` on f64 copies of `inputs` (the composed path other devices and dtypes
/// take) against `f` on the f32 originals (the fused CPU path): values and
/// gradients.
fn check_composed_path(inputs: &[Tensor], weights: &Tensor, f: impl Fn(&[Tensor]) -> Tensor) {
    let (fused, fused_grads) = value_and_grads(inputs, weights, &f);
    let wide: Vec<Tensor> = inputs
        .iter()
        .map(|t| t.to_dtype(DType::F64).unwrap())
        .collect();
    let (composed, composed_grads) =
        value_and_grads(&wide, &weights.to_dtype(DType::F64).unwrap(), &f);
    let narrow = |t: &Tensor| t.to_dtype(DType::F32).unwrap();
    assert!(max_difference(&fused, &narrow(&composed)) < 1e-5);
    for (f, c) in fused_grads.iter().zip(&composed_grads) {
        assert!(max_difference(f, &narrow(c)) < 1e-5);
    }
}

#[test]
fn the_composed_fallbacks_agree_with_the_fused_ops() {
    let mask = super::layers::attention_mask(2, 0, 5, None, &Device::Cpu).unwrap();
    check_composed_path(
        &[random(&[2, 2, 10, 5], 41, 3.0)],
        &random(&[2, 2, 10, 5], 42, 1.0),
        |t| scaled_masked_softmax(&t[0], &mask, 0.5).unwrap(),
    );
    let angles = random(&[5, 4], 43, 3.0);
    let (cos, sin) = (angles.cos().unwrap(), angles.sin().unwrap());
    check_composed_path(
        &[random(&[10, 32], 44, 2.0)],
        &random(&[2, 2, 10, 8], 45, 1.0),
        |t| {
            let (cos, sin) = (
                cos.to_dtype(t[0].dtype()).unwrap(),
                sin.to_dtype(t[0].dtype()).unwrap(),
            );
            to_heads(&t[0], LAYOUT, 2, Some((&cos, &sin))).unwrap()
        },
    );
    check_composed_path(
        &[random(&[2, 4, 5, 8], 46, 2.0)],
        &random(&[10, 32], 47, 1.0),
        |t| to_rows(&t[0], LAYOUT).unwrap(),
    );
}
