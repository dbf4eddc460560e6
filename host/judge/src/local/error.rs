//! What can go wrong inside the local model. Loading errors become the
//! judges config's error (the model cannot be used); running errors become
//! the failing query's [`ModelError`] (the other queries go on).

use std::sync::Arc;
use verifine_runtime::ModelError;

pub(super) type Result<T> = std::result::Result<T, DecoderError>;

/// A candle error as the decoder's (for `map_err`).
pub(super) fn e(err: candle_core::Error) -> DecoderError {
    DecoderError::from(err)
}

/// A failure of the local decoder, while loading or running.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DecoderError {
    /// A tensor operation failed (shared: one failed batch fails each of
    /// its queries with the same cause).
    #[error("tensor operation: {0}")]
    Tensor(Arc<candle_core::Error>),
    /// The file does not describe a model this decoder runs (architecture,
    /// metadata, tensors).
    #[error("{0}")]
    Weights(String),
    /// The prompt cannot be run: no tokens, or longer than the context.
    #[error("{0}")]
    Prompt(String),
    /// The query's JSON schema is not one the local judge can follow.
    #[error("{0}")]
    Schema(String),
    /// The batch handed to the model is inconsistent (a bug of its caller).
    #[error("{0}")]
    Batch(String),
}

impl From<candle_core::Error> for DecoderError {
    fn from(err: candle_core::Error) -> Self {
        DecoderError::Tensor(Arc::new(err))
    }
}

impl From<DecoderError> for ModelError {
    fn from(err: DecoderError) -> Self {
        match err {
            DecoderError::Prompt(why) | DecoderError::Schema(why) => ModelError::BadQuery(why),
            other => ModelError::Model(other.to_string()),
        }
    }
}
