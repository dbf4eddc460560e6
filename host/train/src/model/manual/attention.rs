//! Grouped-query causal self-attention over token rows, forward and
//! backward, one batch row per rayon task.
//!
//! Queries, keys and values stay in token rows (`[batch · seq, heads ·
//! dim]`): a head of one position is a contiguous `dim`-long slice, so the
//! products are dot products and `y += a·x` over such slices, and nothing
//! is moved into a heads-first layout and back. At these sizes (a few dozen
//! positions, heads of 32–64) a GEMM call per head costs more in packing
//! and set-up than the arithmetic: a profile of the first version, which
//! made one, spent a third of the update there. Keys after the query are
//! never computed (their probability is exactly 0). The batch rows give the
//! pool its parallelism.

use crate::model::MASKED;
use crate::model::kernels::{axpy, dot};
use crate::model::simd::widest;
use rayon::prelude::*;
use verifine_models::ops::{TransposedKeys, attend_query};

/// The sizes attention works with.
#[derive(Clone, Copy, Debug)]
pub(super) struct Heads {
    pub batch: usize,
    pub seq: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub dim: usize,
}

impl Heads {
    fn query_width(self) -> usize {
        self.heads * self.dim
    }

    fn key_width(self) -> usize {
        self.kv_heads * self.dim
    }

    /// The key/value head query head `h` reads.
    fn kv_head(self, h: usize) -> usize {
        h / (self.heads / self.kv_heads)
    }

    /// Elements of the attention probabilities, `[batch, heads, seq, seq]`.
    pub fn probs_len(self) -> usize {
        self.batch * self.heads * self.seq * self.seq
    }
}

/// Position `i`'s slice of head `head` in token rows of `width`.
#[inline(always)]
fn at(rows: &[f32], width: usize, dim: usize, i: usize, head: usize) -> &[f32] {
    &rows[i * width + head * dim..][..dim]
}

/// The same, writable.
#[inline(always)]
fn at_mut(rows: &mut [f32], width: usize, dim: usize, i: usize, head: usize) -> &mut [f32] {
    &mut rows[i * width + head * dim..][..dim]
}

/// softmax(q kᵀ / √dim + mask) v per head into `out` (token rows of
/// `heads · dim`), keeping the probabilities in `probs`. Key `j` is visible
/// to query `i` when `j ≤ i` and `keys[j]` (not padding); a hidden earlier
/// key gets [`MASKED`] added, as the autograd path does, and a later key
/// probability 0.
pub(super) fn forward(
    shape: Heads,
    (q, k, v): (&[f32], &[f32], &[f32]),
    keys: &[bool],
    probs: &mut [f32],
    out: &mut [f32],
) {
    let (seq, qw, kw) = (shape.seq, shape.query_width(), shape.key_width());
    out.par_chunks_mut(seq * qw)
        .zip(probs.par_chunks_mut(shape.heads * seq * seq))
        .enumerate()
        .for_each(|(b, (out, probs))| {
            let rows = b * seq..(b + 1) * seq;
            let q = &q[rows.start * qw..rows.end * qw];
            let (k, v) = (
                &k[rows.start * kw..rows.end * kw],
                &v[rows.start * kw..rows.end * kw],
            );
            forward_row(shape, q, k, v, &keys[rows], probs, out);
        });
}

widest! {
    /// [`forward`] for one batch row: the shared [`attend_query`] for each
    /// head and position, the keys of each key/value head transposed once
    /// for all the query heads that read it.
    fn forward_row(
        shape: Heads,
        q: &[f32],
        k: &[f32],
        v: &[f32],
        keys: &[bool],
        probs: &mut [f32],
        out: &mut [f32],
    ) {
        let (seq, dim, qw, kw) = (shape.seq, shape.dim, shape.query_width(), shape.key_width());
        let scale = 1.0 / (dim as f32).sqrt();
        let hidden = |j: usize| if keys[j] { 0.0 } else { MASKED };
        let repeat = shape.heads / shape.kv_heads;
        let mut transposed = TransposedKeys::new();
        for g in 0..shape.kv_heads {
            transposed.fill(dim, (0..seq).map(|j| at(k, kw, dim, j, g)));
            let value = |j: usize| at(v, kw, dim, j, g);
            for h in g * repeat..(g + 1) * repeat {
                let p = &mut probs[h * seq * seq..][..seq * seq];
                for (i, row) in p.chunks_exact_mut(seq).enumerate() {
                    let (visible, later) = row.split_at_mut(i + 1);
                    let q_i = at(q, qw, dim, i, h);
                    let out_i = at_mut(out, qw, dim, i, h);
                    attend_query(q_i, scale, &transposed, 0..i + 1, hidden, value, visible, out_i);
                    later.fill(0.0);
                }
            }
        }
    }
}

