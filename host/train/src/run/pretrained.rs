//! A run whose policy is a pretrained model (`[model] from`): the base is
//! read once and kept (the frozen weights, the KL reference and the export
//! are built from it), fingerprinted so a resume refuses another base, and
//! written back at the end as a Hugging Face checkpoint (`hf/`) and, with
//! LoRA, a PEFT adapter (`adapter/`).

use crate::config::TrainConfig;
use crate::error::{Result, TrainError, ensure};
use crate::model::Decoder;
use candle_core::Device;
use candle_nn::VarMap;
use sha2::{Digest, Sha256};
use std::path::Path;
use verifine_models::Pretrained;
use verifine_models::export::{AdapterConfig, write_adapter, write_checkpoint};

/// The pretrained model a run starts from.
pub(crate) struct Base {
    /// The model as read (weights f32 on the run's device).
    pub model: Pretrained,
    /// sha256 over its files.
    pub fingerprint: String,
}

impl Base {
    /// Reads `[model] from`, if the config names one.
    pub(crate) fn load(config: &TrainConfig, device: &Device) -> Result<Option<Base>> {
        let Some(from) = &config.model.from else {
            return Ok(None);
        };
        ensure!(
            config.init_from.is_none(),
            "[model] from and init_from both name a starting point; keep one"
        );
        let fingerprint = fingerprint(from)?;
        let model = Pretrained::load(from, device)?;
        config
            .model
            .trainable_plan()
            .validate(model.spec.num_layers)?;
        tracing::info!(from = %from.display(), layers = model.spec.num_layers, hidden = model.spec.hidden_size, "pretrained policy");
        Ok(Some(Base { model, fingerprint }))
    }

    /// A decoder over the base weights, its trainable parts in `varmap`.
    pub(crate) fn decoder(&self, config: &TrainConfig, varmap: &VarMap) -> Result<Decoder> {
        Decoder::from_pretrained(
            &self.model.spec,
            &self.model.weights,
            config.model.max_seq_len,
            &config.model.trainable_plan(),
            varmap,
            config.seed,
        )
    }

    /// Writes `model`'s merged weights as a checkpoint into `run_dir/hf`,
    /// and its LoRA adapters into `run_dir/adapter`.
    pub(crate) fn export(
        &self,
        config: &TrainConfig,
        model: &Decoder,
        run_dir: &Path,
    ) -> Result<()> {
        write_checkpoint(&run_dir.join("hf"), &self.model, &model.merged_weights()?)?;
        if let (Some(lora), Some(adapter)) = (&config.model.lora, model.adapter_weights()?) {
            let adapter_config = AdapterConfig {
                r: lora.r,
                alpha: lora.alpha,
                dropout: lora.dropout,
                target_modules: lora
                    .target_modules
                    .iter()
                    .map(|m| m.peft_name().to_string())
                    .collect(),
                base_model: std::fs::canonicalize(&self.model.source)
                    .unwrap_or_else(|_| self.model.source.clone())
                    .display()
                    .to_string(),
            };
            write_adapter(&run_dir.join("adapter"), &adapter, &adapter_config)?;
        }
        Ok(())
    }
}

/// sha256 over a GGUF file, or over a checkpoint directory's files (name
/// and content, sorted by name).
pub(crate) fn fingerprint(path: &Path) -> Result<String> {
    let mut hasher = Sha256::new();
    let mut files = Vec::new();
    if path.is_dir() {
        for entry in std::fs::read_dir(path).map_err(|e| TrainError::io("listing", path, e))? {
            let entry = entry.map_err(|e| TrainError::io("listing", path, e))?;
            if entry.path().is_file() {
                files.push(entry.path());
            }
        }
        files.sort();
    } else {
        files.push(path.to_path_buf());
    }
    for file in files {
        hasher.update(
            file.file_name()
                .map(|n| n.as_encoded_bytes())
                .unwrap_or_default(),
        );
        let mut reader =
            std::fs::File::open(&file).map_err(|e| TrainError::io("opening", &file, e))?;
        std::io::copy(&mut reader, &mut hasher).map_err(|e| TrainError::io("reading", &file, e))?;
    }
    Ok(format!("{:x}", hasher.finalize()))
}
