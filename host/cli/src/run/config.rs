//! The file a user writes for `verifine train`: training's tables
//! ([`TrainConfig`]) plus the host's own, `[limits]` (the plugin sandbox),
//! `[hot_swap]` (live revisions) and `[judges]` (judge models). Every table is optional; names follow
//! TRL / verl where they exist, so configs carry over.

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
pub use verifine_hotswap::HotSwapConfig;
use verifine_runtime::Limits;
use verifine_train::TrainConfig;

/// The default run: `examples/arithmetic/train.toml`, embedded.
pub const DEFAULT_CONFIG: &str = include_str!("../../../../examples/arithmetic/train.toml");

/// The host's tables beside training's.
const HOST_TABLES: [&str; 3] = ["limits", "hot_swap", "judges"];

/// Judge models the run's plugins may ask (`[judges]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JudgesTable {
    /// A judges file (`examples/judges/judges.toml`'s format); relative to
    /// the working directory, and read again on `--resume`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
}

/// A whole run as configured. Read with [`RunConfig::from_toml`], which
/// parses training's tables and the host's from the same text, so an error
/// in either points at its line.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunConfig {
    /// What training does (its tables sit at the top level of the file).
    #[serde(flatten)]
    pub training: TrainConfig,
    /// Sandbox limits of the plugins.
    pub limits: Limits,
    /// Live plugin revisions.
    pub hot_swap: HotSwapConfig,
    /// Judge models for the plugins.
    pub judges: JudgesTable,
}

/// The host's tables of the file (training's keys are read beside them).
#[derive(Default, Deserialize)]
#[serde(default)]
struct HostTables {
    limits: Limits,
    hot_swap: HotSwapConfig,
    judges: JudgesTable,
}

impl RunConfig {
    /// Parses and checks a TOML config; errors name `origin`.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self> {
        let parsed =
            Self::parse(text).with_context(|| format!("invalid training config {origin}"))?;
        parsed
            .training
            .validate()
            .with_context(|| format!("invalid training config {origin}"))?;
        Ok(parsed)
    }

    /// Reads and checks a config file.
    pub fn load(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::from_toml(&text, &path.display().to_string())
    }

    /// The config as `config.toml` in a run directory holds it.
    pub fn to_toml(&self) -> Result<String> {
        Ok(toml::to_string_pretty(self)?)
    }

    fn parse(text: &str) -> Result<Self> {
        let table: toml::Table = toml::from_str(text)?;
        // Neither part refuses the other's top-level keys, so unknown ones
        // are refused here, against the keys a default config writes (every
        // top-level field of TrainConfig is a plain value or a table, so all
        // of them appear once the optional ones are set).
        let known = toml::Table::try_from(TrainConfig {
            init_from: Some(PathBuf::new()),
            ..TrainConfig::default()
        })?;
        for key in table.keys() {
            if !known.contains_key(key) && !HOST_TABLES.contains(&key.as_str()) {
                let mut expected: Vec<&str> = known.keys().map(String::as_str).collect();
                expected.extend(HOST_TABLES);
                let line = line_of_key(text, key)
                    .map_or_else(String::new, |line| format!("line {line}: "));
                bail!(
                    "{line}unknown field `{key}`, expected one of {}",
                    expected.join(", ")
                );
            }
        }
        // Each part straight from the text: errors keep their line and column.
        let training: TrainConfig = toml::from_str(text)?;
        let host: HostTables = toml::from_str(text)?;
        Ok(RunConfig {
            training,
            limits: host.limits,
            hot_swap: host.hot_swap,
            judges: host.judges,
        })
    }
}

/// The 1-based line where a top-level `key` is first written (`key = …`,
/// `key.sub = …`, `[key]`, `[key.sub]`, `[[key]]`).
fn line_of_key(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|line| {
            let line = line.trim_start().trim_start_matches('[').trim_start();
            line.strip_prefix(key)
                .is_some_and(|rest| rest.starts_with([' ', '=', '.', ']', '\t']))
        })
        .map(|index| index + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_config_is_the_default() {
        let shipped = RunConfig::from_toml(DEFAULT_CONFIG, "default").unwrap();
        assert_eq!(shipped.training.reward.rubric.plugin, "math-answer");
        assert_eq!(
            toml::to_string(&shipped).unwrap(),
            toml::to_string(&RunConfig::default()).unwrap()
        );
    }

    #[test]
    fn every_shipped_example_config_parses() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/arithmetic");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                RunConfig::load(&path).unwrap();
                seen += 1;
            }
        }
        assert!(seen >= 3, "train, self-verify and noisy-sft configs");
    }

    #[test]
    fn bad_settings_are_refused_with_the_file_named() {
        let err =
            RunConfig::from_toml("[sft]\nnoisy_target_share = 1.5\n", "bad.toml").unwrap_err();
        let text = format!("{err:#}");
        assert!(
            text.contains("bad.toml") && text.contains("noisy_target_share"),
            "{text}"
        );
        let err = RunConfig::from_toml("seed = 1\n[grpo]\nstep = 3\n", "typo.toml").unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains("step") && text.contains("line 3"), "{text}");
    }

    #[test]
    fn a_run_from_a_base_is_configured_with_init_from() {
        let text = "init_from = \"runs/base\"\n[sft]\nsteps = 0\n";
        let config = RunConfig::from_toml(text, "round.toml").unwrap();
        assert_eq!(config.training.init_from, Some(PathBuf::from("runs/base")));
        let saved = RunConfig::from_toml(&config.to_toml().unwrap(), "saved").unwrap();
        assert_eq!(saved.training.init_from, config.training.init_from);
        // SFT steps continue from the base.
        let more = RunConfig::from_toml("init_from = \"runs/base\"\n", "round.toml").unwrap();
        assert_eq!(
            more.training.sft.steps,
            verifine_train::config::SftConfig::default().steps
        );
    }

    #[test]
    fn unknown_tables_anywhere_are_refused() {
        for (text, key) in [
            ("seeed = 1\n", "seeed"),
            ("[limit]\nmemory_mib = 1\n", "limit"),
            ("[limits]\nmemory = 1\n", "memory"),
            ("[hot_swap]\nkeep = 1\n", "keep"),
            ("[model]\nwidth = 1\n", "width"),
        ] {
            let err = RunConfig::from_toml(text, "typo.toml").unwrap_err();
            let message = format!("{err:#}");
            assert!(
                message.contains(key) && message.contains("typo.toml"),
                "{message}"
            );
        }
    }
}
