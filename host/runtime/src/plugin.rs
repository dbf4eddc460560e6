//! Loading plugins: resolve a name or path, check metadata, compile, pre-link;
//! or, for `native:PATH` on a runtime that allows it, load a native library.

use super::builtin::{BUILTIN_PLUGINS, builtin_names};
use super::code_cache::CodeCache;
use super::engine::SandboxEngine;
use super::host_state::HostState;
use super::judge_models::{NoJudgeModels, SharedJudgeModels};
use super::metadata::{PluginKind, PluginMetadata, check_api, read_metadata};
#[cfg(feature = "native")]
use super::native::NativePlugin;
use super::versions::KindPre;
use crate::error::{Result, RuntimeError};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use verifine_base::default_cache_dir;
use verifine_base::sha256_hex;
use verifine_base::{PluginSpec, Provenance};
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
    /// The call budget as a duration.
    pub fn call_timeout(&self) -> Duration {
        Duration::from_millis(self.call_timeout_ms)
    }

    /// The memory cap in bytes (saturating on 32-bit hosts).
    pub fn memory_bytes(&self) -> usize {
        usize::try_from(self.memory_mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
    }
}

/// A component's compiled code and the sandbox it runs in.
pub(crate) struct WasmCode {
    pub(crate) pre: KindPre,
    pub(crate) engine: SandboxEngine,
    pub(crate) limits: Limits,
    /// Who answers the plugin's `judge-model` calls.
    pub(crate) judges: SharedJudgeModels,
}

/// How a plugin runs. Native plugins live here, one level below
/// [`crate::scoring::RewardPlugins`] and [`PluginInstance`](crate::PluginInstance), so everything that
/// scores through a `Plugin` takes them without change.
pub(crate) enum Code {
    /// A sandboxed component.
    Wasm(WasmCode),
    /// A trusted, unsandboxed native library (loaded only on opt-in).
    #[cfg(feature = "native")]
    Native(NativePlugin),
}

/// A loaded and checked plugin: a compiled component or, only when the
/// runtime allows it, a native library. Cheap to share; make a
/// [`PluginInstance`](crate::PluginInstance) per thread to call it.
pub struct Plugin {
    /// What its metadata (section or native table) says, already checked
    /// against this host.
    pub metadata: PluginMetadata,
    /// Hex sha256 of the component bytes, or of the native library file.
    pub sha256: String,
    /// Where it came from: `builtin:NAME`, a file path or `native:PATH`.
    pub origin: String,
    pub(crate) code: Code,
}

impl Plugin {
    /// Name, version and sha256, to stamp on every result this plugin produces.
    pub fn provenance(&self) -> Provenance {
        Provenance {
            name: self.metadata.name.clone(),
            version: self.metadata.version.to_string(),
            sha256: self.sha256.clone(),
        }
    }

    /// The kind the plugin declares (and was checked to export).
    pub fn kind(&self) -> PluginKind {
        self.metadata.kind
    }

    /// The same compiled component, its `judge-model` queries answered by
    /// `judges` instead of the runtime's: a judge revision that retrains
    /// the model behind a rubric swaps the model, not the code, and
    /// compiles nothing. A native plugin asks no judge models and is
    /// returned as it is.
    pub fn asking(self: &Arc<Self>, judges: SharedJudgeModels) -> Arc<Self> {
        match &self.code {
            Code::Wasm(wasm) => Arc::new(Plugin {
                metadata: self.metadata.clone(),
                sha256: self.sha256.clone(),
                origin: self.origin.clone(),
                code: Code::Wasm(WasmCode {
                    pre: wasm.pre.clone(),
                    engine: wasm.engine.clone(),
                    limits: wasm.limits,
                    judges,
                }),
            }),
            #[cfg(feature = "native")]
            Code::Native(_) => self.clone(),
        }
    }

    #[cfg(feature = "native")]
    /// The native library behind this plugin; `None` for a sandboxed component.
    pub fn native(&self) -> Option<&NativePlugin> {
        match &self.code {
            Code::Native(native) => Some(native),
            Code::Wasm(_) => None,
        }
    }

    #[cfg(feature = "native")]
    /// Wraps a loaded native plugin so it scores wherever a component does.
    pub fn from_native(native: NativePlugin) -> Arc<Self> {
        Arc::new(Plugin {
            metadata: native.metadata().clone(),
            sha256: native.sha256().to_string(),
            origin: format!(
                "{}{}",
                verifine_base::NATIVE_PREFIX,
                native.path().display()
            ),
            code: Code::Native(native),
        })
    }
}

