//! A judge decoder read from a GGUF file: llama or qwen2 metadata, block
//! matrices kept quantized (`QMatMul`), norms and biases dequantized.

use super::model::{JudgeDecoder, Layer, Result, RopeStyle, Shape, e};
use candle_core::Device;
use candle_core::quantized::{QMatMul, gguf_file::Content};
use std::io::{Read, Seek};

impl JudgeDecoder {
    /// Loads the model described by `content` from `reader`.
    pub fn load<R: Read + Seek>(
        content: &Content,
        reader: &mut R,
        device: &Device,
    ) -> Result<Self> {
        let arch = content
            .metadata
            .get("general.architecture")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .unwrap_or_default();
        let rope = match arch.as_str() {
            "llama" => RopeStyle::Adjacent,
            "qwen2" => RopeStyle::Halves,
            other => {
                return Err(format!(
                    "architecture {other:?} is not supported (llama, qwen2)"
                ));
            }
        };
        let meta = |key: &str| -> Result<&candle_core::quantized::gguf_file::Value> {
            let full = format!("{arch}.{key}");
            content
                .metadata
                .get(&full)
                .ok_or_else(|| format!("{full} is missing"))
        };
        let int = |key: &str| -> Result<usize> {
            Ok(meta(key)?
                .to_u32()
                .map_err(|err| format!("{arch}.{key}: {err}"))? as usize)
        };
        let heads = int("attention.head_count")?;
        let kv_heads = int("attention.head_count_kv").unwrap_or(heads);
        let blocks = int("block_count")?;
        let context_length = int("context_length")?.min(32_768);
        let eps = meta("attention.layer_norm_rms_epsilon")
            .and_then(|v| v.to_f32().map_err(e))
            .unwrap_or(1e-5) as f64;
        let freq_base = meta("rope.freq_base")
            .and_then(|v| v.to_f32().map_err(e))
            .unwrap_or(10_000.0);
        let mut tensor = |name: &str| {
            content
                .tensor(reader, name, device)
                .map_err(|err| format!("{name}: {err}"))
        };
        let dense = |t: candle_core::quantized::QTensor| t.dequantize(device).map_err(e);
        let matmul = |t| QMatMul::from_qtensor(t).map_err(e);
        let embedding = dense(tensor("token_embd.weight")?)?;
        // No capacity from the file's word: a missing block fails below.
        let mut layers = Vec::new();
        for i in 0..blocks {
            let p = format!("blk.{i}");
            let bias = |t: std::result::Result<candle_core::quantized::QTensor, String>| {
                t.ok().map(dense).transpose()
            };
            layers.push(Layer {
                attn_norm: dense(tensor(&format!("{p}.attn_norm.weight"))?)?,
                q: matmul(tensor(&format!("{p}.attn_q.weight"))?)?,
                k: matmul(tensor(&format!("{p}.attn_k.weight"))?)?,
                v: matmul(tensor(&format!("{p}.attn_v.weight"))?)?,
                q_bias: bias(tensor(&format!("{p}.attn_q.bias")))?,
                k_bias: bias(tensor(&format!("{p}.attn_k.bias")))?,
                v_bias: bias(tensor(&format!("{p}.attn_v.bias")))?,
                o: matmul(tensor(&format!("{p}.attn_output.weight"))?)?,
                ffn_norm: dense(tensor(&format!("{p}.ffn_norm.weight"))?)?,
                gate: matmul(tensor(&format!("{p}.ffn_gate.weight"))?)?,
                up: matmul(tensor(&format!("{p}.ffn_up.weight"))?)?,
                down: matmul(tensor(&format!("{p}.ffn_down.weight"))?)?,
            });
        }
        let norm = dense(tensor("output_norm.weight")?)?;
        // Tied embeddings: no separate output matrix.
        let output = match tensor("output.weight") {
            Ok(t) => matmul(t)?,
            Err(_) => QMatMul::Tensor(embedding.clone()),
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
                context_length,
            },
            device,
        )
    }
}
