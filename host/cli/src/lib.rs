//! verifine: RL post-training whose verification logic — rubric judges,
//! reward aggregation, curriculum filters, training triggers — runs as
//! sandboxed, versioned WebAssembly components.
//!
//! This crate is the top layer: the command line ([`commands`], one file per
//! command) and the wiring of a training run to plugins ([`run`], behind the
//! default `train` feature). The layers below are crates of their own:
//! `verifine-train` (candle; knows no plugin) and `verifine-hotswap` (live
//! revisions) on `verifine-runtime` (the sandbox, scoring, rows, statistics),
//! all on `verifine-base`.

#![warn(missing_docs)]

pub mod commands;
#[cfg(feature = "train")]
pub mod run;
