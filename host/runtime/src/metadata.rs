//! Reading and checking a plugin's metadata before anything is compiled.
//!
//! The guest SDK stamps `key=value` lines into the custom section
//! [`METADATA_SECTION`]; reading it needs only a parse of the binary, so a
//! plugin built for another contract version is refused in microseconds and
//! with both versions named, instead of failing obscurely at link time.

use semver::Version;
use std::fmt;
use thiserror::Error;
use wasmparser::{Encoding, Parser, Payload};

/// The contract version this host implements (`package verifine:plugin@…` in wit/).
pub const HOST_API_VERSION: &str = verifine_contract::VERSION;

/// Name of the custom section the SDK writes.
pub const METADATA_SECTION: &str = "verifine-plugin";

/// The four plugin kinds of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PluginKind {
    /// Judges samples against criteria.
    Rubric,
    /// Reduces a judgment to one reward.
    Aggregator,
    /// Chooses which prompts train next, and how often.
    Curriculum,
    /// Decides when the judge loop should start.
    Trigger,
}

impl PluginKind {
    /// Every kind, in contract order.
    pub const ALL: [PluginKind; 4] = [
        PluginKind::Rubric,
        PluginKind::Aggregator,
        PluginKind::Curriculum,
        PluginKind::Trigger,
    ];

    /// The kind's name in metadata, configs and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            PluginKind::Rubric => "rubric",
            PluginKind::Aggregator => "aggregator",
            PluginKind::Curriculum => "curriculum",
            PluginKind::Trigger => "trigger",
        }
    }

    /// The kind named `text` (`rubric`, `aggregator`, `curriculum`, `trigger`).
    pub fn parse(text: &str) -> Option<Self> {
        PluginKind::ALL.into_iter().find(|k| k.as_str() == text)
    }
}

impl std::str::FromStr for PluginKind {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        PluginKind::parse(text).ok_or_else(|| {
            format!("unknown kind {text:?}; one of rubric, aggregator, curriculum, trigger")
        })
    }
}

impl fmt::Display for PluginKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a plugin says about itself.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PluginMetadata {
    /// The plugin crate's name.
    pub name: String,
    /// The plugin crate's version.
    pub version: Version,
    /// The one kind the plugin exports.
    pub kind: PluginKind,
    /// The contract version its SDK was built against.
    pub api_version: Version,
}

/// Why a binary is not a loadable plugin.
#[derive(Debug, Error)]
pub enum MetadataError {
    /// The bytes do not parse as WebAssembly; carries the parser's error.
    #[error("not a WebAssembly binary: {0}")]
    NotWasm(String),
    /// A core module, not a component: built for the wrong target.
    #[error(
        "a core WebAssembly module, not a component: build the plugin for wasm32-wasip2 \
         (cargo build --target wasm32-wasip2)"
    )]
    CoreModule,
    /// No metadata section: not built with `export_plugin!`.
    #[error(
        "no `{METADATA_SECTION}` metadata section: build the plugin with verifine-plugin-api's \
         export_plugin! macro"
    )]
    Missing,
    /// More than one metadata section.
    #[error("several `{METADATA_SECTION}` sections; a plugin exports exactly one kind")]
    Duplicate,
    /// The section is there but unreadable; carries what is wrong.
    #[error("malformed plugin metadata: {0}")]
    Malformed(String),
    /// Built for a contract version this host does not implement.
    #[error(
        "plugin {name} was built for the verifine plugin API {plugin}, but this host implements \
         {host}: it needs the same major version and a minor version no newer than the host's"
    )]
    IncompatibleApi {
        /// The plugin's name.
        name: String,
        /// The contract version the plugin was built for.
        plugin: Version,
        /// The contract version this host implements.
        host: Version,
    },
}

/// Reads the metadata section of a component without compiling it.
pub fn read_metadata(bytes: &[u8]) -> Result<PluginMetadata, MetadataError> {
    if !bytes.starts_with(b"\0asm") {
        return Err(MetadataError::NotWasm(
            "no \\0asm magic header (is this a .wasm file?)".to_string(),
        ));
    }
    let mut section: Option<Vec<u8>> = None;
    for (i, payload) in Parser::new(0).parse_all(bytes).enumerate() {
        let payload = payload.map_err(|e| MetadataError::NotWasm(e.message().to_string()))?;
        match payload {
            Payload::Version {
                encoding: Encoding::Module,
                ..
            } if i == 0 => return Err(MetadataError::CoreModule),
            Payload::CustomSection(reader) if reader.name() == METADATA_SECTION => {
                if section.is_some() {
                    return Err(MetadataError::Duplicate);
                }
                section = Some(reader.data().to_vec());
            }
            _ => {}
        }
    }
    parse_section(&section.ok_or(MetadataError::Missing)?)
}

