//! Each op against its definition in f64, each backward pass against
//! finite differences, and the off-CPU compositions against the CPU ops.

use super::rope::Rope;
use super::*;
use candle_core::{Device, Tensor, Var};

/// Deterministic values in about [-2, 2].
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        })
        .collect()
}

fn tensor(n: usize, shape: &[usize], seed: u64) -> Tensor {
    Tensor::from_vec(values(n, seed), shape, &Device::Cpu).unwrap()
}

fn close(a: &[f32], b: &[f64], tolerance: f64, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let error = (f64::from(*x) - y).abs();
        assert!(
            error <= tolerance * (1.0 + y.abs()),
            "{what}[{i}]: {x} vs {y}"
        );
    }
}

/// The gradient of `Σ f(x) · r` for a fixed random `r`, by finite
/// differences in f64 of a function given in f64.
fn numeric_gradient(x: &[f64], r: &[f64], f: impl Fn(&[f64]) -> Vec<f64>) -> Vec<f64> {
    let loss = |x: &[f64]| f(x).iter().zip(r).map(|(y, r)| y * r).sum::<f64>();
    (0..x.len())
        .map(|i| {
            let h = 1e-6;
            let (mut up, mut down) = (x.to_vec(), x.to_vec());
            up[i] += h;
            down[i] -= h;
            (loss(&up) - loss(&down)) / (2.0 * h)
        })
        .collect()
}

fn f64s(t: &Tensor) -> Vec<f64> {
    t.flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap()
        .into_iter()
        .map(f64::from)
        .collect()
}

fn reference_rms_norm(x: &[f64], w: &[f64], eps: f64) -> Vec<f64> {
    x.chunks(w.len())
        .flat_map(|row| {
            let r = 1.0 / (row.iter().map(|v| v * v).sum::<f64>() / row.len() as f64 + eps).sqrt();
            row.iter().zip(w).map(move |(v, w)| v * r * w)
        })
        .collect()
}

#[test]
fn the_norm_matches_its_definition_with_both_gradients() {
    let (rows, width, eps) = (3, 8, 1e-5);
    let x = Var::from_tensor(&tensor(rows * width, &[rows, width], 1)).unwrap();
    let w = Var::from_tensor(&tensor(width, &[width], 2)).unwrap();
    let r = tensor(rows * width, &[rows, width], 3);
    let y = rms_norm(x.as_tensor(), w.as_tensor(), eps).unwrap();
    let (xs, ws, rs) = (f64s(x.as_tensor()), f64s(w.as_tensor()), f64s(&r));
    close(
        &y.flatten_all().unwrap().to_vec1().unwrap(),
        &reference_rms_norm(&xs, &ws, eps),
        1e-5,
        "y",
    );
    let grads = (y * &r).unwrap().sum_all().unwrap().backward().unwrap();
    let dx = numeric_gradient(&xs, &rs, |x| reference_rms_norm(x, &ws, eps));
    let dw = numeric_gradient(&ws, &rs, |w| reference_rms_norm(&xs, w, eps));
    close(&f32s(grads.get(&x).unwrap()), &dx, 1e-3, "dx");
    close(&f32s(grads.get(&w).unwrap()), &dw, 1e-3, "dw");
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.flatten_all().unwrap().to_vec1().unwrap()
}

#[test]
fn the_off_cpu_compositions_agree_with_the_cpu_ops() {
    let (x, w) = (tensor(24, &[3, 8], 17), tensor(8, &[8], 18));
    let composed = norm::composed(&x, &w, 1e-6).unwrap();
    let want = f64s(&composed);
    close(
        &f32s(&rms_norm(&x, &w, 1e-6).unwrap()),
        &want,
        1e-5,
        "rms_norm",
    );
    for activation in [Activation::Silu, Activation::GeluTanh] {
        let (gate, up) = (tensor(24, &[3, 8], 19), tensor(24, &[3, 8], 20));
        let want = f64s(&activation::composed(&gate, &up, activation).unwrap());
        let got = f32s(&gated(&gate, &up, activation).unwrap());
        close(&got, &want, 1e-5, &format!("{activation:?}"));
    }
}

#[test]
fn a_frozen_norm_weight_gets_no_gradient() {
    let x = Var::from_tensor(&tensor(16, &[2, 8], 4)).unwrap();
    let w = tensor(8, &[8], 5);
    let y = rms_norm(x.as_tensor(), &w, 1e-6).unwrap();
    let grads = y.sum_all().unwrap().backward().unwrap();
    assert!(grads.get(&x).is_some());
    assert!(grads.get(&w).is_none(), "the frozen weight got a gradient");
}

fn gated_f64(gate: &[f64], up: &[f64], activation: Activation) -> Vec<f64> {
    gate.iter()
        .zip(up)
        .map(|(&g, &u)| {
            let act = match activation {
                Activation::Silu => g / (1.0 + (-g).exp()),
                Activation::GeluTanh => {
                    let inner = (2.0 / std::f64::consts::PI).sqrt() * (g + 0.044715 * g * g * g);
                    0.5 * g * (1.0 + inner.tanh())
                }
            };
            act * u
        })
        .collect()
}

