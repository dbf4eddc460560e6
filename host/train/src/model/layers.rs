//! The decoder's layers, from ops that have a backward pass.

use super::{MASKED, ModelConfig};
use crate::error::{Result, ensure};
use candle_core::{DType, Device, Tensor};
use verifine_models::config::inverse_frequencies;

/// `x · wᵀ` for token rows `x` (`[rows, in]`): one 2-D product, so the
/// weight's gradient is one `[out, in]` product too.
pub(super) fn linear(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    Ok(x.matmul(&w.t()?)?)
}

/// cos and sin tables `[max_seq_len, head_dim / 2]`, as
/// [`verifine_models::ops::rope`] takes them.
pub(super) fn rotary_tables(config: &ModelConfig, device: &Device) -> Result<(Tensor, Tensor)> {
    let (dim, len) = (config.head_dim(), config.max_seq_len);
    let frequencies = inverse_frequencies(config.rope_theta, dim, config.rope_scaling);
    let (cos, sin) = verifine_models::ops::rotary_tables(&frequencies, len);
    Ok((
        Tensor::from_vec(cos, (len, dim / 2), device)?,
        Tensor::from_vec(sin, (len, dim / 2), device)?,
    ))
}

/// Additive mask `[batch, 1, new, start + new]`: causal, and padding keys
/// hidden, with the finite [`MASKED`] value.
pub(super) fn attention_mask(
    batch: usize,
    start: usize,
    new: usize,
    key_mask: Option<&Tensor>,
    device: &Device,
) -> Result<Tensor> {
    let total = start + new;
    let keys: Vec<Vec<u32>> = match key_mask {
        Some(m) => {
            ensure!(
                m.dims2()? == (batch, total),
                "key mask is {:?}, expected [{batch}, {total}]",
                m.dims()
            );
            m.to_dtype(DType::U32)?.to_vec2()?
        }
        None => vec![vec![1; total]; batch],
    };
    let mut values = Vec::with_capacity(batch * new * total);
    for row in &keys {
        for i in 0..new {
            for (j, key) in row.iter().enumerate() {
                let visible = j <= start + i && *key != 0;
                values.push(if visible { 0.0 } else { MASKED });
            }
        }
    }
    Ok(Tensor::from_vec(values, (batch, 1, new, total), device)?)
}

/// Log-probability of each target token: `[batch, seq]` from logits
/// `[batch, seq, vocab]` and targets `[batch, seq]` (u32), in f32, without
/// materializing the full log-softmax (see [`super::fused`]).
pub fn token_log_probs(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    super::fused::log_softmax_gather(&logits.to_dtype(DType::F32)?, targets)
}
