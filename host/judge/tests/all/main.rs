//! The integration tests of the judge models, in one binary (one link instead of
//! one per file: wasmtime keeps a single `tests/all` for the same reason).
//! Each module is one file's specification.

mod common;

mod fuzz_models;
mod hostile_models;
mod hostile_servers;
mod http_judge;
mod llama_server;
mod local_judge;
mod real_models;
mod schema_answers;
