//! Native plugins: the trusted fast path.
//!
//! A native plugin is the same plugin crate built for the host target as a
//! `cdylib` (`export_native_plugin!` in the SDK). It is loaded with `dlopen`
//! into the host's own process, so it is **not sandboxed**: it can read and
//! write files, reach the network, exhaust memory, loop forever or crash the
//! host, and no per-call time or memory limit applies. That is why it is never
//! loaded unless the caller opts in ([`NativePlugin::load`]'s `allow`,
//! `verifine score --allow-native`), and why hot-swap stays WebAssembly-only.
//!
//! What is kept from the component path: the table is checked before any call
//! (layout version, then the contract version under the same rule as
//! components), a result count that differs from the input count is an error,
//! and a panic in the plugin comes back as [`PluginError::Trap`] instead of
//! unwinding into the host. Arguments and results cross the C ABI in postcard,
//! a compact binary serde format (JSON cost more than the sandbox's own
//! boundary on batches of samples, and lost non-finite floats).

use super::bindings::{
    Candidate, Context, CurriculumDecision, Judgment, MonitorPoint, RubricInfo, Sample, Scoring,
    TriggerDecision,
};
use super::error::PluginError;
use super::metadata::{PluginKind, PluginMetadata, check_api};
use crate::error::{Result, RuntimeError};
use libloading::Library;
use semver::Version;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::ffi::{CStr, c_char};
use std::path::{Path, PathBuf};
use verifine_base::Provenance;
use verifine_base::sha256_hex;
use verifine_native_abi as abi;

/// The spec prefix that names a native plugin: `native:PATH`.
pub const NATIVE_PREFIX: &str = "native:";

/// The opt-in switch, as users meet it: named in every refusal.
pub const OPT_IN_FLAG: &str = "--allow-native";

/// A loaded native plugin; the library stays mapped as long as this lives.
///
/// Calls take `&self` and may come from several threads at once: the SDK's
/// dispatch is stateless, and a Rust plugin's own statics are `Sync`.
pub struct NativePlugin {
    metadata: PluginMetadata,
    sha256: String,
    path: PathBuf,
    call: abi::CallFn,
    free: abi::FreeFn,
    // Keeps the code behind `call` and `free` mapped; declared last so it is
    // dropped after everything that could refer into it.
    _library: Library,
}

impl std::fmt::Debug for NativePlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativePlugin")
            .field("metadata", &self.metadata)
            .field("sha256", &self.sha256)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Why a native plugin was not loaded: it names the path, that native plugins
/// are not sandboxed, and how to opt in.
fn not_allowed(path: &Path) -> RuntimeError {
    RuntimeError::Native(format!(
        "refusing to load native plugin {}: native plugins are not sandboxed (they run inside \
         the host process with its full privileges and no memory or time limit); load one only \
         if you trust its code, by passing {OPT_IN_FLAG} to `verifine score` (or allow = true \
         to NativePlugin::load)",
        path.display()
    ))
}