#[test]
fn gated_activations_match_their_definitions_with_both_gradients() {
    for activation in [Activation::Silu, Activation::GeluTanh] {
        let gate = Var::from_tensor(&tensor(24, &[4, 6], 6)).unwrap();
        let up = Var::from_tensor(&tensor(24, &[4, 6], 7)).unwrap();
        let r = tensor(24, &[4, 6], 8);
        let y = gated(gate.as_tensor(), up.as_tensor(), activation).unwrap();
        let (gs, us, rs) = (f64s(gate.as_tensor()), f64s(up.as_tensor()), f64s(&r));
        let what = format!("{activation:?}");
        close(&f32s(&y), &gated_f64(&gs, &us, activation), 1e-5, &what);
        let grads = (y * &r).unwrap().sum_all().unwrap().backward().unwrap();
        let dg = numeric_gradient(&gs, &rs, |g| gated_f64(g, &us, activation));
        let du = numeric_gradient(&us, &rs, |u| gated_f64(&gs, u, activation));
        close(
            &f32s(grads.get(&gate).unwrap()),
            &dg,
            1e-3,
            &format!("{what} d gate"),
        );
        close(
            &f32s(grads.get(&up).unwrap()),
            &du,
            1e-3,
            &format!("{what} d up"),
        );
    }
}

#[test]
fn the_swiglu_of_slices_is_the_silu_gate_with_its_backward() {
    let (gate, up, grad) = (values(10, 9), values(10, 10), values(10, 11));
    let (mut out, mut sigmoid) = (vec![0f32; 10], vec![0f32; 10]);
    activation::swiglu(&gate, &up, &mut out, &mut sigmoid);
    let g64: Vec<f64> = gate.iter().map(|&v| v.into()).collect();
    let u64: Vec<f64> = up.iter().map(|&v| v.into()).collect();
    close(
        &out,
        &gated_f64(&g64, &u64, Activation::Silu),
        1e-5,
        "swiglu",
    );
    let (mut dg, mut du) = (vec![0f32; 10], vec![0f32; 10]);
    activation::swiglu_backward((&gate, &up, &sigmoid), &grad, &mut dg, &mut du);
    let r: Vec<f64> = grad.iter().map(|&v| v.into()).collect();
    let want = numeric_gradient(&g64, &r, |g| gated_f64(g, &u64, Activation::Silu));
    close(&dg, &want, 1e-3, "swiglu d gate");
}

/// Rotation by the definition: pair `(a, b)` at position `t`, frequency
/// `j` turns by `t · f_j`.
fn rope_f64(x: &[f64], dims: (usize, usize), frequencies: &[f64], style: RopeStyle) -> Vec<f64> {
    let (positions, dim) = dims;
    let mut out = x.to_vec();
    for (i, head) in out.chunks_mut(dim).enumerate() {
        let t = (i % positions) as f64;
        for (j, f) in frequencies.iter().enumerate() {
            let (p, q) = match style {
                RopeStyle::Halves => (j, j + dim / 2),
                RopeStyle::Adjacent => (2 * j, 2 * j + 1),
            };
            let (a, b, angle) = (head[p], head[q], t * f);
            head[p] = a * angle.cos() - b * angle.sin();
            head[q] = b * angle.cos() + a * angle.sin();
        }
    }
    out
}

#[test]
fn rope_matches_its_definition_in_both_styles_with_its_gradient() {
    let (batch, heads, positions, dim) = (2, 3, 5, 8);
    let frequencies = crate::config::inverse_frequencies(100.0, dim, None);
    let (cos, sin) = rotary_tables(&frequencies, positions);
    let table = |v: Vec<f32>| Tensor::from_vec(v, (positions, dim / 2), &Device::Cpu).unwrap();
    let (cos, sin) = (table(cos), table(sin));
    let n = batch * heads * positions * dim;
    for style in [RopeStyle::Halves, RopeStyle::Adjacent] {
        let x = Var::from_tensor(&tensor(n, &[batch, heads, positions, dim], 12)).unwrap();
        let r = tensor(n, &[batch, heads, positions, dim], 13);
        let y = rope(x.as_tensor(), &cos, &sin, style).unwrap();
        let (xs, rs) = (f64s(x.as_tensor()), f64s(&r));
        let want = rope_f64(&xs, (positions, dim), &frequencies, style);
        close(&f32s(&y), &want, 1e-5, &format!("{style:?}"));
        let off_cpu = Rope {
            style,
            inverse: false,
        };
        let composed = off_cpu.composed(x.as_tensor(), &cos, &sin).unwrap();
        close(
            &f32s(&composed),
            &want,
            1e-5,
            &format!("{style:?} composed"),
        );
        let grads = (y * &r).unwrap().sum_all().unwrap().backward().unwrap();
        let dx = numeric_gradient(&xs, &rs, |x| {
            rope_f64(x, (positions, dim), &frequencies, style)
        });
        close(
            &f32s(grads.get(&x).unwrap()),
            &dx,
            1e-3,
            &format!("{style:?} dx"),
        );
    }
}

#[test]
fn softmax_and_exp_match_the_definition() {
    let mut row = values(33, 14);
    row[3] = 80.0;
    let x: Vec<f64> = row.iter().map(|&v| v.into()).collect();
    let max = x.iter().copied().fold(f64::MIN, f64::max);
    let total: f64 = x.iter().map(|v| (v - max).exp()).sum();
    let want: Vec<f64> = x.iter().map(|v| (v - max).exp() / total).collect();
    softmax_in_place(&mut row);
    close(&row, &want, 1e-6, "softmax");
    for v in [-87.0f32, -3.5, 0.0, 1e-3, 2.0, 40.0, 88.0] {
        let want = f64::from(v).exp();
        assert!((f64::from(exp(v)) - want).abs() <= 3e-7 * want, "exp({v})");
    }
}

#[test]
fn large_outputs_split_over_threads_give_the_same_rows() {
    let (rows, width) = (300, 1024);
    let x = tensor(rows * width, &[rows, width], 15);
    let w = tensor(width, &[width], 16);
    let whole = f32s(&rms_norm(&x, &w, 1e-6).unwrap());
    for (i, row) in x.chunk(rows, 0).unwrap().iter().enumerate() {
        let one = f32s(&rms_norm(row, &w, 1e-6).unwrap());
        assert_eq!(one, whole[i * width..][..width], "row {i}");
    }
}
