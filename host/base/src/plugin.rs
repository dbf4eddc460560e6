//! How settings name plugins, and how results name the revision that
//! produced them.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::path::PathBuf;

/// The prefix that marks a native (unsandboxed) plugin in a spec.
pub const NATIVE_PREFIX: &str = "native:";

/// Which plugin a setting names, as users write it: `math-answer`,
/// `path/to/rubric.wasm`, or `native:path/to/librubric.so`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PluginSpec {
    /// A bare name: the built-in plugin of that name; when no built-in has
    /// it, a component file of that name in the working directory.
    Name(String),
    /// A component file (the text ends in `.wasm` or holds a path separator).
    File(PathBuf),
    /// A trusted, unsandboxed native library (`native:PATH`), loaded only by
    /// a runtime that allows it.
    Native(PathBuf),
}

impl PluginSpec {
    /// Reads the text form; every text is some spec.
    pub fn parse(text: &str) -> Self {
        if let Some(path) = text.strip_prefix(NATIVE_PREFIX) {
            PluginSpec::Native(PathBuf::from(path))
        } else if text.ends_with(".wasm") || text.contains(std::path::MAIN_SEPARATOR) {
            PluginSpec::File(PathBuf::from(text))
        } else {
            PluginSpec::Name(text.to_string())
        }
    }
}

impl fmt::Display for PluginSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PluginSpec::Name(name) => f.write_str(name),
            PluginSpec::File(path) => write!(f, "{}", path.display()),
            PluginSpec::Native(path) => write!(f, "{NATIVE_PREFIX}{}", path.display()),
        }
    }
}

impl From<&str> for PluginSpec {
    fn from(text: &str) -> Self {
        PluginSpec::parse(text)
    }
}

impl From<&String> for PluginSpec {
    fn from(text: &String) -> Self {
        PluginSpec::parse(text)
    }
}

impl From<String> for PluginSpec {
    fn from(text: String) -> Self {
        PluginSpec::parse(&text)
    }
}

impl From<&PluginSpec> for PluginSpec {
    fn from(spec: &PluginSpec) -> Self {
        spec.clone()
    }
}

impl From<&std::path::Path> for PluginSpec {
    fn from(path: &std::path::Path) -> Self {
        PluginSpec::File(path.to_path_buf())
    }
}

impl std::str::FromStr for PluginSpec {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(PluginSpec::parse(text))
    }
}

impl PartialEq<&str> for PluginSpec {
    fn eq(&self, text: &&str) -> bool {
        *self == PluginSpec::parse(text)
    }
}

impl Serialize for PluginSpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PluginSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(PluginSpec::parse(&String::deserialize(deserializer)?))
    }
}

/// A plugin setting: which plugin, and its own config table.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PluginSetting {
    /// The plugin.
    pub plugin: PluginSpec,
    /// The plugin's own table, handed to it as JSON (empty when absent).
    #[serde(default)]
    pub config: toml::Table,
}

impl PluginSetting {
    /// A setting of `plugin` with an empty config table.
    pub fn new(plugin: impl Into<PluginSpec>) -> Self {
        PluginSetting {
            plugin: plugin.into(),
            config: toml::Table::new(),
        }
    }

    /// The plugin's table as the JSON object plugins receive.
    pub fn config_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.config).unwrap_or_else(|_| serde_json::json!({}))
    }
}

/// Which plugin produced a result: name, version and the sha256 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// The plugin's name, from its metadata.
    pub name: String,
    /// The plugin's version, from its metadata.
    pub version: String,
    /// Hex sha256 of the component bytes: pins the exact build.
    pub sha256: String,
}

/// Hex sha256 of `bytes`: what a [`Provenance`] names a revision by.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_read_and_print_as_users_write_them() {
        for (text, spec) in [
            ("math-answer", PluginSpec::Name("math-answer".into())),
            ("rubric.wasm", PluginSpec::File("rubric.wasm".into())),
            ("dir/rubric", PluginSpec::File("dir/rubric".into())),
            ("native:lib/x.so", PluginSpec::Native("lib/x.so".into())),
        ] {
            assert_eq!(PluginSpec::parse(text), spec);
            assert_eq!(spec.to_string(), text);
        }
    }
}
