//! Generated bindings and the glue [`export_plugin!`](crate::export_plugin) expands to.

use super::*;
use std::cell::{Cell, RefCell};

pub mod rubric {
    wit_bindgen::generate!({
        world: "rubric",
        path: "wit/v0.3",
        pub_export_macro: true,
        export_macro_name: "export_rubric_world",
        default_bindings_module: "verifine_plugin_api::__private::rubric",
        // The packed batch (contract 0.3) and the native fast path carry
        // these records in postcard (serde).
        additional_derives: [serde::Serialize, serde::Deserialize],
    });
    /// The world's exports, as [`export_plugin!`](crate::export_plugin) implements them.
    pub use exports::verifine::plugin::rubric_plugin::Guest;
}

pub mod aggregator {
    wit_bindgen::generate!({
        world: "aggregator",
        path: "wit/v0.3",
        pub_export_macro: true,
        export_macro_name: "export_aggregator_world",
        default_bindings_module: "verifine_plugin_api::__private::aggregator",
        with: {
            "verifine:plugin/types@0.3.0": super::rubric::verifine::plugin::types,
            "verifine:plugin/host@0.3.0": super::rubric::verifine::plugin::host,
        },
    });
    /// The world's exports, as [`export_plugin!`](crate::export_plugin) implements them.
    pub use exports::verifine::plugin::aggregator_plugin::Guest;
}

pub mod curriculum {
    wit_bindgen::generate!({
        world: "curriculum",
        path: "wit/v0.3",
        pub_export_macro: true,
        export_macro_name: "export_curriculum_world",
        default_bindings_module: "verifine_plugin_api::__private::curriculum",
        with: {
            "verifine:plugin/types@0.3.0": super::rubric::verifine::plugin::types,
            "verifine:plugin/host@0.3.0": super::rubric::verifine::plugin::host,
        },
    });
    /// The world's exports, as [`export_plugin!`](crate::export_plugin) implements them.
    pub use exports::verifine::plugin::curriculum_plugin::Guest;
}

pub mod trigger {
    wit_bindgen::generate!({
        world: "trigger",
        path: "wit/v0.3",
        pub_export_macro: true,
        export_macro_name: "export_trigger_world",
        default_bindings_module: "verifine_plugin_api::__private::trigger",
        with: {
            "verifine:plugin/types@0.3.0": super::rubric::verifine::plugin::types,
            "verifine:plugin/host@0.3.0": super::rubric::verifine::plugin::host,
        },
    });
    /// The world's exports, as [`export_plugin!`](crate::export_plugin) implements them.
    pub use exports::verifine::plugin::trigger_plugin::Guest;
}

/// Parses the plugin's config once per call.
pub fn config<C: DeserializeOwned + Default>(ctx: &Context) -> Result<C, String> {
    let text = ctx.config.trim();
    if text.is_empty() || text == "{}" || text == "null" {
        return Ok(C::default());
    }
    serde_json::from_str(text).map_err(|e| format!("invalid plugin config: {e}"))
}

pub fn judge<R: Rubric>(ctx: &Context, samples: &[Sample]) -> Vec<Result<Judgment, String>> {
    match config::<R::Config>(ctx) {
        Ok(config) => R::judge_batch(&config, ctx, samples),
        Err(e) => samples.iter().map(|_| Err(e.clone())).collect(),
    }
}

/// Decodes a packed batch (contract 0.3). The host encodes what it sends:
/// bytes that do not decode are a host bug, and the trap's message reaches
/// the host's error.
fn unpack<T: DeserializeOwned>(call: &str, bytes: &[u8]) -> T {
    postcard::from_bytes(bytes)
        .unwrap_or_else(|e| panic!("{call}: undecodable batch from the host: {e}"))
}

thread_local! {
    /// The last packed batch's samples, whose strings the next batch reuses.
    static LAST_BATCH: RefCell<Vec<Sample>> = const { RefCell::new(Vec::new()) };
    /// The last packed answer's length: the next answer's first capacity.
    static LAST_ANSWER_LEN: Cell<usize> = const { Cell::new(0) };
}

