//! The precision a pass computes in.

use candle_core::DType;
use serde::{Deserialize, Serialize};

/// Precision of the forward and backward passes. Variables and optimizer
/// state are always f32 ("master weights"); with `bf16` each pass works on a
/// bf16 copy whose gradients flow back to the f32 variables through the cast.
/// Norms, softmax and log-softmax run in f32 either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ComputeDType {
    /// Full precision (the CPU default).
    #[default]
    F32,
    /// bfloat16 matrix work (meant for GPUs).
    Bf16,
}

impl ComputeDType {
    /// The candle dtype.
    pub fn dtype(self) -> DType {
        match self {
            ComputeDType::F32 => DType::F32,
            ComputeDType::Bf16 => DType::BF16,
        }
    }
}
