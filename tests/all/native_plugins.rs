//! Native plugins, the trusted fast path: refused unless the user opts in,
//! checked like components before any call, and scoring exactly like the
//! sandboxed build of the same crate.

use verifine::commands::score::{OutputRow, ScoreArgs, score};
use verifine_base::sha256_hex;
use verifine_runtime::rows::read_samples;
use verifine_runtime::scoring::RewardPlugins;
use verifine_runtime::{Context, Limits, NativePlugin, PluginError, Runtime};
use verifine_tests::{ctx, fixture, native, read_rows, sample, scratch_dir};

fn spec(path: &str) -> String {
    format!("native:{path}")
}

fn score_fixture(dir: &std::path::Path, rubric: &str, allow_native: bool) -> ScoreArgs {
    ScoreArgs {
        rubric: Some(rubric.into()),
        input: fixture("math-answer.jsonl"),
        output: dir.join(format!(
            "{}.jsonl",
            if allow_native { "native" } else { "wasm" }
        )),
        threads: Some(2),
        batch_size: Some(4),
        allow_native,
        ..ScoreArgs::default()
    }
}

#[test]
fn refused_without_opt_in_everywhere() {
    let err = NativePlugin::load(native::MATH_ANSWER, false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not sandboxed"), "{err}");
    assert!(err.contains("--allow-native"), "{err}");

    // A runtime does not load `native:` specs unless told to.
    let runtime = Runtime::with_cache(Limits::default(), None).unwrap();
    let err = format!(
        "{:#}",
        runtime.load(spec(native::MATH_ANSWER)).err().unwrap()
    );
    assert!(err.contains("not sandboxed"), "{err}");

    // Nor does `verifine score` without --allow-native; nothing is written.
    let dir = scratch_dir("native-refused");
    let args = score_fixture(&dir, &spec(native::MATH_ANSWER), false);
    let err = format!("{:#}", score(&args).unwrap_err());
    assert!(err.contains("--allow-native"), "{err}");
    assert!(!args.output.exists());
}

#[test]
fn scores_the_gsm8k_fixture_exactly_like_the_component() {
    let dir = scratch_dir("native-gsm8k");
    let wasm_args = score_fixture(&dir, "math-answer", false);
    let native_args = score_fixture(&dir, &spec(native::MATH_ANSWER), true);
    let wasm = score(&wasm_args).unwrap();
    let native = score(&native_args).unwrap();

    assert_eq!(native.n, wasm.n);
    assert_eq!(native.scored, wasm.scored);
    assert_eq!(native.errors, wasm.errors);
    assert_eq!(native.mean, wasm.mean);
    let wasm_rows: Vec<OutputRow> = read_rows(&wasm_args.output);
    let native_rows: Vec<OutputRow> = read_rows(&native_args.output);
    assert_eq!(native_rows.len(), wasm_rows.len());
    for (n, w) in native_rows.iter().zip(&wasm_rows) {
        assert_eq!((&n.id, n.total), (&w.id, w.total));
        assert_eq!(n.verdicts, w.verdicts, "row {}", n.id);
        assert_eq!(n.error, w.error, "row {}", n.id);
    }

    // Same name and version; the sha256 pins the shared library's file.
    assert_eq!(native.rubric.name, "math-answer");
    assert_eq!(native.rubric.version, wasm.rubric.version);
    let library = std::fs::read(native::MATH_ANSWER).unwrap();
    assert_eq!(native.rubric.sha256, sha256_hex(&library));
    assert_ne!(native.rubric.sha256, wasm.rubric.sha256);
    assert_eq!(native_rows[0].plugin, native.rubric);

    // Judgments match field for field through the JSON transport, describe too.
    let runtime = Runtime::with_cache(Limits::default(), None).unwrap();
    let mut component = runtime.load("math-answer").unwrap().instance();
    let plugin = NativePlugin::load(native::MATH_ANSWER, true).unwrap();
    let samples = read_samples(&fixture("math-answer.jsonl")).unwrap();
    assert_eq!(
        plugin.judge(&ctx(), &samples).unwrap(),
        component.judge(&ctx(), &samples).unwrap()
    );
    assert_eq!(plugin.describe().unwrap(), component.describe().unwrap());
    assert_eq!(plugin.judge(&ctx(), &[]).unwrap(), vec![]);
}

#[test]
fn config_reaches_the_native_plugin() {
    let plugin = NativePlugin::load(native::MATH_ANSWER, true).unwrap();
    let config = |json: &str| Context {
        config: json.into(),
        ..ctx()
    };
    let results = plugin
        .judge(
            &config(r#"{"format_weight":0.0,"correct_weight":2.0}"#),
            &[sample("a", "#### 4")],
        )
        .unwrap();
    assert_eq!(results[0].as_ref().unwrap().total, Some(2.0));
    let results = plugin
        .judge(&config(r#"{"no_such_field":1}"#), &[sample("a", "#### 4")])
        .unwrap();
    assert!(
        results[0]
            .as_ref()
            .unwrap_err()
            .contains("invalid plugin config")
    );
}

#[test]
fn future_contract_version_is_refused_naming_both_versions() {
    let err = format!(
        "{:#}",
        NativePlugin::load(native::FUTURE_API, true).unwrap_err()
    );
    assert!(err.contains("9.0.0"), "{err}");
    assert!(err.contains(verifine_runtime::HOST_API_VERSION), "{err}");
    assert!(err.contains("hostile-future-api"), "{err}");
}

#[test]
fn a_panic_is_an_error_and_the_plugin_keeps_working() {
    let plugin = NativePlugin::load(native::PANICKER, true).unwrap();
    let err = plugin.judge(&ctx(), &[sample("s7", "panic")]).unwrap_err();
    assert!(matches!(err, PluginError::Trap { .. }), "{err}");
    assert!(
        err.to_string().contains("deliberate panic on sample s7"),
        "{err}"
    );
    let results = plugin.judge(&ctx(), &[sample("next", "fine")]).unwrap();
    assert!(results[0].is_ok());

    // Through a scorer the panic fails its batch, not the process.
    let runtime = Runtime::with_cache(Limits::default(), None)
        .unwrap()
        .allow_native(true);
    let function = RewardPlugins::load(
        &runtime,
        spec(native::PANICKER),
        &serde_json::json!({}),
        None,
        &serde_json::json!({}),
    )
    .unwrap();
    let mut scorer = function.scorer().unwrap();
    let scored = scorer.score_batch(0, 0, &[sample("a", "fine"), sample("b", "panic")]);
    // Only the panicking sample fails: the batch is judged again one by one.
    assert_eq!(scored[0].total, Some(1.0));
    assert!(scored[1].total.is_none());
    assert!(
        scored[1]
            .error
            .as_ref()
            .unwrap()
            .contains("deliberate panic")
    );
    let scored = scorer.score_batch(0, 0, &[sample("c", "fine")]);
    assert_eq!(scored[0].total, Some(1.0));
}

#[test]
fn kinds_are_checked_like_components() {
    let plugin = NativePlugin::load(native::MATH_ANSWER, true).unwrap();
    let err = plugin.aggregate(&ctx(), &[]).unwrap_err();
    assert!(matches!(err, PluginError::WrongKind { .. }), "{err}");

    let runtime = Runtime::with_cache(Limits::default(), None)
        .unwrap()
        .allow_native(true);
    let err = RewardPlugins::load(
        &runtime,
        "math-answer",
        &serde_json::json!({}),
        Some(spec(native::MATH_ANSWER).into()),
        &serde_json::json!({}),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("is a rubric plugin"), "{err}");
}
