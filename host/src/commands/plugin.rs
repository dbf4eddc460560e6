//! `verifine plugin list | inspect | check`.

use crate::runtime::builtin::builtin_names;
use crate::runtime::metadata::{check_api, read_metadata};
use crate::runtime::{
    Context, HOST_API_VERSION, MonitorPoint, PluginKind, PluginMetadata, RubricInfo, Runtime,
};
use anyhow::{Context as _, Result, bail};
use serde::Serialize;

/// One line of `plugin list`.
#[derive(Debug, Serialize)]
pub struct ListedPlugin {
    /// The built-in name, as `--rubric` and configs take it.
    pub name: String,
    /// The one kind the plugin exports.
    pub kind: PluginKind,
    /// The plugin's own version, from its metadata.
    pub version: String,
    /// Hex sha256 of the component bytes, as results stamp it.
    pub sha256: String,
}

/// The built-in plugins.
pub fn list(runtime: &Runtime) -> Result<Vec<ListedPlugin>> {
    builtin_names()
        .into_iter()
        .map(|name| {
            let plugin = runtime.load(name)?;
            Ok(ListedPlugin {
                name: name.to_string(),
                kind: plugin.kind(),
                version: plugin.metadata.version.to_string(),
                sha256: plugin.sha256.clone(),
            })
        })
        .collect()
}

/// What `plugin inspect` reports.
#[derive(Debug, Serialize)]
pub struct Inspection {
    /// The spec as given: a built-in name or a file path.
    pub origin: String,
    /// What the plugin's metadata section says.
    pub metadata: PluginMetadata,
    /// The contract version this host implements, to compare with `metadata.api_version`.
    pub host_api_version: &'static str,
    /// Whether this host can load it: same API major, minor no newer.
    pub compatible: bool,
    /// Hex sha256 of the component bytes.
    pub sha256: String,
    /// Size of the component, in bytes.
    pub size_bytes: usize,
    /// A rubric's description (criteria), when the plugin is a loadable rubric.
    pub rubric: Option<RubricInfo>,
}

/// Reads a plugin's metadata (and, for rubrics, its criteria) without running a batch.
pub fn inspect(runtime: &Runtime, spec: &str) -> Result<Inspection> {
    let bytes = plugin_bytes(spec)?;
    let metadata = read_metadata(&bytes).with_context(|| format!("inspecting {spec}"))?;
    let compatible = check_api(&metadata).is_ok();
    let rubric = if compatible && metadata.kind == PluginKind::Rubric {
        let plugin = runtime.load_bytes(&bytes, spec)?;
        Some(plugin.instance().describe()?)
    } else {
        None
    };
    Ok(Inspection {
        origin: spec.to_string(),
        sha256: crate::runtime::engine::sha256_hex(&bytes),
        size_bytes: bytes.len(),
        metadata,
        host_api_version: HOST_API_VERSION,
        compatible,
        rubric,
    })
}

/// Loads the plugin and makes one harmless call of its kind; any problem is an error.
pub fn check(runtime: &Runtime, spec: &str) -> Result<String> {
    let plugin = runtime.load(spec)?;
    let mut instance = plugin.instance();
    let ctx = Context {
        step: 0,
        round: 0,
        config: "{}".to_string(),
    };
    match plugin.kind() {
        PluginKind::Rubric => {
            let info = instance.describe()?;
            if info.name.is_empty() {
                bail!("rubric describes itself with an empty name");
            }
            instance.judge(&ctx, &[])?;
        }
        PluginKind::Aggregator => {
            instance.aggregate(&ctx, &[])?;
        }
        PluginKind::Curriculum => {
            instance.select(&ctx, &[])?.map_err(anyhow::Error::msg)?;
        }
        PluginKind::Trigger => {
            let point = MonitorPoint {
                step: 0,
                round: 0,
                evaluator_score: 0.0,
                judge_reward: 0.0,
            };
            instance
                .check(&ctx, &[point])?
                .map_err(anyhow::Error::msg)?;
        }
    }
    Ok(format!(
        "ok: {} {} ({} plugin, API {}, sha256 {})",
        plugin.metadata.name,
        plugin.metadata.version,
        plugin.kind(),
        plugin.metadata.api_version,
        plugin.sha256
    ))
}

fn plugin_bytes(spec: &str) -> Result<Vec<u8>> {
    if let Some((_, bytes)) = crate::runtime::builtin::BUILTIN_PLUGINS
        .iter()
        .find(|(name, _)| *name == spec)
    {
        return Ok(bytes.to_vec());
    }
    std::fs::read(spec).with_context(|| {
        format!(
            "reading {spec} (built-in plugins: {})",
            builtin_names().join(", ")
        )
    })
}
