//! The fixed tensors of attention: rotary tables and causal masks.

use super::error::{Result, e};
use candle_core::{Device, Tensor};
use verifine_models::RopeScaling;
use verifine_models::config::inverse_frequencies;

/// `-inf` where position `past + i` must not see position `j`: a later
/// token, or (with a sliding `window`) one `window` or more positions
/// back. `None` for a single new token with no window to apply, which
/// sees everything.
pub(crate) fn attention_mask(
    t: usize,
    past: usize,
    window: Option<usize>,
    device: &Device,
) -> Result<Option<Tensor>> {
    let window = window.unwrap_or(usize::MAX);
    if t == 1 && past < window {
        return Ok(None);
    }
    let values: Vec<f32> = (0..t)
        .flat_map(|i| {
            let at = past + i;
            (0..past + t).map(move |j| {
                if j > at || at - j >= window {
                    f32::NEG_INFINITY
                } else {
                    0.0
                }
            })
        })
        .collect();
    Tensor::from_vec(values, (t, past + t), device)
        .map(Some)
        .map_err(e)
}

/// cos and sin of every position's angle per pair of a head's
/// dimensions, `[len, head_dim / 2]`; positions are divided by
/// `position_scale` (linear rope scaling).
pub(crate) fn rotary_tables(
    head_dim: usize,
    len: usize,
    base: f32,
    position_scale: f32,
    device: &Device,
) -> Result<(Tensor, Tensor)> {
    let half = head_dim / 2;
    // Sized from a model file's counts: refused rather than overflowing
    // or allocating past this bound (a 1024-wide head over 32 768
    // positions is 64 MiB a table).
    const MAX_TABLE_ELEMENTS: usize = 1 << 24;
    let elements = len
        .checked_mul(half)
        .filter(|&n| n <= MAX_TABLE_ELEMENTS)
        .ok_or_else(|| {
            super::error::DecoderError::Weights(format!(
                "rotary tables of {len} positions × {half} frequencies exceed {MAX_TABLE_ELEMENTS} entries"
            ))
        })?;
    // Linear scaling divides positions, which is dividing frequencies.
    let scaling = (position_scale != 1.0).then_some(RopeScaling::Linear {
        factor: f64::from(position_scale),
    });
    let frequencies = inverse_frequencies(f64::from(base), head_dim, scaling);
    let (cos, sin) = verifine_models::ops::rotary_tables(&frequencies, len);
    debug_assert_eq!(cos.len(), elements);
    Ok((
        Tensor::from_vec(cos, (len, half), device).map_err(e)?,
        Tensor::from_vec(sin, (len, half), device).map_err(e)?,
    ))
}
