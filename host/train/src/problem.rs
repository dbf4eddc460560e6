//! What every problem source gives (the generator in [`crate::task`], the
//! dataset files, the GSM-Symbolic templates) and everything downstream
//! trains on. Its own module, below the sources, so that the task's config
//! can name the sources and the sources the problem without a circle.

use serde::{Deserialize, Serialize};

/// One problem with its worked solution and answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// The question shown to the policy.
    pub prompt: String,
    /// A step-by-step solution ending in `#### answer` (the SFT target and the reference).
    pub solution: String,
    /// The final answer.
    pub answer: i64,
}
