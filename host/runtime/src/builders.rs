//! Builders for the contract's records, so callers say what they mean
//! (`Context::at_step(12)`, `Sample::new(id, prompt, response)`) instead of
//! spelling out the empty JSON object a field takes when absent.

use crate::{Context, Sample};

/// What an absent JSON object field of the contract holds.
pub const EMPTY_JSON: &str = "{}";

impl Context {
    /// Outside training and the judge loop: step 0, round 0, no plugin config.
    pub fn empty() -> Self {
        Context {
            step: 0,
            round: 0,
            config: EMPTY_JSON.to_string(),
        }
    }

    /// At training step `step`, round 0, no plugin config.
    pub fn at_step(step: u64) -> Self {
        Context {
            step,
            ..Context::empty()
        }
    }

    /// The same context with the plugin's own config (a JSON object).
    pub fn with_config(mut self, config: &serde_json::Value) -> Self {
        self.config = config.to_string();
        self
    }
}

impl Sample {
    /// A sample with no reference, context or metadata.
    pub fn new(
        id: impl Into<String>,
        prompt: impl Into<String>,
        response: impl Into<String>,
    ) -> Self {
        Sample {
            id: id.into(),
            prompt: prompt.into(),
            response: response.into(),
            reference: None,
            context: EMPTY_JSON.to_string(),
            metadata: Vec::new(),
        }
    }

    /// The same sample with a reference answer or worked solution.
    pub fn with_reference(mut self, reference: impl Into<String>) -> Self {
        self.reference = Some(reference.into());
        self
    }
}
