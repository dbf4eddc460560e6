//! The arithmetic of the hand-written pass (`manual`) and of frozen
//! projections (`frozen`): matrix products on strided views, and the
//! row-wise ops (RMSNorm, rotary embedding, SwiGLU) with their backward
//! passes written out.
//!
//! Every op reads and writes plain `f32` slices in token rows (`[rows,
//! width]`, row-major). Ops over many rows run on rayon's pool, the one
//! candle's kernels use.

use crate::model::rms_norm::inverse_rms as row_inverse_rms;
use rayon::prelude::*;

/// Row-wise ops over fewer elements than this run on one thread: below it,
/// waking the pool costs more than the op.
const PARALLEL_FROM: usize = 1 << 14;

/// Rows per rayon task for an op over `width`-wide rows.
pub(super) fn rows_per_task(width: usize) -> usize {
    (PARALLEL_FROM / width.max(1)).max(1)
}

/// A read-only matrix over a slice: element `(i, j)` is
/// `data[i · row_stride + j · col_stride]`. A transpose swaps the strides.
#[derive(Clone, Copy)]
pub(in crate::model) struct Mat<'a> {
    pub data: &'a [f32],
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
    pub col_stride: usize,
}

impl<'a> Mat<'a> {
    /// A contiguous row-major `[rows, cols]` matrix.
    pub fn rows(data: &'a [f32], rows: usize, cols: usize) -> Self {
        Mat::strided(data, rows, cols, cols)
    }

    /// `[rows, cols]` whose rows start `row_stride` apart (a column block
    /// of a wider matrix).
    pub fn strided(data: &'a [f32], rows: usize, cols: usize, row_stride: usize) -> Self {
        Mat {
            data,
            rows,
            cols,
            row_stride,
            col_stride: 1,
        }
    }

    /// The transpose, without moving data.
    pub fn t(self) -> Self {
        Mat {
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
            ..self
        }
    }

    /// Whether every element the strides address lies inside `data`.
    fn in_bounds(&self) -> bool {
        self.rows == 0
            || self.cols == 0
            || (self.rows - 1) * self.row_stride + (self.cols - 1) * self.col_stride
                < self.data.len()
    }
}

/// The output of a product: row-major, rows `row_stride` apart.
pub(in crate::model) struct MatMut<'a> {
    pub data: &'a mut [f32],
    pub rows: usize,
    pub cols: usize,
    pub row_stride: usize,
}

impl<'a> MatMut<'a> {
    /// A contiguous row-major `[rows, cols]` output.
    pub fn rows(data: &'a mut [f32], rows: usize, cols: usize) -> Self {
        MatMut::strided(data, rows, cols, cols)
    }

    /// `[rows, cols]` whose rows start `row_stride` apart.
    pub fn strided(data: &'a mut [f32], rows: usize, cols: usize, row_stride: usize) -> Self {
        MatMut {
            data,
            rows,
            cols,
            row_stride,
        }
    }
}

