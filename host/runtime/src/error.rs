//! Why a plugin could not be loaded, or data could not be read. Every error
//! names what it is about: the plugin's origin or name, the file and row, and
//! both versions when a contract version does not match.

use crate::PluginKind;
use crate::metadata::MetadataError;
use std::path::PathBuf;
use thiserror::Error;
use verifine_base::FileError;

/// The runtime's errors.
#[derive(Debug, Error)]
pub enum RuntimeError {
    /// A bare name that is neither a built-in plugin nor a file.
    #[error("no plugin named {name:?} and no such file; built-in plugins: {builtins}")]
    UnknownPlugin {
        /// The name asked for.
        name: String,
        /// The built-in plugins, comma-separated.
        builtins: String,
    },
    /// A `native:` spec where a component is needed.
    #[error("{spec} names a native library; a component (.wasm) is needed here")]
    NotAComponent {
        /// The spec as written.
        spec: String,
    },
    /// A plugin file that could not be read.
    #[error("reading plugin {}: {message}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        message: String,
    },
    /// The plugin's metadata is missing, malformed, or for another contract.
    #[error("loading plugin {origin}: {error}")]
    Metadata {
        /// Where the plugin came from.
        origin: String,
        /// What is wrong (names both versions on a mismatch). Boxed: two
        /// versions would make every `Result` of the runtime large.
        error: Box<MetadataError>,
    },
    /// wasmtime could not compile the component.
    #[error("loading plugin {origin}: compiling the component: {message}")]
    Compile {
        /// Where the plugin came from.
        origin: String,
        /// wasmtime's explanation.
        message: String,
    },
    /// The component imports something the host does not provide.
    #[error(
        "loading plugin {origin}: plugin {plugin} imports something the host does not provide: {message}"
    )]
    Imports {
        /// Where the plugin came from.
        origin: String,
        /// Its name.
        plugin: String,
        /// wasmtime's explanation.
        message: String,
    },
    /// The component does not export the interface its kind requires.
    #[error(
        "loading plugin {origin}: plugin {plugin} says it is a {kind} plugin but does not export verifine:plugin/{kind}-plugin: {message}"
    )]
    NotExported {
        /// Where the plugin came from.
        origin: String,
        /// Its name.
        plugin: String,
        /// The kind its metadata declares.
        kind: PluginKind,
        /// wasmtime's explanation.
        message: String,
    },
    /// A plugin of another kind than the place it was named for.
    #[error("plugin {plugin} is a {actual} plugin, but a {needed} plugin is needed here")]
    WrongKind {
        /// Its name.
        plugin: String,
        /// The kind it is.
        actual: PluginKind,
        /// The kind needed.
        needed: PluginKind,
    },
    /// The sandbox engine or linker could not be set up.
    #[error("setting up the plugin sandbox: {0}")]
    Engine(String),
    /// A native plugin was refused or could not be loaded (the message names
    /// the library, and both versions on a contract mismatch).
    #[error("{0}")]
    Native(String),
    /// A rubric that cannot describe its criteria cannot score.
    #[error("asking the rubric {plugin} to describe itself: {error}")]
    Describe {
        /// The rubric's name.
        plugin: String,
        /// What the call did.
        error: PluginError,
    },
    /// A data file that could not be read or written.
    #[error(transparent)]
    File(#[from] FileError),
    /// A row that is valid JSON but not a valid row.
    #[error("{}: row {row}: {message}", path.display())]
    Row {
        /// The file.
        path: PathBuf,
        /// 1-based row number (blank lines not counted).
        row: usize,
        /// What is wrong with it.
        message: String,
    },
    /// Snapshot cases that did not all match their snapshots.
    #[error("{0}")]
    Cases(String),
    /// A scoring worker thread panicked.
    #[error("a scoring worker panicked")]
    WorkerPanicked,
}

/// A result with a [`RuntimeError`].
pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

/// A call that did not produce a result.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum PluginError {
    /// The call ran past the per-call deadline; the store was discarded.
    #[error("plugin {plugin} exceeded its time limit of {limit_ms} ms in {call}")]
    Timeout {
        /// Name of the plugin called.
        plugin: String,
        /// The export that was called (`judge`, `aggregate`, …).
        call: &'static str,
        /// The deadline that was exceeded, in milliseconds.
        limit_ms: u64,
    },
    /// The call failed inside the sandbox (panic, memory cap, invalid result);
    /// the store was discarded. A native plugin's caught panic lands here too.
    #[error("plugin {plugin} trapped in {call}: {message}")]
    Trap {
        /// Name of the plugin called.
        plugin: String,
        /// The export that was called.
        call: &'static str,
        /// The error chain, with what the plugin wrote to stderr.
        message: String,
    },
    /// No store could be instantiated; the next call tries afresh.
    #[error("plugin {plugin} could not be instantiated: {message}")]
    Instantiate {
        /// Name of the plugin.
        plugin: String,
        /// The error chain, with what the plugin wrote to stderr.
        message: String,
    },
    /// The plugin's kind has no such export; nothing ran and the store was kept.
    #[error("plugin {plugin} is a {kind} plugin and has no `{call}`")]
    WrongKind {
        /// Name of the plugin.
        plugin: String,
        /// The kind the plugin actually is.
        kind: String,
        /// The export that was asked for.
        call: &'static str,
    },
    /// The plugin returned what the contract forbids (e.g. the wrong number of
    /// results); the store was discarded.
    #[error("plugin {plugin} broke the contract in {call}: {message}")]
    Contract {
        /// Name of the plugin called.
        plugin: String,
        /// The export that was called.
        call: &'static str,
        /// What was wrong with the result.
        message: String,
    },
}

/// A result count that differs from the input count is a contract error,
/// never broadcast (shared by components and native plugins).
pub(crate) fn check_count<T>(
    plugin: &str,
    call: &'static str,
    results: Vec<T>,
    expected: usize,
) -> Result<Vec<T>, PluginError> {
    if results.len() == expected {
        return Ok(results);
    }
    Err(count_error(plugin, call, results.len(), expected))
}

/// The contract error for `count` results where `expected` were due.
pub(crate) fn count_error(
    plugin: &str,
    call: &'static str,
    count: usize,
    expected: usize,
) -> PluginError {
    PluginError::Contract {
        plugin: plugin.to_string(),
        call,
        message: format!("returned {count} results for {expected} inputs"),
    }
}
