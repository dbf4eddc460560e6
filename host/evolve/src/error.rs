//! What can go wrong in the co-evolution loop, each naming what it was doing.

use thiserror::Error;
use verifine_base::FileError;

/// An error of the co-evolution loop.
#[derive(Debug, Error)]
pub enum EvolveError {
    /// A file could not be read or written (the path is in the message).
    #[error(transparent)]
    File(#[from] FileError),
    /// The plugin runtime refused (loading, describing, a bad component).
    #[error(transparent)]
    Runtime(#[from] verifine_runtime::RuntimeError),
    /// Building, checking or recording a judge revision that is code failed.
    #[error(transparent)]
    Hotswap(#[from] verifine_hotswap::HotswapError),
    /// The judge models of `judges` could not be set up.
    #[error(transparent)]
    Judges(#[from] verifine_judge::JudgeError),
    /// A training round failed.
    #[error(transparent)]
    Train(#[from] verifine_train::TrainError),
    /// A plugin answered with an error where the loop needs an answer.
    #[error("{plugin}: {message}")]
    Plugin {
        /// The plugin's name.
        plugin: String,
        /// What it said.
        message: String,
    },
    /// A config, label file or state that cannot be used as it is.
    #[error("{0}")]
    Invalid(String),
}

/// The crate's result type.
pub type Result<T, E = EvolveError> = std::result::Result<T, E>;
