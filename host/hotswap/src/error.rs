//! What can go wrong with live revisions; every error names the file, the
//! slot or the plugin it is about.

use std::path::{Path, PathBuf};
use thiserror::Error;
use verifine_base::FileError;
use verifine_confined::PluginCrateError;
use verifine_runtime::{PluginKind, RuntimeError};

/// Hot-swap's errors.
#[derive(Debug, Error)]
pub enum HotswapError {
    /// Loading or scoring with a plugin failed.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// A file or directory could not be read or written.
    #[error(transparent)]
    File(#[from] FileError),
    /// `promote` or `rollback` named a directory that holds no run.
    #[error("{} is not a run directory (no config.toml)", .0.display())]
    NotARunDirectory(PathBuf),
    /// A revision of the wrong kind for its slot.
    #[error("a {actual} plugin cannot fill a {slot} slot")]
    WrongKind {
        /// The revision's kind.
        actual: PluginKind,
        /// The slot's kind.
        slot: PluginKind,
    },
    /// A rollback with nothing to go back to.
    #[error("no previous revision to roll back to (live: {live})")]
    NothingToRollBack {
        /// The live revision's name and version.
        live: String,
    },
    /// A plugin crate that could not be read, copied or built.
    #[error(transparent)]
    PluginCrate(#[from] PluginCrateError),
    /// The revision agent could not be run, or failed.
    #[error("revision agent: {0}")]
    Agent(String),
    /// A checkpoint's record of the live revisions that cannot be read.
    #[error("the checkpoint's live-revision record: {0}")]
    State(String),
    /// A stored revision whose bytes are not the ones the checkpoint
    /// recorded (replaced or corrupted since): it is not loaded.
    #[error(
        "revision {} does not match the checkpoint: recorded sha256 {recorded}, file has {actual}; \
         restore the file or resume from another checkpoint",
        path.display()
    )]
    RevisionChanged {
        /// The stored revision.
        path: PathBuf,
        /// The digest the checkpoint recorded.
        recorded: String,
        /// The digest of the file now.
        actual: String,
    },
}

impl HotswapError {
    /// An I/O failure doing `action` on `path`.
    pub fn io(action: &'static str, path: &Path, source: std::io::Error) -> Self {
        HotswapError::File(FileError::io(action, path, source))
    }
}

/// A result with a [`HotswapError`].
pub type Result<T, E = HotswapError> = std::result::Result<T, E>;
