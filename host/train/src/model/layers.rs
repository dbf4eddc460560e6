//! The decoder's layers, from ops that have a backward pass.

use super::{MASKED, ModelConfig};
use crate::error::{Result, ensure};
use candle_core::{DType, Device, Tensor};

/// `x · wᵀ` for token rows `x` (`[rows, in]`): one 2-D product, so the
/// weight's gradient is one `[out, in]` product too.
pub(super) fn linear(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    Ok(x.matmul(&w.t()?)?)
}

/// RMSNorm in f32 whatever the compute dtype (fused on the CPU, with its
/// backward: see [`super::fused`]).
pub(super) fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> Result<Tensor> {
    let dtype = x.dtype();
    let normed =
        super::rms_norm::rms_norm(&x.to_dtype(DType::F32)?, &weight.to_dtype(DType::F32)?, eps)?;
    Ok(normed.to_dtype(dtype)?)
}

/// cos and sin tables `[max_seq_len, head_dim / 2]`, as `rope_slow` takes them.
pub(super) fn rotary_tables(config: &ModelConfig, device: &Device) -> Result<(Tensor, Tensor)> {
    let dim = config.head_dim();
    let inv_freq: Vec<f32> = match config.rope_scaling {
        None => (0..dim / 2)
            .map(|i| 1.0 / config.rope_theta.powf(2.0 * i as f64 / dim as f64) as f32)
            .collect(),
        Some(scaling) => {
            verifine_models::config::inverse_frequencies(config.rope_theta, dim, Some(scaling))
                .into_iter()
                .map(|f| f as f32)
                .collect()
        }
    };
    let inv_freq = Tensor::new(inv_freq.as_slice(), device)?;
    let positions = Tensor::arange(0u32, config.max_seq_len as u32, device)?
        .to_dtype(DType::F32)?
        .unsqueeze(1)?;
    let angles = positions.broadcast_mul(&inv_freq.unsqueeze(0)?)?;
    Ok((angles.cos()?, angles.sin()?))
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
