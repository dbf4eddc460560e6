//! Guest SDK for verifine plugins.
//!
//! A plugin is a `cdylib` crate built for `wasm32-wasip2`. It implements one
//! of four traits — [`Rubric`], [`Aggregator`], [`Curriculum`], [`Trigger`] —
//! and registers it with [`export_plugin!`]:
//!
//! ```
//! use verifine_plugin_api::*;
//!
//! struct SaysPlease;
//!
//! impl Rubric for SaysPlease {
//!     type Config = NoConfig;
//!     fn describe() -> RubricInfo {
//!         RubricInfo::new("says-please", env!("CARGO_PKG_VERSION"))
//!             .criterion(Criterion::new("polite", "The response says please", 1.0))
//!     }
//!     fn judge(_: &NoConfig, _: &Context, sample: &Sample) -> Result<Judgment, String> {
//!         let polite = sample.response.to_lowercase().contains("please");
//!         Ok(Judgment::from_verdicts(vec![Verdict::met("polite", polite)]))
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
//! struct SaysPlease;
//!
//! impl Rubric for SaysPlease {
//!     type Config = NoConfig;
//!     fn describe() -> RubricInfo {
//!         RubricInfo::new("says-please", env!("CARGO_PKG_VERSION"))
//!             .criterion(Criterion::new("polite", "The response says please", 1.0))
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
//!         out.verdict(VerdictRef::met("polite", polite))
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
mod explanation;
mod host_calls;
pub mod in_place;
#[cfg(not(target_arch = "wasm32"))]
pub mod native;
mod packed;
pub mod row_rubric;
pub mod verdicts;

pub use builders::NoConfig;
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

/// Registers a plugin type as the crate's export and stamps its metadata.
///
/// `export_plugin!(rubric: MyRubric)`; likewise `rubric_in_place:` (a
/// [`RubricInPlace`] on its fast path), `aggregator:`, `curriculum:`,
/// `trigger:`. Use it once per crate.
#[macro_export]
macro_rules! export_plugin {
    ($kind:ident : $plugin:ty) => {
        $crate::export_plugin!(@stamped $crate::API_VERSION, $kind: $plugin);
    };
    // Stamps another contract version; only for the host's compatibility tests.
    (@stamped $api:expr, rubric: $plugin:ty) => {
        $crate::export_plugin!(@rubric $api, $plugin, judge_packed);
    };
    // The fast path: `judge-packed` reads in place and writes in place.
    (@stamped $api:expr, rubric_in_place: $plugin:ty) => {
        $crate::export_plugin!(@rubric $api, $plugin, judge_packed_in_place);
    };
    (@rubric $api:expr, $plugin:ty, $packed:ident) => {
        $crate::__stamp_metadata!($api, "rubric");
        // Exports exist only in the component; a native build (unit tests,
        // benchmarks) links the plugin as an ordinary library.
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct __VerifineExport;
            impl $crate::__private::rubric::exports::verifine::plugin::rubric_plugin::Guest
                for __VerifineExport
            {
                fn describe() -> $crate::RubricInfo {
                    <$plugin as $crate::Rubric>::describe()
                }
                fn judge(
                    ctx: $crate::Context,
                    samples: ::std::vec::Vec<$crate::Sample>,
                ) -> ::std::vec::Vec<::std::result::Result<$crate::Judgment, ::std::string::String>>
                {
                    $crate::__private::judge::<$plugin>(&ctx, &samples)
                }
                fn reads() -> $crate::SampleFields {
                    <$plugin as $crate::Rubric>::READS
                }
                fn judge_packed(
                    ctx: $crate::Context,
                    samples: ::std::vec::Vec<u8>,
                ) -> ::std::vec::Vec<u8> {
                    $crate::__private::$packed::<$plugin>(ctx, &samples)
                }
            }
            $crate::__private::rubric::export_rubric_world!(
                __VerifineExport with_types_in $crate::__private::rubric
            );
        };
    };
    (@stamped $api:expr, aggregator: $plugin:ty) => {
        $crate::__stamp_metadata!($api, "aggregator");
        // Exports exist only in the component; a native build (unit tests,
        // benchmarks) links the plugin as an ordinary library.
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct __VerifineExport;
            impl $crate::__private::aggregator::exports::verifine::plugin::aggregator_plugin::Guest
                for __VerifineExport
            {
                fn aggregate(
                    ctx: $crate::Context,
                    items: ::std::vec::Vec<$crate::Scoring>,
                ) -> ::std::vec::Vec<
                    ::std::result::Result<::std::option::Option<f64>, ::std::string::String>,
                > {
                    $crate::__private::aggregate::<$plugin>(ctx, items)
                }
                fn aggregate_packed(
                    ctx: $crate::Context,
                    items: ::std::vec::Vec<u8>,
                ) -> ::std::vec::Vec<u8> {
                    $crate::__private::aggregate_packed::<$plugin>(ctx, &items)
                }
            }
            $crate::__private::aggregator::export_aggregator_world!(
                __VerifineExport with_types_in $crate::__private::aggregator
            );
        };
    };
    (@stamped $api:expr, curriculum: $plugin:ty) => {
        $crate::__stamp_metadata!($api, "curriculum");
        // Exports exist only in the component; a native build (unit tests,
        // benchmarks) links the plugin as an ordinary library.
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct __VerifineExport;
            impl $crate::__private::curriculum::exports::verifine::plugin::curriculum_plugin::Guest
                for __VerifineExport
            {
                fn select(
                    ctx: $crate::Context,
                    candidates: ::std::vec::Vec<$crate::Candidate>,
                ) -> ::std::result::Result<
                    ::std::vec::Vec<$crate::CurriculumDecision>,
                    ::std::string::String,
                > {
                    $crate::__private::select::<$plugin>(ctx, candidates)
                }
            }
            $crate::__private::curriculum::export_curriculum_world!(
                __VerifineExport with_types_in $crate::__private::curriculum
            );
        };
    };
    (@stamped $api:expr, trigger: $plugin:ty) => {
        $crate::__stamp_metadata!($api, "trigger");
        // Exports exist only in the component; a native build (unit tests,
        // benchmarks) links the plugin as an ordinary library.
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct __VerifineExport;
            impl $crate::__private::trigger::exports::verifine::plugin::trigger_plugin::Guest
                for __VerifineExport
            {
                fn check(
                    ctx: $crate::Context,
                    history: ::std::vec::Vec<$crate::MonitorPoint>,
                ) -> ::std::result::Result<$crate::TriggerDecision, ::std::string::String> {
                    $crate::__private::check::<$plugin>(ctx, history)
                }
            }
            $crate::__private::trigger::export_trigger_world!(
                __VerifineExport with_types_in $crate::__private::trigger
            );
        };
    };
}