/// Backward of [`forward`] from the output's gradient `grad_out`: writes
/// the gradients of `q`, `k` and `v` (after rotation, as they entered).
pub(super) fn backward(
    shape: Heads,
    (q, k, v): (&[f32], &[f32], &[f32]),
    probs: &[f32],
    grad_out: &[f32],
    (grad_q, grad_k, grad_v): (&mut [f32], &mut [f32], &mut [f32]),
) {
    let (seq, qw, kw) = (shape.seq, shape.query_width(), shape.key_width());
    grad_q
        .par_chunks_mut(seq * qw)
        .zip(grad_k.par_chunks_mut(seq * kw))
        .zip(grad_v.par_chunks_mut(seq * kw))
        .enumerate()
        .for_each(|(b, ((grad_q, grad_k), grad_v))| {
            let rows = b * seq..(b + 1) * seq;
            let (q, grad_out) = (
                &q[rows.start * qw..rows.end * qw],
                &grad_out[rows.start * qw..rows.end * qw],
            );
            let (k, v) = (
                &k[rows.start * kw..rows.end * kw],
                &v[rows.start * kw..rows.end * kw],
            );
            let probs = &probs[b * shape.heads * seq * seq..][..shape.heads * seq * seq];
            backward_row(shape, (q, k, v), probs, grad_out, grad_q, grad_k, grad_v);
        });
}

widest! {
    /// [`backward`] for one batch row.
    fn backward_row(
        shape: Heads,
        qkv: (&[f32], &[f32], &[f32]),
        probs: &[f32],
        grad_out: &[f32],
        grad_q: &mut [f32],
        grad_k: &mut [f32],
        grad_v: &mut [f32],
    ) {
        let (q, k, v) = qkv;
        let (seq, dim, qw, kw) = (shape.seq, shape.dim, shape.query_width(), shape.key_width());
        let scale = 1.0 / (dim as f32).sqrt();
        grad_k.fill(0.0);
        grad_v.fill(0.0);
        let mut grad_scores = vec![0f32; seq];
        for (h, p) in probs.chunks_exact(seq * seq).enumerate() {
            let g = shape.kv_head(h);
            for (i, p_row) in p.chunks_exact(seq).enumerate() {
                let (p_row, d_row) = (&p_row[..=i], &mut grad_scores[..=i]);
                let grad_out_i = at(grad_out, qw, dim, i, h);
                // dP_ij = dO_i · v_j; dV_j += P_ij dO_i.
                for (j, (d, &p)) in d_row.iter_mut().zip(p_row).enumerate() {
                    *d = dot(grad_out_i, at(v, kw, dim, j, g));
                    axpy(at_mut(grad_v, kw, dim, j, g), p, grad_out_i);
                }
                // Through the softmax: dS = P ∘ (dP − Σ_j dP∘P), times the scale.
                let total = dot(d_row, p_row);
                for (d, p) in d_row.iter_mut().zip(p_row) {
                    *d = p * (*d - total) * scale;
                }
                // dQ_i = Σ_j dS_ij k_j; dK_j += dS_ij q_i.
                let q_i = at(q, qw, dim, i, h);
                let grad_q_i = at_mut(grad_q, qw, dim, i, h);
                grad_q_i.fill(0.0);
                for (j, &d) in d_row.iter().enumerate() {
                    axpy(grad_q_i, d, at(k, kw, dim, j, g));
                }
                for (j, &d) in d_row.iter().enumerate() {
                    axpy(at_mut(grad_k, kw, dim, j, g), d, q_i);
                }
            }
        }
    }
}
