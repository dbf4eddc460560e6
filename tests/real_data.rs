//! Built-in plugins on real, labelled data from ../shared/data.

use serde_json::{Value, json};
use verifine::commands::agree::{AgreeArgs, Mode, agree};
use verifine::commands::score::{OutputRow, ScoreArgs, score};
use verifine_tests::{read_rows, scratch_dir, shared_data, write_rows};

const SOLUTION_KEYS: [&str; 4] = [
    "6b_finetuning",
    "6b_verification",
    "175b_finetuning",
    "175b_verification",
];

/// `math-answer` through `score` + `agree` reproduces OpenAI's `is_correct`
/// labels on 300 GSM8K questions × 4 model solutions.
#[test]
fn math_answer_agrees_with_gsm8k_correctness_labels() {
    let dir = scratch_dir("gsm8k");
    let source = std::fs::read_to_string(shared_data("gsm8k/model_solutions.jsonl")).unwrap();
    let mut inputs = Vec::new();
    let mut gold = Vec::new();
    for (line, text) in source.lines().enumerate() {
        let row: Value = serde_json::from_str(text).unwrap();
        for key in SOLUTION_KEYS {
            let id = format!("{line}/{key}");
            let solution = &row[key];
            inputs.push(json!({
                "id": id,
                "prompt": row["question"],
                "response": solution["solution"],
                "reference": row["ground_truth"],
            }));
            gold.push(json!({"id": id, "label": solution["is_correct"]}));
        }
    }
    assert_eq!(inputs.len(), 1200);
    let (input, output, gold_path) = (
        dir.join("in.jsonl"),
        dir.join("out.jsonl"),
        dir.join("gold.jsonl"),
    );
    write_rows(&input, &inputs);
    write_rows(&gold_path, &gold);

    let summary = score(&ScoreArgs {
        rubric: Some("math-answer".into()),
        input,
        output: output.clone(),
        ..ScoreArgs::default()
    })
    .unwrap();
    assert_eq!((summary.n, summary.errors), (1200, 0));

    let report = agree(&AgreeArgs::new(output.clone(), gold_path)).unwrap();
    assert_eq!(report.mode, Mode::Binary);
    assert_eq!(report.n, 1200);
    let accuracy = report.metrics["accuracy"];
    if accuracy.value < 0.999 {
        // Name the disagreements so a regression is easy to read.
        let rows: Vec<OutputRow> = read_rows(&output);
        let wrong: Vec<String> = rows
            .iter()
            .zip(&gold)
            .filter(|(r, g)| (r.total.unwrap_or(0.0) >= 0.5) != (g["label"] == json!(true)))
            .map(|(r, _)| format!("{} ({:?})", r.id, r.explanation))
            .collect();
        panic!(
            "accuracy {} < 0.999; disagreements: {wrong:#?}",
            accuracy.value
        );
    }
    assert!(accuracy.ci_low <= accuracy.value && accuracy.value <= accuracy.ci_high);
}

/// The 30 HealthBench examples load and score with verdicts supplied in
/// context; each total equals Σ points of met items / Σ positive points.
#[test]
fn healthbench_examples_score_with_verdicts_in_context() {
    let dir = scratch_dir("healthbench");
    let source = std::fs::read_to_string(shared_data("healthbench/examples.jsonl")).unwrap();
    let mut inputs = Vec::new();
    let mut expected = Vec::new();
    for (line, text) in source.lines().enumerate() {
        let row: Value = serde_json::from_str(text).unwrap();
        let rubrics = row["rubrics"].as_array().unwrap();
        // A deterministic mix of verdicts: every item whose index is not a multiple of 3 is met.
        let verdicts: Vec<bool> = (0..rubrics.len()).map(|i| i % 3 != 0).collect();
        let points: Vec<f64> = rubrics
            .iter()
            .map(|r| r["points"].as_f64().unwrap())
            .collect();
        let positive: f64 = points.iter().filter(|p| **p > 0.0).sum();
        let met: f64 = points
            .iter()
            .zip(&verdicts)
            .filter(|(_, m)| **m)
            .map(|(p, _)| p)
            .sum();
        expected.push((positive > 0.0).then(|| met / positive));
        let conversation: Vec<String> = row["prompt"]
            .as_array()
            .unwrap()
            .iter()
            .map(|turn| {
                format!(
                    "{}: {}",
                    turn["role"].as_str().unwrap(),
                    turn["content"].as_str().unwrap()
                )
            })
            .collect();
        inputs.push(json!({
            "id": row["prompt_id"],
            "prompt": conversation.join("\n"),
            "response": format!("(response {line})"),
            "context": {"rubrics": rubrics, "verdicts": verdicts, "example_tags": row["example_tags"]},
        }));
    }
    assert_eq!(inputs.len(), 30);
    let (input, output) = (dir.join("in.jsonl"), dir.join("out.jsonl"));
    write_rows(&input, &inputs);
    let summary = score(&ScoreArgs {
        rubric: Some("healthbench".into()),
        input,
        output: output.clone(),
        ..ScoreArgs::default()
    })
    .unwrap();
    assert_eq!(summary.errors, 0);
    let rows: Vec<OutputRow> = read_rows(&output);
    for (row, expected) in rows.iter().zip(&expected) {
        match (row.total, expected) {
            (Some(total), Some(e)) => {
                assert!((total - e).abs() < 1e-9, "{}: {total} vs {e}", row.id)
            }
            (total, e) => assert_eq!(total, *e, "{}", row.id),
        }
        assert_eq!(row.criteria.len(), row.verdicts.len());
    }
    let mean = summary.mean.unwrap();
    assert_eq!(summary.mean_clipped, Some(mean.clamp(0.0, 1.0)));
    assert!(summary.bootstrap_std.unwrap() > 0.0);
}
