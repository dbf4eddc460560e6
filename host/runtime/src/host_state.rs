//! What each plugin store holds, and the host functions plugins may call.
//!
//! WASI is linked so that Rust's standard library works inside plugins, but it
//! grants nothing: no preopened directories, no environment, no arguments, no
//! sockets or name lookup. stdout is discarded; stderr keeps a bounded tail
//! per call ([`crate::output`]), which the host quotes to explain a trap (a
//! panic message, an allocation failure).

use super::bindings::{
    JudgeAnswer, JudgeQuery, LogLevel, ModelQuery, rubric::verifine::plugin::host,
};
use crate::judge_models::{NoJudgeModels, SharedJudgeModels};
use crate::output::StderrTail;
use std::sync::Arc;
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::bindings::sync::io::poll::Pollable;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

/// Log lines a plugin may emit per call; later ones are dropped (once said).
pub const LOG_LINES_PER_CALL: u32 = 100;

/// Characters of one log line kept (the rest is cut, and says so).
pub const LOG_LINE_CHARS: usize = 1024;

/// Characters of plugin stderr quoted in an error (the newest ones).
pub const STDERR_CHARS: usize = 2000;

/// Per-store state of one plugin instance.
pub struct HostState {
    /// The plugin's name; tags its log lines.
    pub plugin_name: String,
    /// The store's resource limiter (memory, tables, instances).
    pub limits: crate::limiter::SandboxLimiter,
    wasi: WasiCtx,
    table: ResourceTable,
    stderr: StderrTail,
    /// Log lines emitted in the current call.
    log_lines: u32,
    /// Who answers `judge-model`.
    pub(crate) judges: SharedJudgeModels,
    /// When the current call started.
    call_started: std::time::Instant,
    /// Time of the current call spent waiting on judge models: the host's
    /// time, not the plugin's, so it does not count against the deadline.
    pub(crate) host_wait: std::time::Duration,
    /// The fields a 0.3 rubric reads, asked once per store (`packed`).
    pub(crate) rubric_reads: Option<crate::bindings::SampleFields>,
    /// The last packed batch's buffer, reused by the next (`packed`).
    pub(crate) packed_samples: Vec<u8>,
}

impl HostState {
    /// A sandbox with no capabilities and the given memory limits.
    pub fn new(plugin_name: &str, limits: crate::limiter::SandboxLimiter) -> Self {
        let stderr = StderrTail::new();
        let wasi = WasiCtxBuilder::new()
            .stdout(std::io::empty())
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
            log_lines: 0,
            judges: Arc::new(NoJudgeModels),
            call_started: std::time::Instant::now(),
            host_wait: std::time::Duration::ZERO,
            rubric_reads: None,
            packed_samples: Vec::new(),
        }
    }

    /// The judge models this instance's `judge-model` calls reach.
    pub fn with_judges(mut self, judges: SharedJudgeModels) -> Self {
        self.judges = judges;
        self
    }

    /// A new call starts: its log budget is whole again and its stderr empty.
    pub fn begin_call(&mut self) {
        self.log_lines = 0;
        self.stderr.reset();
        self.call_started = std::time::Instant::now();
        self.host_wait = std::time::Duration::ZERO;
    }

    /// Time the plugin itself has run in the current call (the call's
    /// elapsed time less what judge models took).
    pub fn guest_time(&self) -> std::time::Duration {
        self.call_started.elapsed().saturating_sub(self.host_wait)
    }

    /// The line to log for `message`, escaped and cut, or `None` when the
    /// call has used its budget of [`LOG_LINES_PER_CALL`] lines (the first
    /// line over it says that the rest is dropped).
    pub fn admit_log(&mut self, message: &str) -> Option<String> {
        self.log_lines = self.log_lines.saturating_add(1);
        match self.log_lines.cmp(&(LOG_LINES_PER_CALL + 1)) {
            std::cmp::Ordering::Less => {
                Some(verifine_base::text::sanitize(message, LOG_LINE_CHARS))
            }
            std::cmp::Ordering::Equal => Some(format!(
                "more than {LOG_LINES_PER_CALL} log lines in one call: the rest of this call's are dropped"
            )),
            std::cmp::Ordering::Greater => None,
        }
    }

    /// What the plugin wrote to stderr in the current call (instantiation
    /// counts as one), trimmed, escaped and cut to its newest
    /// [`STDERR_CHARS`] characters; empty when nothing.
    pub fn stderr_text(&self) -> String {
        let (bytes, dropped) = self.stderr.contents();
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim();
        let chars = text.chars().count();
        let newest: String = text
            .chars()
            .skip(chars.saturating_sub(STDERR_CHARS))
            .collect();
        // Line breaks become " | " before escaping, so the message stays readable.
        let quoted = verifine_base::text::sanitize(&newest.replace('\n', " | "), STDERR_CHARS);
        if dropped > 0 || chars > STDERR_CHARS {
            format!("… {quoted}")
        } else {
            quoted
        }
    }
}

/// Plugins never wait: WASI's timers (the only way a plugin can block in a
/// host call, which the epoch deadline cannot interrupt) trap instead of
/// sleeping. The contract gives plugins no clocks to wait on; Rust's
/// `std::thread::sleep` lands here.
pub fn forbid_waiting(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut clock = linker.instance(MONOTONIC_CLOCK)?;
    clock.func_wrap(
        "subscribe-duration",
        |_, _: (u64,)| -> wasmtime::Result<(Resource<Pollable>,)> {
            Err(wasmtime::format_err!("{WAITING}"))
        },
    )?;
    clock.func_wrap(
        "subscribe-instant",
        |_, _: (u64,)| -> wasmtime::Result<(Resource<Pollable>,)> {
            Err(wasmtime::format_err!("{WAITING}"))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// The WASI interface whose timers [`forbid_waiting`] replaces (the version
/// wasmtime-wasi defines; older 0.2 imports resolve to it).
const MONOTONIC_CLOCK: &str = "wasi:clocks/monotonic-clock@0.2.12";

/// Why a plugin that tried to wait was stopped.
const WAITING: &str =
    "plugins may not sleep or wait on a timer (wasi:clocks/monotonic-clock subscribe)";

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
        let Some(message) = self.admit_log(&message) else {
            return;
        };
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
        self.answer_model_queries(queries)
    }

    fn ask_judges(&mut self, queries: Vec<JudgeQuery>) -> Vec<Result<JudgeAnswer, String>> {
        self.answer_judge_queries(queries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_are_escaped_cut_and_budgeted_per_call() {
        let mut state = HostState::new("p", crate::limiter::SandboxLimiter::new(1 << 20));
        assert_eq!(
            state.admit_log("fine\nERROR forged host line").unwrap(),
            "fine\\nERROR forged host line"
        );
        assert!(state.admit_log(&"x".repeat(10_000)).unwrap().len() < 1100);
        for _ in 2..LOG_LINES_PER_CALL {
            assert!(state.admit_log("again").is_some());
        }
        assert!(state.admit_log("one too many").unwrap().contains("dropped"));
        assert!(state.admit_log("silent").is_none());
        state.begin_call();
        assert_eq!(state.admit_log("next call").as_deref(), Some("next call"));
    }
}
