//! Where a scaffolded plugin crate gets the SDK (`verifine-plugin-api`)
//! from: the published version that speaks this binary's contract, a git
//! repository, or a directory — a checkout's `plugin-api/`, or an unpacked
//! `cargo package` of the SDK beside the two crates it depends on.

use anyhow::{Context as _, Result, bail};
use std::path::{Path, PathBuf};

/// The SDK release built with this binary (the workspace shares one version).
pub const SDK_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The crates the SDK depends on, which an unpacked package set carries beside it.
const SDK_DEPENDENCIES: [&str; 2] = ["verifine-contract", "verifine-native-abi"];

/// How the scaffold depends on the SDK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SdkSource {
    /// `verifine-plugin-api = "VERSION"` from crates.io.
    Version(String),
    /// `verifine-plugin-api = { git = URL }`.
    Git(String),
    /// `verifine-plugin-api = { path = DIR }`.
    Path(PathBuf),
}

impl SdkSource {
    /// Reads `--sdk version [V]`, `--sdk git URL` or `--sdk path DIR`.
    pub fn parse(words: &[String]) -> Result<Self> {
        match words {
            [kind] if kind == "version" => Ok(SdkSource::Version(SDK_VERSION.to_string())),
            [kind, version] if kind == "version" => Ok(SdkSource::Version(version.clone())),
            [kind, url] if kind == "git" => Ok(SdkSource::Git(url.clone())),
            [kind, dir] if kind == "path" => Ok(SdkSource::Path(PathBuf::from(dir))),
            _ => bail!(
                "--sdk takes `version [VERSION]`, `git URL` or `path DIR`, not {:?}",
                words.join(" ")
            ),
        }
    }

    /// The default: inside a verifine checkout (the current directory or
    /// one above it holds `plugin-api/` and `wit/`), that checkout's SDK by
    /// path; elsewhere the version matching this binary.
    pub fn for_current_dir() -> Self {
        let cwd = std::env::current_dir().unwrap_or_default();
        cwd.ancestors()
            .map(|dir| dir.join("plugin-api"))
            .find(|sdk| is_sdk(sdk) && sdk.parent().is_some_and(|p| p.join("wit").is_dir()))
            .map_or_else(
                || SdkSource::Version(SDK_VERSION.to_string()),
                SdkSource::Path,
            )
    }

    /// The `[dependencies]` line and any `[patch.crates-io]` lines of the
    /// scaffold's manifest.
    pub fn manifest_lines(&self) -> Result<(String, String)> {
        let quoted = |text: &str| toml_string(text);
        Ok(match self {
            SdkSource::Version(version) => (
                format!("verifine-plugin-api = {}", quoted(version)),
                String::new(),
            ),
            SdkSource::Git(url) => (
                format!("verifine-plugin-api = {{ git = {} }}", quoted(url)),
                String::new(),
            ),
            SdkSource::Path(dir) => {
                let sdk = std::fs::canonicalize(dir)
                    .with_context(|| format!("--sdk path {}", dir.display()))?;
                if !is_sdk(&sdk) {
                    bail!(
                        "{} is not the SDK: no Cargo.toml naming verifine-plugin-api",
                        sdk.display()
                    );
                }
                let dependency = format!(
                    "verifine-plugin-api = {{ path = {} }}",
                    quoted(&sdk.display().to_string())
                );
                (dependency, unpacked_patches(&sdk))
            }
        })
    }
}

fn is_sdk(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("Cargo.toml")).is_ok_and(|m| {
        m.lines()
            .any(|l| l.trim() == "name = \"verifine-plugin-api\"")
    })
}

/// An unpacked SDK package names its dependencies by version; until they
/// are published, point them at the unpacked crates beside it
/// (`verifine-contract-0.1.0/`, …), when there are any.
fn unpacked_patches(sdk: &Path) -> String {
    let Some(parent) = sdk.parent() else {
        return String::new();
    };
    let mut lines = String::new();
    for name in SDK_DEPENDENCIES {
        let sibling = std::fs::read_dir(parent)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                    n == name || n.strip_prefix(name).is_some_and(|v| v.starts_with('-'))
                })
            })
            .find(|p| p.join("Cargo.toml").is_file());
        if let Some(dir) = sibling {
            lines.push_str(&format!(
                "{name} = {{ path = {} }}\n",
                toml_string(&dir.display().to_string())
            ));
        }
    }
    if lines.is_empty() {
        lines
    } else {
        format!(
            "\n# The unpacked SDK's own dependencies, not yet on crates.io.\n[patch.crates-io]\n{lines}"
        )
    }
}

fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}