fn parse_section(data: &[u8]) -> Result<PluginMetadata, MetadataError> {
    let text = std::str::from_utf8(data).map_err(|e| MetadataError::Malformed(e.to_string()))?;
    let field = |key: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
            .map(str::to_string)
            .ok_or_else(|| MetadataError::Malformed(format!("missing `{key}`")))
    };
    let version = |key: &str| {
        let raw = field(key)?;
        Version::parse(&raw).map_err(|e| MetadataError::Malformed(format!("{key} {raw:?}: {e}")))
    };
    let kind_text = field("kind")?;
    let name = field("name")?;
    if !valid_name(&name) {
        return Err(MetadataError::Malformed(format!(
            "plugin name {:?}: 1 to {MAX_NAME_CHARS} characters of letters, digits, '-' and '_'",
            verifine_base::text::sanitize(&name, 80)
        )));
    }
    Ok(PluginMetadata {
        name,
        version: version("version")?,
        kind: PluginKind::parse(&kind_text)
            .ok_or_else(|| MetadataError::Malformed(format!("unknown kind {kind_text:?}")))?,
        api_version: version("api-version")?,
    })
}

/// The longest plugin name (cargo's limit for package names).
pub const MAX_NAME_CHARS: usize = 64;

/// Names go into every output row and log line: short and plain.
fn valid_name(name: &str) -> bool {
    (1..=MAX_NAME_CHARS).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Whether a plugin built against `plugin` runs on a host implementing `host`:
/// same major, and a minor no newer than the host's.
pub fn api_compatible(plugin: &Version, host: &Version) -> bool {
    plugin.major == host.major && plugin.minor <= host.minor
}

/// Refuses plugins built for another contract version, naming both versions.
pub fn check_api(metadata: &PluginMetadata) -> Result<(), MetadataError> {
    let host = Version::parse(HOST_API_VERSION).expect("valid host API version");
    if api_compatible(&metadata.api_version, &host) {
        Ok(())
    } else {
        Err(MetadataError::IncompatibleApi {
            name: metadata.name.clone(),
            plugin: metadata.api_version.clone(),
            host,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compatibility_rule() {
        let v = |s| Version::parse(s).unwrap();
        assert!(api_compatible(&v("0.1.0"), &v("0.1.3")));
        assert!(api_compatible(&v("1.0.0"), &v("1.2.0")));
        assert!(!api_compatible(&v("1.3.0"), &v("1.2.0")));
        assert!(!api_compatible(&v("9.0.0"), &v("0.1.0")));
    }

    #[test]
    fn host_version_matches_the_wit_package_it_binds() {
        // The bindings (bindings.rs) read this folder.
        let wit = include_str!("../../../wit/v0.3/verifine.wit");
        assert!(wit.contains(&format!("package verifine:plugin@{HOST_API_VERSION};")));
    }

    #[test]
    fn parses_the_sdk_format() {
        let m = parse_section(b"api-version=0.1.0\nkind=trigger\nname=t\nversion=1.2.3\n").unwrap();
        assert_eq!(m.kind, PluginKind::Trigger);
        assert_eq!(m.version, Version::new(1, 2, 3));
        assert!(matches!(
            parse_section(b"kind=judge\nname=x\nversion=1.0.0\napi-version=0.1.0"),
            Err(MetadataError::Malformed(_))
        ));
    }

    #[test]
    fn names_are_short_and_plain() {
        let section = |name: &str| {
            format!("api-version=0.1.0\nkind=rubric\nname={name}\nversion=1.0.0\n").into_bytes()
        };
        assert!(parse_section(&section("math-answer")).is_ok());
        for bad in [
            "x".repeat(65),
            "evil\u{1b}[2J".to_string(),
            "has space".to_string(),
            String::new(),
            "dots.and/slashes".to_string(),
        ] {
            let err = parse_section(&section(&bad)).unwrap_err().to_string();
            assert!(err.contains("plugin name"), "{err}");
            assert!(
                !err.contains('\u{1b}'),
                "the error itself is escaped: {err:?}"
            );
        }
    }

    #[test]
    fn refuses_core_modules_and_garbage() {
        let core_module = b"\0asm\x01\0\0\0";
        assert!(matches!(
            read_metadata(core_module),
            Err(MetadataError::CoreModule)
        ));
        assert!(matches!(
            read_metadata(b"not wasm"),
            Err(MetadataError::NotWasm(_))
        ));
    }
}