impl NativePlugin {
    /// Loads the shared library at `path` and checks its table: layout
    /// version, kind, and the contract version (same major, minor no newer
    /// than the host's — the rule for components). Refuses outright, before
    /// touching the file, unless `allow` is true.
    pub fn load(path: impl AsRef<Path>, allow: bool) -> Result<Self> {
        let path = path.as_ref();
        if !allow {
            return Err(not_allowed(path));
        }
        // dlopen searches system directories for a bare file name; the
        // canonical path makes it load exactly the file that was hashed.
        let unreadable = |e: std::io::Error| {
            RuntimeError::Native(format!("reading native plugin {}: {e}", path.display()))
        };
        let path = std::fs::canonicalize(path).map_err(unreadable)?;
        let bytes = std::fs::read(&path).map_err(unreadable)?;
        let sha256 = sha256_hex(&bytes);
        drop(bytes);

        // SAFETY: loading runs the library's initializers with the host's
        // privileges; that is the trust the caller granted with `allow`.
        let library = unsafe { Library::new(&path) }.map_err(|e| {
            RuntimeError::Native(format!("loading native plugin {}: {e}", path.display()))
        })?;
        // SAFETY: the SDK exports this symbol with exactly this signature.
        let entry = unsafe {
            library.get::<unsafe extern "C" fn() -> *const abi::NativePluginV0>(abi::SYMBOL)
        }
        .map_err(|e| {
            RuntimeError::Native(format!(
                "{} is not a verifine native plugin: it exports no `{}` ({e}); build it with \
                 verifine-plugin-api's export_native_plugin! macro",
                path.display(),
                abi::SYMBOL
            ))
        })?;
        // SAFETY: as above; the function only returns a pointer to a static.
        let table = unsafe { entry() };
        if table.is_null() {
            return Err(RuntimeError::Native(format!(
                "native plugin {} returned no table",
                path.display()
            )));
        }
        // Every layout starts with its version: read that alone first.
        // SAFETY: non-null, and every table layout begins with a u32.
        let table_version = unsafe { table.cast::<u32>().read() };
        if table_version != abi::TABLE_VERSION {
            return Err(RuntimeError::Native(format!(
                "native plugin {} has table layout version {table_version}, but this host reads \
                 layout version {}: rebuild the plugin with a matching verifine-plugin-api",
                path.display(),
                abi::TABLE_VERSION
            )));
        }
        // SAFETY: the layout version says this is a `NativePluginV0`, a static
        // of the library, which outlives every use below.
        let table = unsafe { &*table };
        let name = static_str(table.name, "name", &path)?;
        let version = static_str(table.version, "version", &path)?;
        let kind = match table.kind {
            abi::KIND_RUBRIC => PluginKind::Rubric,
            abi::KIND_AGGREGATOR => PluginKind::Aggregator,
            abi::KIND_CURRICULUM => PluginKind::Curriculum,
            abi::KIND_TRIGGER => PluginKind::Trigger,
            other => {
                return Err(RuntimeError::Native(format!(
                    "native plugin {name} declares unknown kind {other}"
                )));
            }
        };
        let metadata = PluginMetadata {
            version: Version::parse(&version).map_err(|e| {
                RuntimeError::Native(format!("native plugin {name} has version {version:?}: {e}"))
            })?,
            name,
            kind,
            api_version: Version::new(
                table.api_major.into(),
                table.api_minor.into(),
                table.api_patch.into(),
            ),
        };
        check_api(&metadata)
            .map_err(|e| RuntimeError::Native(format!("native plugin {}: {e}", path.display())))?;
        Ok(NativePlugin {
            metadata,
            sha256,
            call: table.call,
            free: table.free,
            path,
            _library: library,
        })
    }

    /// What the table says about the plugin (checked against this host).
    pub fn metadata(&self) -> &PluginMetadata {
        &self.metadata
    }

    /// Hex sha256 of the library file, which pins the exact build in results.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The canonical path the library was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Name, version and the library's sha256, to stamp on results.
    pub fn provenance(&self) -> Provenance {
        Provenance {
            name: self.metadata.name.clone(),
            version: self.metadata.version.to_string(),
            sha256: self.sha256.clone(),
        }
    }

    /// A rubric's name, version and criteria.
    pub fn describe(&self) -> Result<RubricInfo, PluginError> {
        self.invoke("describe", PluginKind::Rubric, abi::CALL_DESCRIBE, &())
    }

    /// Judges a batch: one result per sample, in order.
    pub fn judge(
        &self,
        ctx: &Context,
        samples: &[Sample],
    ) -> Result<Vec<Result<Judgment, String>>, PluginError> {
        let results = self.invoke(
            "judge",
            PluginKind::Rubric,
            abi::CALL_JUDGE,
            &(ctx, samples),
        )?;
        self.expect_count("judge", results, samples.len())
    }

    /// Aggregates a batch: one reward (none when undefined, or an error) per item, in order.
    pub fn aggregate(
        &self,
        ctx: &Context,
        items: &[Scoring],
    ) -> Result<Vec<Result<Option<f64>, String>>, PluginError> {
        let results = self.invoke(
            "aggregate",
            PluginKind::Aggregator,
            abi::CALL_AGGREGATE,
            &(ctx, items),
        )?;
        self.expect_count("aggregate", results, items.len())
    }

