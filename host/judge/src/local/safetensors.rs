//! Loading a Hugging Face checkpoint directory: `config.json`, the weights
//! in `*.safetensors` (one file, or shards named by
//! `model.safetensors.index.json`) and `tokenizer.json`. Llama and qwen2
//! checkpoints keep q/k in the rotate-half layout, so both rotate halves.

use super::model::{JudgeDecoder, Layer, RopeStyle, Shape};
use candle_core::quantized::QMatMul;
use candle_core::{DType, Device, Tensor};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

type Result<T> = std::result::Result<T, String>;

/// The fields of `config.json` the decoder needs.
#[derive(Debug, Deserialize)]
pub struct HfConfig {
    /// `llama` or `qwen2`.
    pub model_type: String,
    /// Width.
    pub hidden_size: usize,
    /// Blocks.
    pub num_hidden_layers: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key/value heads (absent: as many as query heads).
    #[serde(default)]
    pub num_key_value_heads: Option<usize>,
    /// RMS norm epsilon.
    pub rms_norm_eps: f64,
    /// Rotary base (absent: 10 000).
    #[serde(default)]
    pub rope_theta: Option<f32>,
    /// Longest sequence.
    pub max_position_embeddings: usize,
    /// The output matrix is the embedding table.
    #[serde(default)]
    pub tie_word_embeddings: bool,
    /// Begin-of-sequence id, when the model uses one.
    #[serde(default)]
    pub bos_token_id: Option<u32>,
    /// End-of-sequence id(s).
    #[serde(default)]
    pub eos_token_id: Option<serde_json::Value>,
}

impl HfConfig {
    /// Reads `dir/config.json`.
    pub fn load(dir: &Path) -> Result<Self> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The first end-of-sequence id.
    pub fn eos(&self) -> Option<u32> {
        match &self.eos_token_id {
            Some(serde_json::Value::Number(n)) => n.as_u64().map(|v| v as u32),
            Some(serde_json::Value::Array(ids)) => ids.first()?.as_u64().map(|v| v as u32),
            _ => None,
        }
    }
}

fn weight_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let index = dir.join("model.safetensors.index.json");
    if index.is_file() {
        #[derive(Deserialize)]
        struct Index {
            weight_map: HashMap<String, String>,
        }
        let text = std::fs::read_to_string(&index)
            .map_err(|e| format!("reading {}: {e}", index.display()))?;
        let parsed: Index =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", index.display()))?;
        let mut files: Vec<String> = parsed.weight_map.into_values().collect();
        files.sort();
        files.dedup();
        // Shard names come from the file: no path may leave the directory.
        if let Some(bad) = files
            .iter()
            .find(|f| f.contains('/') || f.contains('\\') || f.starts_with('.'))
        {
            return Err(format!(
                "{}: shard name {bad:?} is not a file in the directory",
                index.display()
            ));
        }
        return Ok(files.into_iter().map(|f| dir.join(f)).collect());
    }
    let single = dir.join("model.safetensors");
    if single.is_file() {
        return Ok(vec![single]);
    }
    Err(format!(
        "{} has neither model.safetensors nor model.safetensors.index.json",
        dir.display()
    ))
}

/// Loads the decoder of the checkpoint in `dir`.
pub fn load(dir: &Path, config: &HfConfig, device: &Device) -> Result<JudgeDecoder> {
    let rope = match config.model_type.as_str() {
        "llama" | "qwen2" => RopeStyle::Halves,
        other => {
            return Err(format!(
                "model_type {other:?} is not supported (llama, qwen2)"
            ));
        }
    };
    let mut weights: HashMap<String, Tensor> = HashMap::new();
    for file in weight_files(dir)? {
        let loaded = candle_core::safetensors::load(&file, device)
            .map_err(|e| format!("{}: {e}", file.display()))?;
        weights.extend(loaded);
    }
    let mut take = |name: &str| -> Result<Tensor> {
        weights
            .remove(name)
            .ok_or_else(|| format!("{}: no tensor {name}", dir.display()))?
            .to_dtype(DType::F32)
            .map_err(|e| format!("{name}: {e}"))
    };
    let embedding = take("model.embed_tokens.weight")?;
    let mut layers = Vec::new();
    for i in 0..config.num_hidden_layers {
        let p = format!("model.layers.{i}");
        let bias = |t: Result<Tensor>| t.ok();
        layers.push(Layer {
            attn_norm: take(&format!("{p}.input_layernorm.weight"))?,
            q: QMatMul::Tensor(take(&format!("{p}.self_attn.q_proj.weight"))?),
            k: QMatMul::Tensor(take(&format!("{p}.self_attn.k_proj.weight"))?),
            v: QMatMul::Tensor(take(&format!("{p}.self_attn.v_proj.weight"))?),
            q_bias: bias(take(&format!("{p}.self_attn.q_proj.bias"))),
            k_bias: bias(take(&format!("{p}.self_attn.k_proj.bias"))),
            v_bias: bias(take(&format!("{p}.self_attn.v_proj.bias"))),
            o: QMatMul::Tensor(take(&format!("{p}.self_attn.o_proj.weight"))?),
            ffn_norm: take(&format!("{p}.post_attention_layernorm.weight"))?,
            gate: QMatMul::Tensor(take(&format!("{p}.mlp.gate_proj.weight"))?),
            up: QMatMul::Tensor(take(&format!("{p}.mlp.up_proj.weight"))?),
            down: QMatMul::Tensor(take(&format!("{p}.mlp.down_proj.weight"))?),
        });
    }
    let norm = take("model.norm.weight")?;
    let output = match take("lm_head.weight") {
        Ok(t) => QMatMul::Tensor(t),
        Err(_) if config.tie_word_embeddings => QMatMul::Tensor(embedding.clone()),
        Err(e) => return Err(e),
    };
    JudgeDecoder::assemble(
        embedding,
        layers,
        norm,
        output,
        Shape {
            heads: config.num_attention_heads,
            kv_heads: config
                .num_key_value_heads
                .unwrap_or(config.num_attention_heads),
            eps: config.rms_norm_eps,
            rope,
            freq_base: config.rope_theta.unwrap_or(10_000.0),
            context_length: config.max_position_embeddings.min(32_768),
        },
        device,
    )
}
