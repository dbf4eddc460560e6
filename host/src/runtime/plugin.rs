//! Loading plugins: resolve a name or path, check metadata, compile, pre-link.

use super::bindings::{aggregator, curriculum, rubric, trigger};
use super::builtin::{BUILTIN_PLUGINS, builtin_names};
use super::engine::{SandboxEngine, default_cache_dir, sha256_hex};
use super::host_state::HostState;
use super::instance::PluginInstance;
use super::metadata::{PluginKind, PluginMetadata, check_api, read_metadata};
use anyhow::{Context as _, Result, bail};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use wasmtime::component::{HasSelf, Linker};

/// Sandbox limits applied to every store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Wall-clock budget of one call (a whole batch), in milliseconds.
    pub call_timeout_ms: u64,
    /// Linear-memory cap of one plugin instance, in MiB.
    pub memory_mib: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            call_timeout_ms: 10_000,
            memory_mib: 256,
        }
    }
}

impl Limits {
    pub fn call_timeout(&self) -> Duration {
        Duration::from_millis(self.call_timeout_ms)
    }

    pub fn memory_bytes(&self) -> usize {
        usize::try_from(self.memory_mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
    }
}

/// Which plugin produced a result: name, version and the sha256 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Provenance {
    pub name: String,
    pub version: String,
    pub sha256: String,
}

/// Pre-linked code of one plugin, by kind: instantiating from it is cheap.
#[derive(Clone)]
pub(crate) enum KindPre {
    Rubric(rubric::RubricPre<HostState>),
    Aggregator(aggregator::AggregatorPre<HostState>),
    Curriculum(curriculum::CurriculumPre<HostState>),
    Trigger(trigger::TriggerPre<HostState>),
}

/// A loaded, checked and compiled plugin. Cheap to share; make a
/// [`PluginInstance`] per thread to call it.
pub struct Plugin {
    pub metadata: PluginMetadata,
    pub sha256: String,
    /// Where it came from: `builtin:NAME` or a file path.
    pub origin: String,
    pub(crate) pre: KindPre,
    pub(crate) engine: SandboxEngine,
    pub(crate) limits: Limits,
}

impl Plugin {
    pub fn provenance(&self) -> Provenance {
        Provenance {
            name: self.metadata.name.clone(),
            version: self.metadata.version.to_string(),
            sha256: self.sha256.clone(),
        }
    }

    pub fn kind(&self) -> PluginKind {
        self.metadata.kind
    }

    /// A fresh instance with its own store (instantiated on first call).
    pub fn instance(self: &Arc<Self>) -> PluginInstance {
        PluginInstance::new(self.clone())
    }
}

/// Loads plugins into one engine with one linker.
pub struct Runtime {
    engine: SandboxEngine,
    linker: Linker<HostState>,
    cache_dir: Option<PathBuf>,
    limits: Limits,
}

impl Runtime {
    /// A runtime on the shared engine, caching compiled code in the default
    /// cache directory.
    pub fn new(limits: Limits) -> Result<Self> {
        Self::with_cache(limits, default_cache_dir())
    }

    /// A runtime with an explicit code cache directory (`None`: no cache).
    pub fn with_cache(limits: Limits, cache_dir: Option<PathBuf>) -> Result<Self> {
        let engine = SandboxEngine::shared()?;
        let mut linker = Linker::new(engine.engine());
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        rubric::verifine::plugin::host::add_to_linker::<HostState, HasSelf<HostState>>(
            &mut linker,
            |state| state,
        )?;
        Ok(Runtime {
            engine,
            linker,
            cache_dir,
            limits,
        })
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Loads a built-in plugin by name, or a component file by path.
    pub fn load(&self, spec: &str) -> Result<Arc<Plugin>> {
        let path = Path::new(spec);
        if path.exists() || spec.ends_with(".wasm") || spec.contains(std::path::MAIN_SEPARATOR) {
            let bytes = std::fs::read(path)
                .with_context(|| format!("reading plugin {}", path.display()))?;
            return self
                .load_bytes(&bytes, &path.display().to_string())
                .with_context(|| format!("loading plugin {}", path.display()));
        }
        match BUILTIN_PLUGINS.iter().find(|(name, _)| *name == spec) {
            Some((name, bytes)) => self
                .load_bytes(bytes, &format!("builtin:{name}"))
                .with_context(|| format!("loading built-in plugin {name}")),
            None => bail!(
                "no plugin named {spec:?} and no such file; built-in plugins: {}",
                builtin_names().join(", ")
            ),
        }
    }

    /// Like [`Runtime::load`], and insists on the kind.
    pub fn load_kind(&self, spec: &str, kind: PluginKind) -> Result<Arc<Plugin>> {
        let plugin = self.load(spec)?;
        if plugin.kind() != kind {
            bail!(
                "plugin {} is a {} plugin, but a {kind} plugin is needed here",
                plugin.metadata.name,
                plugin.kind()
            );
        }
        Ok(plugin)
    }

    /// Checks metadata and API version, then compiles (or loads cached code)
    /// and pre-links. Nothing is compiled for a binary that fails the checks.
    pub fn load_bytes(&self, bytes: &[u8], origin: &str) -> Result<Arc<Plugin>> {
        let metadata = read_metadata(bytes)?;
        check_api(&metadata)?;
        let sha256 = sha256_hex(bytes);
        let component = self
            .engine
            .compile(bytes, &sha256, self.cache_dir.as_deref())?;
        let instance_pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(anyhow::Error::from)
            .with_context(|| {
                format!(
                    "plugin {} imports something the host does not provide",
                    metadata.name
                )
            })?;
        let not_exported = |interface: &str| {
            format!(
                "plugin {} says it is a {} plugin but does not export verifine:plugin/{interface}",
                metadata.name, metadata.kind
            )
        };
        let pre = match metadata.kind {
            PluginKind::Rubric => KindPre::Rubric(
                rubric::RubricPre::new(instance_pre)
                    .map_err(anyhow::Error::from)
                    .with_context(|| not_exported("rubric-plugin"))?,
            ),
            PluginKind::Aggregator => KindPre::Aggregator(
                aggregator::AggregatorPre::new(instance_pre)
                    .map_err(anyhow::Error::from)
                    .with_context(|| not_exported("aggregator-plugin"))?,
            ),
            PluginKind::Curriculum => KindPre::Curriculum(
                curriculum::CurriculumPre::new(instance_pre)
                    .map_err(anyhow::Error::from)
                    .with_context(|| not_exported("curriculum-plugin"))?,
            ),
            PluginKind::Trigger => KindPre::Trigger(
                trigger::TriggerPre::new(instance_pre)
                    .map_err(anyhow::Error::from)
                    .with_context(|| not_exported("trigger-plugin"))?,
            ),
        };
        Ok(Arc::new(Plugin {
            metadata,
            sha256,
            origin: origin.to_string(),
            pre,
            engine: self.engine.clone(),
            limits: self.limits,
        }))
    }
}
