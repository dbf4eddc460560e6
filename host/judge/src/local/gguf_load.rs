//! A judge decoder read from a GGUF file: llama, qwen2 or gemma3 metadata,
//! block matrices kept quantized (repacked for integer products where the
//! CPU runs them, else `QMatMul`), norms and biases dequantized.
//!
//! Gemma 3's constants that llama.cpp does not store in the file either
//! are taken as llama.cpp takes them: every sixth layer attends globally,
//! the others within the sliding window with rotary base 10 000; scores
//! are scaled by 1/√key_length (1/√(width/heads) for the 62-layer 27B).

use super::int8::{self, BlockFormat, Int8Matrix};
use super::model::{
    Activation, DecoderError, JudgeDecoder, Layer, Result, RopeStyle, Shape, SlidingWindow, e,
};
use super::projection::Projection;
use crate::config::WeightProducts;
use candle_core::Device;
use candle_core::quantized::{GgmlDType, QMatMul, QTensor, gguf_file::Content};
use std::io::{Read, Seek};

mod counts;

const GEMMA3_GLOBAL_EVERY: usize = 6;
/// Matrices without a SIMD kernel are widened to f32 while the widened
/// ones stay under this size, else requantized to Q8_0.
const WIDEN_TO_F32_BYTES: usize = 4 << 30;

/// How matrices without a fast kernel on this device are held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Widen {
    F32,
    Q8_0,
}

/// Whether candle has a SIMD dot product for `dtype` on the CPU. Others
/// (Q4_1, Q5_0, Q5_1, Q8_1) run scalar code, tens of times slower than
/// llama.cpp on the same file (measured on SmolLM2's Q4_1: a HealthBench
/// run did not finish in 25 minutes).
fn has_cpu_kernel(dtype: GgmlDType) -> bool {
    use GgmlDType::*;
    matches!(
        dtype,
        F32 | F16 | BF16 | Q4_0 | Q8_0 | Q2K | Q3K | Q4K | Q5K | Q6K | Q8K
    )
}

/// On the CPU, how the file's slow matrices are held (`None`: none are
/// slow, or another device).
fn slow_on_this_device(content: &Content, device: &Device) -> Option<Widen> {
    if !device.is_cpu() {
        return None;
    }
    let slow: usize = content
        .tensor_infos
        .values()
        .filter(|t| !has_cpu_kernel(t.ggml_dtype))
        .map(|t| t.shape.elem_count())
        .fold(0usize, usize::saturating_add);
    match slow {
        0 => None,
        n if n.saturating_mul(4) <= WIDEN_TO_F32_BYTES => Some(Widen::F32),
        _ => Some(Widen::Q8_0),
    }
}
const GEMMA3_LOCAL_ROPE_BASE: f32 = 10_000.0;

