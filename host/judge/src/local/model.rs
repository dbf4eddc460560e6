//! A llama- or qwen2-architecture decoder read from GGUF, for inference
//! only: its weights stay in their quantized form (`QMatMul`), and the
//! forward pass extends a [`KvCache`] that can be cut back to any prefix,
//! which is what lets a judge encode a shared prompt prefix once.
//!
//! Written against llama.cpp's definition: RMS norm, rotary embeddings on
//! adjacent pairs (llama) or on halves (qwen2, which also has q/k/v
//! biases), grouped-query attention where query head `h` reads KV head
//! `h / (heads / kv_heads)`, and a SiLU-gated MLP.

use candle_core::quantized::QMatMul;
use candle_core::{D, DType, Device, Module, Tensor};

pub(super) type Result<T> = std::result::Result<T, String>;

/// How rotary embeddings pair up the dimensions of a head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// (x0, x1), (x2, x3) … — llama.
    Adjacent,
    /// (x0, x_{d/2}), (x1, x_{d/2+1}) … — qwen2 (GPT-NeoX).
    Halves,
}

/// One decoder block's weights.
pub(super) struct Layer {
    pub(super) attn_norm: Tensor,
    pub(super) q: QMatMul,
    pub(super) k: QMatMul,
    pub(super) v: QMatMul,
    pub(super) q_bias: Option<Tensor>,
    pub(super) k_bias: Option<Tensor>,
    pub(super) v_bias: Option<Tensor>,
    pub(super) o: QMatMul,
    pub(super) ffn_norm: Tensor,
    pub(super) gate: QMatMul,
    pub(super) up: QMatMul,
    pub(super) down: QMatMul,
}

/// Everything but the weights.
pub(super) struct Shape {
    pub(super) heads: usize,
    pub(super) kv_heads: usize,
    pub(super) eps: f64,
    pub(super) rope: RopeStyle,
    pub(super) freq_base: f32,
    pub(super) context_length: usize,
}

/// The decoder's weights and shape.
pub struct JudgeDecoder {
    embedding: Tensor,
    layers: Vec<Layer>,
    norm: Tensor,
    output: QMatMul,
    cos: Tensor,
    sin: Tensor,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    eps: f64,
    rope: RopeStyle,
    /// Longest sequence the rotary tables cover.
    pub context_length: usize,
    device: Device,
}

