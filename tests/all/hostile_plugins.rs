//! The sandbox contains misbehaving plugins: each failure is a clear error,
//! and the host goes on with the next call — of the same instance and of a
//! good plugin.

use std::sync::Arc;
use verifine_runtime::{Limits, Plugin, PluginError, PluginInstance, Runtime, Sample};
use verifine_tests::{ctx, hostile, sample};

fn runtime() -> Runtime {
    let limits = Limits {
        call_timeout_ms: 300,
        memory_mib: 64,
    };
    Runtime::with_cache(limits, None).unwrap()
}

/// A good plugin still works on the same runtime.
fn good_plugin_still_works(runtime: &Runtime) {
    let math = runtime.load("math-answer").unwrap();
    let results = math
        .instance()
        .judge(&ctx(), &[sample("ok", "#### 4")])
        .unwrap();
    assert_eq!(results[0].as_ref().unwrap().total, Some(1.0));
}

/// The instance recovers: a benign call after the failure succeeds in a new store.
fn recovers(instance: &mut PluginInstance) {
    let results = instance.judge(&ctx(), &[sample("next", "fine")]).unwrap();
    assert!(results[0].is_ok());
    assert_eq!(
        instance.instantiations(),
        2,
        "the failed store was replaced"
    );
}

fn load(runtime: &Runtime, path: &str) -> Arc<Plugin> {
    runtime.load(path).unwrap()
}

