//! A llama-, qwen2- or gemma3-architecture decoder, for inference only:
//! its weights stay in their quantized form (see `projection.rs`), and the forward
//! pass extends a [`KvCache`] that can be cut back to any prefix, which is
//! what lets a judge encode a shared prompt prefix once.
//!
//! Written against llama.cpp's definition, with the layer ops training uses
//! (`verifine_models::ops`): RMS norm, rotary embeddings on
//! adjacent pairs (llama) or on halves (qwen2, which also has q/k/v
//! biases; gemma3), grouped-query attention where query head `h` reads KV
//! head `h / (heads / kv_heads)`, and a gated MLP. Gemma 3 adds what its
//! [`Shape`] and [`Layer`] carry: a scaled embedding, per-head q/k norms,
//! norms after attention and after the MLP, GELU (tanh) gating, and
//! sliding-window layers with their own rotary base.

use super::causal::{SequenceTensors, attend_on_cpu};
use super::projection::Projection;
use candle_core::{D, DType, Device, Tensor};

pub use super::error::DecoderError;
pub(super) use super::error::{Result, e};
use super::norms::{normed, post_norm};
use super::tables::rotary_tables;

/// The gate's activation in the MLP: SiLU for llama and qwen2, GELU (tanh)
/// for gemma3.
pub(super) use verifine_models::ops::Activation;
/// How rotary embeddings pair up a head's dimensions: adjacent pairs for
/// GGUF's llama, halves for qwen2 and gemma3.
pub use verifine_models::ops::RopeStyle;

/// Local attention of Gemma's sliding-window layers.
#[derive(Debug, Clone, Copy)]
pub(super) struct SlidingWindow {
    /// A token sees itself and the `window - 1` before it.
    pub(super) window: usize,
    /// The rotary base of those layers.
    pub(super) freq_base: f32,
}

/// One decoder block's weights.
pub(super) struct Layer {
    pub(super) attn_norm: Tensor,
    pub(super) q: Projection,
    pub(super) k: Projection,
    pub(super) v: Projection,
    pub(super) q_bias: Option<Tensor>,
    pub(super) k_bias: Option<Tensor>,
    pub(super) v_bias: Option<Tensor>,
    pub(super) o: Projection,
    pub(super) ffn_norm: Tensor,
    pub(super) gate: Projection,
    pub(super) up: Projection,
    pub(super) down: Projection,
    /// Per-head RMS norms of queries and keys (gemma3).
    pub(super) q_norm: Option<Tensor>,
    pub(super) k_norm: Option<Tensor>,
    /// Norms of the attention's and the MLP's outputs (gemma3).
    pub(super) post_attn_norm: Option<Tensor>,
    pub(super) post_ffn_norm: Option<Tensor>,
    /// Whether the layer attends within the sliding window only.
    pub(super) sliding: bool,
}

/// Everything but the weights.
pub(super) struct Shape {
    pub(super) heads: usize,
    pub(super) kv_heads: usize,
    pub(super) eps: f64,
    pub(super) rope: RopeStyle,
    pub(super) freq_base: f32,
    /// Positions are divided by this (linear rope scaling; 1: none).
    pub(super) position_scale: f32,
    pub(super) context_length: usize,
    /// Width of a head, when it is not the model's width over its heads.
    pub(super) head_dim: Option<usize>,
    /// The embedding is multiplied by this (gemma3: √width).
    pub(super) embed_scale: Option<f64>,
    pub(super) activation: Activation,
    /// Attention scores are multiplied by this (default 1/√head_dim).
    pub(super) attention_scale: Option<f64>,
    pub(super) sliding_window: Option<SlidingWindow>,
}

/// The decoder's weights and shape.
pub struct JudgeDecoder {
    pub(super) embedding: Tensor,
    pub(super) layers: Vec<Layer>,
    pub(super) norm: Tensor,
    pub(super) output: Projection,
    pub(super) cos: Tensor,
    pub(super) sin: Tensor,
    /// Rotary tables and window of the sliding-window layers.
    pub(super) local: Option<(Tensor, Tensor, usize)>,
    pub(super) embed_scale: Option<f64>,
    pub(super) activation: Activation,
    pub(super) attention_scale: f64,
    pub(super) heads: usize,
    pub(super) kv_heads: usize,
    pub(super) head_dim: usize,
    pub(super) eps: f64,
    pub(super) rope: RopeStyle,
    /// Longest sequence the rotary tables cover.
    pub context_length: usize,
    pub(super) device: Device,
}

/// Keys and values of every layer for the tokens seen so far.
#[derive(Clone, Default)]
pub struct KvCache {
    pub(super) layers: Vec<(Tensor, Tensor)>,
    pub(super) len: usize,
}

