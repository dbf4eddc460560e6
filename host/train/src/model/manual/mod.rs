//! The training pass written by hand: forward and backward of the whole
//! decoder over token rows, for the update step on the CPU in f32.
//!
//! candle's autograd adds every gradient into a freshly zeroed tensor,
//! allocates one tensor per op and runs attention as many small products;
//! at the shapes we train, that left the update at 0.5× PyTorch. This pass
//! computes the same function with the gradients written out: the
//! activations it keeps are reused buffers ([`buffers`]), each gradient is
//! written once, and attention works on one batch row per task. Only the
//! rows whose log-probability the loss reads go through the output
//! projection.
//!
//! It covers the decoder as training builds it in f32 on the CPU: frozen
//! projections, LoRA adapters and an untied head included. q/k/v biases, a
//! GPU or a lower precision take the autograd path ([`supports`] says which),
//! which stays the reference: the tests compare the two by value and
//! gradient.

mod attention;
mod buffers;
mod head;
mod layer;
mod projection;
#[cfg(test)]
mod tests;

use super::Decoder;
use super::WeightLayout;
use crate::error::{Result, TrainError, ensure};
use attention::Heads;
use buffers::Buffer;
use candle_core::{DType, Layout, Storage, Tensor};
use std::ops::Deref;
use verifine_models::ops::contiguous_data;

/// A weight and its gradient, `weight`'s shape in row-major order.
type WeightGrad = (Tensor, Vec<f32>);

/// Whether the hand-written pass computes `decoder`'s update.
pub(crate) fn supports(decoder: &Decoder) -> bool {
    let plain = |t: &Tensor| t.device().is_cpu() && t.dtype() == DType::F32 && t.is_contiguous();
    let blocks_plain = decoder.blocks.iter().all(|b| {
        let linears = [&b.q, &b.k, &b.v, &b.o, &b.gate, &b.up, &b.down];
        b.biases.is_none()
            && plain(&b.attn_norm)
            && plain(&b.mlp_norm)
            && linears.iter().all(|l| {
                l.layout == WeightLayout::OutByIn
                    && plain(&l.weight)
                    && l.adapter
                        .as_ref()
                        .is_none_or(|a| plain(&a.a) && plain(&a.b))
            })
    });
    blocks_plain
        && plain(&decoder.embed)
        && decoder.lm_head.as_ref().is_none_or(plain)
        && plain(&decoder.final_norm)
        && plain(&decoder.cos)
        && plain(&decoder.sin)
}

/// A tensor's storage, read in place for as long as this is held.
struct Held<'a> {
    // candle's read guard (its lock type is candle's own choice).
    storage: Box<dyn Deref<Target = Storage> + 'a>,
    layout: Layout,
}

impl<'a> Held<'a> {
    fn of(tensor: &'a Tensor) -> Result<Self> {
        let (storage, layout) = tensor.storage_and_layout();
        Ok(Held {
            storage: Box::new(storage),
            layout: layout.clone(),
        })
    }

    fn slice(&self) -> Result<&[f32]> {
        match &**self.storage {
            Storage::Cpu(storage) => Ok(contiguous_data::<f32>(storage, &self.layout)?),
            _ => Err(TrainError::Invalid(
                "the hand-written training pass runs on the CPU only".into(),
            )),
        }
    }
}

/// A batch as the pass reads it: `[batch, seq]` each, row-major.
pub(crate) struct Batch<'a> {
    pub batch: usize,
    pub seq: usize,
    /// Token ids fed to the model.
    pub ids: &'a [u32],
    /// Real tokens (`false`: padding, hidden from attention).
    pub keys: &'a [bool],
    /// The token to score at each position.
    pub targets: &'a [u32],
    /// Positions whose log-probability is wanted; the others are 0.
    pub wanted: &'a [bool],
}

/// What the backward pass needs from the forward pass.
pub(crate) struct Tape {
    batch: usize,
    seq: usize,
    ids: Vec<u32>,
    /// The tapes of the blocks from [`first_trained_block`] up: below it
    /// no gradient is wanted, so nothing is kept.
    layers: Vec<layer::LayerTape>,
    head: head::HeadTape,
}

impl Tape {
    /// The softmax over the vocabulary at each wanted position, in batch
    /// order (`[wanted · vocab]`).
    pub(crate) fn into_wanted_distributions(self) -> Vec<f32> {
        self.head.into_probs()
    }
}

