//! A GGUF file as a trainable model: its metadata as a [`DecoderSpec`],
//! every tensor dequantized to f32 under its Hugging Face name, its
//! tokenizer and chat template.
//!
//! llama.cpp's converter stores a llama's query and key rows interleaved
//! for its adjacent-pair rotation; they are put back in the rotate-half
//! order of the Hugging Face layout here, so a GGUF and the checkpoint it
//! came from load into the same decoder. qwen2 rotates halves in both.

use crate::config::{Architecture, DecoderSpec};
use crate::error::{ModelError, Result};
use crate::weights::{EMBED, FINAL_NORM, LM_HEAD, Weights, block_names};
use candle_core::quantized::gguf_file::{Content, Value};
use candle_core::{Device, Tensor};
use std::io::{Read, Seek};
use std::path::Path;

mod checks;
mod reader;

pub use reader::{
    MAX_ALIGNMENT, MAX_METADATA_BYTES, MAX_METADATA_KEYS, MAX_STRING_BYTES, MAX_TENSORS,
};

/// The metadata keys whose arrays (and long strings) are kept when a
/// header is read: everything verifine reads. Any other array is stepped
/// over unread, so a file cannot make the reader materialize what no one
/// uses; code that starts reading another array key adds it here.
pub const KEPT_KEYS: &[&str] = &[
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.scores",
    "tokenizer.ggml.token_type",
    "tokenizer.ggml.merges",
    "tokenizer.chat_template",
];

/// The metadata of a GGUF file, read without its tensors: every count,
/// length, offset and size checked against the file and bounded (see
/// [`MAX_METADATA_BYTES`]), arrays outside [`KEPT_KEYS`] skipped.
pub fn read_content(path: &Path) -> Result<(Content, std::fs::File)> {
    reader::read(path, KEPT_KEYS)
}

/// The decoder shape GGUF metadata describes.
pub fn spec(content: &Content, path: &Path) -> Result<DecoderSpec> {
    let arch_name = content
        .metadata
        .get("general.architecture")
        .and_then(|v| v.to_string().ok())
        .cloned()
        .unwrap_or_default();
    let architecture = match arch_name.as_str() {
        "llama" => Architecture::Llama,
        "qwen2" => Architecture::Qwen2,
        other => {
            return Err(ModelError::unsupported(
                path,
                "general.architecture",
                format!("{other:?}"),
                "the trainable decoder is llama-family: llama or qwen2",
            ));
        }
    };
    let key = |k: &str| format!("{arch_name}.{k}");
    let get = |k: &str| content.metadata.get(&key(k));
    let count = |k: &str| -> Result<usize> {
        let value =
            get(k).ok_or_else(|| ModelError::format(path, format!("{} is missing", key(k))))?;
        value
            .to_u64()
            .ok()
            .filter(|&n| n > 0)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| {
                ModelError::format(
                    path,
                    format!("{} = {value:?} is not a positive integer", key(k)),
                )
            })
    };
    // Absent: the default; present: a finite positive number, or refused.
    let float = |k: &str, default: f64| -> Result<f64> {
        let Some(value) = get(k) else {
            return Ok(default);
        };
        match value {
            Value::F32(x) => Some(f64::from(*x)),
            Value::F64(x) => Some(*x),
            _ => None,
        }
        .filter(|x| x.is_finite() && *x > 0.0)
        .ok_or_else(|| {
            ModelError::format(
                path,
                format!("{} = {value:?} is not a positive number", key(k)),
            )
        })
    };
    if let Some(kind) = get("rope.scaling.type").and_then(|v| v.to_string().ok())
        && kind != "none"
    {
        return Err(ModelError::unsupported(
            path,
            key("rope.scaling.type"),
            kind,
            "rope scaling from GGUF is not read yet; use the Hugging Face checkpoint",
        ));
    }
    if content.tensor_infos.contains_key("rope_freqs.weight") {
        return Err(ModelError::unsupported(
            path,
            "rope_freqs.weight",
            "present",
            "per-frequency rope factors (Llama 3.1 GGUF) are not read yet; use the Hugging Face checkpoint",
        ));
    }
    let vocab_size = match content.metadata.get("tokenizer.ggml.tokens") {
        Some(Value::Array(tokens)) => tokens.len(),
        _ => return Err(ModelError::format(path, "tokenizer.ggml.tokens is missing")),
    };
    let num_heads = count("attention.head_count")?;
    let hidden_size = count("embedding_length")?;
    let token = |k: &str| content.metadata.get(k).and_then(|v| v.to_u32().ok());
    let spec = DecoderSpec {
        architecture,
        vocab_size,
        hidden_size,
        num_layers: count("block_count")?,
        num_heads,
        num_kv_heads: match get("attention.head_count_kv") {
            Some(_) => count("attention.head_count_kv")?,
            None => num_heads,
        },
        intermediate_size: count("feed_forward_length")?,
        max_position_embeddings: count("context_length")?,
        rope_theta: float("rope.freq_base", 10_000.0)?,
        rope_scaling: None,
        rms_norm_eps: float("attention.layer_norm_rms_epsilon", 1e-5)?,
        tie_word_embeddings: !content.tensor_infos.contains_key("output.weight"),
        attention_bias: content.tensor_infos.contains_key("blk.0.attn_q.bias"),
        bos_token_id: token("tokenizer.ggml.bos_token_id"),
        eos_token_ids: token("tokenizer.ggml.eos_token_id").into_iter().collect(),
    };
    // Every count against its bounds and the tensors the file holds,
    // before anything is sized from it.
    checks::check(content, &spec, &arch_name, path)?;
    if get("rope.dimension_count").is_some() {
        let rope_dims = count("rope.dimension_count")?;
        if rope_dims.checked_mul(num_heads) != Some(hidden_size) {
            return Err(ModelError::unsupported(
                path,
                key("rope.dimension_count"),
                rope_dims,
                "rotation must cover whole heads of width embedding_length / head_count",
            ));
        }
    }
    spec.validate(path)?;
    Ok(spec)
}

