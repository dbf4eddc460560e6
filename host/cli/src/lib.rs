//! verifine: RL post-training whose verification logic — rubric judges,
//! reward aggregation, curriculum filters, training triggers — runs as
//! sandboxed, versioned WebAssembly components.
//!
//! This crate is the top layer: the command line ([`commands`], one file per
//! command) and the wiring of a training run to plugins (`run`, behind the
//! default `train` feature). The layers below are crates of their own:
//! `verifine-train` (candle; knows no plugin) and `verifine-hotswap` (live
//! revisions) on `verifine-runtime` (the sandbox, scoring, rows, statistics),
//! all on `verifine-base`.

#![warn(missing_docs)]

pub mod commands;
#[cfg(feature = "train")]
pub mod run;
pub mod sandbox;

/// What `verifine --version` prints: the tool's version, the plugin
/// contract it implements, and the contract versions whose components it
/// loads (every released minor of the current major up to the current one).
pub fn version_text() -> &'static str {
    static TEXT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        let current = verifine_contract::VERSION;
        let major = current.split('.').next().unwrap_or("0");
        let loads: Vec<&str> = verifine_contract::RELEASED
            .iter()
            .map(|(folder, _)| folder.trim_start_matches('v'))
            .filter(|v| v.split('.').next() == Some(major))
            .collect();
        format!(
            "{} (plugin contract verifine:plugin@{current}; loads components built against {})",
            env!("CARGO_PKG_VERSION"),
            loads.join(", ")
        )
    });
    &TEXT
}
