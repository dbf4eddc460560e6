//! One decoder block, forward and backward, in token rows.

use super::attention::{self, Heads};
use super::buffers::Buffer;
use super::kernels::swiglu_backward;
use super::kernels::{Mat, MatMut, matmul, rms_norm, rms_norm_backward, rotate, swiglu};
use super::{Held, WeightGrad};
use crate::error::Result;
use crate::model::block::{Block, Linear};

/// A block's weights, read in place.
pub(super) struct BlockWeights<'a> {
    attn_norm: Held<'a>,
    q: Held<'a>,
    k: Held<'a>,
    v: Held<'a>,
    o: Held<'a>,
    mlp_norm: Held<'a>,
    gate: Held<'a>,
    up: Held<'a>,
    down: Held<'a>,
}

impl<'a> BlockWeights<'a> {
    pub fn of(block: &'a Block) -> Result<Self> {
        Ok(BlockWeights {
            attn_norm: Held::of(&block.attn_norm)?,
            q: Held::of(&block.q.weight)?,
            k: Held::of(&block.k.weight)?,
            v: Held::of(&block.v.weight)?,
            o: Held::of(&block.o.weight)?,
            mlp_norm: Held::of(&block.mlp_norm)?,
            gate: Held::of(&block.gate.weight)?,
            up: Held::of(&block.up.weight)?,
            down: Held::of(&block.down.weight)?,
        })
    }
}

/// What the block's backward pass reads, saved by its forward pass.
pub(super) struct LayerTape {
    input: Buffer,
    attn_inverse_rms: Buffer,
    attn_normed: Buffer,
    q: Buffer,
    k: Buffer,
    v: Buffer,
    probs: Buffer,
    attended: Buffer,
    middle: Buffer,
    mlp_inverse_rms: Buffer,
    mlp_normed: Buffer,
    gate: Buffer,
    up: Buffer,
    sigmoid: Buffer,
    gated: Buffer,
}

/// The sizes a block computes with.
#[derive(Clone, Copy)]
pub(super) struct Sizes {
    pub heads: Heads,
    pub hidden: usize,
    pub intermediate: usize,
    pub eps: f64,
}

impl Sizes {
    fn rows(self) -> usize {
        self.heads.batch * self.heads.seq
    }
}

/// `x · wᵀ` for token rows `x` (`[rows, in]`) and `w` (`[out, in]`).
fn project(x: &[f32], rows: usize, w: &[f32], out: usize, into: &mut [f32], accumulate: bool) {
    let inner = x.len() / rows.max(1);
    let weight = Mat::rows(w, out, inner).t();
    matmul(
        MatMut::rows(into, rows, out),
        Mat::rows(x, rows, inner),
        weight,
        accumulate,
    );
}

/// `g · w` for gradient rows `g` (`[rows, out]`) and `w` (`[out, in]`):
/// the gradient of a projection's input, added when `accumulate`.
fn project_back(
    g: &[f32],
    rows: usize,
    w: &[f32],
    inner: usize,
    into: &mut [f32],
    accumulate: bool,
) {
    let out = g.len() / rows.max(1);
    let weight = Mat::rows(w, out, inner);
    matmul(
        MatMut::rows(into, rows, inner),
        Mat::rows(g, rows, out),
        weight,
        accumulate,
    );
}

/// `gᵀ · x`: a projection's weight gradient, `[out, in]`, unless it is frozen.
fn weight_grad(linear: &Linear, g: &[f32], x: &[f32], rows: usize) -> Option<WeightGrad> {
    if linear.frozen {
        return None;
    }
    let (out, inner) = (g.len() / rows.max(1), x.len() / rows.max(1));
    let mut grad = vec![0f32; out * inner];
    let (g, x) = (Mat::rows(g, rows, out), Mat::rows(x, rows, inner));
    matmul(MatMut::rows(&mut grad, out, inner), g.t(), x, false);
    Some((linear.weight.clone(), grad))
}

/// The block over the residual stream `input` (`[rows, hidden]`): returns
/// the stream after it, and what its backward pass needs.
pub(super) fn forward(
    w: &BlockWeights,
    sizes: Sizes,
    input: Buffer,
    keys: &[bool],
    tables: (&[f32], &[f32]),
) -> Result<(Buffer, LayerTape)> {
    let (rows, hidden, heads) = (sizes.rows(), sizes.hidden, sizes.heads);
    let (qw, kw) = (heads.heads * heads.dim, heads.kv_heads * heads.dim);
    let mut attn_normed = Buffer::scratch(rows * hidden);
    let mut attn_inverse_rms = Buffer::scratch(rows);
    rms_norm(
        &input,
        w.attn_norm.slice()?,
        sizes.eps,
        &mut attn_normed,
        &mut attn_inverse_rms,
    );
    let (mut q, mut k, mut v) = (
        Buffer::scratch(rows * qw),
        Buffer::scratch(rows * kw),
        Buffer::scratch(rows * kw),
    );
    project(&attn_normed, rows, w.q.slice()?, qw, &mut q, false);
    project(&attn_normed, rows, w.k.slice()?, kw, &mut k, false);
    project(&attn_normed, rows, w.v.slice()?, kw, &mut v, false);
    rotate(&mut q, qw, heads.seq, tables, heads.dim, false);
    rotate(&mut k, kw, heads.seq, tables, heads.dim, false);
    let mut probs = Buffer::scratch(heads.probs_len());
    let mut attended = Buffer::scratch(rows * qw);
    attention::forward(heads, (&q, &k, &v), keys, &mut probs, &mut attended);
    let mut middle = Buffer::copy_of(&input);
    project(&attended, rows, w.o.slice()?, hidden, &mut middle, true);

    let mut mlp_normed = Buffer::scratch(rows * hidden);
    let mut mlp_inverse_rms = Buffer::scratch(rows);
    rms_norm(
        &middle,
        w.mlp_norm.slice()?,
        sizes.eps,
        &mut mlp_normed,
        &mut mlp_inverse_rms,
    );
    let width = sizes.intermediate;
    let (mut gate, mut up) = (Buffer::scratch(rows * width), Buffer::scratch(rows * width));
    project(&mlp_normed, rows, w.gate.slice()?, width, &mut gate, false);
    project(&mlp_normed, rows, w.up.slice()?, width, &mut up, false);
    let (mut gated, mut sigmoid) = (Buffer::scratch(rows * width), Buffer::scratch(rows * width));
    swiglu(&gate, &up, &mut gated, &mut sigmoid);
    let mut output = Buffer::copy_of(&middle);
    project(&gated, rows, w.down.slice()?, hidden, &mut output, true);
    let tape = LayerTape {
        input,
        attn_inverse_rms,
        attn_normed,
        q,
        k,
        v,
        probs,
        attended,
        middle,
        mlp_inverse_rms,
        mlp_normed,
        gate,
        up,
        sigmoid,
        gated,
    };
    Ok((output, tape))
}

