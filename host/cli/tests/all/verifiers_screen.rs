//! `verifine verifiers screen`: its figures against hand counts on a slice
//! small enough to check on paper, the shipped example end to end, and
//! configs it must refuse.
#![cfg(feature = "local-judge")]

use serde_json::{Value, json};
use std::path::Path;
use verifine::commands::verifiers::{ScreenArgs, screen};

fn scratch(name: &str) -> verifine_test_support::ScratchDir {
    verifine_test_support::scratch_dir(&format!("screen-{name}"))
}

fn write_lines(path: &Path, rows: &[Value]) {
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(path, text).unwrap();
}

/// Three tasks, five (response, criterion) pairs:
/// A: items +5, −2 (hard); B: +3 (non-hard); C: +4, +1 (non-hard).
fn hand_slice(dir: &Path) {
    let task = |id: &str, points: &[f64], split: &str| {
        let rubrics: Vec<Value> = points
            .iter()
            .map(|p| json!({"criterion": format!("{id} item worth {p}"), "points": p}))
            .collect();
        json!({"id": id, "prompt": "q", "response": "r", "context": {"rubrics": rubrics, "split": split}})
    };
    write_lines(
        &dir.join("slice.jsonl"),
        &[
            task("A", &[5.0, -2.0], "hard"),
            task("B", &[3.0], "nonhard"),
            task("C", &[4.0, 1.0], "nonhard"),
        ],
    );
    let labels = |name: &str, a: [bool; 2], b: bool, c: [bool; 2]| {
        write_lines(
            &dir.join(format!("{name}.jsonl")),
            &[
                json!({"id": "A", "verdicts": a}),
                json!({"id": "B", "verdicts": [b]}),
                json!({"id": "C", "verdicts": c}),
            ],
        );
    };
    // Majority per pair: A [T, F], B [T], C [F, T].
    labels("g1", [true, false], true, [false, true]);
    labels("g2", [true, true], false, [false, true]);
    labels("g3", [false, false], true, [true, true]);
    labels("cheap", [true, true], true, [true, true]);
    labels("good", [true, false], true, [false, false]);
    labels("pricey", [true, false], true, [false, true]);
}

const HAND_CONFIG: &str = r#"
slice = "slice.jsonl"
threshold = 0.8
balanced = "pricey"

[[goldens]]
name = "g1"
source = { kind = "labels", path = "g1.jsonl" }
usd_per_1000_tasks = 30.0
[[goldens]]
name = "g2"
source = { kind = "labels", path = "g2.jsonl" }
[[goldens]]
name = "g3"
source = { kind = "labels", path = "g3.jsonl" }

[[candidates]]
name = "cheap"
source = { kind = "labels", path = "cheap.jsonl" }
usd_per_1000_tasks = 1.0
[[candidates]]
name = "good"
source = { kind = "labels", path = "good.jsonl" }
usd_per_1000_tasks = 10.0
[[candidates]]
name = "pricey"
source = { kind = "labels", path = "pricey.jsonl" }
usd_per_1000_tasks = 100.0

[post_training]
baseline = 0.4
scores = { cheap = 0.5, good = 0.7, pricey = 0.8 }
"#;

fn close(a: &Value, b: f64) {
    let a = a.as_f64().unwrap_or_else(|| panic!("{a} is not a number"));
    assert!((a - b).abs() < 1e-9, "{a} != {b}");
}

