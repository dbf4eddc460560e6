//! Why an expression has no value for one draw: the error every step of
//! evaluating a template (numbers, values, helpers, expressions) shares.

use thiserror::Error;

/// Why an expression has no value for one draw.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Error)]
pub enum EvalError {
    /// A `/`, `//`, `%` or negative power of zero.
    #[error("division by zero")]
    DivisionByZero,
    /// A result beyond exact 128-bit arithmetic (a huge power, say).
    #[error("a number too large for exact arithmetic")]
    Overflow,
    /// An operation on values of the wrong kinds (text plus a number …).
    #[error("{0}")]
    Type(String),
    /// A value a helper cannot take (an empty range, `ensure_int(2.5)` …).
    #[error("{0}")]
    Value(String),
}

pub(super) fn type_error<T>(message: String) -> Result<T, EvalError> {
    Err(EvalError::Type(message))
}

pub(super) fn value_error<T>(message: String) -> Result<T, EvalError> {
    Err(EvalError::Value(message))
}