/// Backward through the block: `grad` holds the gradient of the block's
/// output on entry and of its input on return; the weights' gradients are
/// pushed onto `grads`.
pub(super) fn backward(
    block: &Block,
    w: &BlockWeights,
    sizes: Sizes,
    tape: LayerTape,
    grad: &mut [f32],
    tables: (&[f32], &[f32]),
    grads: &mut Vec<WeightGrad>,
) -> Result<()> {
    let (rows, hidden, heads) = (sizes.rows(), sizes.hidden, sizes.heads);
    let (qw, kw, width) = (
        heads.heads * heads.dim,
        heads.kv_heads * heads.dim,
        sizes.intermediate,
    );
    // MLP: output = middle + gated · downᵀ.
    let mut grad_gated = Buffer::scratch(rows * width);
    project_back(grad, rows, w.down.slice()?, width, &mut grad_gated, false);
    grads.extend(weight_grad(&block.down, grad, &tape.gated, rows));
    drop(tape.gated);
    let (mut grad_gate, mut grad_up) =
        (Buffer::scratch(rows * width), Buffer::scratch(rows * width));
    swiglu_backward(
        &tape.gate,
        &tape.up,
        &tape.sigmoid,
        &grad_gated,
        &mut grad_gate,
        &mut grad_up,
    );
    drop((grad_gated, tape.sigmoid));
    let mut grad_normed = Buffer::scratch(rows * hidden);
    project_back(
        &grad_gate,
        rows,
        w.gate.slice()?,
        hidden,
        &mut grad_normed,
        false,
    );
    project_back(
        &grad_up,
        rows,
        w.up.slice()?,
        hidden,
        &mut grad_normed,
        true,
    );
    grads.extend(weight_grad(&block.gate, &grad_gate, &tape.mlp_normed, rows));
    grads.extend(weight_grad(&block.up, &grad_up, &tape.mlp_normed, rows));
    drop((grad_gate, grad_up, tape.gate, tape.up, tape.mlp_normed));
    let norm = rms_norm_backward(
        &tape.middle,
        w.mlp_norm.slice()?,
        &tape.mlp_inverse_rms,
        &grad_normed,
        grad,
    );
    grads.push((block.mlp_norm.clone(), norm));
    drop(tape.middle);

    // Attention: middle = input + attended · oᵀ.
    let mut grad_attended = Buffer::scratch(rows * qw);
    project_back(grad, rows, w.o.slice()?, qw, &mut grad_attended, false);
    grads.extend(weight_grad(&block.o, grad, &tape.attended, rows));
    drop(tape.attended);
    let (mut grad_q, mut grad_k, mut grad_v) = (
        Buffer::scratch(rows * qw),
        Buffer::scratch(rows * kw),
        Buffer::scratch(rows * kw),
    );
    attention::backward(
        heads,
        (&tape.q, &tape.k, &tape.v),
        &tape.probs,
        &grad_attended,
        (&mut grad_q, &mut grad_k, &mut grad_v),
    );
    drop((grad_attended, tape.probs, tape.q, tape.k, tape.v));
    rotate(&mut grad_q, qw, heads.seq, tables, heads.dim, true);
    rotate(&mut grad_k, kw, heads.seq, tables, heads.dim, true);
    project_back(&grad_q, rows, w.q.slice()?, hidden, &mut grad_normed, false);
    project_back(&grad_k, rows, w.k.slice()?, hidden, &mut grad_normed, true);
    project_back(&grad_v, rows, w.v.slice()?, hidden, &mut grad_normed, true);
    grads.extend(weight_grad(&block.q, &grad_q, &tape.attn_normed, rows));
    grads.extend(weight_grad(&block.k, &grad_k, &tape.attn_normed, rows));
    grads.extend(weight_grad(&block.v, &grad_v, &tape.attn_normed, rows));
    let norm = rms_norm_backward(
        &tape.input,
        w.attn_norm.slice()?,
        &tape.attn_inverse_rms,
        &grad_normed,
        grad,
    );
    grads.push((block.attn_norm.clone(), norm));
    Ok(())
}
