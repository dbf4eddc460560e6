//! The one wasmtime engine, its epoch ticker and the on-disk code cache.

use crate::code_cache::CodeCache;
use crate::error::RuntimeError;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use wasmtime::component::Component;
use wasmtime::{Config, Engine};

/// How often the engine's epoch advances; call deadlines are counted in ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// An engine configured for sandboxed plugins, with a thread that advances its
/// epoch so every call can be given a deadline. The ticker stops when the last
/// clone of the engine handle is dropped.
#[derive(Clone)]
pub struct SandboxEngine {
    engine: Engine,
    _ticker: Arc<Ticker>,
}

struct Ticker {
    stop: Arc<AtomicBool>,
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl SandboxEngine {
    /// A new engine with epoch interruption and its ticker thread.
    pub fn new() -> Result<Self, RuntimeError> {
        let mut config = Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        // For profiling guests: `VERIFINE_PERFMAP=1 perf record …` names plugin
        // functions (perf reads /tmp/perf-PID.map).
        if std::env::var_os("VERIFINE_PERFMAP").is_some() {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&config).map_err(|e| RuntimeError::Engine(format!("{e:#}")))?;

        let stop = Arc::new(AtomicBool::new(false));
        let weak = engine.weak();
        let stop_flag = stop.clone();
        std::thread::Builder::new()
            .name("verifine-epoch".into())
            .spawn(move || {
                while !stop_flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })
            .map_err(|e| RuntimeError::Engine(format!("starting the epoch thread: {e}")))?;
        Ok(SandboxEngine {
            engine,
            _ticker: Arc::new(Ticker { stop }),
        })
    }

    /// A process-wide shared engine, so compiled code is shared too.
    pub fn shared() -> Result<Self, RuntimeError> {
        static SHARED: OnceLock<SandboxEngine> = OnceLock::new();
        if let Some(engine) = SHARED.get() {
            return Ok(engine.clone());
        }
        let engine = SandboxEngine::new()?;
        Ok(SHARED.get_or_init(|| engine).clone())
    }

    /// The wasmtime engine itself, for linkers and stores.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Compiles `bytes`, or loads the machine code compiled earlier for the same
    /// bytes by a compatible engine. Cache problems never fail a load: the
    /// component is then compiled afresh.
    pub fn compile(
        &self,
        bytes: &[u8],
        sha256: &str,
        cache: Option<&CodeCache>,
    ) -> Result<Component, wasmtime::Error> {
        let Some(cache) = cache else {
            return Component::new(&self.engine, bytes);
        };
        let engine_key = self.compatibility_key();
        // `load` reads into memory rather than mapping the file (a mapping of
        // a file someone truncates later would fault while the code runs) and
        // returns only bytes whose tag verifies.
        if let Some(cached) = cache.load(sha256, &engine_key) {
            // SAFETY: the tag proves these are the bytes this user's runtime
            // serialized from the source with this sha256 on a compatible
            // engine (see code_cache.rs); wasmtime still checks the header.
            match unsafe { Component::deserialize(&self.engine, &cached) } {
                Ok(component) => return Ok(component),
                Err(e) => tracing::warn!("ignoring an unreadable cache entry: {e}"),
            }
        }
        let component = Component::new(&self.engine, bytes)?;
        if let Err(e) = cache.store(sha256, &engine_key, &component.serialize()?) {
            tracing::warn!("could not cache compiled code: {e}");
        }
        Ok(component)
    }

    /// A short key for "compiled code from this engine can be loaded by that one".
    fn compatibility_key(&self) -> String {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        self.engine
            .precompile_compatibility_hash()
            .hash(&mut hasher);
        format!("{:016x}", hasher.finish())
    }
}
