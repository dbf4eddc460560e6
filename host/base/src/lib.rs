//! The vocabulary every verifine layer shares, and nothing heavy: which
//! plugin a setting names ([`PluginSpec`], [`PluginSetting`]), which revision
//! produced a result ([`Provenance`]), the seeded generator behind every
//! reproducible draw ([`SplitMix64`]), files that are never left half
//! written ([`files`]), repeated ids in files of any size ([`SeenIds`]), untrusted text made safe
//! to print ([`text`]), the sha256 that names a revision ([`sha256_hex`]),
//! and the font every plot draws its text with ([`PLOT_FONT`]).
//!
//! The sandbox runtime (wasmtime) and training (candle) both sit on this
//! crate, so it depends on neither.

#![warn(missing_docs)]

pub mod files;
mod plugin;
mod rng;
pub mod seen_ids;
pub mod text;
mod user_dirs;
mod write_behind;

pub use files::{
    FileError, read_jsonl, read_jsonl_if_exists, temporary_sibling, write_atomically, write_jsonl,
};
pub use plugin::{NATIVE_PREFIX, PluginSetting, PluginSpec, Provenance, sha256_hex};
pub use rng::{SplitMix64, os_random_u64};
pub use seen_ids::{IdHasher, Repeat, SeenIds};
pub use user_dirs::{default_cache_dir, user_path};

/// A score at or above this counts as correct: a total as a passed answer,
/// a verdict's score as met, a number as a positive label. One mark for
/// rewards, evaluations, agreement and the judge loop.
pub const PASS_MARK: f64 = 0.5;

/// DejaVu Sans Mono (see `assets/DejaVuSansMono.LICENSE`), bundled so
/// plots (training curves, co-evolution reports, verifier screens) need no
/// system font library.
pub const PLOT_FONT: &[u8] = include_bytes!("../assets/DejaVuSansMono.ttf");
