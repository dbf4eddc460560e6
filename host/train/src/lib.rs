//! Training: the decoder model, the embedded arithmetic task, the SFT and
//! GRPO objectives, self-verification rollouts, checkpoints and the run
//! loop. Rewards, the step-boundary hook (hot-swap) and the SFT curriculum
//! come from the host through [`hooks`]; nothing here knows a plugin or
//! touches wasmtime.
//!
//! Reading order: [`run`] (the lifecycle), `run/grpo_step.rs` (one GRPO
//! step top to bottom), then [`grpo`], [`conversation`] and [`model`].

#![warn(missing_docs)]

pub mod checkpoint;
pub mod config;
pub mod conversation;
pub mod dataset;
pub mod error;
pub mod grpo;
pub mod hooks;
pub mod metrics_log;
pub mod model;
pub mod optim;
pub mod plot;
pub mod policy;
pub mod problem;
pub mod prompt_pool;
pub mod rollout;
pub mod run;
pub mod sequences;
pub mod sft_data;
pub mod sft_targets;
pub mod symbolic;
pub mod task;
pub mod test_support;
pub mod tokenizer;
pub mod verifier;

pub use config::TrainConfig;
pub use error::TrainError;
pub use policy::Policy;
pub use run::{
    HeldoutAnswer, PhaseSeconds, TrainSummary, checkpointed_config, ensure_new_run_dir, resume,
    train,
};
