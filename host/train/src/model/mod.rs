//! A Llama/Qwen2-style decoder written for training with candle.
//!
//! RMSNorm, rotary position embeddings (rotate-half), grouped-query
//! attention, a SwiGLU MLP and tied input/output embeddings.
//!
//! Two passes compute it:
//! - **candle's autograd** (`mod.rs`, `block.rs`, `attention.rs`,
//!   `layers.rs`): every device and dtype, sampling, and the reference the
//!   other pass is tested against. It uses only ops with a backward pass:
//!   candle's fused softmax, rms-norm and rope kernels have none and
//!   silently drop gradients (candle issue 2168). The layer ops (RMSNorm,
//!   rope, the gated MLP) are `verifine_models::ops`, the same maths the
//!   local judge runs; softmax and log-softmax + gather are fused here
//!   (`fused.rs`), and so is rope together with the move of heads between
//!   token rows and attention's layout (`heads.rs`).
//! - **the hand-written pass** (`manual/`): the update step on the CPU in
//!   f32, forward and backward written out over token rows (`kernels.rs`
//!   splits `verifine_models::ops`' row functions over the pool). It covers
//!   frozen projections, LoRA adapters and an untied head; `manual::supports`
//!   says when it runs (not with q/k/v biases, off the CPU, or below f32).
//!
//! Frozen projections multiply in `frozen.rs`; weights on disk are in
//! `weights.rs`. A frozen weight (one that is not a variable) gets no
//! gradient on either pass, norms included.
//!
//! Rollouts call [`Decoder::detached`] first: the copy shares storage with the
//! variables but records no graph, and [`KvCache`] keeps past keys and values.

mod attention;
mod block;
mod dtype;
mod frozen;
mod fused;
#[cfg(test)]
mod fused_tests;
mod heads;
mod init;
mod kernels;
mod layers;
pub(crate) mod manual;
mod pretrained;
mod simd;
#[cfg(test)]
pub(crate) mod test_models;
#[cfg(test)]
mod tests;
mod weights;

pub use attention::KvCache;
pub use layers::token_log_probs;
pub use weights::{load_matching_weights, load_weights, save_weights, sorted_vars};

use crate::error::{Result, ensure};
use block::{Block, Linear};
use candle_core::{DType, Device, Tensor};
use candle_nn::{Init, VarBuilder, VarMap};
pub use dtype::ComputeDType;
use layers::{attention_mask, linear, rotary_tables};
pub use pretrained::{LoraConfig, LoraModule, TrainablePlan};
use serde::{Deserialize, Serialize};
use verifine_models::ops::{Activation, gated, rms_norm};

/// The storage order of a projection's weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WeightLayout {
    /// `[out, in]`, as checkpoints store it and training updates it.
    OutByIn,
    /// `[in, out]`, contiguous: sampling's copy. With a few token rows per
    /// product, `x · w` runs 1.5–4× faster than `x · wᵀ` over an `[out,
    /// in]` weight (the product no longer repacks the weight's transpose).
    InByOut,
}

/// The device training (and a loaded [`crate::Policy`]) computes on: the
/// first GPU in a `cuda` build, else the CPU (candle's own choice).
pub(crate) fn device() -> Result<Device> {
    Ok(Device::cuda_if_available(0)?)
}

/// Added to attention scores of masked positions: finite, so a fully masked
/// row (padding) gives a uniform distribution instead of NaN.
pub const MASKED: f32 = -1e9;

/// Sizes of a decoder, from tiny (tests) to 0.5B-class (GPU).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Tokens in the vocabulary (rows of the tied embedding).
    pub vocab_size: usize,
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Decoder blocks.
    pub num_layers: usize,
    /// Query heads; `hidden_size` must be a multiple.
    pub num_heads: usize,
    /// Key/value heads (grouped-query attention); divides `num_heads`.
    pub num_kv_heads: usize,
    /// Width of the SwiGLU MLP.
    pub intermediate_size: usize,
    /// Longest sequence the rotary tables cover.
    pub max_seq_len: usize,
    /// Rotary base frequency.
    pub rope_theta: f64,
    /// RMSNorm epsilon.
    pub rms_eps: f64,
    /// The output projection is the embedding table (own models always).
    #[serde(default = "tied")]
    pub tie_word_embeddings: bool,
    /// Query/key/value projections carry biases (qwen2).
    #[serde(default)]
    pub attention_bias: bool,
    /// Rotary scaling of a pretrained model.
    #[serde(default)]
    pub rope_scaling: Option<verifine_models::RopeScaling>,
}

