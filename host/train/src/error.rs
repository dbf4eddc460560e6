//! Why training stopped. Errors name the file, the step or the hook they are
//! about; a hook's own error (the host's) is carried as it is.

use crate::symbolic::SymbolicError;
use std::path::{Path, PathBuf};
use thiserror::Error;
use verifine_base::FileError;

/// A setting that would fail later, or silently mean nothing
/// ([`crate::config::TrainConfig::validate`]). Here, below the config, so
/// that [`TrainError`] carries it without reaching up into the modules the
/// config names.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("{0}")]
pub struct InvalidConfig(pub String);

/// An error a host's hook reports; training adds where it happened
/// ([`TrainError::Hook`]). Hosts see it as `hooks::HookError`.
pub type HookError = Box<dyn std::error::Error + Send + Sync>;

/// Training's errors.
#[derive(Debug, Error)]
pub enum TrainError {
    /// A tensor operation failed (shapes, dtypes, devices).
    #[error(transparent)]
    Candle(#[from] candle_core::Error),
    /// A file or directory could not be read or written.
    #[error(transparent)]
    File(#[from] FileError),
    /// The config asks for something that cannot work.
    #[error(transparent)]
    Config(#[from] InvalidConfig),
    /// A precondition that does not hold: an empty batch, a sequence longer
    /// than the context, a run directory that already holds a run …
    #[error("{0}")]
    Invalid(String),
    /// A pretrained model could not be read or written.
    #[error(transparent)]
    Model(#[from] verifine_models::ModelError),
    /// The tokenizer could not be trained, loaded or used.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// A file that exists but does not hold what it should (a checkpoint,
    /// weights, metrics).
    #[error("{}: {message}", path.display())]
    Unreadable {
        /// The file or directory.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A GSM-Symbolic template could not be read or drawn from.
    #[error(transparent)]
    Symbolic(#[from] SymbolicError),
    /// The host's hook failed (reward, step boundary, curriculum).
    #[error("{context}: {error}")]
    Hook {
        /// Where training called it.
        context: String,
        /// The host's error.
        error: HookError,
    },
}

impl TrainError {
    /// An I/O failure while doing `action` on `path`.
    pub fn io(action: &'static str, path: &Path, source: std::io::Error) -> Self {
        TrainError::File(FileError::io(action, path, source))
    }

    /// `path` exists but could not be used.
    pub fn unreadable(path: &Path, message: impl std::fmt::Display) -> Self {
        TrainError::Unreadable {
            path: path.to_path_buf(),
            message: message.to_string(),
        }
    }
}

/// A result with a [`TrainError`].
pub type Result<T, E = TrainError> = std::result::Result<T, E>;

/// Returns [`TrainError::Invalid`] with the formatted message unless the
/// condition holds.
macro_rules! ensure {
    ($condition:expr, $($message:tt)+) => {
        let holds: bool = $condition;
        if !holds {
            return Err($crate::error::TrainError::Invalid(format!($($message)+)));
        }
    };
}

/// Returns [`TrainError::Invalid`] with the formatted message.
macro_rules! bail {
    ($($message:tt)+) => {
        return Err($crate::error::TrainError::Invalid(format!($($message)+)))
    };
}

pub(crate) use {bail, ensure};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_error_keeps_naming_its_file() {
        let symbolic = SymbolicError::Template {
            template: "0000.toml".into(),
            line: Some(3),
            message: "unknown function".into(),
        };
        let train = TrainError::from(symbolic);
        assert_eq!(train.to_string(), "0000.toml:3: unknown function");
    }
}
