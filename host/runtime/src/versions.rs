//! A component runs under the contract version it was built against: its
//! pre-linked code and its exports are those of that version's worlds
//! ([`crate::bindings`] for 0.2, [`crate::bindings::v0_1`] for 0.1). The
//! records are the same Rust types in both, so every call site is written
//! once and [`versioned!`] expands it for each version.

use crate::bindings::{aggregator, curriculum, rubric, trigger, v0_1};
use crate::host_state::HostState;
use crate::metadata::PluginKind;
use wasmtime::Store;
use wasmtime::component::InstancePre;

/// One value per contract version a component can be built against.
#[derive(Clone)]
pub(crate) enum ByVersion<Current, V01> {
    /// Built against the current contract (0.2).
    Current(Current),
    /// Built against contract 0.1.
    V01(V01),
}

/// Runs `$body` with `$bind` bound to whichever version `$value` holds.
macro_rules! versioned {
    ($value:expr, $bind:ident => $body:expr) => {
        match $value {
            $crate::versions::ByVersion::Current($bind) => $body,
            $crate::versions::ByVersion::V01($bind) => $body,
        }
    };
}
pub(crate) use versioned;

/// Pre-linked code of one plugin, by kind: instantiating from it is cheap.
#[derive(Clone)]
pub(crate) enum KindPre {
    Rubric(ByVersion<rubric::RubricPre<HostState>, v0_1::rubric::RubricPre<HostState>>),
    Aggregator(
        ByVersion<aggregator::AggregatorPre<HostState>, v0_1::aggregator::AggregatorPre<HostState>>,
    ),
    Curriculum(
        ByVersion<curriculum::CurriculumPre<HostState>, v0_1::curriculum::CurriculumPre<HostState>>,
    ),
    Trigger(ByVersion<trigger::TriggerPre<HostState>, v0_1::trigger::TriggerPre<HostState>>),
}

/// A live instance's exports.
pub(crate) enum Exports {
    Rubric(ByVersion<rubric::Rubric, v0_1::rubric::Rubric>),
    Aggregator(ByVersion<aggregator::Aggregator, v0_1::aggregator::Aggregator>),
    Curriculum(ByVersion<curriculum::Curriculum, v0_1::curriculum::Curriculum>),
    Trigger(ByVersion<trigger::Trigger, v0_1::trigger::Trigger>),
}

/// Picks the version's world for `kind`: 0.1 components export 0.1's
/// interfaces, everything newer the current ones.
fn pick<C, V>(
    v01: bool,
    current: impl FnOnce() -> wasmtime::Result<C>,
    old: impl FnOnce() -> wasmtime::Result<V>,
) -> wasmtime::Result<ByVersion<C, V>> {
    if v01 {
        old().map(ByVersion::V01)
    } else {
        current().map(ByVersion::Current)
    }
}

impl KindPre {
    /// The pre-linked exports of a `kind` plugin built against contract
    /// `0.minor` (fails when the component does not export that world).
    pub(crate) fn new(
        kind: PluginKind,
        api_minor: u64,
        pre: InstancePre<HostState>,
    ) -> wasmtime::Result<Self> {
        let v01 = api_minor < 2;
        let p = pre.clone();
        Ok(match kind {
            PluginKind::Rubric => KindPre::Rubric(pick(
                v01,
                || rubric::RubricPre::new(p),
                || v0_1::rubric::RubricPre::new(pre),
            )?),
            PluginKind::Aggregator => KindPre::Aggregator(pick(
                v01,
                || aggregator::AggregatorPre::new(p),
                || v0_1::aggregator::AggregatorPre::new(pre),
            )?),
            PluginKind::Curriculum => KindPre::Curriculum(pick(
                v01,
                || curriculum::CurriculumPre::new(p),
                || v0_1::curriculum::CurriculumPre::new(pre),
            )?),
            PluginKind::Trigger => KindPre::Trigger(pick(
                v01,
                || trigger::TriggerPre::new(p),
                || v0_1::trigger::TriggerPre::new(pre),
            )?),
        })
    }

    /// A fresh instance's exports in `store`.
    pub(crate) fn instantiate(&self, store: &mut Store<HostState>) -> wasmtime::Result<Exports> {
        macro_rules! start {
            ($pre:expr, $kind:ident) => {
                match $pre {
                    ByVersion::Current(p) => p.instantiate(&mut *store).map(ByVersion::Current),
                    ByVersion::V01(p) => p.instantiate(&mut *store).map(ByVersion::V01),
                }
                .map(Exports::$kind)
            };
        }
        match self {
            KindPre::Rubric(pre) => start!(pre, Rubric),
            KindPre::Aggregator(pre) => start!(pre, Aggregator),
            KindPre::Curriculum(pre) => start!(pre, Curriculum),
            KindPre::Trigger(pre) => start!(pre, Trigger),
        }
    }
}
