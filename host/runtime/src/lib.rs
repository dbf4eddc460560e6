//! The plugin runtime: one engine, sandboxed stores, version-checked loading
//! and provenance for every result; scoring (rubric + aggregator → reward),
//! the JSONL row formats, snapshot cases and agreement statistics. Knows
//! nothing of training, serving or hot-swap: those sit above it.
//!
//! Scoring a sample with a built-in rubric (loaded, version-checked and
//! compiled once; each scorer holds its own sandboxed instances):
//!
//! ```
//! use verifine_runtime::scoring::RewardPlugins;
//! use verifine_runtime::{Limits, Runtime, Sample};
//!
//! let runtime = Runtime::new(Limits::default())?;
//! let no_config = serde_json::json!({});
//! let reward = RewardPlugins::load(&runtime, "math-answer", &no_config, None, &no_config)?;
//! let sample = Sample::new("q1", "What is 6*7?", "6*7 = 42\n#### 42").with_reference("42");
//! let scored = reward.scorer()?.score_batch(0, 0, &[sample]);
//! assert_eq!(scored[0].total, Some(1.0));
//! assert_eq!(reward.rubric.provenance().name, "math-answer");
//! # Ok::<(), verifine_runtime::RuntimeError>(())
//! ```

#![warn(missing_docs)]

// The generated bindings stay inside: what other crates see of the contract
// is the records re-exported below, by name.
#[allow(missing_docs)] // generated from wit/, documented there
mod bindings;
mod builders;
pub mod builtin;
pub mod cases;
pub mod code_cache;
mod engine;
mod error;
mod host_judges;
mod host_state;
mod instance;
pub mod judge_models;
pub mod judgments;
mod limiter;
pub mod metadata;
#[cfg(feature = "native")]
pub mod native;
mod output;
mod packed;
mod packed_answer;
mod plugin;
pub mod rows;
pub mod score_stream;
pub mod scorer_pool;
pub mod scoring;
pub mod scoring_bounds;
pub mod stats;
mod versions;

/// The contract's records, as plugins and hosts exchange them (generated
/// from the current `wit/` version; older versions convert to these).
pub use bindings::{
    Candidate, Context, Criterion, CurriculumDecision, DimensionHistory, JudgeAnswer, JudgeQuery,
    Judgment, LogLevel, ModelQuery, MonitorPoint, RubricInfo, Sample, SampleFields, Scoring,
    Selection, SubScore, TokenLogprob, TokenUsage, TriggerDecision, Verdict,
};
pub use error::{PluginError, Result, RuntimeError};
pub use instance::PluginInstance;
pub use judge_models::{JudgeModels, ModelAnswer, ModelError, ModelRequest, SharedJudgeModels};
pub use limiter::{MAX_INSTANCES, MAX_MEMORIES, MAX_TABLES};
pub use metadata::{HOST_API_VERSION, PluginKind, PluginMetadata};
#[cfg(feature = "native")]
pub use native::NativePlugin;
pub use output::StderrTail;
pub use plugin::{Limits, Plugin, Runtime, spec_bytes};
pub use verifine_base::default_cache_dir;
pub use verifine_base::{PluginSetting, PluginSpec, Provenance};
