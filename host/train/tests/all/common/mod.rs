//! What the training integration tests share: a tiny run and a scratch
//! directory.

use std::path::PathBuf;
use verifine_train::TrainConfig;
use verifine_train::config::{CheckpointConfig, GrpoPhase, ModelSize, SftConfig};
use verifine_train::grpo::GrpoConfig;

/// A run small enough for a test: a 16-wide one-layer model, two SFT and two
/// GRPO steps, a checkpoint after every step.
pub fn tiny() -> TrainConfig {
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

/// A fresh scratch directory `verifine-<suite>-<name>-<pid>` (not created).
pub fn scratch(suite: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("verifine-{suite}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}
