//! A decoder's weights under their Hugging Face names (`model.layers.0.
//! self_attn.q_proj.weight` …), in f32: read from safetensors (one file or
//! shards, f32/bf16/f16), checked against the [`DecoderSpec`] they claim.

use crate::config::DecoderSpec;
use crate::error::{ModelError, Result};
use candle_core::{DType, Device, Tensor};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Tensors by Hugging Face name.
pub type Weights = BTreeMap<String, Tensor>;

/// One block's tensor names, in the order a block uses them.
pub fn block_names(layer: usize) -> BlockNames {
    let p = format!("model.layers.{layer}");
    BlockNames {
        attn_norm: format!("{p}.input_layernorm.weight"),
        q: format!("{p}.self_attn.q_proj.weight"),
        k: format!("{p}.self_attn.k_proj.weight"),
        v: format!("{p}.self_attn.v_proj.weight"),
        q_bias: format!("{p}.self_attn.q_proj.bias"),
        k_bias: format!("{p}.self_attn.k_proj.bias"),
        v_bias: format!("{p}.self_attn.v_proj.bias"),
        o: format!("{p}.self_attn.o_proj.weight"),
        mlp_norm: format!("{p}.post_attention_layernorm.weight"),
        gate: format!("{p}.mlp.gate_proj.weight"),
        up: format!("{p}.mlp.up_proj.weight"),
        down: format!("{p}.mlp.down_proj.weight"),
    }
}

/// The Hugging Face names of one decoder block's tensors.
#[derive(Debug, Clone)]
#[allow(
    missing_docs,
    reason = "each field is the tensor named like it in the Hugging Face layout"
)]
pub struct BlockNames {
    pub attn_norm: String,
    pub q: String,
    pub k: String,
    pub v: String,
    pub q_bias: String,
    pub k_bias: String,
    pub v_bias: String,
    pub o: String,
    pub mlp_norm: String,
    pub gate: String,
    pub up: String,
    pub down: String,
}

/// The embedding table.
pub const EMBED: &str = "model.embed_tokens.weight";
/// The final norm.
pub const FINAL_NORM: &str = "model.norm.weight";
/// The untied output projection.
pub const LM_HEAD: &str = "lm_head.weight";

/// Every tensor a model of `spec` has, with its shape.
pub fn expected_shapes(spec: &DecoderSpec) -> Vec<(String, Vec<usize>)> {
    let (h, kv, i) = (
        spec.hidden_size,
        spec.num_kv_heads * spec.head_dim(),
        spec.intermediate_size,
    );
    let mut shapes = vec![(EMBED.to_string(), vec![spec.vocab_size, h])];
    for layer in 0..spec.num_layers {
        let n = block_names(layer);
        shapes.extend([
            (n.attn_norm, vec![h]),
            (n.q, vec![h, h]),
            (n.k, vec![kv, h]),
            (n.v, vec![kv, h]),
            (n.o, vec![h, h]),
            (n.mlp_norm, vec![h]),
            (n.gate, vec![i, h]),
            (n.up, vec![i, h]),
            (n.down, vec![h, i]),
        ]);
        if spec.attention_bias {
            shapes.extend([
                (n.q_bias, vec![h]),
                (n.k_bias, vec![kv]),
                (n.v_bias, vec![kv]),
            ]);
        }
    }
    shapes.push((FINAL_NORM.to_string(), vec![h]));
    if !spec.tie_word_embeddings {
        shapes.push((LM_HEAD.to_string(), vec![spec.vocab_size, h]));
    }
    shapes
}

