//! verifine's integration tests, in one binary (one link instead of one
//! per file, as wasmtime keeps a single `tests/all`); each module is one
//! file's specification. The snapshot tests of the built-in plugins are a
//! binary of their own (`builtin_snapshots`), so their insta snapshot names
//! stay what the reviewed files in `tests/snapshots/` are called.

mod author_workflow;
mod book;
mod cli_contract;
mod contract_versions;
mod fuzz_inputs;
mod hostile_plugins;
mod hot_swap;
mod layers;
mod licenses;
mod module_cycles;
mod native_plugins;
mod real_data;
mod serve;
