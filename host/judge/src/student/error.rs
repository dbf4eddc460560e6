//! What can go wrong when a student judge is trained, saved or loaded.

use std::path::PathBuf;

/// A student judge's error.
#[derive(Debug, thiserror::Error)]
pub enum StudentError {
    /// The examples cannot train the student (none, or labels that do not
    /// match its criteria).
    #[error("{0}")]
    Examples(String),
    /// A tensor operation failed.
    #[error("tensor operation: {0}")]
    Tensor(#[from] candle_core::Error),
    /// A student file could not be read or written.
    #[error(transparent)]
    File(#[from] verifine_base::FileError),
    /// The student's weights could not be read or written.
    #[error("{}: {source}", path.display())]
    Weights {
        /// The weights file.
        path: PathBuf,
        /// What candle said.
        source: candle_core::Error,
    },
    /// The student's spec is not valid JSON of its kind.
    #[error("{}: {source}", path.display())]
    Spec {
        /// The spec file.
        path: PathBuf,
        /// What serde said.
        source: serde_json::Error,
    },
}