/// Refuses weights that lack a tensor of `spec` or hold one of another
/// shape (naming it); tensors the decoder does not use (rotary caches some
/// checkpoints carry) are dropped.
pub fn check_shapes(spec: &DecoderSpec, weights: &mut Weights, path: &Path) -> Result<()> {
    // Each block has nine tensors: a layer count the weights cannot hold
    // is refused before the list of expected tensors is built from it.
    if spec
        .num_layers
        .checked_mul(9)
        .is_none_or(|n| n > weights.len())
    {
        return Err(ModelError::unsupported(
            path,
            "num_hidden_layers",
            spec.num_layers,
            format!(
                "the weights hold {} tensors, fewer than nine per block",
                weights.len()
            ),
        ));
    }
    let expected = expected_shapes(spec);
    for (name, shape) in &expected {
        match weights.get(name) {
            None => {
                return Err(ModelError::format(
                    path,
                    format!("no tensor {name} (expected {shape:?})"),
                ));
            }
            Some(t) if t.dims() != shape.as_slice() => {
                return Err(ModelError::format(
                    path,
                    format!("tensor {name} is {:?}, the config says {shape:?}", t.dims()),
                ));
            }
            Some(_) => {}
        }
    }
    let keep: std::collections::BTreeSet<&str> = expected.iter().map(|(n, _)| n.as_str()).collect();
    let extra: Vec<String> = weights
        .keys()
        .filter(|n| !keep.contains(n.as_str()))
        .cloned()
        .collect();
    if let Some(name) = extra.iter().find(|n| !n.ends_with("rotary_emb.inv_freq")) {
        // A tied model that still ships lm_head.weight is fine (it equals
        // the embedding); anything else means another architecture.
        if name != LM_HEAD {
            return Err(ModelError::format(
                path,
                format!(
                    "tensor {name} is not part of a {} decoder",
                    spec.architecture.name()
                ),
            ));
        }
    }
    for name in extra {
        weights.remove(&name);
    }
    Ok(())
}

/// Bytes of a `model.safetensors.index.json` (Llama 3.1 405B's: 120 KiB).
/// Read whole, so bounded.
pub const MAX_INDEX_JSON_BYTES: u64 = 64 << 20;

/// The safetensors files of a checkpoint directory: the shards
/// `model.safetensors.index.json` names, or `model.safetensors`.
pub fn weight_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let index = dir.join("model.safetensors.index.json");
    if index.is_file() {
        #[derive(Deserialize)]
        struct Index {
            weight_map: HashMap<String, String>,
        }
        let text = crate::config::read_bounded(&index, MAX_INDEX_JSON_BYTES)?;
        let parsed: Index =
            serde_json::from_str(&text).map_err(|e| ModelError::format(&index, e.to_string()))?;
        let mut files: Vec<String> = parsed.weight_map.into_values().collect();
        files.sort();
        files.dedup();
        // Shard names come from the file: no path may leave the directory.
        if let Some(bad) = files
            .iter()
            .find(|f| f.contains('/') || f.contains('\\') || f.starts_with('.'))
        {
            return Err(ModelError::format(
                &index,
                format!("shard name {bad:?} is not a file in the directory"),
            ));
        }
        return Ok(files.into_iter().map(|f| dir.join(f)).collect());
    }
    let single = dir.join("model.safetensors");
    if single.is_file() {
        return Ok(vec![single]);
    }
    Err(ModelError::format(
        dir,
        "neither model.safetensors nor model.safetensors.index.json is here",
    ))
}

/// Every tensor of the checkpoint in `dir`, as f32 on `device`.
pub fn load_safetensors_dir(dir: &Path, device: &Device) -> Result<Weights> {
    let mut weights = Weights::new();
    for file in weight_files(dir)? {
        let loaded = candle_core::safetensors::load(&file, device)
            .map_err(|e| ModelError::format(&file, e.to_string()))?;
        for (name, tensor) in loaded {
            let tensor = match tensor.dtype() {
                DType::F32 => tensor,
                DType::BF16 | DType::F16 | DType::F64 => tensor.to_dtype(DType::F32)?,
                other => {
                    return Err(ModelError::format(
                        &file,
                        format!("tensor {name} is {other:?}; weights must be f32, bf16 or f16"),
                    ));
                }
            };
            weights.insert(name, tensor);
        }
    }
    Ok(weights)
}

/// Writes `weights` as one safetensors file through a temporary file and a
/// rename (never half a file), with transformers' `format = pt` metadata.
pub fn save_safetensors(weights: &Weights, path: &Path) -> Result<()> {
    let tmp = verifine_base::temporary_sibling(path);
    let tensors: Vec<(&str, Tensor)> = weights
        .iter()
        .map(|(n, t)| Ok((n.as_str(), t.to_dtype(DType::F32)?.contiguous()?)))
        .collect::<Result<_>>()?;
    let mut metadata = HashMap::new();
    metadata.insert("format".to_string(), "pt".to_string());
    safetensors::serialize_to_file(tensors.iter().map(|(n, t)| (*n, t)), Some(metadata), &tmp)
        .map_err(|e| ModelError::format(&tmp, format!("writing: {e}")))?;
    std::fs::rename(&tmp, path)
        .map_err(|e| verifine_base::FileError::io("renaming into", path, e))?;
    verifine_base::files::sync_parent(path);
    Ok(())
}