#[test]
fn infinite_loop_hits_the_deadline() {
    let runtime = runtime();
    let mut instance = load(&runtime, hostile::INFINITE_LOOP).instance();
    let started = std::time::Instant::now();
    let err = instance.judge(&ctx(), &[sample("s", "loop")]).unwrap_err();
    assert!(
        matches!(err, PluginError::Timeout { limit_ms: 300, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("time limit of 300 ms"), "{err}");
    assert!(started.elapsed().as_secs() < 5, "deadline not enforced");
    recovers(&mut instance);
    good_plugin_still_works(&runtime);
}

#[test]
fn a_plugin_that_sleeps_in_a_host_call_is_stopped_at_once() {
    let runtime = runtime();
    let mut instance = load(&runtime, hostile::SLEEPER).instance();
    let started = std::time::Instant::now();
    let err = instance.judge(&ctx(), &[sample("s", "sleep")]).unwrap_err();
    // The plugin asked for 20 s; the epoch deadline cannot interrupt a host
    // call, so the timer itself must refuse.
    assert!(
        started.elapsed().as_secs() < 10,
        "the sleep was not stopped"
    );
    let PluginError::Trap { message, .. } = &err else {
        panic!("expected a trap, got {err}");
    };
    assert!(message.contains("may not sleep"), "{message}");
    recovers(&mut instance);
    good_plugin_still_works(&runtime);
}

#[test]
fn allocation_bomb_hits_the_memory_cap() {
    let runtime = runtime();
    let mut instance = load(&runtime, hostile::ALLOC_BOMB).instance();
    let err = instance.judge(&ctx(), &[sample("s", "bomb")]).unwrap_err();
    let PluginError::Trap { message, .. } = &err else {
        panic!("expected a trap, got {err}");
    };
    assert!(message.contains("memory"), "{message}");
    recovers(&mut instance);
    good_plugin_still_works(&runtime);
}

#[test]
fn panic_is_a_trap_with_the_panic_message() {
    let runtime = runtime();
    let mut instance = load(&runtime, hostile::PANICKER).instance();
    let err = instance
        .judge(&ctx(), &[sample("s7", "panic")])
        .unwrap_err();
    assert!(matches!(err, PluginError::Trap { .. }), "{err}");
    assert!(
        err.to_string().contains("deliberate panic on sample s7"),
        "{err}"
    );
    recovers(&mut instance);
    good_plugin_still_works(&runtime);
}

#[test]
fn output_is_bounded_per_call_and_never_fails_a_plugin() {
    // A generous deadline: this test is about memory, not time, and must not
    // flake on a busy machine.
    let runtime = Runtime::with_cache(
        Limits {
            call_timeout_ms: 10_000,
            memory_mib: 64,
        },
        None,
    )
    .unwrap();
    let mut instance = load(&runtime, hostile::CHATTERBOX).instance();
    // A kilobyte to stdout and to stderr on every call, for many calls, in one store.
    for call in 0..2_000 {
        let id = format!("s{call}");
        let results = instance.judge(&ctx(), &[sample(&id, "fine")]).unwrap();
        assert!(results[0].is_ok(), "call {call}: {:?}", results[0]);
    }
    // Two MiB to each in one call (128 times the tail) is cut to a tail, not a trap.
    let results = instance.judge(&ctx(), &[sample("big", "flood")]).unwrap();
    assert!(results[0].is_ok(), "{:?}", results[0]);
    assert_eq!(instance.instantiations(), 1, "no store was renewed");
    // A trap quotes what the failing call wrote, not what earlier calls did.
    let err = instance
        .judge(&ctx(), &[sample("last", "panic")])
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("deliberate panic on sample last"),
        "{message}"
    );
    assert!(message.contains("chatter from sample last"), "{message}");
    assert!(!message.contains("sample s1999"), "{message}");
    assert!(!message.contains("sample big"), "{message}");
    recovers(&mut instance);
    good_plugin_still_works(&runtime);
}

#[test]
fn future_api_version_is_refused_naming_both_versions() {
    let runtime = runtime();
    let err = format!("{:#}", runtime.load(hostile::FUTURE_API).err().unwrap());
    assert!(err.contains("9.0.0"), "{err}");
    assert!(err.contains(verifine_runtime::HOST_API_VERSION), "{err}");
    assert!(err.contains("hostile-future-api"), "{err}");
    good_plugin_still_works(&runtime);
}

#[test]
fn core_module_is_refused() {
    let runtime = runtime();
    // The smallest valid core module: magic and version 1, no sections.
    let core_module = b"\0asm\x01\0\0\0";
    let err = format!(
        "{:#}",
        runtime.load_bytes(core_module, "core.wasm").err().unwrap()
    );
    assert!(
        err.contains("core WebAssembly module, not a component"),
        "{err}"
    );
    good_plugin_still_works(&runtime);
}

#[test]
fn random_bytes_are_refused() {
    let runtime = runtime();
    let mut state = 0x1234_5678_9abc_def0_u64;
    let mut random = Vec::with_capacity(4096);
    for _ in 0..4096 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        random.push(state as u8);
    }
    let err = format!(
        "{:#}",
        runtime.load_bytes(&random, "random.wasm").err().unwrap()
    );
    assert!(err.contains("not a WebAssembly binary"), "{err}");

    // Random bytes behind a valid component preamble are refused too.
    let mut disguised = b"\0asm\x0d\0\x01\0".to_vec();
    disguised.extend_from_slice(&random);
    assert!(runtime.load_bytes(&disguised, "disguised.wasm").is_err());
    good_plugin_still_works(&runtime);
}

#[test]
fn wrong_result_count_is_an_error_not_a_broadcast() {
    let runtime = runtime();
    let mut instance = load(&runtime, hostile::WRONG_COUNT).instance();
    let err = instance
        .judge(&ctx(), &[sample("a", "x"), sample("b", "y")])
        .unwrap_err();
    assert!(matches!(err, PluginError::Contract { .. }), "{err}");
    assert!(
        err.to_string().contains("returned 1 results for 2 inputs"),
        "{err}"
    );
    good_plugin_still_works(&runtime);
}

