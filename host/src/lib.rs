//! verifine: RL post-training whose verification logic — rubric judges,
//! reward aggregation, curriculum filters, training triggers — runs as
//! sandboxed, versioned WebAssembly components.
//!
//! Layers, top to bottom: [`commands`] (what the CLI runs) → [`training`]
//! (model, task, objective, the run loop) → [`hotswap`] (live revisions, the
//! gate, the inbox) → [`scoring`] (batches through plugins) → [`runtime`]
//! (the sandbox, and opt-in native plugins). [`rows`] (the JSONL formats),
//! [`data`] and [`stats`] are leaf utilities.

#![warn(missing_docs)]

pub mod commands;
pub mod data;
pub mod hotswap;
pub mod rows;
pub mod runtime;
pub mod scoring;
pub mod stats;
pub mod training;
