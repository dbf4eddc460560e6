//! What goes wrong reading or writing a model.

use std::path::PathBuf;
use thiserror::Error;

/// A model that cannot be read or written; every variant says where.
#[derive(Debug, Error)]
pub enum ModelError {
    /// A file could not be opened, read, written or renamed.
    #[error(transparent)]
    File(#[from] verifine_base::FileError),
    /// A file is there but its content is not what the format says.
    #[error("{}: {message}", path.display())]
    Format {
        /// The file (or checkpoint directory).
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The model is valid but of a shape or kind verifine does not run;
    /// `field` names the setting (a config.json key or GGUF metadata key).
    #[error("{}: {field} = {value} is not supported: {why}", path.display())]
    Unsupported {
        /// The file or directory.
        path: PathBuf,
        /// The config key or metadata key.
        field: String,
        /// Its value.
        value: String,
        /// What verifine supports instead.
        why: String,
    },
    /// A chat template that does not compile or render.
    #[error("{origin}: {message}")]
    Template {
        /// Where the template came from: file and field
        /// (`tokenizer_config.json: chat_template`).
        origin: String,
        /// What is wrong with it.
        message: String,
    },
    /// Input stopped at one of the bounds verifine puts on what a
    /// downloaded model may cost — a chat template's rendering budget, a
    /// tokenizer's ids or text growth — instead of hanging or exhausting
    /// memory.
    #[error("{origin}: {message}")]
    Limit {
        /// The file and field the input came from.
        origin: String,
        /// Which bound it went past, named as the constant that sets it.
        message: String,
    },
    /// A tokenizer that fails on text.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// A tensor operation failed.
    #[error(transparent)]
    Tensor(#[from] candle_core::Error),
}

impl ModelError {
    /// A format error in `path`.
    pub fn format(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        ModelError::Format {
            path: path.into(),
            message: message.into(),
        }
    }

    /// A setting of `path` that verifine does not support.
    pub fn unsupported(
        path: impl Into<PathBuf>,
        field: impl Into<String>,
        value: impl ToString,
        why: impl Into<String>,
    ) -> Self {
        ModelError::Unsupported {
            path: path.into(),
            field: field.into(),
            value: value.to_string(),
            why: why.into(),
        }
    }
}

/// Results of this crate.
pub type Result<T> = std::result::Result<T, ModelError>;
