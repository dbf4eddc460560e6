//! Training: the decoder model, the embedded arithmetic task and the GRPO
//! objective. Rewards come only through [`crate::scoring`]; nothing here
//! touches wasmtime.
//!
//! Status: model, tokenizer, task, sampling, SFT and GRPO losses, optimizer
//! and a first `verifine train` loop are in place; self-verification
//! rollouts, checkpoints with exact resume, the reference-model KL, the plot
//! and the benchmarks are not yet written (see the closing note of issue 3).

pub mod checkpoint;
pub mod grpo;
pub mod model;
pub mod optim;
pub mod rollout;
pub mod sequences;
pub mod task;
pub mod tokenizer;
pub mod trainer;
