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
