//! Training: the decoder model, the embedded arithmetic task and the GRPO
//! objective. Rewards come only through [`crate::scoring`]; nothing here
//! touches wasmtime.
//!
//! Status: the model, the tokenizer, the task generator, sampling, the SFT
//! and GRPO losses and the optimizer are in place and tested; the training
//! loop that drives them (with self-verification rollouts and rewards from
//! plugins), checkpoints with resume and `verifine train` are not yet
//! written (see the closing note of issue 3).

pub mod grpo;
pub mod model;
pub mod optim;
pub mod rollout;
pub mod sequences;
pub mod task;
pub mod tokenizer;
