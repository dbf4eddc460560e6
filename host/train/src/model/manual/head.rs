//! The final norm, the output projection and the log-softmax of the target
//! token, forward and backward, over the wanted rows only.

use super::buffers::Buffer;
use super::layer::Sizes;
use super::{Batch, Held, WeightGrad};
use crate::error::Result;
use crate::model::Decoder;
use crate::model::kernels::{
    Mat, MatMut, matmul, normalize_rows, normalize_rows_backward, rows_per_task,
};
use rayon::prelude::*;
use verifine_models::ops::exp;

/// What the head's backward pass reads.
pub(super) struct HeadTape {
    /// The residual stream after the last block.
    input: Buffer,
    inverse_rms: Buffer,
    /// The wanted rows (indices into the batch's token rows).
    active: Vec<usize>,
    /// The normed stream of the wanted rows, `[active, hidden]`.
    normed: Buffer,
    /// softmax of the wanted rows' logits, `[active, vocab]`.
    probs: Buffer,
    /// The target of each wanted row.
    targets: Vec<u32>,
}

impl HeadTape {
    /// The softmax of each wanted row's logits, `[active · vocab]`.
    pub(super) fn into_probs(self) -> Vec<f32> {
        self.probs.to_vec()
    }
}

/// The output projection: the untied head, or the embedding.
fn head_weight(decoder: &Decoder) -> &candle_core::Tensor {
    decoder.lm_head.as_ref().unwrap_or(&decoder.embed)
}

/// log softmax(normed · headᵀ)[target] per wanted row of the stream `input`.
pub(super) fn forward(
    decoder: &Decoder,
    sizes: Sizes,
    input: Buffer,
    batch: &Batch,
) -> Result<(Vec<f32>, HeadTape)> {
    let (rows, hidden) = (batch.batch * batch.seq, sizes.hidden);
    let vocab = decoder.config().vocab_size;
    let mut all_normed = Buffer::scratch(rows * hidden);
    let mut inverse_rms = Buffer::scratch(rows);
    let final_norm = Held::of(&decoder.final_norm)?;
    normalize_rows(
        &input,
        final_norm.slice()?,
        sizes.eps,
        &mut all_normed,
        &mut inverse_rms,
    );
    let active: Vec<usize> = (0..rows).filter(|&i| batch.wanted[i]).collect();
    let normed = if active.len() == rows {
        all_normed
    } else {
        let mut normed = Buffer::scratch(active.len() * hidden);
        for (row, &i) in normed.chunks_exact_mut(hidden).zip(&active) {
            row.copy_from_slice(&all_normed[i * hidden..][..hidden]);
        }
        normed
    };
    let head = Held::of(head_weight(decoder))?;
    let mut probs = Buffer::scratch(active.len() * vocab);
    matmul(
        MatMut::rows(&mut probs, active.len(), vocab),
        Mat::rows(&normed, active.len(), hidden),
        Mat::rows(head.slice()?, vocab, hidden).t(),
        false,
    );
    let targets: Vec<u32> = active.iter().map(|&i| batch.targets[i]).collect();
    let mut active_log_probs = vec![0f32; active.len()];
    probs
        .par_chunks_mut(vocab)
        .zip(active_log_probs.par_iter_mut())
        .zip(&targets)
        .with_min_len(rows_per_task(vocab))
        .for_each(|((row, log_prob), &target)| {
            // The logits become probabilities in place.
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let target_logit = row[target as usize];
            let mut sum = 0f32;
            for x in row.iter_mut() {
                *x = exp(*x - max);
                sum += *x;
            }
            *log_prob = target_logit - max - sum.ln();
            let inverse = 1.0 / sum;
            row.iter_mut().for_each(|x| *x *= inverse);
        });
    let mut log_probs = vec![0f32; rows];
    for (&i, &lp) in active.iter().zip(&active_log_probs) {
        log_probs[i] = lp;
    }
    let tape = HeadTape {
        input,
        inverse_rms,
        active,
        normed,
        probs,
        targets,
    };
    Ok((log_probs, tape))
}

/// Backward through the head: returns the gradient of the stream after
/// the last block, and pushes the head's and the final norm's gradients.
pub(super) fn backward(
    decoder: &Decoder,
    sizes: Sizes,
    mut tape: HeadTape,
    grad_log_probs: &[f32],
    grads: &mut Vec<WeightGrad>,
) -> Result<Buffer> {
    let (rows, hidden) = (sizes.heads.batch * sizes.heads.seq, sizes.hidden);
    let (vocab, active) = (decoder.config().vocab_size, tape.active.len());
    // d log p[t] / d logits = onehot(t) − p, times the incoming gradient.
    tape.probs
        .par_chunks_mut(vocab)
        .zip(&tape.active)
        .zip(&tape.targets)
        .with_min_len(rows_per_task(vocab))
        .for_each(|((row, &i), &target)| {
            let g = grad_log_probs[i];
            row.iter_mut().for_each(|p| *p *= -g);
            row[target as usize] += g;
        });
    let head_tensor = head_weight(decoder);
    let head = Held::of(head_tensor)?;
    let grad_logits = Mat::rows(&tape.probs, active, vocab);
    let mut grad_normed_active = Buffer::scratch(active * hidden);
    matmul(
        MatMut::rows(&mut grad_normed_active, active, hidden),
        grad_logits,
        Mat::rows(head.slice()?, vocab, hidden),
        false,
    );
    if !decoder.embed_frozen {
        let mut grad = vec![0f32; vocab * hidden];
        matmul(
            MatMut::rows(&mut grad, vocab, hidden),
            grad_logits.t(),
            Mat::rows(&tape.normed, active, hidden),
            false,
        );
        grads.push((head_tensor.clone(), grad));
    }
    drop((tape.probs, tape.normed));
    let grad_normed = if active == rows {
        grad_normed_active
    } else {
        let mut all = Buffer::zeros(rows * hidden);
        for (row, &i) in grad_normed_active.chunks_exact(hidden).zip(&tape.active) {
            all[i * hidden..][..hidden].copy_from_slice(row);
        }
        all
    };
    let mut grad_input = Buffer::zeros(rows * hidden);
    let final_norm = Held::of(&decoder.final_norm)?;
    let input = (&*tape.input, final_norm.slice()?, &*tape.inverse_rms);
    let trains = decoder.final_norm.is_variable();
    if let Some(norm) = normalize_rows_backward(input, &grad_normed, &mut grad_input, trains) {
        grads.push((decoder.final_norm.clone(), norm));
    }
    Ok(grad_input)
}
