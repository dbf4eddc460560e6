//! What tests of training and of the layers above share, and a smoke test
//! of a user's set-up: the smallest run that still exercises every part of
//! the loop. Always compiled: behind a feature that dev-dependencies switch
//! on, it gave `cargo test --workspace` its own copy of every crate above
//! training, built again for the CLI and the Python extension. A test that
//! needs another size changes fields of it
//! (`TrainConfig { sft: SftConfig { steps: 3, ..tiny.sft }, ..tiny }`), so
//! the shape is written once.

use crate::TrainConfig;
use crate::config::{CheckpointConfig, GrpoPhase, ModelSize, SftConfig};
use crate::grpo::GrpoConfig;

/// A run small enough for a test (a second or two): a 16-wide one-layer
/// model, 100 training problems, two SFT and two GRPO steps of two prompts
/// with two answers each, no periodic evaluation, a checkpoint after every
/// step.
pub fn tiny_config() -> TrainConfig {
    TrainConfig {
        train_problems: 100,
        heldout_problems: 8,
        eval_every: 0,
        vocab_size: 300,
        model: ModelSize {
            hidden_size: 16,
            num_layers: 1,
            num_heads: 2,
            num_kv_heads: 1,
            intermediate_size: 32,
            ..ModelSize::default()
        },
        sft: SftConfig {
            steps: 2,
            batch_size: 4,
            ..SftConfig::default()
        },
        grpo: GrpoPhase {
            steps: 2,
            prompts_per_step: 2,
            max_new_tokens: 8,
            objective: GrpoConfig {
                num_generations: 2,
                dynamic_sampling: false,
                ..GrpoConfig::default()
            },
            ..GrpoPhase::default()
        },
        checkpoints: CheckpointConfig { every: 1, keep: 10 },
        ..TrainConfig::default()
    }
}

/// ChatML, as a Jinja chat template: the tiny checkpoint's.
pub const CHATML_TEMPLATE: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/// Writes a random tiny llama checkpoint directory (`config.json`,
/// `model.safetensors`, a byte-level BPE `tokenizer.json` with
/// `<|im_start|>`/`<|im_end|>`, a ChatML template): a pretrained model
/// for tests of everything that starts from one. `norm_offset` is added
/// to every norm weight, so two calls can write two different bases.
pub fn write_tiny_checkpoint(dir: &std::path::Path, norm_offset: f64) -> crate::error::Result<()> {
    use candle_core::{Device, Tensor};
    use serde_json::json;
    use verifine_models::weights::{expected_shapes, save_safetensors};
    let io = |e: std::io::Error| crate::error::TrainError::io("writing", dir, e);
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut tokens: Vec<String> = tokenizers::pre_tokenizers::byte_level::ByteLevel::alphabet()
        .into_iter()
        .map(String::from)
        .collect();
    tokens.sort();
    let vocab: serde_json::Map<String, serde_json::Value> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), json!(i)))
        .collect();
    let (start, end) = (tokens.len(), tokens.len() + 1);
    let special = |id: usize, content: &str| json!({"id": id, "content": content, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true});
    let tokenizer = json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [special(start, "<|im_start|>"), special(end, "<|im_end|>")],
        "normalizer": null,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
        "post_processor": null,
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                  "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                  "vocab": vocab, "merges": []},
    });
    std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).map_err(io)?;
    let tokenizer_config = json!({"eos_token": "<|im_end|>", "chat_template": CHATML_TEMPLATE});
    std::fs::write(
        dir.join("tokenizer_config.json"),
        tokenizer_config.to_string(),
    )
    .map_err(io)?;
    let config = json!({
        "model_type": "llama", "vocab_size": end + 1, "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 64,
        "max_position_embeddings": 2048, "rope_theta": 10000.0, "rms_norm_eps": 1e-5,
        "tie_word_embeddings": false, "eos_token_id": end,
    });
    std::fs::write(dir.join("config.json"), config.to_string()).map_err(io)?;
    let spec = verifine_models::DecoderSpec::from_json(&config, dir)?;
    let weights: verifine_models::Weights = expected_shapes(&spec)
        .into_iter()
        .map(|(name, shape)| {
            let t = Tensor::randn(0f32, 0.2, shape, &Device::Cpu)?;
            let t = match name.ends_with("norm.weight") {
                true => (t.ones_like()? + norm_offset)?,
                false => t,
            };
            Ok((name, t))
        })
        .collect::<crate::error::Result<_>>()?;
    save_safetensors(&weights, &dir.join("model.safetensors"))?;
    Ok(())
}
