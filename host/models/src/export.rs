//! Writing a trained model back in the layout transformers (and PEFT)
//! load: a checkpoint directory with merged weights, `config.json`, the
//! tokenizer files and the chat template; and a LoRA adapter as
//! `adapter_model.safetensors` + `adapter_config.json`.
//!
//! Both are written into a sibling `*.partial` directory and renamed into
//! place, so a crash leaves the previous export or none, never half of one.

use crate::Pretrained;
use crate::error::{ModelError, Result};
use crate::weights::{Weights, save_safetensors};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use verifine_base::FileError;

/// Writes the checkpoint of `base` with `weights` (merged, Hugging Face
/// names) into `dir`, replacing what was there.
pub fn write_checkpoint(dir: &Path, base: &Pretrained, weights: &Weights) -> Result<()> {
    let tokenizer_json = base.tokenizer.to_tokenizer_json()?;
    in_fresh_dir(dir, |tmp| {
        save_safetensors(weights, &tmp.join("model.safetensors"))?;
        write_json(&tmp.join("config.json"), &base.spec.to_config_json())?;
        write_text(&tmp.join("tokenizer.json"), &tokenizer_json)?;
        let mut tokenizer_config = base.tokenizer_config.clone();
        if let Some(fields) = tokenizer_config.as_object_mut() {
            // The template travels as chat_template.jinja, as transformers
            // writes it now; one source only.
            fields.remove("chat_template");
        }
        write_json(&tmp.join("tokenizer_config.json"), &tokenizer_config)?;
        if let Some(template) = &base.chat_template {
            write_text(&tmp.join("chat_template.jinja"), template.source())?;
        }
        let generation = base.generation_config.clone().unwrap_or_else(
            || json!({"bos_token_id": base.spec.bos_token_id, "eos_token_id": base.stop_ids()}),
        );
        write_json(&tmp.join("generation_config.json"), &generation)
    })
}

/// A LoRA adapter as PEFT describes it.
#[derive(Debug, Clone)]
pub struct AdapterConfig {
    /// Rank.
    pub r: usize,
    /// Scale numerator (the update is `alpha / r · B A`).
    pub alpha: f64,
    /// Dropout on the adapter's input during training.
    pub dropout: f64,
    /// Adapted modules, as PEFT names them (`q_proj`, `v_proj` …).
    pub target_modules: Vec<String>,
    /// Where the base model is (recorded, as PEFT does).
    pub base_model: String,
}

/// Writes `adapter` (PEFT tensor names:
/// `base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight` …)
/// into `dir`.
pub fn write_adapter(dir: &Path, adapter: &Weights, config: &AdapterConfig) -> Result<()> {
    let json = json!({
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": config.r,
        "lora_alpha": config.alpha,
        "lora_dropout": config.dropout,
        "target_modules": config.target_modules,
        "bias": "none",
        "fan_in_fan_out": false,
        "inference_mode": true,
        "init_lora_weights": true,
        "use_rslora": false,
        "use_dora": false,
        "modules_to_save": null,
        "layers_to_transform": null,
        "base_model_name_or_path": config.base_model,
        "revision": null,
    });
    in_fresh_dir(dir, |tmp| {
        save_safetensors(adapter, &tmp.join("adapter_model.safetensors"))?;
        write_json(&tmp.join("adapter_config.json"), &json)
    })
}

/// Runs `write` on an empty `*.partial` sibling of `dir`, then puts it in
/// `dir`'s place.
fn in_fresh_dir(dir: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let name = dir
        .file_name()
        .ok_or_else(|| ModelError::format(dir, "not a directory name"))?
        .to_string_lossy();
    let partial: PathBuf = dir.with_file_name(format!("{name}.partial"));
    let old: PathBuf = dir.with_file_name(format!("{name}.old"));
    for stale in [&partial, &old] {
        if stale.exists() {
            std::fs::remove_dir_all(stale).map_err(|e| FileError::io("removing", stale, e))?;
        }
    }
    std::fs::create_dir_all(&partial).map_err(|e| FileError::io("creating", &partial, e))?;
    write(&partial)?;
    if dir.exists() {
        std::fs::rename(dir, &old).map_err(|e| FileError::io("renaming", dir, e))?;
    }
    std::fs::rename(&partial, dir).map_err(|e| FileError::io("renaming into", dir, e))?;
    if old.exists() {
        std::fs::remove_dir_all(&old).map_err(|e| FileError::io("removing", &old, e))?;
    }
    verifine_base::files::sync_parent(dir);
    Ok(())
}

fn write_json(path: &Path, value: &Value) -> Result<()> {
    let text =
        serde_json::to_string_pretty(value).map_err(|e| ModelError::format(path, e.to_string()))?;
    write_text(path, &text)
}

fn write_text(path: &Path, text: &str) -> Result<()> {
    verifine_base::write_atomically(path, |w| w.write_all(text.as_bytes()))?;
    Ok(())
}
