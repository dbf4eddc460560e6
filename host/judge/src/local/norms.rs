//! RMSNorm as the decoder applies it: training's op
//! (`verifine_models::ops::rms_norm`), and the optional norms gemma3 adds.

use super::error::{Result, e};
use candle_core::Tensor;

/// RMSNorm over the last dimension (training's, from
/// `verifine_models::ops`).
pub(super) fn normed(x: &Tensor, weight: &Tensor, eps: f64) -> Result<Tensor> {
    verifine_models::ops::rms_norm(x, weight, eps).map_err(e)
}

/// `x` RMS-normed by `weight` over its last dimension, when there is one.
pub(super) fn post_norm(x: Tensor, weight: &Option<Tensor>, eps: f64) -> Result<Tensor> {
    match weight {
        Some(w) => normed(&x, w, eps),
        None => Ok(x),
    }
}
