//! Guest SDK for verifine plugins.
//!
//! A plugin is a `cdylib` crate built for `wasm32-wasip2`. It implements one
//! of four traits — [`Rubric`], [`Aggregator`], [`Curriculum`], [`Trigger`] —
//! and registers it with [`export_plugin!`]. A rubric declares its
//! criterion ids once, with [`criteria!`], so `describe()` and its verdicts
//! cannot name a criterion two ways (a misspelled id does not compile):
//!
//! ```
//! use verifine_plugin_api::*;
//!
//! criteria! {
//!     /// What the rubric checks.
//!     pub enum Checks {
//!         Polite = "polite",
//!     }
//! }
//!
//! struct SaysPlease;
//!
//! impl Rubric for SaysPlease {
//!     type Config = NoConfig;
//!     fn describe() -> RubricInfo {
//!         RubricInfo::new("says-please", env!("CARGO_PKG_VERSION"))
//!             .criterion(Criterion::new(&Checks::Polite, "The response says please", 1.0))
//!     }
//!     fn judge(_: &NoConfig, _: &Context, sample: &Sample) -> Result<Judgment, String> {
//!         let polite = sample.response.to_lowercase().contains("please");
//!         Ok(Judgment::from_verdicts(vec![Verdict::met(&Checks::Polite, polite)]))
//!     }
//! }
//!
//! export_plugin!(rubric: SaysPlease);
//!
//! // The rule is plain Rust: test it as such, without a host.
//! # fn main() {
//! let sample = Sample::new("s1", "Ask for the salt.", "Please pass the salt.");
//! let judgment = SaysPlease::judge(&NoConfig::default(), &Context::at_step(0), &sample).unwrap();
//! assert_eq!(judgment.verdicts[0].met, Some(true));
//! # }
//! ```
//!
//! ## The fast path
//!
//! Owned samples and judgments cost allocations on both sides of the
//! sandbox. A rubric that is called often and does little per sample can
//! also implement [`RubricInPlace`]: it reads a [`SampleView`] that borrows
//! the host's packed batch and writes through a [`JudgmentWriter`], which
//! reuses its buffers from sample to sample. Its owned [`Rubric::judge`]
//! stays available (tests, the native build) through [`judge_owned`]:
//!
//! ```
//! use verifine_plugin_api::*;
//!
//! criteria! {
//!     /// What the rubric checks.
//!     pub enum Checks {
//!         Polite = "polite",
//!     }
//! }
//!
//! struct SaysPlease;
//!
//! impl Rubric for SaysPlease {
//!     type Config = NoConfig;
//!     fn describe() -> RubricInfo {
//!         RubricInfo::new("says-please", env!("CARGO_PKG_VERSION"))
//!             .criterion(Criterion::new(&Checks::Polite, "The response says please", 1.0))
//!     }
//!     fn judge(config: &NoConfig, ctx: &Context, sample: &Sample) -> Result<Judgment, String> {
//!         judge_owned::<Self>(config, ctx, sample)
//!     }
//! }
//!
//! impl RubricInPlace for SaysPlease {
//!     fn judge_in_place(
//!         _: &NoConfig,
//!         _: &Context,
//!         sample: &SampleView<'_>,
//!         out: &mut JudgmentWriter<'_>,
//!     ) -> Result<(), String> {
//!         let polite = sample.response.contains("please");
//!         out.verdict(VerdictRef::met(&Checks::Polite, polite))
//!             .explain(format_args!("{} bytes read", sample.response.len()));
//!         Ok(())
//!     }
//! }
//!
//! export_plugin!(rubric_in_place: SaysPlease);
//! # fn main() {
//! let sample = Sample::new("s1", "Ask for the salt.", "Could you please pass it?");
//! let judgment = SaysPlease::judge(&NoConfig::default(), &Context::at_step(0), &sample).unwrap();
//! assert_eq!(judgment.verdicts[0].met, Some(true));
//! assert_eq!(judgment.explanation.as_deref(), Some("25 bytes read"));
//! # }
//! ```
//!
//! The generated WebAssembly bindings stay private; the types re-exported here
//! are plain Rust structs with public fields. [`export_plugin!`] also stamps the
//! contract version, the plugin kind and the crate's name and version into a
//! custom section, which the host reads before it compiles anything.
//!
//! The same crate can also be built for the host target as a *native* plugin,
//! a trusted fast path without the sandbox: add
//! [`export_native_plugin!`]`(rubric: SaysPlease)` beside `export_plugin!`
//! and `cargo build --release` (no `--target`) yields a shared library the
//! host loads only when the user opts in.

#![warn(missing_docs)]