/// The log-probabilities of `batch`'s targets under `decoder` (`[batch ·
/// seq]`; 0 where not wanted), and the tape for [`backward`].
pub(crate) fn forward(decoder: &Decoder, batch: &Batch) -> Result<(Vec<f32>, Tape)> {
    let config = decoder.config();
    let rows = batch.batch * batch.seq;
    ensure!(
        [
            batch.ids.len(),
            batch.keys.len(),
            batch.targets.len(),
            batch.wanted.len()
        ]
        .iter()
        .all(|&n| n == rows),
        "a batch of {}×{} needs that many ids, keys, targets and flags",
        batch.batch,
        batch.seq
    );
    ensure!(
        batch.seq <= config.max_seq_len,
        "sequence of {} tokens exceeds max_seq_len {}",
        batch.seq,
        config.max_seq_len
    );
    let vocab = config.vocab_size;
    if let Some(id) = batch
        .ids
        .iter()
        .chain(batch.targets)
        .find(|&&id| id as usize >= vocab)
    {
        return Err(TrainError::Invalid(format!(
            "token id {id} outside a vocabulary of {vocab}"
        )));
    }
    let sizes = sizes(decoder, batch.batch, batch.seq);
    let hidden = config.hidden_size;
    let embed = Held::of(&decoder.embed)?;
    let mut x = Buffer::scratch(rows * hidden);
    for (row, &id) in x.chunks_exact_mut(hidden).zip(batch.ids) {
        row.copy_from_slice(&embed.slice()?[id as usize * hidden..][..hidden]);
    }
    let (cos, sin) = (Held::of(&decoder.cos)?, Held::of(&decoder.sin)?);
    let tables = (cos.slice()?, sin.slice()?);
    let first_trained = first_trained_block(decoder);
    let mut layers = Vec::with_capacity(decoder.blocks.len() - first_trained);
    for (index, block) in decoder.blocks.iter().enumerate() {
        let weights = layer::BlockWeights::of(block)?;
        let (output, tape) = layer::forward(&weights, sizes, x, batch.keys, tables)?;
        if index >= first_trained {
            layers.push(tape);
        }
        x = output;
    }
    let (log_probs, head) = head::forward(decoder, sizes, x, batch)?;
    let tape = Tape {
        batch: batch.batch,
        seq: batch.seq,
        ids: batch.ids.to_vec(),
        layers,
        head,
    };
    Ok((log_probs, tape))
}

/// The gradient of every trainable weight of `decoder` from the gradient
/// of the log-probabilities [`forward`] returned (`[batch · seq]`).
pub(crate) fn backward(
    decoder: &Decoder,
    tape: Tape,
    grad_log_probs: &[f32],
) -> Result<Vec<WeightGrad>> {
    let sizes = sizes(decoder, tape.batch, tape.seq);
    ensure!(
        grad_log_probs.len() == tape.batch * tape.seq,
        "{} log-prob gradients for a batch of {}×{}",
        grad_log_probs.len(),
        tape.batch,
        tape.seq
    );
    let mut grads = Vec::new();
    let mut grad = head::backward(decoder, sizes, tape.head, grad_log_probs, &mut grads)?;
    let (cos, sin) = (Held::of(&decoder.cos)?, Held::of(&decoder.sin)?);
    let tables = (cos.slice()?, sin.slice()?);
    // The tapes start at the first trained block; the gradient stops there.
    let trained = &decoder.blocks[decoder.blocks.len() - tape.layers.len()..];
    for (block, layer_tape) in trained.iter().zip(tape.layers).rev() {
        let weights = layer::BlockWeights::of(block)?;
        layer::backward(&weights, sizes, layer_tape, &mut grad, tables, &mut grads)?;
    }
    if !decoder.embed_frozen {
        let hidden = sizes.hidden;
        // Tied: the output projection's gradient is already there; add the
        // input embedding's to it.
        let tied = grads.iter().position(|(w, _)| w.id() == decoder.embed.id());
        let mut embed_grad = match tied {
            Some(i) => grads.swap_remove(i).1,
            None => vec![0f32; decoder.config().vocab_size * hidden],
        };
        for (row, &id) in grad.chunks_exact(hidden).zip(&tape.ids) {
            let target = &mut embed_grad[id as usize * hidden..][..hidden];
            target.iter_mut().zip(row).for_each(|(t, g)| *t += g);
        }
        grads.push((decoder.embed.clone(), embed_grad));
    }
    Ok(grads)
}

/// The lowest block a gradient must reach: the first with a trained
/// weight or adapter, or 0 when the embedding trains. With the lower
/// blocks frozen (LoRA on the top ones) the backward pass ends there,
/// which is most of a verifier's training time saved.
pub(crate) fn first_trained_block(decoder: &Decoder) -> usize {
    if !decoder.embed_frozen {
        return 0;
    }
    decoder
        .blocks
        .iter()
        .position(|b| {
            [&b.q, &b.k, &b.v, &b.o, &b.gate, &b.up, &b.down]
                .iter()
                .any(|l| !l.frozen || l.adapter.is_some())
        })
        .unwrap_or(decoder.blocks.len())
}

fn sizes(decoder: &Decoder, batch: usize, seq: usize) -> layer::Sizes {
    let config = decoder.config();
    layer::Sizes {
        heads: Heads {
            batch,
            seq,
            heads: config.num_heads,
            kv_heads: config.num_kv_heads,
            dim: config.head_dim(),
        },
        hidden: config.hidden_size,
        intermediate: config.intermediate_size,
        eps: config.rms_eps,
    }
}
