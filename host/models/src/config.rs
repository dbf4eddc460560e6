//! The shape of a llama-family decoder, read from a Hugging Face
//! `config.json` or from GGUF metadata, and written back as `config.json`.
//!
//! One description for both formats, so training, the local judge and the
//! exporter agree on what a model is. Anything this decoder does not
//! compute (another activation, an MLP bias, a rope scaling kind it does
//! not implement, a head width that is not `hidden / heads`) is refused
//! naming the field, never silently approximated.

use crate::error::{ModelError, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::Path;

pub mod limits;
mod rope;

pub use rope::inverse_frequencies;
use rope::rope_scaling;

/// Which family the weights follow. Both rotate halves in the Hugging Face
/// layout; qwen2 adds biases to the query, key and value projections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Architecture {
    /// Llama, SmolLM, Mistral-style dense llama checkpoints.
    Llama,
    /// Qwen2 / Qwen2.5.
    Qwen2,
}

impl Architecture {
    /// The `model_type` of `config.json` (and GGUF's `general.architecture`).
    pub fn name(self) -> &'static str {
        match self {
            Architecture::Llama => "llama",
            Architecture::Qwen2 => "qwen2",
        }
    }

    /// The transformers class `config.json` names.
    fn class(self) -> &'static str {
        match self {
            Architecture::Llama => "LlamaForCausalLM",
            Architecture::Qwen2 => "Qwen2ForCausalLM",
        }
    }
}

/// How rotary frequencies are stretched for longer contexts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rope_type", rename_all = "lowercase")]
pub enum RopeScaling {
    /// Positions divided by `factor`.
    Linear {
        /// The stretch.
        factor: f64,
    },
    /// Llama 3.1's band-wise scaling.
    Llama3 {
        /// Stretch of the low frequencies.
        factor: f64,
        /// Below this share of the original context, frequencies are scaled.
        low_freq_factor: f64,
        /// Above this share, they are kept.
        high_freq_factor: f64,
        /// The context the model was pretrained with.
        original_max_position_embeddings: usize,
    },
}

/// A decoder's shape and special token ids.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecoderSpec {
    /// The family.
    pub architecture: Architecture,
    /// Rows of the embedding table.
    pub vocab_size: usize,
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Decoder blocks.
    pub num_layers: usize,
    /// Query heads.
    pub num_heads: usize,
    /// Key/value heads (grouped-query attention when fewer).
    pub num_kv_heads: usize,
    /// Width of the gated MLP.
    pub intermediate_size: usize,
    /// Longest sequence the model was trained for.
    pub max_position_embeddings: usize,
    /// Rotary base.
    pub rope_theta: f64,
    /// Rotary scaling, if any.
    pub rope_scaling: Option<RopeScaling>,
    /// RMSNorm epsilon.
    pub rms_norm_eps: f64,
    /// The output projection is the embedding table.
    pub tie_word_embeddings: bool,
    /// Query/key/value projections carry biases.
    pub attention_bias: bool,
    /// Begin-of-sequence id.
    pub bos_token_id: Option<u32>,
    /// End-of-sequence ids (generation stops on any).
    pub eos_token_ids: Vec<u32>,
}

