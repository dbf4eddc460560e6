//! `math-answer` scoring per sample, several ways on the same batch of 256
//! GSM8K model solutions: the Rust function linked into the bench, its
//! owned path (`native`, the anchor), its fast path linked in
//! (`native_in_place`: the packed batch in, the packed answer out, what the
//! component runs, without the sandbox), the same crate as a native plugin
//! loaded with libloading (`native_cdylib`, postcard across the C ABI), and
//! the component in the WASM sandbox on the SDK's fast path (`wasm`: the
//! sample read in place, the judgment written in place, the host reading
//! the answer in place) and on its owned path (`wasm_owned`: owned samples
//! and judgments in the guest, the component built with the feature
//! `owned-path`); beside them `wasm_boundary_only` and
//! `wasm_boundary_only_owned`, a component that returns judgments of the
//! same shape without reading the text, which is what crossing the sandbox
//! costs by itself on each path. Every sandboxed row ends with judgments
//! the host can read (checked whole, read in place: `judge_in_place`),
//! but `wasm_owned_records`: the fast path's component with the host
//! building owned records (`judge`, what the reward server reads).
//!
//! cargo bench -p verifine-runtime --features native --bench math_answer
//!
//! The ratios to `native` are the figures that matter (see BENCHMARKS.md);
//! absolute times depend on the machine. The native plugin is built first
//! (release, host target) into target/native-plugins. `MATH_ANSWER_COMPONENT`
//! and `BOUNDARY_COMPONENT` name other builds of the two components to time.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use verifine_plugin_api as api;
use verifine_plugin_api::Rubric;
use verifine_runtime::{Context, Limits, NativePlugin, Runtime, Sample};

const BATCH: usize = 256;
const KEYS: [&str; 4] = [
    "6b_finetuning",
    "6b_verification",
    "175b_finetuning",
    "175b_verification",
];

/// 256 (question, model solution, reference) triples from the shared GSM8K
/// file; falls back to generated problems when the file is absent.
fn rows() -> Vec<(String, String, String, String)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/gsm8k/model_solutions.jsonl");
    let mut rows = Vec::new();
    if let Ok(text) = std::fs::read_to_string(&path) {
        for (i, line) in text.lines().enumerate() {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            for key in KEYS {
                rows.push((
                    format!("{i}/{key}"),
                    row["question"].as_str().unwrap().to_string(),
                    row[key]["solution"].as_str().unwrap().to_string(),
                    row["ground_truth"].as_str().unwrap().to_string(),
                ));
            }
        }
    } else {
        for i in 0..BATCH {
            rows.push((
                i.to_string(),
                format!("What is {i} + {i} + 3?"),
                format!(
                    "{i} + {i} = {}\n{} + 3 = {}\nA: {}",
                    2 * i,
                    2 * i,
                    2 * i + 3,
                    2 * i + 3
                ),
                format!("#### {}", 2 * i + 3),
            ));
        }
    }
    rows.truncate(BATCH);
    rows
}

/// A component to time instead of the one this tree builds (the variable
/// names its file): how one bench binary compares the steps of a change
/// to the guest side in one run (BENCHMARKS.md).
fn component_override(variable: &str) -> Option<std::path::PathBuf> {
    std::env::var_os(variable).map(std::path::PathBuf::from)
}