mod builders;
#[doc(hidden)]
pub mod call_arena;
pub mod criteria;
mod explanation;
mod export;
mod host_calls;
pub mod in_place;
#[cfg(not(target_arch = "wasm32"))]
pub mod native;
mod packed;
pub mod row_rubric;
pub mod verdicts;

pub use builders::NoConfig;
pub use criteria::CriterionId;
pub use explanation::{ExplanationText, Number};
pub use host_calls::{ask_judges, judge_model, log};
pub use in_place::{JudgmentWriter, RubricInPlace, SampleView, VerdictRef, judge_owned};

/// The contract version this SDK was built against (`verifine:plugin@API_VERSION`).
pub const API_VERSION: &str = verifine_contract::VERSION;

/// Name of the custom section holding a plugin's metadata.
pub const METADATA_SECTION: &str = "verifine-plugin";

/// The sample fields a rubric reads ([`Rubric::READS`]).
pub use __private::rubric::exports::verifine::plugin::rubric_plugin::SampleFields;
pub use __private::rubric::verifine::plugin::host::{
    JudgeAnswer, JudgeQuery, LogLevel, ModelQuery, TokenLogprob, TokenUsage,
};
pub use __private::rubric::verifine::plugin::types::{
    Candidate, Context, Criterion, CurriculumDecision, DimensionHistory, Judgment, MonitorPoint,
    RubricInfo, Sample, Scoring, Selection, SubScore, TriggerDecision, Verdict,
};

use serde::de::DeserializeOwned;

/// A judge: scores responses against criteria.
///
/// Implement [`Rubric::judge`] for one sample; override [`Rubric::judge_batch`]
/// only when samples of a batch should be judged together (for instance to
/// send one batched `judge_model` request).
pub trait Rubric {
    /// The plugin's own table from the user's config (`[rubric.config]`).
    /// Use [`NoConfig`] when there is nothing to configure.
    type Config: DeserializeOwned + Default;

    /// The sample fields [`Rubric::judge`] reads besides `id`: the host sends
    /// the others empty ("" for strings, `None`, no metadata), so it copies
    /// no text the rubric ignores. All of them unless a rubric says less; a
    /// rubric that says less and reads more sees empty fields.
    const READS: SampleFields = SampleFields::all();

    /// Name, version and the criteria this rubric judges.
    fn describe() -> RubricInfo;

    /// Judges one sample; an `Err` marks that sample as failed, not the batch.
    fn judge(config: &Self::Config, ctx: &Context, sample: &Sample) -> Result<Judgment, String>;

    /// Judges a batch; defaults to [`Rubric::judge`] per sample.
    fn judge_batch(
        config: &Self::Config,
        ctx: &Context,
        samples: &[Sample],
    ) -> Vec<Result<Judgment, String>> {
        samples
            .iter()
            .map(|sample| Self::judge(config, ctx, sample))
            .collect()
    }
}

/// Reduces a judgment to one scalar reward.
pub trait Aggregator {
    /// The plugin's own table from the user's config.
    type Config: DeserializeOwned + Default;

    /// Reward for one judged sample; `Ok(None)` when it is undefined for this item.
    fn aggregate(
        config: &Self::Config,
        ctx: &Context,
        item: &Scoring,
    ) -> Result<Option<f64>, String>;

    /// Rewards for a batch; defaults to [`Aggregator::aggregate`] per item.
    fn aggregate_batch(
        config: &Self::Config,
        ctx: &Context,
        items: &[Scoring],
    ) -> Vec<Result<Option<f64>, String>> {
        items
            .iter()
            .map(|item| Self::aggregate(config, ctx, item))
            .collect()
    }
}

/// Decides which candidate prompts enter the next training round, and how often.
///
/// Sees the whole batch at once, since priorities are usually relative.
pub trait Curriculum {
    /// The plugin's own table from the user's config.
    type Config: DeserializeOwned + Default;

    /// One decision per candidate, in order.
    fn select(
        config: &Self::Config,
        ctx: &Context,
        candidates: &[Candidate],
    ) -> Result<Vec<CurriculumDecision>, String>;
}

/// Decides when the judge loop should start (e.g. progress has stalled).
pub trait Trigger {
    /// The plugin's own table from the user's config.
    type Config: DeserializeOwned + Default;

    /// `history` holds every monitoring point so far; the last one is current.
    fn check(
        config: &Self::Config,
        ctx: &Context,
        history: &[MonitorPoint],
    ) -> Result<TriggerDecision, String>;
}

#[doc(hidden)]
#[allow(missing_docs, reason = "the macros' plumbing, not API")]
pub mod __private;