#[test]
fn the_figures_match_a_hand_count() {
    let dir = scratch("hand");
    hand_slice(&dir);
    std::fs::write(dir.join("screen.toml"), HAND_CONFIG).unwrap();
    let run_dir = dir.join("run");
    screen(&ScreenArgs {
        config: dir.join("screen.toml"),
        run_dir: run_dir.clone(),
    })
    .unwrap();
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("summary.json")).unwrap())
            .unwrap();
    let candidate = |name: &str| {
        summary["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(summary["pairs"], 5);
    // cheap: all met against majority [T, F, T, F, T]: tp 3, fp 2.
    let cheap = candidate("cheap");
    close(&cheap["accuracy"], 0.6);
    close(&cheap["precision"], 0.6);
    close(&cheap["recall"], 1.0);
    close(&cheap["f1"], 0.75);
    assert!(
        cheap["spearman"].is_null(),
        "a constant judge has no rank correlation"
    );
    // good: [T, F, T, F, F]: tp 2, tn 2, fn 1.
    let good = candidate("good");
    close(&good["accuracy"], 0.8);
    close(&good["precision"], 1.0);
    close(&good["recall"], 2.0 / 3.0);
    close(&good["f1"], 0.8);
    close(&good["spearman"], 2.0 / 3.0);
    close(&good["usd_per_1000_tasks"], 10.0);
    // good [T, F, T, F, F] against g2 [T, T, F, F, T]: 2 of 5.
    close(&good["versus_goldens"]["g2"]["accuracy"], 0.4);
    // The cheapest at accuracy ≥ 0.8 is `good`, not `cheap`.
    assert_eq!(summary["picks"]["cost_reducing"], "good");
    assert_eq!(summary["picks"]["balanced"], "pricey");
    // Post-training: best 0.8 (pricey), baseline 0.4; goldens cost 30.
    close(&good["score_gap"], 0.1);
    close(&good["uplift"], 0.75);
    close(&good["cost_reduction"], 1.0 - 10.0 / 30.0);
    close(&candidate("pricey")["cost_reduction"], 1.0 - 100.0 / 30.0);
    close(&summary["golden_protocol_usd_per_1000_tasks"], 30.0);
    // good's task scores: A 5/5, B 3/3, C 0/5; hard A, non-hard B and C.
    let scores = &good["task_scores"];
    close(&scores["mean"], 2.0 / 3.0);
    close(&scores["hard"], 1.0);
    close(&scores["nonhard"], 0.5);
    close(&scores["all"], (100.0 * 1.0 + 160.0 * 0.5) / 260.0);
    // One flip moves A by 5/5, B by 3/3, C by 4/5; the mean by 1/3.
    close(&summary["single_error"]["largest_task_move"], 1.0);
    close(&summary["single_error"]["policy_move"], 1.0 / 3.0);
    // A golden against the others: g2 agrees with g1 on 3 of 5 pairs.
    let g2 = &summary["goldens"][1];
    close(&g2["versus_goldens"]["g1"]["accuracy"], 0.6);
    let report = std::fs::read_to_string(run_dir.join("report.md")).unwrap();
    assert!(report.contains("**cost-reducing**") && report.contains("good"));
    let png = std::fs::read(run_dir.join("pareto.png")).unwrap();
    assert_eq!(&png[..4], b"\x89PNG");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_shipped_example_screens_gsm8k_solutions() {
    use verifine_judge::local::tiny::{TinySpec, write_tiny_llama};
    let dir = scratch("example");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/verifiers");
    let shared = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/gsm8k/model_solutions.jsonl");
    // The example as shipped, on its first 24 tasks, with its models
    // written as its header says.
    let config = std::fs::read_to_string(example.join("screen.toml"))
        .unwrap()
        .replace("max_tasks = 400", "max_tasks = 24")
        .replace(
            "../../../shared/data/gsm8k/model_solutions.jsonl",
            &shared.display().to_string(),
        );
    assert!(config.contains("max_tasks = 24"));
    std::fs::write(dir.join("screen.toml"), config).unwrap();
    std::fs::copy(example.join("judges.toml"), dir.join("judges.toml")).unwrap();
    for (name, width, layers, q8, seed) in [
        ("small", 64, 2, false, 1),
        ("medium", 128, 3, false, 2),
        ("large", 256, 4, true, 3),
    ] {
        let spec = TinySpec {
            width,
            layers,
            heads: 4,
            kv_heads: 2,
            ff: width * 2,
            context: 4096,
            q8,
            seed,
        };
        write_tiny_llama(&dir.join(format!("models/{name}.gguf")), spec).unwrap();
    }
    let summary = screen(&ScreenArgs {
        config: dir.join("screen.toml"),
        run_dir: dir.join("run"),
    })
    .unwrap();
    assert_eq!(summary.tasks, 24);
    assert_eq!(summary.goldens.len(), 3);
    // The labels and the reference check agree on GSM8K (both check the
    // final answer against the truth).
    let labels = &summary.goldens[0];
    assert!(labels.versus_goldens["reference-check"].accuracy >= 0.9);
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run/summary.json")).unwrap())
            .unwrap();
    for c in json["candidates"].as_array().unwrap() {
        for key in [
            "name",
            "accuracy",
            "precision",
            "recall",
            "f1",
            "spearman",
            "usd_per_1000_tasks",
        ] {
            assert!(c.get(key).is_some(), "candidate lacks {key}: {c}");
        }
    }
    assert!(json["picks"]["cost_reducing"].is_string());
    assert_eq!(json["picks"]["balanced"], "medium");
    // Model judges cost tokens and device time; prefix reuse shows.
    let small = summary
        .candidates
        .iter()
        .find(|c| c.name == "small")
        .unwrap();
    assert!(small.cost.usd_per_1000_tasks > 0.0 && small.cost.device_seconds_per_1000_tasks > 0.0);
    assert!(small.cost.cached_input_tokens_per_1000_tasks > 0.0);
    assert_eq!(
        &std::fs::read(dir.join("run/pareto.png")).unwrap()[..4],
        b"\x89PNG"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn configs_it_cannot_run_are_refused_with_a_reason() {
    let dir = scratch("hostile");
    hand_slice(&dir);
    let refuse = |text: &str| {
        std::fs::write(dir.join("bad.toml"), text).unwrap();
        let err = screen(&ScreenArgs {
            config: dir.join("bad.toml"),
            run_dir: dir.join("run"),
        })
        .expect_err("refused");
        format!("{err:#}")
    };
    let err = refuse(&HAND_CONFIG.replace("balanced = \"pricey\"", "balanced = \"nobody\""));
    assert!(err.contains("nobody") && err.contains("bad.toml"), "{err}");
    let err = refuse(&HAND_CONFIG.replace(
        "source = { kind = \"labels\", path = \"cheap.jsonl\" }",
        "source = { kind = \"judge\", judge = \"x\" }",
    ));
    assert!(err.contains("no `judges` file"), "{err}");
    let err = refuse(&HAND_CONFIG.replace("name = \"g3\"", "name = \"g1\""));
    assert!(err.contains("used twice"), "{err}");
    // A labels file with the wrong number of verdicts names the row.
    write_lines(
        &dir.join("short.jsonl"),
        &[json!({"id": "A", "verdicts": [true]})],
    );
    let err = refuse(&HAND_CONFIG.replace("g3.jsonl", "short.jsonl"));
    assert!(
        err.contains("row A has 1 verdicts for 2 rubric items"),
        "{err}"
    );
    // A slice row without rubrics is named by file and line.
    std::fs::write(
        dir.join("slice.jsonl"),
        "{\"id\": \"x\", \"prompt\": \"q\", \"response\": \"r\"}\n",
    )
    .unwrap();
    let err = refuse(HAND_CONFIG);
    assert!(err.contains("slice.jsonl:1"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
