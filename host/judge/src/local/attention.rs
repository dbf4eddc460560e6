//! Attention inside a block: projections, per-head norms, rotary
//! embeddings, grouped-query scores.

use super::error::{Result, e};
use super::model::{JudgeDecoder, Layer};
use super::norms::post_norm;
use super::projection::Projection;
use candle_core::Tensor;

impl JudgeDecoder {
    /// A layer's queries and keys (normed per head where the architecture
    /// does, then rotated) and values from the normed input `h` of `(rows,
    /// positions)` tokens, as `[rows, heads, positions, head_dim]`: a
    /// prompt is one row of many positions, a decoding batch many rows of
    /// one.
    pub(super) fn query_key_value(
        &self,
        layer: &Layer,
        h: &Tensor,
        (rows, positions): (usize, usize),
        cos: &Tensor,
        sin: &Tensor,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let project = |w: &Projection, bias: &Option<Tensor>, heads: usize| -> Result<Tensor> {
            let mut y = w.forward(h)?;
            if let Some(bias) = bias {
                y = y.broadcast_add(bias).map_err(e)?;
            }
            y.reshape((rows, positions, heads, self.head_dim))
                .and_then(|y| y.transpose(1, 2))
                .and_then(|y| y.contiguous())
                .map_err(e)
        };
        let q = project(&layer.q, &layer.q_bias, self.heads)?;
        let k = project(&layer.k, &layer.k_bias, self.kv_heads)?;
        let q = post_norm(q, &layer.q_norm, self.eps)?;
        let k = post_norm(k, &layer.k_norm, self.eps)?;
        let q = self.rotate(&q, cos, sin)?;
        let k = self.rotate(&k, cos, sin)?;
        let v = project(&layer.v, &layer.v_bias, self.kv_heads)?;
        Ok((q, k, v))
    }

    pub(super) fn rotate(&self, x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        verifine_models::ops::rope(x, cos, sin, self.rope).map_err(e)
    }

    /// Attention of queries `[rows, heads, positions, head_dim]` over keys
    /// and values `[rows, kv_heads, seen, head_dim]`. The queries of the
    /// heads that share a key/value head are stacked and run as one product
    /// against it, so keys and values are never copied per query head.
    pub(super) fn attend(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        mask: &Option<Tensor>,
    ) -> Result<Tensor> {
        let (rows, heads, positions, head_dim) = q.dims4().map_err(e)?;
        let seen = k.dim(2).map_err(e)?;
        let repeat = heads / self.kv_heads;
        // Head h reads key/value head h / repeat.
        let stacked = (rows, self.kv_heads, repeat * positions, head_dim);
        let q = q.contiguous().and_then(|q| q.reshape(stacked)).map_err(e)?;
        let mut scores =
            (q.matmul(&k.t().map_err(e)?).map_err(e)? * self.attention_scale).map_err(e)?;
        if let Some(mask) = mask {
            scores = scores
                .reshape((rows, self.kv_heads, repeat, positions, seen))
                .and_then(|s| s.broadcast_add(mask))
                .and_then(|s| s.reshape((rows, self.kv_heads, repeat * positions, seen)))
                .map_err(e)?;
        }
        let weights = candle_nn::ops::softmax_last_dim(&scores).map_err(e)?;
        weights
            .matmul(&v.contiguous().map_err(e)?)
            .and_then(|a| a.reshape((rows, heads, positions, head_dim)))
            .map_err(e)
    }
}