/// Keys and values of every layer for the tokens seen so far.
#[derive(Clone, Default)]
pub struct KvCache {
    layers: Vec<(Tensor, Tensor)>,
    len: usize,
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

pub(super) fn e(err: candle_core::Error) -> String {
    err.to_string()
}

impl JudgeDecoder {
    /// A decoder from its weights and shape (both loaders end here).
    pub(super) fn assemble(
        embedding: Tensor,
        layers: Vec<Layer>,
        norm: Tensor,
        output: QMatMul,
        shape: Shape,
        device: &Device,
    ) -> Result<Self> {
        let width = embedding.dims().get(1).copied().unwrap_or(0);
        if shape.heads == 0
            || shape.kv_heads == 0
            || !shape.heads.is_multiple_of(shape.kv_heads)
            || width % shape.heads != 0
            || !(width / shape.heads).is_multiple_of(2)
        {
            return Err(format!(
                "{} heads, {} KV heads and width {width} do not fit",
                shape.heads, shape.kv_heads
            ));
        }
        let head_dim = width / shape.heads;
        let (cos, sin) = rotary_tables(head_dim, shape.context_length, shape.freq_base, device)?;
        Ok(JudgeDecoder {
            embedding,
            layers,
            norm,
            output,
            cos,
            sin,
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
    /// `keep` positions (`[keep, vocab]`, f32).
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache, keep: usize) -> Result<Tensor> {
        let past = cache.len;
        let t = tokens.len();
        if t == 0 || keep == 0 || keep > t {
            return Err(format!("forward of {t} tokens keeping {keep}"));
        }
        if past + t > self.context_length {
            return Err(format!(
                "{} tokens exceed the context length {}",
                past + t,
                self.context_length
            ));
        }
        let ids = Tensor::new(tokens, &self.device).map_err(e)?;
        let mut x = self
            .embedding
            .index_select(&ids, 0)
            .map_err(e)?
            .unsqueeze(0)
            .map_err(e)?;
        let mask = causal_mask(t, past, &self.device)?;
        let cos = self.cos.narrow(0, past, t).map_err(e)?;
        let sin = self.sin.narrow(0, past, t).map_err(e)?;
        let mut next_layers = Vec::with_capacity(self.layers.len());
        for (i, layer) in self.layers.iter().enumerate() {
            let h = candle_nn::ops::rms_norm(&x, &layer.attn_norm, self.eps as f32).map_err(e)?;
            let (q, k, v) = self.query_key_value(layer, &h, (1, t), &cos, &sin)?;
            let (k, v) = match cache.layers.get(i) {
                Some((pk, pv)) => (
                    Tensor::cat(&[pk, &k], 2).map_err(e)?,
                    Tensor::cat(&[pv, &v], 2).map_err(e)?,
                ),
                None => (k, v),
            };
            next_layers.push((k.clone(), v.clone()));
            let attended = self.attend(&q, &k, &v, &mask)?;
            let attended = attended
                .transpose(1, 2)
                .and_then(|a| a.reshape((1, t, self.heads * self.head_dim)))
                .map_err(e)?;
            x = (x + layer.o.forward(&attended).map_err(e)?).map_err(e)?;
            let h = candle_nn::ops::rms_norm(&x, &layer.ffn_norm, self.eps as f32).map_err(e)?;
            let gated = candle_nn::ops::silu(&layer.gate.forward(&h).map_err(e)?).map_err(e)?;
            let mlp = layer
                .down
                .forward(&(gated * layer.up.forward(&h).map_err(e)?).map_err(e)?);
            x = (x + mlp.map_err(e)?).map_err(e)?;
        }
        cache.layers = next_layers;
        cache.len = past + t;
        let last = x.narrow(1, t - keep, keep).map_err(e)?;
        let last = candle_nn::ops::rms_norm(&last, &self.norm, self.eps as f32).map_err(e)?;
        let logits = self
            .output
            .forward(&last)
            .map_err(e)?
            .squeeze(0)
            .map_err(e)?;
        candle_nn::ops::log_softmax(&logits.to_dtype(DType::F32).map_err(e)?, D::Minus1).map_err(e)
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
            return Err(format!("{b} tokens for {} caches", caches.len()));
        }
        if let Some(full) = caches.iter().find(|c| c.len + 1 > self.context_length) {
            return Err(format!(
                "{} tokens exceed the context length {}",
                full.len + 1,
                self.context_length
            ));
        }
        let ids = Tensor::new(tokens, &self.device).map_err(e)?;
        let mut x = self
            .embedding
            .index_select(&ids, 0)
            .map_err(e)?
            .unsqueeze(1)
            .map_err(e)?;
        let positions: Vec<u32> = caches.iter().map(|c| c.len as u32).collect();
        let positions = Tensor::new(positions.as_slice(), &self.device).map_err(e)?;
        let half = self.head_dim / 2;
        let table = |t: &Tensor| -> Result<Tensor> {
            t.index_select(&positions, 0)
                .and_then(|t| t.reshape((b, 1, half)))
                .and_then(|t| t.contiguous())
                .map_err(e)
        };
        let (cos, sin) = (table(&self.cos)?, table(&self.sin)?);
        for (i, layer) in self.layers.iter().enumerate() {
            let h = candle_nn::ops::rms_norm(&x, &layer.attn_norm, self.eps as f32).map_err(e)?;
            let (q, k, v) = self.query_key_value(layer, &h, (b, 1), &cos, &sin)?;
            let mut attended = Vec::with_capacity(b);
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
                attended.push(self.attend(&row(&q)?, &kj, &vj, &None)?);
                match cache.layers.get_mut(i) {
                    Some(slot) => *slot = (kj, vj),
                    None => cache.layers.push((kj, vj)),
                }
            }
            let attended = Tensor::cat(&attended, 0)
                .and_then(|a| a.transpose(1, 2))
                .and_then(|a| a.reshape((b, 1, self.heads * self.head_dim)))
                .map_err(e)?;
            x = (x + layer.o.forward(&attended).map_err(e)?).map_err(e)?;
            let h = candle_nn::ops::rms_norm(&x, &layer.ffn_norm, self.eps as f32).map_err(e)?;
            let gated = candle_nn::ops::silu(&layer.gate.forward(&h).map_err(e)?).map_err(e)?;
            let mlp = layer
                .down
                .forward(&(gated * layer.up.forward(&h).map_err(e)?).map_err(e)?);
            x = (x + mlp.map_err(e)?).map_err(e)?;
        }
        for cache in caches.iter_mut() {
            cache.len += 1;
        }
        let x = candle_nn::ops::rms_norm(&x, &self.norm, self.eps as f32).map_err(e)?;
        let logits = self.output.forward(&x).map_err(e)?.squeeze(1).map_err(e)?;
        candle_nn::ops::log_softmax(&logits.to_dtype(DType::F32).map_err(e)?, D::Minus1)
            .and_then(|t| t.to_vec2())
            .map_err(e)
    }