    /// Curriculum decisions for a batch of candidates, in order.
    pub fn select(
        &self,
        ctx: &Context,
        candidates: &[Candidate],
    ) -> Result<Result<Vec<CurriculumDecision>, String>, PluginError> {
        let result: Result<Vec<CurriculumDecision>, String> = self.invoke(
            "select",
            PluginKind::Curriculum,
            abi::CALL_SELECT,
            &(ctx, candidates),
        )?;
        match result {
            Ok(decisions) => self
                .expect_count("select", decisions, candidates.len())
                .map(Ok),
            Err(e) => Ok(Err(e)),
        }
    }

    /// Whether the trigger fires at the last point of `history`.
    pub fn check(
        &self,
        ctx: &Context,
        history: &[MonitorPoint],
    ) -> Result<Result<TriggerDecision, String>, PluginError> {
        self.invoke(
            "check",
            PluginKind::Trigger,
            abi::CALL_CHECK,
            &(ctx, history),
        )
    }

    /// One call through the table: encoded arguments in, the encoded result (or a message) out, the
    /// output buffer handed back to the plugin's own allocator in every case.
    fn invoke<O: DeserializeOwned>(
        &self,
        call: &'static str,
        kind: PluginKind,
        function: u32,
        input: &impl Serialize,
    ) -> Result<O, PluginError> {
        if self.metadata.kind != kind {
            return Err(PluginError::WrongKind {
                plugin: self.metadata.name.clone(),
                kind: self.metadata.kind.to_string(),
                call,
            });
        }
        let contract = |message: String| PluginError::Contract {
            plugin: self.metadata.name.clone(),
            call,
            message,
        };
        let input = postcard::to_stdvec(input)
            .map_err(|e| contract(format!("arguments not encodable: {e}")))?;
        let mut buffer = abi::NativeBuffer::empty();
        // SAFETY: `input` is live for the call and `buffer` is writable; the
        // plugin was checked to speak this table layout.
        let status = unsafe { (self.call)(function, input.as_ptr(), input.len(), &mut buffer) };
        let output = Output {
            buffer,
            free: self.free,
        };
        let bytes = output.bytes();
        match status {
            abi::STATUS_OK => postcard::from_bytes(bytes)
                .map_err(|e| contract(format!("result not decodable: {e}"))),
            abi::STATUS_PANIC => Err(PluginError::Trap {
                plugin: self.metadata.name.clone(),
                call,
                message: String::from_utf8_lossy(bytes).into_owned(),
            }),
            abi::STATUS_ERROR => Err(contract(String::from_utf8_lossy(bytes).into_owned())),
            other => Err(contract(format!(
                "unknown status {other}: {}",
                String::from_utf8_lossy(bytes)
            ))),
        }
    }

    /// A result count that differs from the input count is an error, never broadcast.
    fn expect_count<T>(
        &self,
        call: &'static str,
        results: Vec<T>,
        expected: usize,
    ) -> Result<Vec<T>, PluginError> {
        super::error::check_count(&self.metadata.name, call, results, expected)
    }
}

/// An output buffer, released through the plugin's `free` when dropped.
struct Output {
    buffer: abi::NativeBuffer,
    free: abi::FreeFn,
}

impl Output {
    fn bytes(&self) -> &[u8] {
        if self.buffer.ptr.is_null() || self.buffer.len == 0 {
            return &[];
        }
        // SAFETY: the plugin wrote `len` initialized bytes at `ptr`; they stay
        // valid until `free`, which only runs when `self` drops.
        unsafe { std::slice::from_raw_parts(self.buffer.ptr, self.buffer.len) }
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        let buffer = std::mem::replace(&mut self.buffer, abi::NativeBuffer::empty());
        if !buffer.ptr.is_null() {
            // SAFETY: the buffer came unchanged from this plugin's `call`.
            unsafe { (self.free)(buffer) };
        }
    }
}

/// A NUL-terminated UTF-8 static of the table.
fn static_str(ptr: *const c_char, field: &str, path: &Path) -> Result<String> {
    if ptr.is_null() {
        return Err(RuntimeError::Native(format!(
            "native plugin {} has no {field}",
            path.display()
        )));
    }
    // SAFETY: the table promises a NUL-terminated static here.
    let text = unsafe { CStr::from_ptr(ptr) };
    text.to_str().map(str::to_string).map_err(|e| {
        RuntimeError::Native(format!(
            "native plugin {} has a non-UTF-8 {field}: {e}",
            path.display()
        ))
    })
}

#[cfg(test)]
#[path = "native_tests.rs"]
mod tests;
