//! Training: the decoder model, the embedded arithmetic task and the GRPO
//! objective. Rewards come only through [`crate::scoring`]; nothing here
//! touches wasmtime.
//!
//! Status: the model, the tokenizer, the task generator, sampling and the
//! GRPO loss are in place and tested; the training loop (SFT, GRPO steps,
//! self-verification), checkpoints and `verifine train` are not yet written
//! (see the closing note of issue 3).

pub mod grpo;
pub mod model;
pub mod rollout;
pub mod task;
pub mod tokenizer;