#[test]
fn a_packed_answer_that_does_not_decode_or_count_is_a_contract_error() {
    let runtime = runtime();
    let mut instance = load(&runtime, hostile::GARBLED_PACKED).instance();
    let err = instance
        .judge(&ctx(), &[sample("a", "x"), sample("b", "y")])
        .unwrap_err();
    assert!(matches!(err, PluginError::Contract { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("judge-packed answered 11 bytes that do not decode"),
        "{err}"
    );
    let before = instance.instantiations();
    let err = instance
        .judge(&ctx(), &[sample("a", "short"), sample("b", "y")])
        .unwrap_err();
    assert!(
        err.to_string().contains("returned 1 results for 2 inputs"),
        "{err}"
    );
    // Each breach discarded the store: the second call started a new one.
    assert_eq!(instance.instantiations(), before + 1);
    good_plugin_still_works(&runtime);
}

#[test]
fn wrong_kind_is_refused_where_a_rubric_is_needed() {
    let runtime = runtime();
    let err = format!(
        "{:#}",
        runtime
            .load_kind("weighted-sum", verifine_runtime::PluginKind::Rubric)
            .err()
            .unwrap()
    );
    assert!(
        err.contains("aggregator plugin, but a rubric plugin is needed"),
        "{err}"
    );
}

#[test]
fn a_trap_fails_only_its_sample_in_a_scoring_run() {
    use verifine_runtime::scorer_pool::score_all;
    use verifine_runtime::scoring::RewardPlugins;
    let runtime = runtime();
    let function = RewardPlugins::load(
        &runtime,
        hostile::PANICKER,
        &serde_json::json!({}),
        None,
        &serde_json::json!({}),
    )
    .unwrap();
    let samples: Vec<Sample> = (0..6)
        .map(|i| sample(&i.to_string(), if i == 2 { "panic" } else { "fine" }))
        .collect();
    let scored = score_all(&function, &samples, 2, 1, &|_| {}).unwrap();
    let failed: Vec<bool> = scored.iter().map(|s| s.error.is_some()).collect();
    // The trapping batch is judged again sample by sample: its neighbour
    // (sample 3) is scored, only the panicking sample fails.
    assert_eq!(failed, [false, false, true, false, false, false]);
    assert!(
        scored[2].error.as_ref().unwrap().contains("panic"),
        "{:?}",
        scored[2].error
    );
    assert_eq!(scored[3].total, Some(1.0));
    assert_eq!(scored[4].total, Some(1.0));
}

#[test]
fn memory_a_plugin_keeps_across_calls_is_never_handed_out_again() {
    for path in [hostile::HOARDER, hostile::HOARDER_IN_PLACE] {
        keeps_what_it_kept(path);
    }
}

fn keeps_what_it_kept(path: &str) {
    let runtime = runtime();
    let mut instance = load(&runtime, path).instance();
    let mut kept: Vec<String> = Vec::new();
    // Early batches keep nothing (the call arena is reused from call to
    // call), then some keep, then none again, with long responses between.
    for batch in 0..12 {
        let samples: Vec<Sample> = (0..24)
            .map(|i| {
                let text = match (batch, i % 5) {
                    (3 | 4 | 7, 0) => format!("keep:{batch}/{i}:{}", "k".repeat(i * 40)),
                    _ => format!("{batch}-{i} {}", "x".repeat((batch * 31 + i * 57) % 2000)),
                };
                sample(&format!("s{batch}-{i}"), &text)
            })
            .collect();
        let judged = instance.judge(&ctx(), &samples).unwrap();
        for (sample, judgment) in samples.iter().zip(judged) {
            let judgment = judgment.unwrap();
            if sample.response.starts_with("keep:") {
                kept.push(sample.response.clone());
            }
            assert_eq!(
                judgment.explanation.as_deref(),
                Some(kept.join("|").as_str())
            );
            let churned: usize = (0..8).map(|i| sample.response.len() * i).sum();
            assert_eq!(judgment.sub_scores[0].value, churned as f64);
        }
    }
    assert_eq!(
        instance.instantiations(),
        1,
        "no trap, one store throughout"
    );
}