fn tied() -> bool {
    true
}

impl ModelConfig {
    /// A model small enough for gradient checks.
    pub fn tiny(vocab_size: usize) -> Self {
        ModelConfig {
            vocab_size,
            hidden_size: 16,
            num_layers: 2,
            num_heads: 4,
            num_kv_heads: 2,
            intermediate_size: 32,
            max_seq_len: 64,
            rope_theta: 10_000.0,
            rms_eps: 1e-6,
            tie_word_embeddings: true,
            attention_bias: false,
            rope_scaling: None,
        }
    }

    /// Qwen2-0.5B's shape, for GPU runs.
    pub fn qwen2_0_5b_class(vocab_size: usize) -> Self {
        ModelConfig {
            vocab_size,
            hidden_size: 896,
            num_layers: 24,
            num_heads: 14,
            num_kv_heads: 2,
            intermediate_size: 4864,
            max_seq_len: 2048,
            rope_theta: 1_000_000.0,
            rms_eps: 1e-6,
            tie_word_embeddings: true,
            attention_bias: false,
            rope_scaling: None,
        }
    }

    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_heads
    }

    fn validate(&self) -> Result<()> {
        ensure!(
            self.hidden_size.is_multiple_of(self.num_heads),
            "hidden_size {} is not a multiple of num_heads {}",
            self.hidden_size,
            self.num_heads
        );
        ensure!(
            self.num_heads.is_multiple_of(self.num_kv_heads),
            "num_heads {} is not a multiple of num_kv_heads {}",
            self.num_heads,
            self.num_kv_heads
        );
        ensure!(
            self.head_dim().is_multiple_of(2),
            "head dimension must be even for rotary embeddings"
        );
        Ok(())
    }
}

/// The decoder. Weights are tensors of the [`VarMap`] it was built from, so
/// an optimizer over `varmap.all_vars()` trains it.
pub struct Decoder {
    config: ModelConfig,
    embed: Tensor,
    /// The output projection of an untied model.
    lm_head: Option<Tensor>,
    /// The embedding (and output projection) does not train.
    embed_frozen: bool,
    blocks: Vec<Block>,
    final_norm: Tensor,
    cos: Tensor,
    sin: Tensor,
}

