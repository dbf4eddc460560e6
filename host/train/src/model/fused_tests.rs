//! Each fused op against the same maths composed from candle ops, by value
//! and by gradient, and its gradient against finite differences.

use super::*;
use candle_core::{Device, Var};
use verifine_base::SplitMix64;

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
    let (fused, fused_grad) =
        value_and_grads(&[x.clone()], &weights, |t| softmax_last_dim(&t[0]).unwrap());
    let (composed, composed_grad) =
        value_and_grads(&[x.clone()], &weights, |t| composed_softmax(&t[0]));
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
    let (fused, fused_grad) = value_and_grads(&[logits.clone()], &weights, |t| {
        log_softmax_gather(&t[0], &targets).unwrap()
    });
    let (composed, composed_grad) = value_and_grads(&[logits.clone()], &weights, |t| {
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
fn rms_norm_matches_the_composition_in_value_and_both_gradients() {
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
    let (fused, fused_grad) =
        value_and_grads(&[x.clone()], &weights, |t| softmax_last_dim(&t[0]).unwrap());
    let (composed, composed_grad) =
        value_and_grads(&[x.clone()], &weights, |t| composed_softmax(&t[0]));
    assert!(max_difference(&fused, &composed) < 1e-6);
    assert!(max_difference(&fused_grad[0], &composed_grad[0]) < 1e-6);
    let targets = Tensor::from_vec((0..70u32).collect::<Vec<_>>(), 70, &Device::Cpu).unwrap();
    let row_weights = random(&[70], 12, 1.0);
    let (fused, fused_grad) = value_and_grads(&[x.clone()], &row_weights, |t| {
        log_softmax_gather(&t[0], &targets).unwrap()
    });
    let (composed, composed_grad) = value_and_grads(&[x.clone()], &row_weights, |t| {
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
