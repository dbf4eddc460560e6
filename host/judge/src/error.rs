//! What can go wrong when judges are set up. Failures of single queries
//! are not errors of this kind: they come back as that query's answer.

use thiserror::Error;

/// A judge-backend error.
#[derive(Debug, Error)]
pub enum JudgeError {
    /// A config that cannot be used.
    #[error("judges config: {0}")]
    Config(String),
    /// A file could not be read or written.
    #[error(transparent)]
    File(#[from] verifine_base::FileError),
    /// A rubric whose queries were to be captured could not be loaded or run.
    #[error(transparent)]
    Rubric(#[from] verifine_runtime::RuntimeError),
    /// The HTTP client or the async runtime could not start.
    #[error("starting the judge client: {0}")]
    Client(String),
}

/// Results of this crate.
pub type Result<T> = std::result::Result<T, JudgeError>;