/// The component bytes a spec names (a built-in plugin's, or a file's) and
/// the origin to record: `builtin:NAME` or the path.
pub fn spec_bytes(spec: impl Into<PluginSpec>) -> Result<(Vec<u8>, String)> {
    let spec = spec.into();
    let path = match &spec {
        PluginSpec::Name(name) => {
            if let Some((name, bytes)) = BUILTIN_PLUGINS.iter().find(|(n, _)| n == name) {
                return Ok((bytes.to_vec(), format!("builtin:{name}")));
            }
            let path = Path::new(name);
            if !path.exists() {
                return Err(RuntimeError::UnknownPlugin {
                    name: name.clone(),
                    builtins: builtin_names().join(", "),
                });
            }
            path
        }
        PluginSpec::File(path) => path.as_path(),
        PluginSpec::Native(_) => {
            return Err(RuntimeError::NotAComponent {
                spec: spec.to_string(),
            });
        }
    };
    let bytes = std::fs::read(path).map_err(|e| RuntimeError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    Ok((bytes, path.display().to_string()))
}

/// Loads plugins into one engine with one linker.
pub struct Runtime {
    engine: SandboxEngine,
    linker: Linker<HostState>,
    cache: Option<CodeCache>,
    limits: Limits,
    allow_native: bool,
    judges: SharedJudgeModels,
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
        let engine_error = |e: wasmtime::Error| RuntimeError::Engine(format!("{e:#}"));
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(engine_error)?;
        crate::host_state::forbid_waiting(&mut linker).map_err(engine_error)?;
        crate::bindings::rubric::verifine::plugin::host::add_to_linker::<
            HostState,
            HasSelf<HostState>,
        >(&mut linker, |state| state)
        .map_err(engine_error)?;
        crate::bindings::v0_2::rubric::verifine::plugin::host::add_to_linker::<
            HostState,
            HasSelf<HostState>,
        >(&mut linker, |state| state)
        .map_err(engine_error)?;
        crate::bindings::v0_1::rubric::verifine::plugin::host::add_to_linker::<
            HostState,
            HasSelf<HostState>,
        >(&mut linker, |state| state)
        .map_err(engine_error)?;
        Ok(Runtime {
            engine,
            linker,
            cache: cache_dir.and_then(CodeCache::open),
            limits,
            allow_native: false,
            judges: Arc::new(NoJudgeModels),
        })
    }

    /// Lets [`Runtime::load`] accept `native:PATH` specs. Off by default:
    /// native plugins are not sandboxed, so only a user's explicit opt-in
    /// (`verifine score --allow-native`) should turn this on.
    pub fn allow_native(mut self, allow: bool) -> Self {
        self.allow_native = allow;
        self
    }

    /// The judge models that answer `judge-model` for every plugin this
    /// runtime loads from now on (by default, none: each query fails with
    /// "no judge model configured").
    pub fn with_judges(mut self, judges: SharedJudgeModels) -> Self {
        self.judges = judges;
        self
    }

    /// The limits every instance of this runtime's plugins gets.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Loads a built-in plugin by name, or a component file by path. A bare
    /// name that matches a built-in plugin means the built-in one.
    /// `native:PATH` loads a native library, refused unless
    /// [`Runtime::allow_native`] was set.
    pub fn load(&self, spec: impl Into<PluginSpec>) -> Result<Arc<Plugin>> {
        let spec = spec.into();
        if let PluginSpec::Native(path) = &spec {
            return self.load_native(path);
        }
        let (bytes, origin) = spec_bytes(spec)?;
        self.load_bytes(&bytes, &origin)
    }

    /// Like [`Runtime::load`], and insists on the kind.
    pub fn load_kind(&self, spec: impl Into<PluginSpec>, kind: PluginKind) -> Result<Arc<Plugin>> {
        let plugin = self.load(spec)?;
        if plugin.kind() != kind {
            return Err(RuntimeError::WrongKind {
                plugin: plugin.metadata.name.clone(),
                actual: plugin.kind(),
                needed: kind,
            });
        }
        Ok(plugin)
    }

    #[cfg(feature = "native")]
    fn load_native(&self, path: &Path) -> Result<Arc<Plugin>> {
        let native = NativePlugin::load(path, self.allow_native)?;
        Ok(Plugin::from_native(native))
    }

    #[cfg(not(feature = "native"))]
    fn load_native(&self, path: &Path) -> Result<Arc<Plugin>> {
        Err(RuntimeError::Native(format!(
            "native plugin {}: this build of verifine has no native plugin support \
             (verifine-runtime's `native` feature)",
            path.display()
        )))
    }

    /// Checks metadata and API version, then compiles (or loads cached code)
    /// and pre-links. Nothing is compiled for a binary that fails the checks.
    pub fn load_bytes(&self, bytes: &[u8], origin: &str) -> Result<Arc<Plugin>> {
        let metadata_error = |error| RuntimeError::Metadata {
            origin: origin.to_string(),
            error: Box::new(error),
        };
        let metadata = read_metadata(bytes).map_err(metadata_error)?;
        check_api(&metadata).map_err(metadata_error)?;
        let sha256 = sha256_hex(bytes);
        let component = self
            .engine
            .compile(bytes, &sha256, self.cache.as_ref())
            .map_err(|e| RuntimeError::Compile {
                origin: origin.to_string(),
                message: format!("{e:#}"),
            })?;
        let instance_pre =
            self.linker
                .instantiate_pre(&component)
                .map_err(|e| RuntimeError::Imports {
                    origin: origin.to_string(),
                    plugin: metadata.name.clone(),
                    message: format!("{e:#}"),
                })?;
        let not_exported = |e: wasmtime::Error| RuntimeError::NotExported {
            origin: origin.to_string(),
            plugin: metadata.name.clone(),
            kind: metadata.kind,
            message: format!("{e:#}"),
        };
        let pre = KindPre::new(metadata.kind, metadata.api_version.minor, instance_pre)
            .map_err(not_exported)?;
        Ok(Arc::new(Plugin {
            metadata,
            sha256,
            origin: origin.to_string(),
            code: Code::Wasm(WasmCode {
                pre,
                engine: self.engine.clone(),
                limits: self.limits,
                judges: self.judges.clone(),
            }),
        }))
    }
}

#[cfg(test)]
#[path = "plugin_tests.rs"]
mod tests;
