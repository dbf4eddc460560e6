//! What each plugin store holds, and the host functions plugins may call.
//!
//! WASI is linked so that Rust's standard library works inside plugins, but it
//! grants nothing: no preopened directories, no environment, no arguments, no
//! sockets or name lookup. stdout and stderr go to small in-memory pipes; the
//! host reads stderr to explain a trap (a panic message, an allocation failure).

use super::bindings::{LogLevel, ModelQuery, rubric::verifine::plugin::host};
use wasmtime::StoreLimits;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

/// Bytes of plugin stdout/stderr kept per store; writes beyond it fail.
const OUTPUT_CAPACITY: usize = 64 * 1024;

/// Per-store state of one plugin instance.
pub struct HostState {
    /// The plugin's name; tags its log lines.
    pub plugin_name: String,
    /// Memory caps, read by the store's limiter.
    pub limits: StoreLimits,
    wasi: WasiCtx,
    table: ResourceTable,
    stderr: MemoryOutputPipe,
}

impl HostState {
    /// A sandbox with no capabilities and the given memory limits.
    pub fn new(plugin_name: &str, limits: StoreLimits) -> Self {
        let stderr = MemoryOutputPipe::new(OUTPUT_CAPACITY);
        let wasi = WasiCtxBuilder::new()
            .stdout(MemoryOutputPipe::new(OUTPUT_CAPACITY))
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
        HostState {
            plugin_name: plugin_name.to_string(),
            limits,
            wasi,
            table: ResourceTable::new(),
            stderr,
        }
    }

    /// What the plugin wrote to stderr, trimmed (empty when nothing).
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr.contents())
            .trim()
            .to_string()
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl host::Host for HostState {
    fn log(&mut self, level: LogLevel, message: String) {
        let plugin = self.plugin_name.as_str();
        match level {
            LogLevel::Trace => tracing::trace!(plugin, "{message}"),
            LogLevel::Debug => tracing::debug!(plugin, "{message}"),
            LogLevel::Info => tracing::info!(plugin, "{message}"),
            LogLevel::Warn => tracing::warn!(plugin, "{message}"),
            LogLevel::Error => tracing::error!(plugin, "{message}"),
        }
    }

    fn judge_model(&mut self, queries: Vec<ModelQuery>) -> Vec<Result<String, String>> {
        // Model backends are configured in a later release; the interface exists
        // now so plugins can fall back (or report) cleanly.
        queries
            .iter()
            .map(|_| Err("no judge model configured".to_string()))
            .collect()
    }
}