/// Exports a plugin type as a native plugin: a C-ABI table, stamped with the
/// contract version, that the host checks before calling anything.
///
/// `export_native_plugin!(rubric: MyRubric)`; likewise `aggregator:`,
/// `curriculum:`, `trigger:`. Put it next to [`export_plugin!`]: it expands
/// to nothing on wasm32, so one crate builds as a component for
/// `wasm32-wasip2` and as a native `cdylib` for the host target.
///
/// Native plugins are **not sandboxed**: they run in the host's process with
/// its privileges and no memory or time limit, so hosts load them only on an
/// explicit opt-in. The exported symbol is unmangled, so link at most one
/// plugin that uses this macro into any one native binary.
#[macro_export]
macro_rules! export_native_plugin {
    ($kind:ident : $plugin:ty) => {
        $crate::export_native_plugin!(@stamped $crate::API_VERSION, $kind: $plugin);
    };
    // Stamps another contract version; only for the host's compatibility tests.
    (@stamped $api:expr, $kind:ident : $plugin:ty) => {
        #[cfg(not(target_arch = "wasm32"))]
        const _: () = {
            unsafe extern "C" fn __verifine_native_call(
                function: u32,
                input: *const u8,
                input_len: usize,
                output: *mut $crate::native::NativeBuffer,
            ) -> i32 {
                // SAFETY: the host upholds the ABI's pointer contract.
                unsafe {
                    $crate::native::call(
                        function,
                        input,
                        input_len,
                        output,
                        $crate::native::$kind::<$plugin>,
                    )
                }
            }
            static __VERIFINE_NATIVE_TABLE: $crate::native::NativePluginV0 =
                $crate::native::table(
                    $api,
                    $crate::native::kind::$kind,
                    concat!(env!("CARGO_PKG_NAME"), "\0"),
                    concat!(env!("CARGO_PKG_VERSION"), "\0"),
                    __verifine_native_call,
                );
            /// The native plugin's table (see `verifine_native_abi::SYMBOL`).
            #[unsafe(no_mangle)]
            pub extern "C" fn verifine_native_plugin_v0() -> *const $crate::native::NativePluginV0 {
                &__VERIFINE_NATIVE_TABLE
            }
        };
    };
}

/// Writes the metadata custom section (`key=value` lines) into the module.
#[doc(hidden)]
#[macro_export]
macro_rules! __stamp_metadata {
    ($api:expr, $kind:literal) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            const PARTS: &[&str] = &[
                "api-version=",
                $api,
                "\nkind=",
                $kind,
                "\nname=",
                env!("CARGO_PKG_NAME"),
                "\nversion=",
                env!("CARGO_PKG_VERSION"),
                "\n",
            ];
            const LEN: usize = $crate::__private::joined_len(PARTS);
            #[used]
            #[unsafe(link_section = "verifine-plugin")]
            static METADATA: [u8; LEN] = $crate::__private::join::<LEN>(PARTS);
        };
    };
}

#[doc(hidden)]
#[allow(missing_docs, reason = "the macros' plumbing, not API")]
pub mod __private;
