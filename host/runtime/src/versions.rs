//! A component runs under the contract version it was built against: its
//! pre-linked code and its exports are those of that version's worlds
//! ([`crate::bindings`] for 0.3, [`crate::bindings::v0_2`] and
//! [`crate::bindings::v0_1`] for the older ones). The records are the same
//! Rust types in all of them, so every call site is written once and
//! [`versioned!`] expands it for each version; only a call that exists in
//! the current version alone (`judge-packed`) matches on [`ByVersion`].

use crate::bindings::{aggregator, curriculum, rubric, trigger, v0_1, v0_2};
use crate::host_state::HostState;
use crate::metadata::PluginKind;
use wasmtime::Store;
use wasmtime::component::InstancePre;

/// One value per contract version a component can be built against.
#[derive(Clone)]
pub(crate) enum ByVersion<Current, V02, V01> {
    /// Built against the current contract (0.3).
    Current(Current),
    /// Built against contract 0.2.
    V02(V02),
    /// Built against contract 0.1.
    V01(V01),
}

/// Runs `$body` with `$bind` bound to whichever version `$value` holds.
macro_rules! versioned {
    ($value:expr, $bind:ident => $body:expr) => {
        match $value {
            $crate::versions::ByVersion::Current($bind) => $body,
            $crate::versions::ByVersion::V02($bind) => $body,
            $crate::versions::ByVersion::V01($bind) => $body,
        }
    };
}
pub(crate) use versioned;

/// Pre-linked code of one plugin, by kind: instantiating from it is cheap.
#[derive(Clone)]
pub(crate) enum KindPre {
    Rubric(
        ByVersion<
            rubric::RubricPre<HostState>,
            v0_2::rubric::RubricPre<HostState>,
            v0_1::rubric::RubricPre<HostState>,
        >,
    ),
    Aggregator(
        ByVersion<
            aggregator::AggregatorPre<HostState>,
            v0_2::aggregator::AggregatorPre<HostState>,
            v0_1::aggregator::AggregatorPre<HostState>,
        >,
    ),
    Curriculum(
        ByVersion<
            curriculum::CurriculumPre<HostState>,
            v0_2::curriculum::CurriculumPre<HostState>,
            v0_1::curriculum::CurriculumPre<HostState>,
        >,
    ),
    Trigger(
        ByVersion<
            trigger::TriggerPre<HostState>,
            v0_2::trigger::TriggerPre<HostState>,
            v0_1::trigger::TriggerPre<HostState>,
        >,
    ),
}

/// A live instance's exports.
pub(crate) enum Exports {
    Rubric(ByVersion<rubric::Rubric, v0_2::rubric::Rubric, v0_1::rubric::Rubric>),
    Aggregator(
        ByVersion<
            aggregator::Aggregator,
            v0_2::aggregator::Aggregator,
            v0_1::aggregator::Aggregator,
        >,
    ),
    Curriculum(
        ByVersion<
            curriculum::Curriculum,
            v0_2::curriculum::Curriculum,
            v0_1::curriculum::Curriculum,
        >,
    ),
    Trigger(ByVersion<trigger::Trigger, v0_2::trigger::Trigger, v0_1::trigger::Trigger>),
}

/// Picks the world of contract `0.minor` (0.0 is 0.1's): the minor a
/// component was stamped with decides which exports it has.
fn pick<C, V02, V01>(
    minor: u64,
    current: impl FnOnce() -> wasmtime::Result<C>,
    v02: impl FnOnce() -> wasmtime::Result<V02>,
    v01: impl FnOnce() -> wasmtime::Result<V01>,
) -> wasmtime::Result<ByVersion<C, V02, V01>> {
    match minor {
        0 | 1 => v01().map(ByVersion::V01),
        2 => v02().map(ByVersion::V02),
        _ => current().map(ByVersion::Current),
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
        let (p, q) = (pre.clone(), pre.clone());
        Ok(match kind {
            PluginKind::Rubric => KindPre::Rubric(pick(
                api_minor,
                || rubric::RubricPre::new(p),
                || v0_2::rubric::RubricPre::new(q),
                || v0_1::rubric::RubricPre::new(pre),
            )?),
            PluginKind::Aggregator => KindPre::Aggregator(pick(
                api_minor,
                || aggregator::AggregatorPre::new(p),
                || v0_2::aggregator::AggregatorPre::new(q),
                || v0_1::aggregator::AggregatorPre::new(pre),
            )?),
            PluginKind::Curriculum => KindPre::Curriculum(pick(
                api_minor,
                || curriculum::CurriculumPre::new(p),
                || v0_2::curriculum::CurriculumPre::new(q),
                || v0_1::curriculum::CurriculumPre::new(pre),
            )?),
            PluginKind::Trigger => KindPre::Trigger(pick(
                api_minor,
                || trigger::TriggerPre::new(p),
                || v0_2::trigger::TriggerPre::new(q),
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
                    ByVersion::V02(p) => p.instantiate(&mut *store).map(ByVersion::V02),
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
