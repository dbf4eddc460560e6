//! Rotary scaling as `config.json` states it, and the inverse frequencies
//! it gives: shared by training, the judge and the exporter so the three
//! rotate alike.

use super::RopeScaling;
use crate::error::{ModelError, Result};
use serde_json::Value;
use std::path::Path;

pub(super) fn rope_scaling(value: Option<&Value>, path: &Path) -> Result<Option<RopeScaling>> {
    let Some(value) = value else { return Ok(None) };
    let kind = value
        .get("rope_type")
        .or_else(|| value.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("(none)");
    let number = |key: &str| -> Result<f64> {
        value
            .get(key)
            .and_then(Value::as_f64)
            .filter(|x| x.is_finite() && *x > 0.0)
            .ok_or_else(|| {
                ModelError::format(
                    path,
                    format!("rope_scaling.{key} is missing or not a positive number"),
                )
            })
    };
    match kind {
        "default" => Ok(None),
        "linear" => Ok(Some(RopeScaling::Linear {
            factor: number("factor")?,
        })),
        "llama3" => {
            let (low, high) = (number("low_freq_factor")?, number("high_freq_factor")?);
            if high <= low {
                return Err(ModelError::format(
                    path,
                    format!(
                        "rope_scaling.high_freq_factor {high} must exceed low_freq_factor {low}"
                    ),
                ));
            }
            Ok(Some(RopeScaling::Llama3 {
                factor: number("factor")?,
                low_freq_factor: low,
                high_freq_factor: high,
                original_max_position_embeddings: number("original_max_position_embeddings")?
                    as usize,
            }))
        }
        other => Err(ModelError::unsupported(
            path,
            "rope_scaling.rope_type",
            format!("{other:?}"),
            "supported: default, linear, llama3",
        )),
    }
}

/// Rotary inverse frequencies of heads of width `dim` (`dim / 2` of them),
/// with `scaling` applied as transformers applies it.
pub fn inverse_frequencies(theta: f64, dim: usize, scaling: Option<RopeScaling>) -> Vec<f64> {
    let base: Vec<f64> = (0..dim / 2)
        .map(|i| 1.0 / theta.powf(2.0 * i as f64 / dim as f64))
        .collect();
    match scaling {
        None => base,
        Some(RopeScaling::Linear { factor }) => base.into_iter().map(|f| f / factor).collect(),
        Some(RopeScaling::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_max_position_embeddings,
        }) => {
            let original = original_max_position_embeddings as f64;
            let low_wavelen = original / low_freq_factor;
            let high_wavelen = original / high_freq_factor;
            base.into_iter()
                .map(|f| {
                    let wavelen = 2.0 * std::f64::consts::PI / f;
                    if wavelen < high_wavelen {
                        f
                    } else if wavelen > low_wavelen {
                        f / factor
                    } else {
                        let smooth = (original / wavelen - low_freq_factor)
                            / (high_freq_factor - low_freq_factor);
                        (1.0 - smooth) * f / factor + smooth * f
                    }
                })
                .collect()
        }
    }
}