impl Decoder {
    /// A freshly initialized decoder whose weights live in `varmap`.
    pub fn new(config: ModelConfig, varmap: &VarMap, device: &Device) -> Result<Self> {
        config.validate()?;
        let vb = VarBuilder::from_varmap(varmap, DType::F32, device);
        let (h, kv, i) = (
            config.hidden_size,
            config.num_kv_heads * config.head_dim(),
            config.intermediate_size,
        );
        let normal = Init::Randn {
            mean: 0.0,
            stdev: 0.02,
        };
        // Residual projections start smaller so the stream stays unit-scale.
        let residual = Init::Randn {
            mean: 0.0,
            stdev: 0.02 / (2.0 * config.num_layers as f64).sqrt(),
        };
        let ones = Init::Const(1.0);
        let embed = vb.get_with_hints((config.vocab_size, h), "embed", normal)?;
        let blocks = (0..config.num_layers)
            .map(|l| {
                let vb = vb.pp(format!("layers.{l}"));
                let linear = |shape: (usize, usize), name: &str, init| {
                    vb.get_with_hints(shape, name, init).map(Linear::plain)
                };
                Ok(Block {
                    attn_norm: vb.get_with_hints(h, "attn_norm", ones)?,
                    q: linear((h, h), "q", normal)?,
                    k: linear((kv, h), "k", normal)?,
                    v: linear((kv, h), "v", normal)?,
                    biases: None,
                    o: linear((h, h), "o", residual)?,
                    mlp_norm: vb.get_with_hints(h, "mlp_norm", ones)?,
                    gate: linear((i, h), "gate", normal)?,
                    up: linear((i, h), "up", normal)?,
                    down: linear((h, i), "down", residual)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let final_norm = vb.get_with_hints(h, "final_norm", ones)?;
        let (cos, sin) = rotary_tables(&config, device)?;
        Ok(Decoder {
            config,
            embed,
            embed_frozen: false,
            lm_head: None,
            blocks,
            final_norm,
            cos,
            sin,
        })
    }

    /// The model's sizes.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The model computing in `dtype`: the weights are cast (a no-op for
    /// f32), and the cast is part of the graph, so gradients reach the f32
    /// variables.
    pub fn cast(&self, dtype: ComputeDType) -> Result<Decoder> {
        let dtype = dtype.dtype();
        let cast = |t: &Tensor| t.to_dtype(dtype);
        Ok(Decoder {
            config: self.config.clone(),
            embed: cast(&self.embed)?,
            embed_frozen: self.embed_frozen,
            lm_head: self.lm_head.as_ref().map(cast).transpose()?,
            blocks: self
                .blocks
                .iter()
                .map(|b| b.try_map(cast))
                .collect::<candle_core::Result<_>>()?,
            final_norm: cast(&self.final_norm)?,
            cos: cast(&self.cos)?,
            sin: cast(&self.sin)?,
        })
    }

    /// A frozen copy with its own storage (the KL reference): later updates
    /// of the variables do not reach it. LoRA adapters are folded in.
    pub fn frozen_copy(&self) -> Result<Decoder> {
        let copy = |t: &Tensor| t.detach().copy();
        Ok(Decoder {
            config: self.config.clone(),
            embed: copy(&self.embed)?,
            embed_frozen: true,
            lm_head: self.lm_head.as_ref().map(copy).transpose()?,
            blocks: self
                .blocks
                .iter()
                .map(Block::merged_copy)
                .collect::<candle_core::Result<_>>()?,
            final_norm: copy(&self.final_norm)?,
            cos: self.cos.clone(),
            sin: self.sin.clone(),
        })
    }

    /// A copy that records no graph: same storage as the variables.
    pub fn detached(&self) -> Decoder {
        self.sampling_copy(|b| Ok(b.try_map(|t| Ok(t.detach()))?))
            .expect("detaching cannot fail")
    }

    /// The copy rollouts sample from: no graph, every LoRA adapter folded
    /// into its weight (one product per projection and token instead of
    /// three), projection weights stored `[in, out]` (see
    /// [`WeightLayout`]). Costs one copy of the projections per call.
    pub fn for_sampling(&self) -> Result<Decoder> {
        self.sampling_copy(Block::for_sampling)
    }

    fn sampling_copy(&self, block: impl Fn(&Block) -> Result<Block>) -> Result<Decoder> {
        Ok(Decoder {
            config: self.config.clone(),
            embed: self.embed.detach(),
            embed_frozen: true,
            lm_head: self.lm_head.as_ref().map(Tensor::detach),
            blocks: self.blocks.iter().map(block).collect::<Result<_>>()?,
            final_norm: self.final_norm.detach(),
            cos: self.cos.clone(),
            sin: self.sin.clone(),
        })
    }

    /// Full-sequence logits `[batch, seq, vocab]` for training. `key_mask`
    /// (`[batch, seq]`, 1 = token, 0 = padding) hides padding from attention.
    pub fn forward(&self, ids: &Tensor, key_mask: Option<&Tensor>) -> Result<Tensor> {
        let mut cache = KvCache::default();
        self.forward_cached(ids, key_mask, &mut cache)
    }

    /// Log-probability of each of `targets` (`[batch, seq]`, u32) after the
    /// tokens of `ids` up to it: `[batch, seq]`. What training needs, without
    /// the `[batch, seq, vocab]` logits ever being reshaped or normalised as
    /// a whole (see [`fused::log_softmax_gather`]).
    pub fn target_log_probs(
        &self,
        ids: &Tensor,
        key_mask: Option<&Tensor>,
        targets: &Tensor,
    ) -> Result<Tensor> {
        let (batch, seq) = ids.dims2()?;
        ensure!(
            targets.dims2()? == (batch, seq),
            "targets {:?} for ids {:?}",
            targets.dims(),
            ids.dims()
        );
        let logits = self.head(&self.final_hidden(ids, key_mask, &mut KvCache::default())?)?;
        let targets = targets.flatten_all()?;
        Ok(layers::token_log_probs(&logits, &targets)?.reshape((batch, seq))?)
    }

    /// Logits for `ids` (`[batch, new]`) following the positions in `cache`,
    /// which is extended: `[batch, new, vocab]`. `key_mask` covers every
    /// position so far (`[batch, cache.len + new]`).
    pub fn forward_cached(
        &self,
        ids: &Tensor,
        key_mask: Option<&Tensor>,
        cache: &mut KvCache,
    ) -> Result<Tensor> {
        let (batch, new) = ids.dims2()?;
        let logits = self.head(&self.final_hidden(ids, key_mask, cache)?)?;
        Ok(logits.reshape((batch, new, self.config.vocab_size))?)
    }

    /// Logits of the token after the last of `ids` (`[batch, new]`) in each
    /// row, `[batch, vocab]`: what sampling needs, without projecting every
    /// prompt position onto the vocabulary.
    pub fn next_token_logits(
        &self,
        ids: &Tensor,
        key_mask: Option<&Tensor>,
        cache: &mut KvCache,
    ) -> Result<Tensor> {
        let (batch, new) = ids.dims2()?;
        let hidden = self.final_hidden(ids, key_mask, cache)?;
        let last = hidden
            .reshape((batch, new, self.config.hidden_size))?
            .narrow(1, new - 1, 1)?
            .squeeze(1)?;
        self.head(&last.contiguous()?)
    }

    /// The normalized residual stream after the last block, one row per
    /// token (`[batch · new, hidden]`). It stays in token rows throughout,
    /// so projections are plain 2-D products and only attention moves heads.
    fn final_hidden(
        &self,
        ids: &Tensor,
        key_mask: Option<&Tensor>,
        cache: &mut KvCache,
    ) -> Result<Tensor> {
        let (batch, new) = ids.dims2()?;
        let start = cache.len;
        ensure!(
            start + new <= self.config.max_seq_len,
            "sequence of {} tokens exceeds max_seq_len {}",
            start + new,
            self.config.max_seq_len
        );
        let mut x = self.embed.index_select(&ids.flatten_all()?, 0)?;
        let mask = attention_mask(batch, start, new, key_mask, x.device())?;
        let tables = (
            self.cos.narrow(0, start, new)?,
            self.sin.narrow(0, start, new)?,
        );
        let capacity = cache.capacity();
        let layers = cache.layers_mut(self.config.num_layers);
        for (block, layer_cache) in self.blocks.iter().zip(layers.iter_mut()) {
            let attn = self.attention(
                block,
                &x,
                (batch, new),
                &mask,
                &tables,
                (layer_cache, capacity),
            )?;
            x = (x + attn)?;
            let hn = rms_norm(&x, &block.mlp_norm, self.config.rms_eps)?;
            let gate = block.gate.forward(&hn)?;
            let up = block.up.forward(&hn)?;
            let mlp = block.down.forward(&gated(&gate, &up, Activation::Silu)?)?;
            x = (x + mlp)?;
        }
        cache.len += new;
        Ok(rms_norm(&x, &self.final_norm, self.config.rms_eps)?)
    }

    /// Token rows onto the vocabulary.
    fn head(&self, x: &Tensor) -> Result<Tensor> {
        let head = self.lm_head.as_ref().unwrap_or(&self.embed);
        match self.embed_frozen {
            true => frozen::frozen_linear(x, head, None),
            false => linear(x, head),
        }
    }
}
