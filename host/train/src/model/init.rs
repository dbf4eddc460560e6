//! Seeded initialization: candle's CPU generator cannot be seeded, so
//! weights are drawn from [`SplitMix64`] streams named after each variable.

use super::{Decoder, sorted_vars};
use crate::error::Result;
use candle_core::Tensor;
use candle_nn::VarMap;
use verifine_base::SplitMix64;

impl Decoder {
    /// Re-draws every weight of `varmap` from `seed` with the same
    /// distributions as [`Decoder::new`], so runs are reproducible: candle's
    /// CPU generator cannot be seeded.
    pub fn reseed(&self, varmap: &VarMap, seed: u64) -> Result<()> {
        let residual_std = 0.02 / (2.0 * self.config.num_layers as f64).sqrt();
        for (name, var) in sorted_vars(varmap) {
            let leaf = name.rsplit('.').next().unwrap_or(&name);
            let count = var.shape().elem_count();
            let values: Vec<f32> = if leaf.ends_with("norm") {
                vec![1.0; count]
            } else {
                let std = if leaf == "o" || leaf == "down" {
                    residual_std
                } else {
                    0.02
                };
                let mut rng = SplitMix64::new(seed ^ fnv1a(&name));
                (0..count)
                    .map(|_| (standard_normal(&mut rng) * std) as f32)
                    .collect()
            };
            var.set(&Tensor::from_vec(values, var.shape(), var.device())?)?;
        }
        Ok(())
    }
}

pub(super) fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A standard normal draw (Box–Muller).
pub(super) fn standard_normal(rng: &mut SplitMix64) -> f64 {
    let uniform =
        |rng: &mut SplitMix64| ((rng.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
    let (u1, u2) = (uniform(rng), uniform(rng));
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}
