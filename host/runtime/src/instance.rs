//! Calling a plugin inside its sandbox.
//!
//! Each instance owns one store with a memory cap and sets an epoch deadline
//! before every call. A trap (panic, timeout, memory exhaustion, bad result)
//! discards the store; the next call instantiates afresh, so one bad input
//! never poisons the calls after it.
//!
//! An instance of a native plugin (the `native` module, behind the feature of that name) has no store: its
//! calls go straight to the library, with the same result types and checks
//! but without the sandbox's limits.

use super::bindings::{
    Candidate, Context, CurriculumDecision, Judgment, MonitorPoint, RubricInfo, Sample, Scoring,
    TriggerDecision,
};
use super::engine::EPOCH_TICK;
use super::host_state::HostState;
use super::packed;
use super::plugin::{Code, Limits, Plugin};
use super::versions::{ByVersion, Exports, versioned};
use crate::error::{PluginError, check_count, count_error};
use crate::judgments::{self, Judgments};
use crate::limiter::SandboxLimiter;
use std::sync::Arc;
use wasmtime::{Store, Trap, UpdateDeadline};

/// A rubric's answer before it is read.
enum Answer {
    Packed(Vec<u8>),
    Owned(Vec<Result<Judgment, String>>),
}

struct Live {
    store: Store<HostState>,
    exports: Exports,
}

impl Plugin {
    /// A fresh instance with its own store (instantiated on first call).
    pub fn instance(self: &Arc<Self>) -> PluginInstance {
        PluginInstance::new(self.clone())
    }
}

/// One sandboxed instance of a plugin (or a handle on a native one). Not
/// shared between threads: make one per worker with [`Plugin::instance`].
pub struct PluginInstance {
    plugin: Arc<Plugin>,
    live: Option<Live>,
    instantiations: u64,
}

impl PluginInstance {
    pub(crate) fn new(plugin: Arc<Plugin>) -> Self {
        PluginInstance {
            plugin,
            live: None,
            instantiations: 0,
        }
    }

    /// The plugin this instance runs.
    pub fn plugin(&self) -> &Arc<Plugin> {
        &self.plugin
    }

    /// How many stores this instance has created (1 + the traps it recovered from).
    pub fn instantiations(&self) -> u64 {
        self.instantiations
    }

    /// The sandbox limits; a native plugin has none, and never reaches the
    /// code that asks (its calls are dispatched before).
    fn limits(&self) -> Limits {
        match &self.plugin.code {
            Code::Wasm(code) => code.limits,
            #[cfg(feature = "native")]
            Code::Native(_) => Limits::default(),
        }
    }

    fn deadline_ticks(&self) -> u64 {
        ticks(self.limits().call_timeout())
    }

    fn instantiate(&mut self) -> Result<Live, PluginError> {
        let plugin = &self.plugin;
        #[allow(irrefutable_let_patterns)] // without the `native` feature
        let Code::Wasm(code) = &plugin.code else {
            return Err(PluginError::Instantiate {
                plugin: plugin.metadata.name.clone(),
                message: "a native plugin has no sandbox to instantiate".to_string(),
            });
        };
        let limits = SandboxLimiter::new(code.limits.memory_bytes());
        let mut store = Store::new(
            code.engine.engine(),
            HostState::new(&plugin.metadata.name, limits).with_judges(code.judges.clone()),
        );
        store.limiter(|state| &mut state.limits);
        // At the deadline, time spent waiting on judge models is given back:
        // only the plugin's own running counts against its limit.
        let limit = code.limits.call_timeout();
        store.epoch_deadline_callback(move |store| {
            let guest = store.data().guest_time();
            if guest >= limit {
                return Err(Trap::Interrupt.into());
            }
            Ok(UpdateDeadline::Continue(ticks(limit - guest)))
        });
        store.set_epoch_deadline(self.deadline_ticks());
        let exports = code
            .pre
            .instantiate(&mut store)
            .map_err(|e| PluginError::Instantiate {
                plugin: plugin.metadata.name.clone(),
                message: describe_error(&e, &store.data().stderr_text()),
            })?;
        self.instantiations += 1;
        Ok(Live { store, exports })
    }