impl JudgeDecoder {
    /// Loads the model described by `content` from `reader`, its block
    /// matrices held for the `products` asked for.
    pub fn load<R: Read + Seek>(
        content: &Content,
        reader: &mut R,
        device: &Device,
        products: WeightProducts,
    ) -> Result<Self> {
        let arch = content
            .metadata
            .get("general.architecture")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .unwrap_or_default();
        let rope = match arch.as_str() {
            "llama" => RopeStyle::Adjacent,
            "qwen2" | "gemma3" => RopeStyle::Halves,
            other => {
                return Err(DecoderError::Weights(format!(
                    "architecture {other:?} is not supported (llama, qwen2, gemma3)"
                )));
            }
        };
        let gemma = arch == "gemma3";
        let meta = |key: &str| -> Result<&candle_core::quantized::gguf_file::Value> {
            let full = format!("{arch}.{key}");
            content
                .metadata
                .get(&full)
                .ok_or_else(|| DecoderError::Weights(format!("{full} is missing")))
        };
        let counts::Counts {
            heads,
            kv_heads,
            blocks,
            width,
            head_dim,
            context_length,
            sliding_window,
        } = counts::counts(content, &arch, gemma)?;
        // Present but not a finite positive number: refused, not guessed.
        let float = |key: &str| -> Result<Option<f32>> {
            match meta(key) {
                Err(_) => Ok(None),
                Ok(v) => match v.to_f32() {
                    Ok(x) if x.is_finite() && x > 0.0 => Ok(Some(x)),
                    _ => Err(DecoderError::Weights(format!(
                        "{arch}.{key} = {v:?} must be a finite positive f32"
                    ))),
                },
            }
        };
        let eps = float("attention.layer_norm_rms_epsilon")?.unwrap_or(1e-5) as f64;
        let freq_base = float("rope.freq_base")?.unwrap_or(10_000.0);
        let position_scale = match meta("rope.scaling.type").and_then(|v| v.to_string().map_err(e))
        {
            Ok(kind) if kind == "linear" => float("rope.scaling.factor")?.unwrap_or(1.0),
            Ok(kind) if kind != "none" => {
                return Err(DecoderError::Weights(format!(
                    "{arch}.rope.scaling.type {kind:?} is not supported (linear)"
                )));
            }
            _ => 1.0,
        };
        let mut tensor = |name: &str| {
            content
                .tensor(reader, name, device)
                .map_err(|err| DecoderError::Weights(format!("{name}: {err}")))
        };
        let dense = |t: candle_core::quantized::QTensor| t.dequantize(device).map_err(e);
        let slow = slow_on_this_device(content, device);
        let int8 = int8::kernel_for(device, products);
        let matmul = |t: QTensor| -> Result<Projection> {
            if let (Some(kernel), Some(format), Ok((outputs, inputs))) =
                (int8, BlockFormat::of(t.dtype()), t.shape().dims2())
            {
                let raw = t.data().map_err(e)?;
                return Int8Matrix::new(format, outputs, inputs, &raw, kernel)
                    .map(Projection::Int8)
                    .map_err(DecoderError::Weights);
            }
            let Some(widen) = slow.filter(|_| !has_cpu_kernel(t.dtype())) else {
                return Projection::from_qmatmul(QMatMul::from_qtensor(t).map_err(e)?);
            };
            let dense = t.dequantize(device).map_err(e)?;
            match widen {
                Widen::F32 => Projection::dense(&dense),
                Widen::Q8_0 => QTensor::quantize(&dense, GgmlDType::Q8_0)
                    .and_then(QMatMul::from_qtensor)
                    .map_err(e)
                    .and_then(Projection::from_qmatmul),
            }
        };
        let token_embd = tensor("token_embd.weight")?;
        let embedding = token_embd.dequantize(device).map_err(e)?;
        // No capacity from the file's word: a missing block fails below.
        let mut layers = Vec::new();
        for i in 0..blocks {
            let p = format!("blk.{i}");
            let optional =
                |t: Result<candle_core::quantized::QTensor>| t.ok().map(dense).transpose();
            let gemma_norm = |t: Result<candle_core::quantized::QTensor>| {
                if gemma {
                    t.and_then(dense).map(Some)
                } else {
                    Ok(None)
                }
            };
            layers.push(Layer {
                attn_norm: dense(tensor(&format!("{p}.attn_norm.weight"))?)?,
                q: matmul(tensor(&format!("{p}.attn_q.weight"))?)?,
                k: matmul(tensor(&format!("{p}.attn_k.weight"))?)?,
                v: matmul(tensor(&format!("{p}.attn_v.weight"))?)?,
                q_bias: optional(tensor(&format!("{p}.attn_q.bias")))?,
                k_bias: optional(tensor(&format!("{p}.attn_k.bias")))?,
                v_bias: optional(tensor(&format!("{p}.attn_v.bias")))?,
                o: matmul(tensor(&format!("{p}.attn_output.weight"))?)?,
                ffn_norm: dense(tensor(&format!("{p}.ffn_norm.weight"))?)?,
                gate: matmul(tensor(&format!("{p}.ffn_gate.weight"))?)?,
                up: matmul(tensor(&format!("{p}.ffn_up.weight"))?)?,
                down: matmul(tensor(&format!("{p}.ffn_down.weight"))?)?,
                q_norm: gemma_norm(tensor(&format!("{p}.attn_q_norm.weight")))?,
                k_norm: gemma_norm(tensor(&format!("{p}.attn_k_norm.weight")))?,
                post_attn_norm: gemma_norm(tensor(&format!("{p}.post_attention_norm.weight")))?,
                post_ffn_norm: gemma_norm(tensor(&format!("{p}.post_ffw_norm.weight")))?,
                sliding: gemma && (i + 1) % GEMMA3_GLOBAL_EVERY != 0,
            });
        }
        let norm = dense(tensor("output_norm.weight")?)?;
        // Tied embeddings: no separate output matrix. Where the table's
        // blocks run as integer products it is also held as such a matrix
        // (a quarter of the f32 table's size for Q8_0); else the f32 table
        // itself is shared.
        let output = match tensor("output.weight") {
            Ok(t) => matmul(t)?,
            Err(_) if int8.is_some() && BlockFormat::of(token_embd.dtype()).is_some() => {
                matmul(token_embd)?
            }
            Err(_) => Projection::tied(&embedding),
        };
        let sliding_window = sliding_window.map(|window| SlidingWindow {
            window,
            freq_base: GEMMA3_LOCAL_ROPE_BASE,
        });
        let attention_scale = match (gemma, blocks) {
            (true, 62) => Some(1.0 / ((width / heads) as f64).sqrt()),
            _ => None,
        };
        JudgeDecoder::assemble(
            embedding,
            layers,
            norm,
            output,
            Shape {
                heads,
                kv_heads,
                eps,
                rope,
                freq_base,
                // Gemma 3 scales only its global layers' positions.
                position_scale,
                context_length,
                head_dim: Some(head_dim),
                embed_scale: gemma.then(|| (width as f64).sqrt()),
                activation: if gemma {
                    Activation::GeluTanh
                } else {
                    Activation::Silu
                },
                attention_scale,
                sliding_window,
            },
            device,
        )
    }
}
