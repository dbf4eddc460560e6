//! Training: the decoder model, the embedded arithmetic task, the SFT and
//! GRPO objectives, self-verification rollouts, checkpoints and the
//! `verifine train` loop. Rewards and curriculum decisions come only through
//! the plugin runtime ([`crate::scoring`], [`crate::runtime`]); nothing here
//! touches wasmtime.

pub mod checkpoint;
pub mod config;
pub mod conversation;
pub mod grpo;
pub mod metrics_log;
pub mod model;
pub mod optim;
pub mod plot;
pub mod rollout;
pub mod sequences;
pub mod sft_data;
pub mod task;
pub mod tokenizer;
pub mod trainer;