    /// Runs `f` on a live instance under the call deadline; on any failure the
    /// store is dropped.
    fn call<R>(
        &mut self,
        call: &'static str,
        f: impl FnOnce(&mut Store<HostState>, &Exports) -> Option<wasmtime::Result<R>>,
    ) -> Result<R, PluginError> {
        let mut live = match self.live.take() {
            Some(live) => live,
            None => self.instantiate()?,
        };
        live.store.set_epoch_deadline(self.deadline_ticks());
        live.store.data_mut().begin_call();
        let name = &self.plugin.metadata.name;
        match f(&mut live.store, &live.exports) {
            None => {
                let kind = self.plugin.kind().to_string();
                self.live = Some(live);
                Err(PluginError::WrongKind {
                    plugin: name.clone(),
                    kind,
                    call,
                })
            }
            Some(Ok(value)) => {
                self.live = Some(live);
                Ok(value)
            }
            Some(Err(e)) => {
                if e.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
                    return Err(PluginError::Timeout {
                        plugin: name.clone(),
                        call,
                        limit_ms: self.limits().call_timeout_ms,
                    });
                }
                Err(PluginError::Trap {
                    plugin: name.clone(),
                    call,
                    message: describe_error(&e, &live.store.data().stderr_text()),
                })
            }
        }
    }

    /// A rubric's name, version and criteria.
    pub fn describe(&mut self) -> Result<RubricInfo, PluginError> {
        #[cfg(feature = "native")]
        if let Some(native) = self.plugin.native() {
            return native.describe();
        }
        self.call("describe", |store, exports| match exports {
            Exports::Rubric(r) => Some(versioned!(r, r => r
                .verifine_plugin_rubric_plugin()
                .call_describe(store))),
            _ => None,
        })
    }

    /// Judges a batch: one result per sample, in order, as owned records.
    pub fn judge(
        &mut self,
        ctx: &Context,
        samples: &[Sample],
    ) -> Result<Vec<Result<Judgment, String>>, PluginError> {
        #[cfg(feature = "native")]
        if let Some(native) = self.plugin.native() {
            return native.judge(ctx, samples);
        }
        let results = match self.answer(ctx, samples)? {
            Answer::Packed(bytes) => {
                let decoded = judgments::decode_owned(&bytes)
                    .map_err(|e| packed::answer_error(bytes.len(), e));
                self.expect_decoded("judge", decoded)?
            }
            Answer::Owned(results) => results,
        };
        self.expect_count("judge", results, samples.len())
    }

    /// Judges a batch: one result per sample, in order, read where the
    /// rubric's answer lies (no allocation per sample on the current
    /// contract; results that arrive owned are encoded once into the same
    /// view).
    pub fn judge_in_place(
        &mut self,
        ctx: &Context,
        samples: &[Sample],
    ) -> Result<Judgments, PluginError> {
        #[cfg(feature = "native")]
        if let Some(native) = self.plugin.native() {
            return native
                .judge(ctx, samples)
                .map(|owned| Judgments::from_owned(&owned));
        }
        let results = match self.answer(ctx, samples)? {
            Answer::Packed(bytes) => {
                let len = bytes.len();
                let checked =
                    Judgments::from_packed(bytes).map_err(|e| packed::answer_error(len, e));
                self.expect_decoded("judge", checked)?
            }
            Answer::Owned(results) => Judgments::from_owned(&results),
        };
        if results.len() != samples.len() {
            self.live = None;
            return Err(count_error(
                &self.plugin.metadata.name,
                "judge",
                results.len(),
                samples.len(),
            ));
        }
        Ok(results)
    }

    /// A rubric's answer as it arrives: packed (the current contract) or
    /// as records (an older one's canonical ABI).
    fn answer(&mut self, ctx: &Context, samples: &[Sample]) -> Result<Answer, PluginError> {
        self.call("judge", |store, exports| match exports {
            Exports::Rubric(ByVersion::Current(r)) => {
                Some(packed::judge(store, r, ctx, samples).map(Answer::Packed))
            }
            Exports::Rubric(r) => Some(
                versioned!(r, r => r
                    .verifine_plugin_rubric_plugin()
                    .call_judge(store, ctx, samples))
                .map(Answer::Owned),
            ),
            _ => None,
        })
    }

    /// Aggregates a batch: one reward (none when undefined, or an error) per item, in order.
    pub fn aggregate(
        &mut self,
        ctx: &Context,
        items: &[Scoring],
    ) -> Result<Vec<Result<Option<f64>, String>>, PluginError> {
        #[cfg(feature = "native")]
        if let Some(native) = self.plugin.native() {
            return native.aggregate(ctx, items);
        }
        let results = self.call("aggregate", |store, exports| match exports {
            Exports::Aggregator(ByVersion::Current(a)) => {
                Some(packed::aggregate(store, a, ctx, items))
            }
            Exports::Aggregator(a) => Some(
                versioned!(a, a => a
                    .verifine_plugin_aggregator_plugin()
                    .call_aggregate(store, ctx, items))
                .map(Ok),
            ),
            _ => None,
        })?;
        let results = self.expect_decoded("aggregate", results)?;
        self.expect_count("aggregate", results, items.len())
    }

    /// Curriculum decisions for a batch of candidates, in order.
    pub fn select(
        &mut self,
        ctx: &Context,
        candidates: &[Candidate],
    ) -> Result<Result<Vec<CurriculumDecision>, String>, PluginError> {
        #[cfg(feature = "native")]
        if let Some(native) = self.plugin.native() {
            return native.select(ctx, candidates);
        }
        let result = self.call("select", |store, exports| match exports {
            Exports::Curriculum(c) => Some(versioned!(c, c => c
                .verifine_plugin_curriculum_plugin()
                .call_select(store, ctx, candidates))),
            _ => None,
        })?;
        match result {
            Ok(decisions) => self
                .expect_count("select", decisions, candidates.len())
                .map(Ok),
            Err(e) => Ok(Err(e)),
        }
    }

    /// Whether the trigger fires at the last point of `history`.
    pub fn check(
        &mut self,
        ctx: &Context,
        history: &[MonitorPoint],
    ) -> Result<Result<TriggerDecision, String>, PluginError> {
        #[cfg(feature = "native")]
        if let Some(native) = self.plugin.native() {
            return native.check(ctx, history);
        }
        self.call("check", |store, exports| match exports {
            Exports::Trigger(t) => Some(versioned!(t, t => t
                .verifine_plugin_trigger_plugin()
                .call_check(store, ctx, history))),
            _ => None,
        })
    }

    /// A result count that differs from the input count is an error, never broadcast.
    /// A result the host could not decode breaks the contract like a wrong
    /// count does: reported, and the store discarded.
    fn expect_decoded<T>(
        &mut self,
        call: &'static str,
        decoded: Result<T, String>,
    ) -> Result<T, PluginError> {
        decoded.map_err(|message| {
            self.live = None;
            PluginError::Contract {
                plugin: self.plugin.metadata.name.clone(),
                call,
                message,
            }
        })
    }

    fn expect_count<T>(
        &mut self,
        call: &'static str,
        results: Vec<T>,
        expected: usize,
    ) -> Result<Vec<T>, PluginError> {
        let checked = check_count(&self.plugin.metadata.name, call, results, expected);
        if checked.is_err() {
            self.live = None;
        }
        checked
    }
}

/// Epoch ticks in `time` (at least one).
fn ticks(time: std::time::Duration) -> u64 {
    ((time.as_nanos() / EPOCH_TICK.as_nanos()) as u64).max(1)
}

/// The error chain in one line, with what the plugin wrote to stderr.
fn describe_error(error: &wasmtime::Error, stderr: &str) -> String {
    let mut message = format!("{error:#}");
    if let Some(trap) = error.downcast_ref::<Trap>()
        && !message.contains(&trap.to_string())
    {
        message = format!("{trap}: {message}");
    }
    // Keep the first line of the wasm backtrace out of user-facing errors.
    if let Some(cut) = message.find("\nwasm backtrace") {
        message.truncate(cut);
    }
    if !stderr.is_empty() {
        message.push_str(&format!(" (plugin stderr: {stderr})"));
    }
    message
}