impl KvCache {
    /// Tokens held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no token is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The cache of the first `len` tokens (shares storage until extended).
    pub fn prefix(&self, len: usize) -> Result<KvCache> {
        if len >= self.len {
            return Ok(self.clone());
        }
        if len == 0 {
            return Ok(KvCache::default());
        }
        let layers = self
            .layers
            .iter()
            .map(|(k, v)| {
                Ok((
                    k.narrow(2, 0, len).map_err(e)?,
                    v.narrow(2, 0, len).map_err(e)?,
                ))
            })
            .collect::<Result<_>>()?;
        Ok(KvCache { layers, len })
    }
}

impl JudgeDecoder {
    /// A decoder from its weights and shape (both loaders end here).
    pub(super) fn assemble(
        embedding: Tensor,
        layers: Vec<Layer>,
        norm: Tensor,
        output: Projection,
        shape: Shape,
        device: &Device,
    ) -> Result<Self> {
        let width = embedding.dims().get(1).copied().unwrap_or(0);
        let head_dim = shape.head_dim.unwrap_or(width / shape.heads.max(1)).max(1);
        if shape.heads == 0
            || shape.kv_heads == 0
            || !shape.heads.is_multiple_of(shape.kv_heads)
            || (shape.head_dim.is_none() && width % shape.heads != 0)
            || !head_dim.is_multiple_of(2)
            || head_dim > verifine_models::config::limits::MAX_HEAD_DIM
        {
            return Err(DecoderError::Weights(format!(
                "{} heads, {} KV heads and width {width} do not fit",
                shape.heads, shape.kv_heads
            )));
        }
        let table = |base| {
            rotary_tables(
                head_dim,
                shape.context_length,
                base,
                shape.position_scale,
                device,
            )
        };
        let (cos, sin) = table(shape.freq_base)?;
        let local = match shape.sliding_window {
            Some(w) => {
                let (cos, sin) =
                    rotary_tables(head_dim, shape.context_length, w.freq_base, 1.0, device)?;
                Some((cos, sin, w.window.max(1)))
            }
            None => None,
        };
        Ok(JudgeDecoder {
            embedding,
            layers,
            norm,
            output,
            cos,
            sin,
            local,
            embed_scale: shape.embed_scale,
            activation: shape.activation,
            attention_scale: shape
                .attention_scale
                .unwrap_or(1.0 / (head_dim as f64).sqrt()),
            heads: shape.heads,
            kv_heads: shape.kv_heads,
            head_dim,
            eps: shape.eps,
            rope: shape.rope,
            context_length: shape.context_length,
            device: device.clone(),
        })
    }

    /// Rows of the embedding table: token ids at or above it cannot be run.
    pub fn vocab_size(&self) -> usize {
        self.embedding.dims().first().copied().unwrap_or(0)
    }

    /// Runs `tokens` after what `cache` holds, extending it, and returns
    /// the log-probabilities of the next token after each of the last
    /// `keep` positions (`keep` rows of the vocabulary's size).
    pub fn forward(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        keep: usize,
    ) -> Result<Vec<Vec<f32>>> {
        let (rows, extended) = self.forward_each(cache, &[tokens], keep)?.remove(0);
        *cache = extended;
        Ok(rows)
    }