impl DecoderSpec {
    /// Width of one head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_heads
    }

    /// Reads `dir/config.json`.
    pub fn from_config_json(dir: &Path) -> Result<Self> {
        let path = dir.join("config.json");
        let text = read_bounded(&path, limits::MAX_CONFIG_JSON_BYTES)?;
        let value: Value =
            serde_json::from_str(&text).map_err(|e| ModelError::format(&path, e.to_string()))?;
        Self::from_json(&value, &path)
    }

    /// Interprets a parsed `config.json` (`path` for messages).
    pub fn from_json(config: &Value, path: &Path) -> Result<Self> {
        let field = |key: &str| config.get(key).filter(|v| !v.is_null());
        let count = |key: &str| -> Result<usize> {
            let value =
                field(key).ok_or_else(|| ModelError::format(path, format!("{key} is missing")))?;
            value
                .as_u64()
                .filter(|&n| n > 0)
                .map(|n| n as usize)
                .ok_or_else(|| {
                    ModelError::format(path, format!("{key} = {value} is not a positive integer"))
                })
        };
        // transformers 5 writes rope settings as `rope_parameters`; older
        // releases as `rope_theta` and `rope_scaling`.
        let rope_parameters = field("rope_parameters").filter(|v| v.is_object());
        let field = |key: &str| {
            config
                .get(key)
                .filter(|v| !v.is_null())
                .or_else(|| match key {
                    "rope_theta" => rope_parameters.and_then(|p| p.get("rope_theta")),
                    "rope_scaling" => rope_parameters,
                    _ => None,
                })
        };
        let number = |key: &str, default: f64| -> Result<f64> {
            match field(key) {
                None => Ok(default),
                Some(v) => v
                    .as_f64()
                    .filter(|x| x.is_finite() && *x > 0.0)
                    .ok_or_else(|| {
                        ModelError::format(path, format!("{key} = {v} is not a positive number"))
                    }),
            }
        };
        let model_type = field("model_type")
            .and_then(Value::as_str)
            .unwrap_or("(none)");
        let architecture = match model_type {
            "llama" => Architecture::Llama,
            "qwen2" => Architecture::Qwen2,
            other => {
                return Err(ModelError::unsupported(
                    path,
                    "model_type",
                    format!("{other:?}"),
                    "the trainable decoder is llama-family: llama (SmolLM, Llama) or qwen2",
                ));
            }
        };
        let activation = field("hidden_act")
            .and_then(Value::as_str)
            .unwrap_or("silu");
        if activation != "silu" {
            return Err(ModelError::unsupported(
                path,
                "hidden_act",
                activation,
                "the MLP is SiLU-gated",
            ));
        }
        if field("mlp_bias").and_then(Value::as_bool) == Some(true) {
            return Err(ModelError::unsupported(
                path,
                "mlp_bias",
                true,
                "the MLP has no biases",
            ));
        }
        if architecture == Architecture::Qwen2
            && field("use_sliding_window").and_then(Value::as_bool) == Some(true)
        {
            return Err(ModelError::unsupported(
                path,
                "use_sliding_window",
                true,
                "attention is full",
            ));
        }
        let num_heads = count("num_attention_heads")?;
        let hidden_size = count("hidden_size")?;
        let num_kv_heads = match field("num_key_value_heads") {
            Some(_) => count("num_key_value_heads")?,
            None => num_heads,
        };
        let attention_bias = match architecture {
            Architecture::Qwen2 => true,
            Architecture::Llama => field("attention_bias")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        };
        let spec = DecoderSpec {
            architecture,
            vocab_size: count("vocab_size")?,
            hidden_size,
            num_layers: count("num_hidden_layers")?,
            num_heads,
            num_kv_heads,
            intermediate_size: count("intermediate_size")?,
            max_position_embeddings: count("max_position_embeddings")?,
            rope_theta: number("rope_theta", 10_000.0)?,
            rope_scaling: rope_scaling(field("rope_scaling"), path)?,
            rms_norm_eps: number("rms_norm_eps", 1e-6)?,
            tie_word_embeddings: field("tie_word_embeddings")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            attention_bias,
            bos_token_id: field("bos_token_id")
                .and_then(Value::as_u64)
                .and_then(|v| u32::try_from(v).ok()),
            eos_token_ids: token_ids(field("eos_token_id")),
        };
        if let Some(head_dim) = field("head_dim").and_then(Value::as_u64)
            && (head_dim as usize).checked_mul(num_heads) != Some(hidden_size)
        {
            return Err(ModelError::unsupported(
                path,
                "head_dim",
                head_dim,
                format!(
                    "heads must split the width: hidden_size {hidden_size} / num_attention_heads {num_heads}"
                ),
            ));
        }
        spec.validate(path)?;
        Ok(spec)
    }

    /// The first of the counts [`limits`] bounds that is 0 or past its
    /// bound, with its value.
    pub(crate) fn count_out_of_bounds(&self) -> Option<(limits::Count, usize)> {
        use limits::Count;
        [
            (Count::Vocab, self.vocab_size),
            (Count::Hidden, self.hidden_size),
            (Count::Layers, self.num_layers),
            (Count::Heads, self.num_heads),
            (Count::KvHeads, self.num_kv_heads),
            (Count::Intermediate, self.intermediate_size),
            (Count::Context, self.max_position_embeddings),
        ]
        .into_iter()
        .find(|&(count, value)| value == 0 || value > count.max())
    }

    /// Checks the shape fits the decoder (every count within [`limits`],
    /// heads divide the width and each other, heads of even width for
    /// rotation, finite positive rotary base and norm epsilon). Field names
    /// are `config.json`'s; a GGUF file's counts are checked under their
    /// own names first.
    pub fn validate(&self, path: &Path) -> Result<()> {
        let bad = |field: &str, value: usize, why: String| {
            Err(ModelError::unsupported(path, field, value, why))
        };
        if let Some((count, value)) = self.count_out_of_bounds() {
            let max = count.max();
            return bad(
                count.config_field(),
                value,
                format!("must be between 1 and {max}"),
            );
        }
        for (field, value) in [
            ("rope_theta", self.rope_theta),
            ("rms_norm_eps", self.rms_norm_eps),
        ] {
            if !value.is_finite() || value < 0.0 || (field == "rope_theta" && value == 0.0) {
                return Err(ModelError::unsupported(
                    path,
                    field,
                    value,
                    "must be finite and positive",
                ));
            }
        }
        if !self.hidden_size.is_multiple_of(self.num_heads) {
            return bad(
                "num_attention_heads",
                self.num_heads,
                format!("must divide hidden_size {}", self.hidden_size),
            );
        }
        if !self.num_heads.is_multiple_of(self.num_kv_heads) {
            return bad(
                "num_key_value_heads",
                self.num_kv_heads,
                format!("must divide num_attention_heads {}", self.num_heads),
            );
        }
        if self.head_dim() > limits::MAX_HEAD_DIM {
            return bad(
                "head_dim",
                self.head_dim(),
                format!("must be at most {}", limits::MAX_HEAD_DIM),
            );
        }
        if !self.head_dim().is_multiple_of(2) {
            return bad(
                "head_dim",
                self.head_dim(),
                "rotary embeddings need an even head width".into(),
            );
        }
        Ok(())
    }

    /// Rotary inverse frequencies (`head_dim / 2`), scaling applied.
    pub fn inverse_frequencies(&self) -> Vec<f64> {
        inverse_frequencies(self.rope_theta, self.head_dim(), self.rope_scaling)
    }

    /// `config.json` as transformers writes it for this model (f32 weights).
    pub fn to_config_json(&self) -> Value {
        let eos = match self.eos_token_ids.as_slice() {
            [] => Value::Null,
            [one] => json!(one),
            many => json!(many),
        };
        let rope_scaling = match self.rope_scaling {
            None => Value::Null,
            Some(RopeScaling::Linear { factor }) => {
                json!({"rope_type": "linear", "factor": factor})
            }
            Some(RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_position_embeddings,
            }) => json!({
                "rope_type": "llama3",
                "factor": factor,
                "low_freq_factor": low_freq_factor,
                "high_freq_factor": high_freq_factor,
                "original_max_position_embeddings": original_max_position_embeddings,
            }),
        };
        let mut config = json!({
            "architectures": [self.architecture.class()],
            "model_type": self.architecture.name(),
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "num_key_value_heads": self.num_kv_heads,
            "intermediate_size": self.intermediate_size,
            "max_position_embeddings": self.max_position_embeddings,
            "rope_theta": self.rope_theta,
            "rope_scaling": rope_scaling,
            "rms_norm_eps": self.rms_norm_eps,
            "tie_word_embeddings": self.tie_word_embeddings,
            "hidden_act": "silu",
            "bos_token_id": self.bos_token_id,
            "eos_token_id": eos,
            "torch_dtype": "float32",
            "use_cache": true,
        });
        if self.architecture == Architecture::Llama {
            config["attention_bias"] = json!(self.attention_bias);
            config["mlp_bias"] = json!(false);
            config["head_dim"] = json!(self.head_dim());
        }
        config
    }
}

/// Reads `path` whole, refusing it when longer than `max` bytes.
pub(crate) fn read_bounded(path: &Path, max: u64) -> Result<String> {
    use std::io::Read;
    let file =
        std::fs::File::open(path).map_err(|e| verifine_base::FileError::io("reading", path, e))?;
    let mut text = String::new();
    file.take(max + 1)
        .read_to_string(&mut text)
        .map_err(|e| verifine_base::FileError::io("reading", path, e))?;
    if text.len() as u64 > max {
        return Err(ModelError::format(
            path,
            format!("longer than {max} bytes; a model's JSON files are far smaller"),
        ));
    }
    Ok(text)
}

fn token_ids(value: Option<&Value>) -> Vec<u32> {
    let id = |v: &Value| v.as_u64().and_then(|v| u32::try_from(v).ok());
    match value {
        Some(Value::Array(ids)) => ids.iter().filter_map(id).collect(),
        Some(one) => id(one).into_iter().collect(),
        None => Vec::new(),
    }
}
