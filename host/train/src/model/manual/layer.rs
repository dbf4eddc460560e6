//! One decoder block, forward and backward, in token rows.

use super::attention::{self, Heads};
use super::buffers::Buffer;
use super::projection::Projection;
use super::{Held, WeightGrad};
use crate::error::Result;
use crate::model::block::Block;
use crate::model::kernels::{
    normalize_rows, normalize_rows_backward, rotate_rows, swiglu_rows, swiglu_rows_backward,
};

/// A block's weights, read in place.
pub(super) struct BlockWeights<'a> {
    block: &'a Block,
    attn_norm: Held<'a>,
    q: Projection<'a>,
    k: Projection<'a>,
    v: Projection<'a>,
    o: Projection<'a>,
    mlp_norm: Held<'a>,
    gate: Projection<'a>,
    up: Projection<'a>,
    down: Projection<'a>,
}

impl<'a> BlockWeights<'a> {
    pub fn of(block: &'a Block) -> Result<Self> {
        Ok(BlockWeights {
            block,
            attn_norm: Held::of(&block.attn_norm)?,
            q: Projection::of(&block.q)?,
            k: Projection::of(&block.k)?,
            v: Projection::of(&block.v)?,
            o: Projection::of(&block.o)?,
            mlp_norm: Held::of(&block.mlp_norm)?,
            gate: Projection::of(&block.gate)?,
            up: Projection::of(&block.up)?,
            down: Projection::of(&block.down)?,
        })
    }
}

/// The `s · x Aᵀ` product of each projection a LoRA adapter targets.
struct LowRank {
    q: Option<Buffer>,
    k: Option<Buffer>,
    v: Option<Buffer>,
    o: Option<Buffer>,
    gate: Option<Buffer>,
    up: Option<Buffer>,
    down: Option<Buffer>,
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
    low: LowRank,
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
    let weight = w.attn_norm.slice()?;
    normalize_rows(
        &input,
        weight,
        sizes.eps,
        &mut attn_normed,
        &mut attn_inverse_rms,
    );
    let (mut q, mut k, mut v) = (
        Buffer::scratch(rows * qw),
        Buffer::scratch(rows * kw),
        Buffer::scratch(rows * kw),
    );
    let q_low = w.q.forward(&attn_normed, rows, &mut q, false)?;
    let k_low = w.k.forward(&attn_normed, rows, &mut k, false)?;
    let v_low = w.v.forward(&attn_normed, rows, &mut v, false)?;
    rotate_rows(&mut q, qw, heads.seq, tables, heads.dim, false);
    rotate_rows(&mut k, kw, heads.seq, tables, heads.dim, false);
    let mut probs = Buffer::scratch(heads.probs_len());
    let mut attended = Buffer::scratch(rows * qw);
    attention::forward(heads, (&q, &k, &v), keys, &mut probs, &mut attended);
    let mut middle = Buffer::copy_of(&input);
    let o_low = w.o.forward(&attended, rows, &mut middle, true)?;

    let mut mlp_normed = Buffer::scratch(rows * hidden);
    let mut mlp_inverse_rms = Buffer::scratch(rows);
    let weight = w.mlp_norm.slice()?;
    normalize_rows(
        &middle,
        weight,
        sizes.eps,
        &mut mlp_normed,
        &mut mlp_inverse_rms,
    );
    let width = sizes.intermediate;
    let (mut gate, mut up) = (Buffer::scratch(rows * width), Buffer::scratch(rows * width));
    let gate_low = w.gate.forward(&mlp_normed, rows, &mut gate, false)?;
    let up_low = w.up.forward(&mlp_normed, rows, &mut up, false)?;
    let (mut gated, mut sigmoid) = (Buffer::scratch(rows * width), Buffer::scratch(rows * width));
    swiglu_rows(&gate, &up, &mut gated, &mut sigmoid);
    let mut output = Buffer::copy_of(&middle);
    let down_low = w.down.forward(&gated, rows, &mut output, true)?;
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
        low: LowRank {
            q: q_low,
            k: k_low,
            v: v_low,
            o: o_low,
            gate: gate_low,
            up: up_low,
            down: down_low,
        },
    };
    Ok((output, tape))
}

/// Backward through the block: `grad` holds the gradient of the block's
/// output on entry and of its input on return; the weights' gradients are
/// pushed onto `grads`.
pub(super) fn backward(
    w: &BlockWeights,
    sizes: Sizes,
    tape: LayerTape,
    grad: &mut [f32],
    tables: (&[f32], &[f32]),
    grads: &mut Vec<WeightGrad>,
) -> Result<()> {
    let (rows, hidden, heads) = (sizes.rows(), sizes.hidden, sizes.heads);
    let (qw, kw) = (heads.heads * heads.dim, heads.kv_heads * heads.dim);
    let width = sizes.intermediate;
    let low = tape.low;
    // MLP: output = middle + down(gated).
    let mut grad_gated = Buffer::scratch(rows * width);
    let gated = &tape.gated;
    w.down
        .backward(grad, gated, low.down, rows, &mut grad_gated, false, grads)?;
    drop(tape.gated);
    let (mut grad_gate, mut grad_up) =
        (Buffer::scratch(rows * width), Buffer::scratch(rows * width));
    let (gate, up, sigmoid) = (&tape.gate, &tape.up, &tape.sigmoid);
    swiglu_rows_backward(
        (gate, up, sigmoid),
        &grad_gated,
        &mut grad_gate,
        &mut grad_up,
    );
    drop((grad_gated, tape.sigmoid, tape.gate, tape.up));
    let mut grad_normed = Buffer::scratch(rows * hidden);
    let normed = &tape.mlp_normed;
    w.gate.backward(
        &grad_gate,
        normed,
        low.gate,
        rows,
        &mut grad_normed,
        false,
        grads,
    )?;
    w.up.backward(
        &grad_up,
        normed,
        low.up,
        rows,
        &mut grad_normed,
        true,
        grads,
    )?;
    drop((grad_gate, grad_up, tape.mlp_normed));
    let weight = w.mlp_norm.slice()?;
    let inverse = &tape.mlp_inverse_rms;
    let trains = w.block.mlp_norm.is_variable();
    let input = (&*tape.middle, weight, &**inverse);
    if let Some(norm) = normalize_rows_backward(input, &grad_normed, grad, trains) {
        grads.push((w.block.mlp_norm.clone(), norm));
    }
    drop(tape.middle);

    // Attention: middle = input + o(attended).
    let mut grad_attended = Buffer::scratch(rows * qw);
    let attended = &tape.attended;
    w.o.backward(
        grad,
        attended,
        low.o,
        rows,
        &mut grad_attended,
        false,
        grads,
    )?;
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
    rotate_rows(&mut grad_q, qw, heads.seq, tables, heads.dim, true);
    rotate_rows(&mut grad_k, kw, heads.seq, tables, heads.dim, true);
    let normed = &tape.attn_normed;
    w.q.backward(&grad_q, normed, low.q, rows, &mut grad_normed, false, grads)?;
    w.k.backward(&grad_k, normed, low.k, rows, &mut grad_normed, true, grads)?;
    w.v.backward(&grad_v, normed, low.v, rows, &mut grad_normed, true, grads)?;
    let weight = w.attn_norm.slice()?;
    let inverse = &tape.attn_inverse_rms;
    let trains = w.block.attn_norm.is_variable();
    let input = (&*tape.input, weight, &**inverse);
    if let Some(norm) = normalize_rows_backward(input, &grad_normed, grad, trains) {
        grads.push((w.block.attn_norm.clone(), norm));
    }
    Ok(())
}