    /// A layer's queries and keys (rotated) and values from the normed
    /// input `h` of `(rows, positions)` tokens, as `[rows, heads, positions,
    /// head_dim]`: a prompt is one row of many positions, a decoding batch
    /// many rows of one.
    fn query_key_value(
        &self,
        layer: &Layer,
        h: &Tensor,
        (rows, positions): (usize, usize),
        cos: &Tensor,
        sin: &Tensor,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let project = |w: &QMatMul, bias: &Option<Tensor>, heads: usize| -> Result<Tensor> {
            let mut y = w.forward(h).map_err(e)?;
            if let Some(bias) = bias {
                y = y.broadcast_add(bias).map_err(e)?;
            }
            y.reshape((rows, positions, heads, self.head_dim))
                .and_then(|y| y.transpose(1, 2))
                .and_then(|y| y.contiguous())
                .map_err(e)
        };
        let q = self.rotate(&project(&layer.q, &layer.q_bias, self.heads)?, cos, sin)?;
        let k = self.rotate(&project(&layer.k, &layer.k_bias, self.kv_heads)?, cos, sin)?;
        let v = project(&layer.v, &layer.v_bias, self.kv_heads)?;
        Ok((q, k, v))
    }

    fn rotate(&self, x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        match self.rope {
            RopeStyle::Adjacent => candle_nn::rotary_emb::rope_i(x, cos, sin),
            RopeStyle::Halves => candle_nn::rotary_emb::rope(x, cos, sin),
        }
        .map_err(e)
    }

    fn attend(&self, q: &Tensor, k: &Tensor, v: &Tensor, mask: &Option<Tensor>) -> Result<Tensor> {
        let repeat = self.heads / self.kv_heads;
        let widen = |x: &Tensor| -> Result<Tensor> {
            if repeat == 1 {
                return Ok(x.clone());
            }
            let (b, kv, len, d) = x.dims4().map_err(e)?;
            x.unsqueeze(2)
                .and_then(|x| x.expand((b, kv, repeat, len, d)))
                .and_then(|x| x.reshape((b, kv * repeat, len, d)))
                .map_err(e)
        };
        let (k, v) = (widen(k)?, widen(v)?);
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        let mut scores = (q
            .matmul(&k.t().map_err(e)?.contiguous().map_err(e)?)
            .map_err(e)?
            * scale)
            .map_err(e)?;
        if let Some(mask) = mask {
            scores = scores.broadcast_add(mask).map_err(e)?;
        }
        let weights = candle_nn::ops::softmax_last_dim(&scores).map_err(e)?;
        weights.matmul(&v.contiguous().map_err(e)?).map_err(e)
    }
}

/// `-inf` where position `past + i` would see a later token; `None` for a
/// single new token, which sees everything.
fn causal_mask(t: usize, past: usize, device: &Device) -> Result<Option<Tensor>> {
    if t == 1 {
        return Ok(None);
    }
    let values: Vec<f32> = (0..t)
        .flat_map(|i| {
            (0..past + t).map(move |j| if j > past + i { f32::NEG_INFINITY } else { 0.0 })
        })
        .collect();
    Tensor::from_vec(values, (t, past + t), device)
        .map(Some)
        .map_err(e)
}

fn rotary_tables(
    head_dim: usize,
    len: usize,
    base: f32,
    device: &Device,
) -> Result<(Tensor, Tensor)> {
    let half = head_dim / 2;
    let inverse: Vec<f32> = (0..half)
        .map(|i| 1.0 / base.powf(2.0 * i as f32 / head_dim as f32))
        .collect();
    let mut cos = Vec::with_capacity(len * half);
    let mut sin = Vec::with_capacity(len * half);
    for position in 0..len {
        for f in &inverse {
            let angle = position as f32 * f;
            cos.push(angle.cos());
            sin.push(angle.sin());
        }
    }
    Ok((
        Tensor::from_vec(cos, (len, half), device).map_err(e)?,
        Tensor::from_vec(sin, (len, half), device).map_err(e)?,
    ))
}
