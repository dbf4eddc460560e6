//! The integration tests of training, in one binary (one link instead of
//! one per file: wasmtime keeps a single `tests/all` for the same reason).
//! Each module is one file's specification.

mod common;

mod arms;
mod pretrained;
mod rounds;
mod rust_reward;
