//! A weight matrix of the judge's decoder, applied to token rows as
//! `x · wᵀ`.
//!
//! GGUF's 32-value block formats and Q4_K/Q5_K run as integer products on
//! CPUs with AVX-512 VNNI ([`super::int8`]). Other quantized blocks (Q6_K,
//! or any on other CPUs) go through candle's quantized kernels. A dense
//! matrix
//! (a safetensors checkpoint, or a GGUF format widened to f32 because
//! candle has no fast kernel for it) is stored transposed, `[in, out]`:
//! decoding multiplies one or a few token rows at a time, and at that size
//! candle's `x · wᵀ` over an `[out, in]` matrix repacks the transpose on
//! every call — `x · w` over the contiguous `[in, out]` copy ran 1.5–4×
//! faster in the training sampler's measurements (BENCHMARKS.md) and is no
//! slower for a long prompt.

use super::error::{DecoderError, Result};
use super::int8::{Int8Matrix, QuantizedRows};
use candle_core::quantized::QMatMul;
use candle_core::{Module, Tensor};

/// One projection of the decoder.
pub(super) enum Projection {
    /// Repacked for integer products with byte-quantized rows.
    Int8(Int8Matrix),
    /// Kept in the file's block format.
    Quantized(QMatMul),
    /// Dense, stored `[in, out]`.
    Dense(Tensor),
}

impl Projection {
    /// A dense `[out, in]` matrix, as checkpoints store it.
    pub fn dense(weight: &Tensor) -> Result<Self> {
        let transposed = weight.t().and_then(|t| t.contiguous());
        Ok(Projection::Dense(transposed?))
    }

    /// The output projection of tied embeddings: the embedding table itself,
    /// shared rather than copied (a transposed copy of Gemma 3's 262 144-row
    /// table would add 671 MB, for no gain at the vocabulary's width).
    pub fn tied(embedding: &Tensor) -> Self {
        Projection::Quantized(QMatMul::Tensor(embedding.clone()))
    }

    /// A matrix candle holds as a `QMatMul`; a dense one is transposed.
    pub fn from_qmatmul(matmul: QMatMul) -> Result<Self> {
        match matmul {
            QMatMul::Tensor(weight) => Self::dense(&weight),
            other => Ok(Projection::Quantized(other)),
        }
    }

    /// `x · wᵀ` for `x` of any rank whose last dimension is `in`.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let e = DecoderError::from;
        match self {
            Projection::Int8(matrix) => {
                let mut dims = x.dims().to_vec();
                if dims.pop() != Some(matrix.inputs()) {
                    return Err(DecoderError::Batch(format!(
                        "rows of shape {:?} for a matrix of {} inputs",
                        x.dims(),
                        matrix.inputs()
                    )));
                }
                let values: Vec<f32> = x.flatten_all().and_then(|v| v.to_vec1()).map_err(e)?;
                let product = matrix.product(&QuantizedRows::quantize(&values, matrix.inputs()));
                dims.push(matrix.outputs());
                Tensor::from_vec(product, dims, x.device()).map_err(e)
            }
            Projection::Quantized(matmul) => matmul.forward(x).map_err(e),
            Projection::Dense(weight) => {
                let mut dims = x.dims().to_vec();
                let inner = dims
                    .pop()
                    .ok_or_else(|| DecoderError::Batch("a projection of a scalar".into()))?;
                let rows = x.reshape(((), inner)).map_err(e)?;
                let out = rows.matmul(weight).map_err(e)?;
                dims.push(weight.dim(1).map_err(e)?);
                out.reshape(dims).map_err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn a_dense_projection_computes_x_times_w_transposed_at_any_rank() {
        let device = Device::Cpu;
        let w = Tensor::randn(0f32, 1.0, (5, 3), &device).unwrap();
        let projection = Projection::dense(&w).unwrap();
        for x in [
            Tensor::randn(0f32, 1.0, (4, 3), &device).unwrap(),
            Tensor::randn(0f32, 1.0, (2, 4, 3), &device).unwrap(),
        ] {
            let expected = QMatMul::Tensor(w.clone()).forward(&x).unwrap();
            let got = projection.forward(&x).unwrap();
            assert_eq!(got.dims(), expected.dims());
            let gap = (got - expected)
                .unwrap()
                .abs()
                .unwrap()
                .flatten_all()
                .unwrap();
            assert!(gap.max(0).unwrap().to_scalar::<f32>().unwrap() < 1e-5);
        }
    }
}
