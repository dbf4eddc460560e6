//! A GGUF file's counts checked, under their metadata names, against
//! [`limits`] and against the tensors the file holds, before any tensor is
//! read or anything is sized from them: a file claiming a billion blocks
//! with one block of weights is refused here, not by running out of
//! memory building a billion of something.

use crate::config::DecoderSpec;
use crate::config::limits::{self, Count};
use crate::error::{ModelError, Result};
use crate::weights::expected_shapes;
use candle_core::quantized::gguf_file::Content;
use std::path::Path;

/// The tensors of one block: Hugging Face leaf name, GGUF leaf name.
const BLOCK_TENSORS: [(&str, &str); 12] = [
    ("input_layernorm.weight", "attn_norm.weight"),
    ("self_attn.q_proj.weight", "attn_q.weight"),
    ("self_attn.k_proj.weight", "attn_k.weight"),
    ("self_attn.v_proj.weight", "attn_v.weight"),
    ("self_attn.q_proj.bias", "attn_q.bias"),
    ("self_attn.k_proj.bias", "attn_k.bias"),
    ("self_attn.v_proj.bias", "attn_v.bias"),
    ("self_attn.o_proj.weight", "attn_output.weight"),
    ("post_attention_layernorm.weight", "ffn_norm.weight"),
    ("mlp.gate_proj.weight", "ffn_gate.weight"),
    ("mlp.up_proj.weight", "ffn_up.weight"),
    ("mlp.down_proj.weight", "ffn_down.weight"),
];

/// The GGUF name of the tensor called `hf` in a Hugging Face checkpoint.
fn gguf_name(hf: &str) -> String {
    match hf {
        crate::weights::EMBED => "token_embd.weight".into(),
        crate::weights::FINAL_NORM => "output_norm.weight".into(),
        crate::weights::LM_HEAD => "output.weight".into(),
        other => {
            let rest = other.strip_prefix("model.layers.").unwrap_or(other);
            let (block, leaf) = rest.split_once('.').unwrap_or((rest, ""));
            let leaf = BLOCK_TENSORS
                .iter()
                .find(|(h, _)| *h == leaf)
                .map_or(leaf, |(_, g)| g);
            format!("blk.{block}.{leaf}")
        }
    }
}

/// Refuses counts of `spec` (read from `content`'s `arch` keys) outside
/// [`limits`] or that disagree with the tensors `content` describes.
pub(super) fn check(content: &Content, spec: &DecoderSpec, arch: &str, path: &Path) -> Result<()> {
    let key = |k: &str| format!("{arch}.{k}");
    let out_of_bounds = |field: String, value: usize, why: String| {
        Err(ModelError::unsupported(path, field, value, why))
    };
    if let Some((count, value)) = spec.count_out_of_bounds() {
        let max = count.max();
        let why = match count {
            Count::Vocab => format!("must hold between 1 and {max} tokens"),
            _ => format!("must be between 1 and {max}"),
        };
        return out_of_bounds(count.gguf_key(arch), value, why);
    }
    if !spec.hidden_size.is_multiple_of(spec.num_heads) {
        let why = format!("must divide embedding_length {}", spec.hidden_size);
        return out_of_bounds(key("attention.head_count"), spec.num_heads, why);
    }
    if spec.head_dim() > limits::MAX_HEAD_DIM {
        let why = format!(
            "heads of width {} (at most {})",
            spec.head_dim(),
            limits::MAX_HEAD_DIM
        );
        return out_of_bounds(key("attention.head_count"), spec.num_heads, why);
    }
    if !spec.num_heads.is_multiple_of(spec.num_kv_heads) {
        let why = format!("must divide attention.head_count {}", spec.num_heads);
        return out_of_bounds(key("attention.head_count_kv"), spec.num_kv_heads, why);
    }
    // Nine tensors a block: more blocks than that are not in the file.
    let held = content.tensor_infos.len();
    let last = format!("blk.{}.attn_q.weight", spec.num_layers - 1);
    if spec.num_layers > held / 9 || !content.tensor_infos.contains_key(&last) {
        let why = format!("the file holds {held} tensors and no {last}");
        return out_of_bounds(key("block_count"), spec.num_layers, why);
    }
    let dims = |name: &str| {
        content
            .tensor_infos
            .get(name)
            .map(|t| t.shape.dims().to_vec())
            .ok_or_else(|| ModelError::format(path, format!("no tensor {name}")))
    };
    let embedding = dims("token_embd.weight")?;
    if embedding.len() != 2 || embedding[1] != spec.hidden_size {
        let why = format!("the embedding table token_embd.weight is {embedding:?}");
        return out_of_bounds(key("embedding_length"), spec.hidden_size, why);
    }
    if embedding[0] != spec.vocab_size {
        let why = format!("the embedding table token_embd.weight is {embedding:?}");
        return out_of_bounds("tokenizer.ggml.tokens".into(), spec.vocab_size, why);
    }
    for (hf, shape) in expected_shapes(spec) {
        let name = gguf_name(&hf);
        let found = dims(&name)?;
        if found != shape {
            // The counts this tensor's shape follows from.
            let leaf = name.rsplit_once("blk.").map_or(name.as_str(), |(_, l)| l);
            let from: &[&str] = if leaf.contains("ffn_gate")
                || leaf.contains("ffn_up")
                || leaf.contains("ffn_down")
            {
                &["feed_forward_length", "embedding_length"]
            } else if leaf.contains("attn_k") || leaf.contains("attn_v") {
                &[
                    "attention.head_count",
                    "attention.head_count_kv",
                    "embedding_length",
                ]
            } else {
                &["embedding_length"]
            };
            let keys: Vec<String> = from.iter().map(|k| key(k)).collect();
            return Err(ModelError::format(
                path,
                format!(
                    "tensor {name} is {found:?} but {} say {shape:?}",
                    keys.join(", ")
                ),
            ));
        }
    }
    Ok(())
}