/// Every tensor, dequantized to f32, under its Hugging Face name.
pub fn weights<R: Read + Seek>(
    content: &Content,
    reader: &mut R,
    spec: &DecoderSpec,
    path: &Path,
    device: &Device,
) -> Result<Weights> {
    let mut read = |name: &str| -> Result<Tensor> {
        let q = content
            .tensor(reader, name, device)
            .map_err(|e| ModelError::format(path, format!("tensor {name}: {e}")))?;
        Ok(q.dequantize(device)?)
    };
    let interleaved = spec.architecture == Architecture::Llama;
    let mut weights = Weights::new();
    weights.insert(EMBED.into(), read("token_embd.weight")?);
    for layer in 0..spec.num_layers {
        let n = block_names(layer);
        let b = format!("blk.{layer}");
        let mut rotated = |gguf: &str, heads: usize| -> Result<Tensor> {
            let t = read(&format!("{b}.{gguf}"))?;
            if interleaved {
                to_rotate_half(&t, heads)
            } else {
                Ok(t)
            }
        };
        weights.insert(n.q.clone(), rotated("attn_q.weight", spec.num_heads)?);
        weights.insert(n.k.clone(), rotated("attn_k.weight", spec.num_kv_heads)?);
        if spec.attention_bias {
            weights.insert(n.q_bias.clone(), rotated("attn_q.bias", spec.num_heads)?);
            weights.insert(n.k_bias.clone(), rotated("attn_k.bias", spec.num_kv_heads)?);
            weights.insert(n.v_bias.clone(), read(&format!("{b}.attn_v.bias"))?);
        }
        for (hf, gguf) in [
            (n.attn_norm, "attn_norm.weight"),
            (n.v, "attn_v.weight"),
            (n.o, "attn_output.weight"),
            (n.mlp_norm, "ffn_norm.weight"),
            (n.gate, "ffn_gate.weight"),
            (n.up, "ffn_up.weight"),
            (n.down, "ffn_down.weight"),
        ] {
            weights.insert(hf, read(&format!("{b}.{gguf}"))?);
        }
    }
    weights.insert(FINAL_NORM.into(), read("output_norm.weight")?);
    if !spec.tie_word_embeddings {
        weights.insert(LM_HEAD.into(), read("output.weight")?);
    }
    Ok(weights)
}

/// Undoes llama.cpp's interleaving of each head's rows (or bias entries):
/// row `2i + s` of a head goes back to `s · d/2 + i`.
fn to_rotate_half(t: &Tensor, heads: usize) -> Result<Tensor> {
    let dims = t.dims().to_vec();
    let rows = dims[0];
    let d = rows / heads;
    let rest: usize = dims[1..].iter().product();
    Ok(t.reshape((heads, d / 2, 2, rest))?
        .transpose(1, 2)?
        .contiguous()?
        .reshape(dims)?)
}

/// The chat template and the texts of the begin/end tokens.
pub fn chat_template_source(content: &Content) -> Option<String> {
    content
        .metadata
        .get("tokenizer.chat_template")
        .and_then(|v| v.to_string().ok())
        .cloned()
}
