//! Self-attention of one block, and the cache of past keys and values that
//! sampling continues from.
//!
//! Training runs a whole sequence at once and keeps nothing. Sampling feeds
//! one token per row at a time; its cache is allocated once for the longest
//! sequence and each step's keys and values are written into it in place,
//! where appending by concatenation would copy every past position again at
//! every step.

use super::Decoder;
use super::block::Block;
use super::fused;
use super::heads::{HeadLayout, to_heads, to_rows};
use crate::error::{Result, ensure};
use candle_core::{DType, Tensor};
use verifine_models::ops::rms_norm;

/// Keys and values of the positions seen so far, per layer.
#[derive(Default)]
pub struct KvCache {
    layers: Vec<Option<LayerCache>>,
    /// Positions the cache is allocated for; `None` keeps what a call
    /// produced as it is (a single call, as in training).
    capacity: Option<usize>,
    /// Positions already in the cache.
    pub len: usize,
}

impl KvCache {
    /// A cache that will hold up to `positions` positions, written in place.
    pub fn with_capacity(positions: usize) -> Self {
        KvCache {
            capacity: Some(positions),
            ..KvCache::default()
        }
    }

    /// One slot per layer, made on the first call.
    pub(super) fn layers_mut(&mut self, layers: usize) -> &mut [Option<LayerCache>] {
        if self.layers.is_empty() {
            self.layers = (0..layers).map(|_| None).collect();
        }
        &mut self.layers
    }

    pub(super) fn capacity(&self) -> Option<usize> {
        self.capacity
    }

    /// Keeps the batch rows `rows` names, in its order, repeats allowed: a
    /// prompt read once and continued by several samples, or finished rows
    /// dropped from a generation.
    pub fn select_rows(&mut self, rows: &Tensor) -> Result<()> {
        for layer in self.layers.iter_mut().flatten() {
            layer.keys = layer.keys.index_select(rows, 0)?;
            layer.values = layer.values.index_select(rows, 0)?;
        }
        Ok(())
    }
}

/// One layer's keys and values, `[batch, kv_heads, positions, dim]`; the
/// first `filled` positions are valid.
pub(super) struct LayerCache {
    keys: Tensor,
    values: Tensor,
    filled: usize,
}

impl LayerCache {
    /// Appends this call's `k` and `v` and returns every position so far.
    fn extend(
        slot: &mut Option<LayerCache>,
        k: Tensor,
        v: Tensor,
        capacity: Option<usize>,
    ) -> Result<(Tensor, Tensor)> {
        let new = k.dim(2)?;
        let Some(capacity) = capacity else {
            let (keys, values) = match slot.take() {
                Some(past) => (
                    Tensor::cat(&[&past.keys, &k], 2)?,
                    Tensor::cat(&[&past.values, &v], 2)?,
                ),
                None => (k, v),
            };
            let filled = keys.dim(2)?;
            *slot = Some(LayerCache {
                keys: keys.clone(),
                values: values.clone(),
                filled,
            });
            return Ok((keys, values));
        };
        let layer = match slot {
            Some(layer) => layer,
            None => {
                let (batch, heads, _, dim) = k.dims4()?;
                let shape = (batch, heads, capacity, dim);
                slot.insert(LayerCache {
                    keys: Tensor::zeros(shape, k.dtype(), k.device())?,
                    values: Tensor::zeros(shape, v.dtype(), v.device())?,
                    filled: 0,
                })
            }
        };
        ensure!(
            layer.filled + new <= capacity,
            "key/value cache of {capacity} positions cannot take {} more after {}",
            new,
            layer.filled
        );
        layer.keys.slice_set(&k.contiguous()?, 2, layer.filled)?;
        layer.values.slice_set(&v.contiguous()?, 2, layer.filled)?;
        layer.filled += new;
        Ok((
            layer.keys.narrow(2, 0, layer.filled)?,
            layer.values.narrow(2, 0, layer.filled)?,
        ))
    }
}

impl Decoder {
    /// Self-attention of the token rows `x` (`[batch · new, hidden]`).
    pub(super) fn attention(
        &self,
        block: &Block,
        x: &Tensor,
        (batch, new): (usize, usize),
        mask: &Tensor,
        (cos, sin): &(Tensor, Tensor),
        (cache, capacity): (&mut Option<LayerCache>, Option<usize>),
    ) -> Result<Tensor> {
        let config = self.config();
        let (heads, kv_heads, dim) = (config.num_heads, config.num_kv_heads, config.head_dim());
        let layout = |heads| HeadLayout {
            batch,
            seq: new,
            heads,
            dim,
        };
        // Grouped-query attention without copying keys and values per head:
        // the `group` query heads sharing a key/value head are stacked as
        // rows of one product, `[batch, kv_heads, group · new, dim]`.
        let group = heads / kv_heads;
        let hn = rms_norm(x, &block.attn_norm, config.rms_eps)?;
        let rotary = Some((cos, sin));
        let (mut q, mut k, mut v) = (
            block.q.forward(&hn)?,
            block.k.forward(&hn)?,
            block.v.forward(&hn)?,
        );
        if let Some([qb, kb, vb]) = &block.biases {
            q = q.broadcast_add(qb)?;
            k = k.broadcast_add(kb)?;
            v = v.broadcast_add(vb)?;
        }
        let q = to_heads(&q, layout(heads), group, rotary)?;
        let k = to_heads(&k, layout(kv_heads), 1, rotary)?;
        let v = to_heads(&v, layout(kv_heads), 1, None)?;
        let (k, v) = LayerCache::extend(cache, k, v, capacity)?;
        let scores = q.matmul(&k.t()?)?.to_dtype(DType::F32)?;
        let scale = 1.0 / (dim as f64).sqrt();
        let probs = fused::scaled_masked_softmax(&scores, mask, scale)?.to_dtype(x.dtype())?;
        let out = to_rows(&probs.matmul(&v)?, layout(heads))?;
        block.o.forward(&out)
    }
}
