//! The arithmetic of the hand-written pass (`manual`) and of frozen
//! projections (`frozen`): matrix products on strided views, attention's
//! dot products, and the row-wise ops (RMSNorm, rotary embedding, SwiGLU)
//! with their backward passes run over token rows. The row-wise maths is
//! `verifine_models::ops`', written once for training and the judge; here
//! it is only split over rows.
//!
//! Every op reads and writes plain `f32` slices in token rows (`[rows,
//! width]`, row-major). Ops over many rows run on rayon's pool, the one
//! candle's kernels use.

use rayon::prelude::*;
use verifine_models::ops::{self, RopeStyle};

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

/// RMSNorm of token rows ([`ops::norm::normalize`] per row): writes the
/// normed rows into `out` and each row's `1 / rms` into `inverse_rms`
/// (what the backward pass needs).
pub(super) fn normalize_rows(
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
            let rows = out.chunks_exact_mut(width).zip(x.chunks_exact(width));
            for ((o, x), inv) in rows.zip(inverse.iter_mut()) {
                *inv = ops::norm::normalize(x, weight, eps, o);
            }
        });
}

/// Backward of [`normalize_rows`]: adds the gradient of `x` to `grad_x`,
/// from the output's gradient `grad_out`, and returns the weight's gradient
/// when `weight_trains` (a frozen norm costs no gradient).
pub(super) fn normalize_rows_backward(
    (x, weight, inverse_rms): (&[f32], &[f32], &[f32]),
    grad_out: &[f32],
    grad_x: &mut [f32],
    weight_trains: bool,
) -> Option<Vec<f32>> {
    let width = weight.len();
    let per_task = rows_per_task(width);
    grad_x
        .par_chunks_mut(width * per_task)
        .zip(x.par_chunks(width * per_task))
        .zip(grad_out.par_chunks(width * per_task))
        .zip(inverse_rms.par_chunks(per_task))
        .map(|(((grad_x, x), grad_out), inverse)| {
            let mut grad_weight = weight_trains.then(|| vec![0f32; width]);
            let rows = grad_x
                .chunks_exact_mut(width)
                .zip(x.chunks_exact(width))
                .zip(grad_out.chunks_exact(width));
            for (((gx, x), g), &r) in rows.zip(inverse) {
                let gw = grad_weight.as_deref_mut();
                ops::norm::normalize_backward(x, weight, r, g, gx, gw);
            }
            grad_weight
        })
        .reduce(
            || weight_trains.then(|| vec![0f32; width]),
            |a, b| {
                a.zip(b).map(|(mut a, b)| {
                    a.iter_mut().zip(&b).for_each(|(a, b)| *a += b);
                    a
                })
            },
        )
}

/// Rotary embedding in place on token rows of `width` (whole heads of
/// `dim`, [`ops::rope::rotate`] each): the row of sequence position `t`
/// (row index mod `seq`) turns by the angles in row `t` of the `[seq, dim
/// / 2]` tables. `inverse` turns back, which is also the backward pass.
pub(super) fn rotate_rows(
    x: &mut [f32],
    width: usize,
    seq: usize,
    (cos, sin): (&[f32], &[f32]),
    dim: usize,
    inverse: bool,
) {
    let half = dim / 2;
    let per_task = rows_per_task(width);
    x.par_chunks_mut(width * per_task)
        .enumerate()
        .for_each(|(task, rows)| {
            for (i, row) in rows.chunks_exact_mut(width).enumerate() {
                let t = (task * per_task + i) % seq;
                let tables = (&cos[t * half..][..half], &sin[t * half..][..half]);
                for head in row.chunks_exact_mut(dim) {
                    ops::rope::rotate(head, tables, RopeStyle::Halves, inverse);
                }
            }
        });
}

/// SwiGLU over many elements ([`ops::activation::swiglu`] per chunk):
/// `out = silu(gate) · up`, keeping `σ(gate)` in `sigmoid`.
pub(super) fn swiglu_rows(gate: &[f32], up: &[f32], out: &mut [f32], sigmoid: &mut [f32]) {
    const CHUNK: usize = PARALLEL_FROM;
    out.par_chunks_mut(CHUNK)
        .zip(sigmoid.par_chunks_mut(CHUNK))
        .zip(gate.par_chunks(CHUNK).zip(up.par_chunks(CHUNK)))
        .for_each(|((out, sigmoid), (gate, up))| ops::activation::swiglu(gate, up, out, sigmoid));
}

/// Backward of [`swiglu_rows`] from the output's gradient: the gradients of
/// `gate` and `up`, written into `grad_gate` and `grad_up`.
pub(super) fn swiglu_rows_backward(
    (gate, up, sigmoid): (&[f32], &[f32], &[f32]),
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
                ops::activation::swiglu_backward((gate, up, sigmoid), grad_out, grad_gate, grad_up)
            },
        );
}
