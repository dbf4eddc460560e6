//! Pretrained models in the formats people bring them in: Hugging Face
//! checkpoint directories (`config.json`, safetensors shards,
//! `tokenizer.json`, a chat template) and GGUF files (dequantized for
//! training), and the checkpoint directories and PEFT adapters verifine
//! writes back for transformers to load.
//!
//! Training (`verifine-train`) and the local judge (`verifine-judge`) both
//! read models through this crate, so a model is one thing everywhere:
//! one [`DecoderSpec`], one tokenizer, one chat template.

#![warn(missing_docs)]

pub mod chat;
pub mod config;
pub mod error;
pub mod export;
pub mod gguf;
pub mod ops;
pub mod spm;
pub mod tokenizer;
pub mod weights;

pub use chat::{ChatTemplate, Message, Role};
pub use config::{Architecture, DecoderSpec, RopeScaling};
pub use error::{ModelError, Result};
pub use tokenizer::TextTokenizer;
pub use weights::Weights;

use candle_core::Device;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// Where a pretrained model came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelFormat {
    /// A Hugging Face checkpoint directory.
    CheckpointDir,
    /// A GGUF file (weights dequantized).
    Gguf,
}

/// A pretrained model, ready to become a policy or a judge.
pub struct Pretrained {
    /// The directory or file it was read from.
    pub source: PathBuf,
    /// Which format that was.
    pub format: ModelFormat,
    /// Its shape and special ids.
    pub spec: DecoderSpec,
    /// Its weights (f32, Hugging Face names).
    pub weights: Weights,
    /// Its tokenizer.
    pub tokenizer: TextTokenizer,
    /// Its chat template, when it has one.
    pub chat_template: Option<ChatTemplate>,
    /// `tokenizer_config.json` as shipped (or, from GGUF, as transformers
    /// needs it), carried into exported checkpoints.
    pub tokenizer_config: Value,
    /// `generation_config.json`, when the checkpoint had one.
    pub generation_config: Option<Value>,
}

impl std::fmt::Debug for Pretrained {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pretrained")
            .field("source", &self.source)
            .field("format", &self.format)
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl Pretrained {
    /// Reads a checkpoint directory or a `.gguf` file onto `device`.
    pub fn load(path: &Path, device: &Device) -> Result<Self> {
        if path.is_dir() {
            Self::load_checkpoint_dir(path, device)
        } else if path.is_file() {
            Self::load_gguf(path, device)
        } else {
            Err(ModelError::format(
                path,
                "no such checkpoint directory or GGUF file",
            ))
        }
    }

    /// Reads a Hugging Face checkpoint directory.
    pub fn load_checkpoint_dir(dir: &Path, device: &Device) -> Result<Self> {
        let mut spec = DecoderSpec::from_config_json(dir)?;
        let generation_config = chat::read_json_if_present(&dir.join("generation_config.json"))?;
        // generation_config.json may name more end tokens than config.json.
        if let Some(ids) = generation_config
            .as_ref()
            .and_then(|g| g.get("eos_token_id"))
        {
            for id in ids.as_array().cloned().unwrap_or_else(|| vec![ids.clone()]) {
                if let Some(id) = id.as_u64().map(|v| v as u32)
                    && !spec.eos_token_ids.contains(&id)
                {
                    spec.eos_token_ids.push(id);
                }
            }
        }
        let mut weights = weights::load_safetensors_dir(dir, device)?;
        weights::check_shapes(&spec, &mut weights, dir)?;
        let tokenizer =
            TextTokenizer::from_tokenizer_json_for(&dir.join("tokenizer.json"), spec.vocab_size)?;
        let tokenizer_config = chat::read_json_if_present(&dir.join("tokenizer_config.json"))?
            .unwrap_or_else(|| json!({}));
        let chat_template = ChatTemplate::from_checkpoint_dir(dir)?;
        let model = Pretrained {
            source: dir.to_path_buf(),
            format: ModelFormat::CheckpointDir,
            spec,
            weights,
            tokenizer,
            chat_template,
            tokenizer_config,
            generation_config,
        };
        model.check_vocabulary()?;
        Ok(model)
    }

    /// Reads a GGUF file, dequantizing every tensor.
    pub fn load_gguf(path: &Path, device: &Device) -> Result<Self> {
        let (content, mut file) = gguf::read_content(path)?;
        let spec = gguf::spec(&content, path)?;
        let mut weights = gguf::weights(&content, &mut file, &spec, path, device)?;
        weights::check_shapes(&spec, &mut weights, path)?;
        let tokenizer = TextTokenizer::from_gguf_for(&content, path, spec.vocab_size)?;
        let text_of = |id: Option<u32>| {
            id.and_then(|id| tokenizer.id_to_token(id))
                .unwrap_or_default()
        };
        let bos = text_of(spec.bos_token_id);
        let eos = text_of(spec.eos_token_ids.first().copied());
        let chat_template = ChatTemplate::from_gguf(&content, path, &bos, &eos)?;
        let add_bos = content
            .metadata
            .get("tokenizer.ggml.add_bos_token")
            .and_then(|v| v.to_bool().ok())
            .unwrap_or(false);
        let padding = content
            .metadata
            .get("tokenizer.ggml.padding_token_id")
            .and_then(|v| v.to_u32().ok());
        let tokenizer_config = json!({
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": bos,
            "eos_token": eos,
            "pad_token": text_of(padding),
            "add_bos_token": add_bos,
            "clean_up_tokenization_spaces": false,
            "model_max_length": spec.max_position_embeddings,
        });
        let model = Pretrained {
            source: path.to_path_buf(),
            format: ModelFormat::Gguf,
            spec,
            weights,
            tokenizer,
            chat_template,
            tokenizer_config,
            generation_config: None,
        };
        model.check_vocabulary()?;
        Ok(model)
    }

    /// Refuses a tokenizer whose ids run past the embedding table.
    fn check_vocabulary(&self) -> Result<()> {
        let tokens = self.tokenizer.vocab_size();
        if tokens > self.spec.vocab_size {
            return Err(ModelError::format(
                &self.source,
                format!(
                    "the tokenizer has {tokens} tokens but the embedding table {} rows",
                    self.spec.vocab_size
                ),
            ));
        }
        Ok(())
    }

    /// The ids that end an answer: the model's end-of-sequence ids, and the
    /// end-of-turn token of a ChatML template when it has one.
    pub fn stop_ids(&self) -> Vec<u32> {
        let mut ids = self.spec.eos_token_ids.clone();
        if let Some(end) = self.tokenizer.token_to_id("<|im_end|>")
            && !ids.contains(&end)
        {
            ids.push(end);
        }
        ids
    }

    /// The id padding may use (never attended to): the configured pad
    /// token, else the first end id.
    pub fn pad_id(&self) -> u32 {
        let configured = match self.tokenizer_config.get("pad_token") {
            Some(Value::String(s)) => self.tokenizer.token_to_id(s),
            Some(Value::Object(o)) => o
                .get("content")
                .and_then(Value::as_str)
                .and_then(|s| self.tokenizer.token_to_id(s)),
            _ => None,
        };
        configured
            .or_else(|| self.stop_ids().first().copied())
            .unwrap_or(0)
    }
}