    /// One new token for each of several sequences at once: the weight
    /// products run as one batch, attention per sequence over its own
    /// cache. Returns each sequence's next-token log-probabilities.
    pub fn forward_batch(
        &self,
        tokens: &[u32],
        caches: &mut [&mut KvCache],
    ) -> Result<Vec<Vec<f32>>> {
        let b = tokens.len();
        if b == 0 || caches.len() != b {
            return Err(DecoderError::Batch(format!(
                "{b} tokens for {} caches",
                caches.len()
            )));
        }
        if let Some(full) = caches.iter().find(|c| c.len + 1 > self.context_length) {
            return Err(DecoderError::Prompt(format!(
                "{} tokens exceed the context length {}",
                full.len + 1,
                self.context_length
            )));
        }
        let mut x = self.embed(tokens)?.unsqueeze(1).map_err(e)?;
        let positions: Vec<u32> = caches.iter().map(|c| c.len as u32).collect();
        let positions = Tensor::new(positions.as_slice(), &self.device).map_err(e)?;
        let half = self.head_dim / 2;
        let table = |t: &Tensor| -> Result<Tensor> {
            t.index_select(&positions, 0)
                .and_then(|t| t.reshape((b, 1, half)))
                .and_then(|t| t.contiguous())
                .map_err(e)
        };
        let global = (table(&self.cos)?, table(&self.sin)?, usize::MAX);
        let local = match &self.local {
            Some((cos, sin, window)) => Some((table(cos)?, table(sin)?, *window)),
            None => None,
        };
        for (i, layer) in self.layers.iter().enumerate() {
            let (cos, sin, window) = match (&local, layer.sliding) {
                (Some(local), true) => local,
                _ => &global,
            };
            let h = normed(&x, &layer.attn_norm, self.eps)?;
            let (q, k, v) = self.query_key_value(layer, &h, (b, 1), cos, sin)?;
            for (j, cache) in caches.iter_mut().enumerate() {
                let row = |t: &Tensor| t.narrow(0, j, 1).map_err(e);
                let (kj, vj) = (row(&k)?, row(&v)?);
                let (kj, vj) = match cache.layers.get(i) {
                    Some((pk, pv)) => (
                        Tensor::cat(&[pk, &kj], 2).map_err(e)?,
                        Tensor::cat(&[pv, &vj], 2).map_err(e)?,
                    ),
                    None => (kj, vj),
                };
                match cache.layers.get_mut(i) {
                    Some(slot) => *slot = (kj, vj),
                    None => cache.layers.push((kj, vj)),
                }
            }
            let sequences: Vec<SequenceTensors> = caches
                .iter()
                .enumerate()
                .map(|(j, cache)| SequenceTensors {
                    q_row: j,
                    q_first: 0,
                    positions: 1,
                    k: &cache.layers[i].0,
                    v: &cache.layers[i].1,
                })
                .collect();
            let heads = (self.kv_heads, self.attention_scale as f32, *window);
            let attended = match attend_on_cpu(&q, &sequences, heads).map_err(e)? {
                Some(attended) => attended,
                None => {
                    let mut attended = Vec::with_capacity(b);
                    for s in &sequences {
                        // A sliding-window layer sees the last `window` positions.
                        let seen = s.k.dim(2).map_err(e)?;
                        let from = seen.saturating_sub(*window);
                        let visible = |t: &Tensor| t.narrow(2, from, seen - from).map_err(e);
                        let q = q.narrow(0, s.q_row, 1).map_err(e)?;
                        attended.push(self.attend(&q, &visible(s.k)?, &visible(s.v)?, &None)?);
                    }
                    Tensor::cat(&attended, 0)
                        .and_then(|a| a.transpose(1, 2))
                        .map_err(e)?
                }
            };
            let attended = attended
                .reshape((b, 1, self.heads * self.head_dim))
                .map_err(e)?;
            x = self.finish_block(layer, x, &attended)?;
        }
        for cache in caches.iter_mut() {
            cache.len += 1;
        }
        self.log_probs(&x)?
            .squeeze(1)
            .and_then(|t| t.to_vec2())
            .map_err(e)
    }

    /// The embeddings of `tokens` (`[tokens, width]`), scaled where the
    /// architecture scales them.
    pub(super) fn embed(&self, tokens: &[u32]) -> Result<Tensor> {
        let ids = Tensor::new(tokens, &self.device).map_err(e)?;
        let x = self.embedding.index_select(&ids, 0).map_err(e)?;
        match self.embed_scale {
            Some(scale) => (x * scale).map_err(e),
            None => Ok(x),
        }
    }

    /// The rest of a block once attention has run: the output projection
    /// (normed, in gemma3) added to the stream, then the gated MLP.
    pub(super) fn finish_block(
        &self,
        layer: &Layer,
        x: Tensor,
        attended: &Tensor,
    ) -> Result<Tensor> {
        let out = layer.o.forward(attended)?;
        let out = post_norm(out, &layer.post_attn_norm, self.eps)?;
        let x = (x + out).map_err(e)?;
        let h = normed(&x, &layer.ffn_norm, self.eps)?;
        let gate = layer.gate.forward(&h)?;
        let up = layer.up.forward(&h)?;
        let gated = verifine_models::ops::gated(&gate, &up, self.activation).map_err(e)?;
        let mlp = layer.down.forward(&gated)?;
        let mlp = post_norm(mlp, &layer.post_ffn_norm, self.eps)?;
        (x + mlp).map_err(e)
    }

    /// Final norm, output matrix, log-softmax over the vocabulary.
    pub(super) fn log_probs(&self, x: &Tensor) -> Result<Tensor> {
        let x = normed(x, &self.norm, self.eps)?;
        let logits = self.output.forward(&x)?;
        candle_nn::ops::log_softmax(&logits.to_dtype(DType::F32).map_err(e)?, D::Minus1).map_err(e)
    }
}