/// `dst = a · b`, or `dst += a · b` when `accumulate`, on every thread of
/// the pool.
///
/// # Panics
/// When the shapes disagree or a view addresses memory outside its slice;
/// both are bugs of the caller, never of the data.
pub(in crate::model) fn matmul(dst: MatMut, a: Mat, b: Mat, accumulate: bool) {
    assert!(
        a.rows == dst.rows && b.cols == dst.cols && a.cols == b.rows,
        "product of [{}, {}] and [{}, {}] into [{}, {}]",
        a.rows,
        a.cols,
        b.rows,
        b.cols,
        dst.rows,
        dst.cols
    );
    let dst_view = Mat::strided(dst.data, dst.rows, dst.cols, dst.row_stride);
    assert!(
        a.in_bounds() && b.in_bounds() && dst_view.in_bounds(),
        "a view of a product addresses memory outside its buffer"
    );
    if dst.rows == 0 || dst.cols == 0 {
        return;
    }
    if a.cols == 0 {
        if !accumulate {
            for r in 0..dst.rows {
                dst.data[r * dst.row_stride..][..dst.cols].fill(0.0);
            }
        }
        return;
    }
    let parallelism = match rayon::current_num_threads() {
        1 => gemm::Parallelism::None,
        n => gemm::Parallelism::Rayon(n),
    };
    // SAFETY: the asserts above check that the three views' shapes agree and
    // that every element their strides address lies inside its slice; `dst`
    // is borrowed mutably, so it overlaps neither input.
    unsafe {
        gemm::gemm(
            dst.rows,
            dst.cols,
            a.cols,
            dst.data.as_mut_ptr(),
            1,
            dst.row_stride as isize,
            accumulate,
            a.data.as_ptr(),
            a.col_stride as isize,
            a.row_stride as isize,
            b.data.as_ptr(),
            b.col_stride as isize,
            b.row_stride as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// `eˣ` to about 2 ulp, written so that loops over slices vectorize (libm's
/// `expf` is a call per element). Inputs below −87.3 give about 1e-38
/// instead of 0, which no sum of a softmax can tell apart.
#[inline(always)]
pub(super) fn exp(x: f32) -> f32 {
    const LOG2_E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split in two so that `n · LN2_HI` is exact.
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Adding and subtracting 1.5 · 2²³ rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.3, 88.3);
    let n = (x * LOG2_E + ROUND) - ROUND;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    // Taylor series to r⁶ on |r| ≤ ln 2 / 2: error below 1.2e-7.
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    p * scale
}

/// `a · b` over equally long slices, with eight partial sums so that the
/// loop vectorizes (a single running sum would fix the order of additions).
#[inline(always)]
pub(super) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut partial = [0f32; 8];
    let (a_chunks, b_chunks) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = a_chunks
        .remainder()
        .iter()
        .zip(b_chunks.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a_chunks.zip(b_chunks) {
        for lane in 0..8 {
            partial[lane] += x[lane] * y[lane];
        }
    }
    partial.iter().sum::<f32>() + tail
}

/// `y += a · x` over equally long slices.
#[inline(always)]
pub(super) fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    y.iter_mut().zip(x).for_each(|(y, x)| *y += a * x);
}

/// Replaces `row` by its softmax.
#[inline(always)]
pub(super) fn softmax_in_place(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f32;
    for x in row.iter_mut() {
        *x = exp(*x - max);
        sum += *x;
    }
    let inverse = 1.0 / sum;
    row.iter_mut().for_each(|x| *x *= inverse);
}

/// RMSNorm of token rows: writes `x / rms(x) · weight` into `out` and each
/// row's `1 / rms` into `inverse_rms` (what the backward pass needs).
pub(super) fn rms_norm(
    x: &[f32],
    weight: &[f32],
    eps: f64,
    out: &mut [f32],
    inverse_rms: &mut [f32],
) {
    let width = weight.len();
    let per_task = rows_per_task(width);
    out.par_chunks_mut(width * per_task)
        .zip(inverse_rms.par_chunks_mut(per_task))
        .zip(x.par_chunks(width * per_task))
        .for_each(|((out, inverse), x)| {
            for ((o, inv), x) in out
                .chunks_exact_mut(width)
                .zip(inverse.iter_mut())
                .zip(x.chunks_exact(width))
            {
                *inv = row_inverse_rms(x, eps);
                for ((o, v), w) in o.iter_mut().zip(x).zip(weight) {
                    *o = v * *inv * w;
                }
            }
        });
}

/// Backward of [`rms_norm`]: adds the gradient of `x` to `grad_x` and
/// returns the weight's gradient, from the output's gradient `grad_out`.
pub(super) fn rms_norm_backward(
    x: &[f32],
    weight: &[f32],
    inverse_rms: &[f32],
    grad_out: &[f32],
    grad_x: &mut [f32],
) -> Vec<f32> {
    let width = weight.len();
    let per_task = rows_per_task(width);
    grad_x
        .par_chunks_mut(width * per_task)
        .zip(x.par_chunks(width * per_task))
        .zip(grad_out.par_chunks(width * per_task))
        .zip(inverse_rms.par_chunks(per_task))
        .map(|(((grad_x, x), grad_out), inverse)| {
            let mut grad_weight = vec![0f32; width];
            for (((gx, x), g), &inv) in grad_x
                .chunks_exact_mut(width)
                .zip(x.chunks_exact(width))
                .zip(grad_out.chunks_exact(width))
                .zip(inverse)
            {
                // y = x · inv · w, inv = (mean x² + eps)^-½:
                // dx = inv · (g·w) − x · inv³ / width · Σ (g·w·x).
                let dot: f32 = g
                    .iter()
                    .zip(weight)
                    .zip(x)
                    .map(|((g, w), x)| g * w * x)
                    .sum();
                let coefficient = inv * inv * inv * dot / width as f32;
                for (((gx, g), w), v) in gx.iter_mut().zip(g).zip(weight).zip(x) {
                    *gx += inv * g * w - v * coefficient;
                }
                for ((gw, g), v) in grad_weight.iter_mut().zip(g).zip(x) {
                    *gw += g * v * inv;
                }
            }
            grad_weight
        })
        .reduce(
            || vec![0f32; width],
            |mut a, b| {
                a.iter_mut().zip(&b).for_each(|(a, b)| *a += b);
                a
            },
        )
}

/// Rotary embedding in place on token rows of `width` (whole heads of
/// `dim`): the row of sequence position `t` (row index mod `seq`) turns by
/// the angles in row `t` of the `[seq, dim / 2]` tables. `inverse` turns
/// back, which is also the backward pass (a rotation's transpose is its
/// inverse).
pub(super) fn rotate(
    x: &mut [f32],
    width: usize,
    seq: usize,
    (cos, sin): (&[f32], &[f32]),
    dim: usize,
    inverse: bool,
) {
    let half = dim / 2;
    let sign = if inverse { -1.0 } else { 1.0 };
    let per_task = rows_per_task(width);
    x.par_chunks_mut(width * per_task)
        .enumerate()
        .for_each(|(task, rows)| {
            for (i, row) in rows.chunks_exact_mut(width).enumerate() {
                let t = (task * per_task + i) % seq;
                let (c, s) = (&cos[t * half..][..half], &sin[t * half..][..half]);
                for head in row.chunks_exact_mut(dim) {
                    let (first, second) = head.split_at_mut(half);
                    for j in 0..half {
                        let (a, b, sj) = (first[j], second[j], sign * s[j]);
                        first[j] = a * c[j] - b * sj;
                        second[j] = b * c[j] + a * sj;
                    }
                }
            }
        });
}

/// SwiGLU: `out = silu(gate) · up`, keeping `sigmoid(gate)` in `sigmoid`
/// for the backward pass.
pub(super) fn swiglu(gate: &[f32], up: &[f32], out: &mut [f32], sigmoid: &mut [f32]) {
    const CHUNK: usize = PARALLEL_FROM;
    out.par_chunks_mut(CHUNK)
        .zip(sigmoid.par_chunks_mut(CHUNK))
        .zip(gate.par_chunks(CHUNK).zip(up.par_chunks(CHUNK)))
        .for_each(|((out, sigmoid), (gate, up))| {
            for (((o, s), &g), &u) in out.iter_mut().zip(sigmoid.iter_mut()).zip(gate).zip(up) {
                *s = 1.0 / (1.0 + exp(-g));
                *o = g * *s * u;
            }
        });
}

/// Backward of [`swiglu`] from the output's gradient: the gradients of
/// `gate` and `up`, written into `grad_gate` and `grad_up`.
pub(super) fn swiglu_backward(
    gate: &[f32],
    up: &[f32],
    sigmoid: &[f32],
    grad_out: &[f32],
    grad_gate: &mut [f32],
    grad_up: &mut [f32],
) {
    const CHUNK: usize = PARALLEL_FROM;
    grad_gate
        .par_chunks_mut(CHUNK)
        .zip(grad_up.par_chunks_mut(CHUNK))
        .zip(gate.par_chunks(CHUNK).zip(up.par_chunks(CHUNK)))
        .zip(sigmoid.par_chunks(CHUNK).zip(grad_out.par_chunks(CHUNK)))
        .for_each(
            |(((grad_gate, grad_up), (gate, up)), (sigmoid, grad_out))| {
                for i in 0..grad_gate.len() {
                    let (g, u, s, d) = (gate[i], up[i], sigmoid[i], grad_out[i]);
                    grad_up[i] = d * g * s;
                    // d silu(g) / dg = s · (1 + g · (1 − s)).
                    grad_gate[i] = d * u * s * (1.0 + g * (1.0 - s));
                }
            },
        );
}