fn bench(c: &mut Criterion) {
    let rows = rows();
    let host_samples: Vec<Sample> = rows
        .iter()
        .map(|(id, q, r, reference)| Sample {
            id: id.clone(),
            prompt: q.clone(),
            response: r.clone(),
            reference: Some(reference.clone()),
            context: "{}".into(),
            metadata: vec![],
        })
        .collect();
    let guest_samples: Vec<api::Sample> = rows
        .iter()
        .map(|(id, q, r, reference)| api::Sample::new(id, q, r).with_reference(reference))
        .collect();

    let runtime = Runtime::new(Limits::default()).unwrap();
    let plugin = component_override("MATH_ANSWER_COMPONENT")
        .map_or_else(
            || runtime.load("math-answer"),
            |path| runtime.load(path.as_path()),
        )
        .unwrap();
    let mut instance = plugin.instance();
    let host_ctx = Context {
        step: 0,
        round: 0,
        config: "{}".into(),
    };
    let guest_ctx = api::Context::at_step(0);
    let config = math_answer::Config::default();

    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap();
    let library = verifine_wasm_build::build_native_libraries(workspace, &["math-answer"]);
    let boundary = component_override("BOUNDARY_COMPONENT").unwrap_or_else(|| {
        verifine_wasm_build::build_components(workspace, &["boundary-only"])[0]
            .path
            .clone()
    });
    let boundary = runtime.load(boundary.as_path()).unwrap();
    let mut boundary = boundary.instance();
    let owned = |package: &str| {
        let built =
            verifine_wasm_build::build_component_variant(workspace, package, "owned-path", "owned");
        runtime.load(built.path.as_path()).unwrap()
    };
    let mut owned_math = owned("math-answer").instance();
    let mut owned_boundary = owned("boundary-only").instance();
    let cdylib = NativePlugin::load(&library[0].path, true).unwrap();

    // Same verdicts every way before timing anything.
    let wasm = instance.judge(&host_ctx, &host_samples).unwrap();
    let packed_samples = postcard::to_stdvec(&guest_samples).unwrap();
    let in_place = || {
        api::__private::judge_packed_in_place::<math_answer::MathAnswer>(
            guest_ctx.clone(),
            black_box(&packed_samples),
        )
    };
    let natively_in_place: Vec<Result<verifine_runtime::Judgment, String>> =
        postcard::from_bytes(&in_place()).unwrap();
    assert_eq!(natively_in_place, wasm);
    assert_eq!(
        instance
            .judge_in_place(&host_ctx, &host_samples)
            .unwrap()
            .to_owned_results(),
        wasm
    );
    let native = math_answer::MathAnswer::judge_batch(&config, &guest_ctx, &guest_samples);
    for (w, n) in wasm.iter().zip(&native) {
        assert_eq!(w.as_ref().unwrap().total, n.as_ref().unwrap().total);
    }
    assert_eq!(cdylib.judge(&host_ctx, &host_samples).unwrap(), wasm);
    assert_eq!(owned_math.judge(&host_ctx, &host_samples).unwrap(), wasm);
    assert_eq!(
        owned_boundary.judge(&host_ctx, &host_samples).unwrap(),
        boundary.judge(&host_ctx, &host_samples).unwrap()
    );

    let mut group = c.benchmark_group("math_answer_batch256");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("native", |b| {
        b.iter(|| {
            black_box(math_answer::MathAnswer::judge_batch(
                &config,
                &guest_ctx,
                black_box(&guest_samples),
            ))
        })
    });
    group.bench_function("native_in_place", |b| b.iter(|| black_box(in_place())));
    group.bench_function("native_cdylib", |b| {
        b.iter(|| black_box(cdylib.judge(&host_ctx, black_box(&host_samples)).unwrap()))
    });
    group.bench_function("wasm", |b| {
        b.iter(|| {
            black_box(
                instance
                    .judge_in_place(&host_ctx, black_box(&host_samples))
                    .unwrap(),
            )
        })
    });
    // What `Scorer::score_batch` and the reward server read: owned records.
    group.bench_function("wasm_owned_records", |b| {
        b.iter(|| black_box(instance.judge(&host_ctx, black_box(&host_samples)).unwrap()))
    });
    group.bench_function("wasm_boundary_only", |b| {
        b.iter(|| {
            black_box(
                boundary
                    .judge_in_place(&host_ctx, black_box(&host_samples))
                    .unwrap(),
            )
        })
    });
    group.bench_function("wasm_owned", |b| {
        b.iter(|| {
            black_box(
                owned_math
                    .judge_in_place(&host_ctx, black_box(&host_samples))
                    .unwrap(),
            )
        })
    });
    group.bench_function("wasm_boundary_only_owned", |b| {
        b.iter(|| {
            black_box(
                owned_boundary
                    .judge_in_place(&host_ctx, black_box(&host_samples))
                    .unwrap(),
            )
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