/// Encodes a packed answer (contract 0.3) into a buffer sized like the
/// last one, so it rarely grows.
fn pack<T: serde::Serialize>(call: &str, value: &T) -> Vec<u8> {
    let buffer = Vec::with_capacity(LAST_ANSWER_LEN.get());
    let bytes = postcard::to_extend(value, buffer)
        .unwrap_or_else(|e| panic!("{call}: unencodable answer: {e}"));
    LAST_ANSWER_LEN.set(bytes.len());
    bytes
}

/// `judge` over contract 0.3's packed batch: postcard in, postcard out
/// (the format `judge-packed` documents in the contract).
///
/// The rubric's allocations come from the call arena ([`call_arena`]); the
/// samples' strings (kept for the next batch) and the answer are allocated
/// before it starts.
pub fn judge_packed<R: Rubric>(ctx: Context, bytes: &[u8]) -> Vec<u8> {
    LAST_BATCH.with_borrow_mut(|samples| {
        packed::read_samples_into(bytes, samples)
            .unwrap_or_else(|e| panic!("judge-packed: undecodable batch from the host: {e}"));
        let answer = Vec::with_capacity(LAST_ANSWER_LEN.get().max(64));
        let answer = call_arena::during_call(|| {
            let judged = judge::<R>(&ctx, samples);
            postcard::to_extend(&judged, answer)
                .unwrap_or_else(|e| panic!("judge-packed: unencodable answer: {e}"))
        });
        LAST_ANSWER_LEN.set(answer.len());
        answer
    })
}

thread_local! {
    /// The fast path's judgment buffers, reused from sample to sample.
    static SCRATCH: RefCell<in_place::Scratch> = RefCell::new(in_place::Scratch::default());
}

/// `judge-packed` on the fast path: samples read in place, judgments
/// written in place ([`RubricInPlace`]).
///
/// The rubric's own temporaries come from the call arena; the answer and the
/// writer's buffers are allocated before it starts, so that growing them
/// keeps them on the system allocator.
pub fn judge_packed_in_place<R: RubricInPlace>(ctx: Context, bytes: &[u8]) -> Vec<u8> {
    let mut answer = Vec::with_capacity(LAST_ANSWER_LEN.get().max(64));
    SCRATCH
        .with_borrow_mut(|scratch| {
            scratch.reserve();
            call_arena::during_call(|| {
                let config = config::<R::Config>(&ctx);
                in_place::judge_packed::<R>(&config, &ctx, bytes, scratch, &mut answer)
            })
        })
        .unwrap_or_else(|e| panic!("judge-packed: undecodable batch from the host: {e}"));
    LAST_ANSWER_LEN.set(answer.len());
    answer
}

/// `aggregate` over contract 0.3's packed batch.
pub fn aggregate_packed<A: Aggregator>(ctx: Context, items: &[u8]) -> Vec<u8> {
    let items: Vec<Scoring> = unpack("aggregate-packed", items);
    pack("aggregate-packed", &aggregate::<A>(ctx, items))
}

pub fn aggregate<A: Aggregator>(
    ctx: Context,
    items: Vec<Scoring>,
) -> Vec<Result<Option<f64>, String>> {
    match config::<A::Config>(&ctx) {
        Ok(config) => A::aggregate_batch(&config, &ctx, &items),
        Err(e) => items.iter().map(|_| Err(e.clone())).collect(),
    }
}

pub fn select<C: Curriculum>(
    ctx: Context,
    candidates: Vec<Candidate>,
) -> Result<Vec<CurriculumDecision>, String> {
    C::select(&config::<C::Config>(&ctx)?, &ctx, &candidates)
}

pub fn check<T: Trigger>(
    ctx: Context,
    history: Vec<MonitorPoint>,
) -> Result<TriggerDecision, String> {
    T::check(&config::<T::Config>(&ctx)?, &ctx, &history)
}

pub const fn joined_len(parts: &[&str]) -> usize {
    let mut len = 0;
    let mut i = 0;
    while i < parts.len() {
        len += parts[i].len();
        i += 1;
    }
    len
}

pub const fn join<const N: usize>(parts: &[&str]) -> [u8; N] {
    let mut out = [0u8; N];
    let mut at = 0;
    let mut i = 0;
    while i < parts.len() {
        let bytes = parts[i].as_bytes();
        let mut j = 0;
        while j < bytes.len() {
            out[at] = bytes[j];
            at += 1;
            j += 1;
        }
        i += 1;
    }
    out
}
