//! The one wasmtime engine, its epoch ticker and the on-disk code cache.

use crate::error::RuntimeError;
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
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
        cache: Option<&Path>,
    ) -> Result<Component, wasmtime::Error> {
        let Some(dir) = cache else {
            return Component::new(&self.engine, bytes);
        };
        let path = dir.join(format!("{sha256}-{}.cwasm", self.compatibility_key()));
        // Read into memory rather than map the file: a mapping of a file that
        // someone truncates later would fault (SIGBUS) while the code runs.
        if let Ok(cached) = std::fs::read(&path) {
            // SAFETY: cache entries are written only by `Component::serialize`
            // of an engine with the same compatibility hash, under a name keyed
            // by the sha256 of the source bytes, in the user's own cache
            // directory; wasmtime still checks the header and rejects other files.
            match unsafe { Component::deserialize(&self.engine, &cached) } {
                Ok(component) => return Ok(component),
                Err(e) => tracing::warn!("ignoring unreadable cache entry {}: {e}", path.display()),
            }
        }
        let component = Component::new(&self.engine, bytes)?;
        if let Err(e) = store_atomically(&path, &component.serialize()?) {
            tracing::warn!("could not cache compiled code at {}: {e}", path.display());
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

/// The default code cache: `$VERIFINE_CACHE_DIR`, else `$XDG_CACHE_HOME/verifine/code`,
/// else `~/.cache/verifine/code`; `None` when no home is known.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("VERIFINE_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("verifine").join("code"))
}

/// Hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Writes `bytes` to a temporary file beside `path` (an unpredictable name,
/// opened exclusively) and renames it into place.
pub fn store_atomically(path: &Path, bytes: &[u8]) -> Result<(), verifine_base::FileError> {
    verifine_base::write_atomically(path, |w| std::io::Write::write_all(w, bytes))
}
