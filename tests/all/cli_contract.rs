//! How `score`, `agree` and `plugin` treat bad input and what they promise
//! about their outputs.

use serde_json::json;
use verifine::commands::agree::{AgreeArgs, Mode, agree};
use verifine::commands::plugin::{check, inspect, list};
use verifine::commands::score::{ScoreArgs, score};
use verifine_runtime::{Limits, Runtime};
use verifine_tests::{EXAMPLE_CONCISE, hostile, read_rows, scratch_dir, write_rows};

fn math_args(dir: &std::path::Path) -> ScoreArgs {
    ScoreArgs {
        rubric: Some("math-answer".into()),
        input: dir.join("in.jsonl"),
        output: dir.join("out.jsonl"),
        ..ScoreArgs::default()
    }
}

#[test]
fn malformed_line_is_reported_with_file_and_line_and_output_is_untouched() {
    let dir = scratch_dir("malformed");
    std::fs::write(
        dir.join("in.jsonl"),
        "{\"id\":1,\"prompt\":\"q\",\"response\":\"#### 1\",\"reference\":\"1\"}\n{\"id\":2,\"prompt\":\n",
    )
    .unwrap();
    std::fs::write(dir.join("out.jsonl"), "previous results\n").unwrap();
    let err = format!("{:#}", score(&math_args(&dir)).unwrap_err());
    assert!(err.contains("in.jsonl:2:"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.join("out.jsonl")).unwrap(),
        "previous results\n"
    );
}

#[test]
fn unknown_fields_and_duplicate_ids_are_errors() {
    let dir = scratch_dir("unknown-field");
    write_rows(
        &dir.join("in.jsonl"),
        &[json!({"id": 1, "prompt": "q", "respones": "typo"})],
    );
    let err = format!("{:#}", score(&math_args(&dir)).unwrap_err());
    assert!(
        err.contains("in.jsonl:1:") && err.contains("respones"),
        "{err}"
    );

    let row = json!({"id": "a", "prompt": "q", "response": "#### 1", "reference": "1"});
    write_rows(&dir.join("in.jsonl"), &[row.clone(), row]);
    let err = format!("{:#}", score(&math_args(&dir)).unwrap_err());
    assert!(err.contains("duplicate id \"a\""), "{err}");
}

#[test]
fn unknown_plugin_lists_the_available_ones() {
    let dir = scratch_dir("unknown-plugin");
    write_rows(
        &dir.join("in.jsonl"),
        &[json!({"id": 1, "prompt": "q", "response": "r"})],
    );
    let args = ScoreArgs {
        rubric: Some("math-answr".into()),
        ..math_args(&dir)
    };
    let err = format!("{:#}", score(&args).unwrap_err());
    assert!(err.contains("no plugin named \"math-answr\""), "{err}");
    assert!(
        err.contains("math-answer") && err.contains("healthbench"),
        "{err}"
    );
    assert!(!dir.join("out.jsonl").exists());
}

#[test]
fn output_rows_carry_provenance_and_per_row_errors() {
    let dir = scratch_dir("provenance");
    write_rows(
        &dir.join("in.jsonl"),
        &[
            json!({"id": 1, "prompt": "q", "response": "#### 7", "reference": "7"}),
            json!({"id": 2, "prompt": "q", "response": "#### 7"}),
        ],
    );
    let summary = score(&math_args(&dir)).unwrap();
    assert_eq!((summary.n, summary.scored, summary.errors), (2, 1, 1));
    let rows: Vec<serde_json::Value> = read_rows(&dir.join("out.jsonl"));
    assert_eq!(rows[0]["total"], json!(1.0));
    assert_eq!(rows[0]["plugin"]["name"], json!("math-answer"));
    assert_eq!(rows[0]["plugin"]["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(rows[1]["total"], json!(null));
    assert!(rows[1]["error"].as_str().unwrap().contains("reference"));
}

#[test]
fn explicit_aggregator_decides_the_total_and_keeps_the_rubric_total() {
    let dir = scratch_dir("aggregator");
    write_rows(
        &dir.join("in.jsonl"),
        &[json!({"id": 1, "prompt": "q", "response": "I think 7", "reference": "7"})],
    );
    let args = ScoreArgs {
        aggregator: Some("weighted-sum".into()),
        ..math_args(&dir)
    };
    score(&args).unwrap();
    let row: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(dir.join("out.jsonl"))
            .unwrap()
            .trim(),
    )
    .unwrap();
    // correct (0.9) but unformatted: weighted-sum gives 0.9 / 1.0
    assert!((row["total"].as_f64().unwrap() - 0.9).abs() < 1e-12);
    assert!((row["rubric_total"].as_f64().unwrap() - 0.9).abs() < 1e-12);
    assert_eq!(row["aggregator"]["name"], json!("weighted-sum"));
}

#[test]
fn config_file_sets_plugin_tables() {
    let dir = scratch_dir("config");
    write_rows(
        &dir.join("in.jsonl"),
        &[json!({"id": 1, "prompt": "q", "response": "A: 3", "reference": "4"})],
    );
    std::fs::write(
        dir.join("score.toml"),
        "[rubric]\nplugin = \"math-answer\"\nconfig = { format_weight = 0.25, correct_weight = 0.75 }\n",
    )
    .unwrap();
    let args = ScoreArgs {
        rubric: None,
        config: Some(dir.join("score.toml")),
        ..math_args(&dir)
    };
    let summary = score(&args).unwrap();
    assert_eq!(summary.mean, Some(0.25));

    std::fs::write(
        dir.join("score.toml"),
        "[rubric]\nplugin = \"math-answer\"\nconfig = { format_wieght = 1 }\n",
    )
    .unwrap();
    let summary = score(&args).unwrap();
    assert_eq!(
        summary.errors, 1,
        "a bad plugin config fails every sample, visibly"
    );
}

#[test]
fn agree_reports_binary_and_continuous_metrics() {
    let dir = scratch_dir("agree");
    let pred = dir.join("pred.jsonl");
    let gold = dir.join("gold.jsonl");
    write_rows(
        &pred,
        &[
            json!({"id": "a", "total": 0.9}),
            json!({"id": "b", "total": 0.2}),
            json!({"id": "c", "total": 0.7}),
            json!({"id": "d", "total": null}),
            json!({"id": "only-pred", "total": 1.0}),
        ],
    );
    write_rows(
        &gold,
        &[
            json!({"id": "a", "label": true, "score": 1.0}),
            json!({"id": "b", "label": false, "score": 0.0}),
            json!({"id": "c", "label": false, "score": 0.5}),
            json!({"id": "d", "label": true, "score": 1.0}),
        ],
    );
    let report = agree(&AgreeArgs::new(pred.clone(), gold.clone())).unwrap();
    assert_eq!((report.n, report.mode), (3, Mode::Binary));
    assert_eq!(
        (
            report.unmatched_pred,
            report.unmatched_gold,
            report.missing_values
        ),
        (1, 0, 1)
    );
    assert!((report.metrics["accuracy"].value - 2.0 / 3.0).abs() < 1e-12);
    assert!((report.metrics["precision"].value - 0.5).abs() < 1e-12);
    assert_eq!(report.metrics["recall"].value, 1.0);

    let continuous = agree(&AgreeArgs {
        gold_field: "score".into(),
        ..AgreeArgs::new(pred, gold)
    })
    .unwrap();
    assert_eq!(continuous.mode, Mode::Continuous);
    assert!(continuous.metrics.contains_key("pearson"));
    assert!((continuous.metrics["mae"].value - (0.1 + 0.2 + 0.2) / 3.0).abs() < 1e-12);
    let json = serde_json::to_value(&continuous).unwrap();
    for key in ["value", "ci_low", "ci_high"] {
        assert!(json["metrics"]["spearman"].get(key).is_some());
    }
}

#[test]
fn agree_names_file_and_line_of_a_bad_field() {
    let dir = scratch_dir("agree-bad");
    write_rows(&dir.join("p.jsonl"), &[json!({"id": 1, "total": "high"})]);
    write_rows(&dir.join("g.jsonl"), &[json!({"id": 1, "label": true})]);
    let err = agree(&AgreeArgs::new(dir.join("p.jsonl"), dir.join("g.jsonl"))).unwrap_err();
    assert!(err.to_string().contains("p.jsonl:1:"), "{err}");
}

#[test]
fn agree_reads_files_of_many_chunks_and_names_lines_as_the_file_has_them() {
    let dir = scratch_dir("agree-chunks");
    let (pred, gold) = (dir.join("p.jsonl"), dir.join("g.jsonl"));
    // More rows than one chunk of lines holds, predictions in reverse order
    // with a blank line before every hundredth, the score nested.
    let n = 20_000;
    let pred_line = |i: usize, score: serde_json::Value| {
        let row =
            json!({"id": format!("q{i}"), "judge": {"score": score}, "response": "x".repeat(40)});
        format!("{}{row}\n", if i.is_multiple_of(100) { "\n" } else { "" })
    };
    let pred_text: String = (0..n)
        .rev()
        .map(|i| pred_line(i, json!((i % 10) as f64 / 10.0)))
        .collect();
    std::fs::write(&pred, &pred_text).unwrap();
    let mut gold_text: String = (0..n)
        .map(|i| format!("{}\n", json!({"id": format!("q{i}"), "label": i % 3 == 0})))
        .collect();
    // A label that is no label, on a row no prediction joins: not an error.
    gold_text += &format!("{}\n", json!({"id": "unjoined", "label": "yes"}));
    std::fs::write(&gold, gold_text).unwrap();
    let args = AgreeArgs {
        pred_field: "judge.score".into(),
        threshold: Some(0.5),
        resamples: 20,
        ..AgreeArgs::new(pred.clone(), gold.clone())
    };
    let report = agree(&args).unwrap();
    let agreeing = (0..n).filter(|i| (i % 10 >= 5) == (i % 3 == 0)).count();
    assert_eq!(
        (report.n, report.unmatched_pred, report.unmatched_gold),
        (n, 0, 1)
    );
    assert_eq!(report.metrics["accuracy"].value, agreeing as f64 / n as f64);

    // A bad value deep in the file: its line counts the blank lines above.
    let bad = 123;
    let text: String = (0..n)
        .rev()
        .map(|i| pred_line(i, if i == bad { json!("high") } else { json!(0.5) }))
        .collect();
    std::fs::write(&pred, text).unwrap();
    let err = agree(&args).unwrap_err().to_string();
    let rows_above = n - 1 - bad;
    let blanks_above = (bad + 1..n).filter(|i| i % 100 == 0).count();
    let line = rows_above + blanks_above + 1;
    assert!(
        err.contains(&format!("p.jsonl:{line}: field \"judge.score\"")),
        "{err}"
    );
}

#[test]
fn agree_refuses_a_nan_threshold_and_duplicate_ids_in_either_file() {
    let dir = scratch_dir("agree-hostile");
    let (pred, gold) = (dir.join("p.jsonl"), dir.join("g.jsonl"));
    write_rows(
        &gold,
        &[
            json!({"id": 1, "label": true}),
            json!({"id": 2, "label": false}),
        ],
    );
    // A duplicate prediction id that gold does not have is still a duplicate.
    write_rows(
        &pred,
        &[
            json!({"id": 1, "total": 0.9}),
            json!({"id": 2, "total": 0.1}),
            json!({"id": 7, "total": 0.5}),
            json!({"id": 7, "total": 0.6}),
        ],
    );
    let err = agree(&AgreeArgs::new(pred.clone(), gold.clone())).unwrap_err();
    assert!(err.to_string().contains("p.jsonl:4: duplicate id"), "{err}");
    write_rows(
        &pred,
        &[
            json!({"id": 1, "total": 0.9}),
            json!({"id": 2, "total": 0.1}),
        ],
    );
    let nan = AgreeArgs {
        threshold: Some(f64::NAN),
        ..AgreeArgs::new(pred.clone(), gold.clone())
    };
    assert!(agree(&nan).unwrap_err().to_string().contains("--threshold"));
    // The same files with a sane threshold agree perfectly.
    let report = agree(&AgreeArgs::new(pred, gold)).unwrap();
    assert_eq!(report.metrics["balanced_f1"].value, 1.0);
}

#[test]
fn plugin_list_inspect_and_check() {
    let runtime = Runtime::new(Limits::default()).unwrap();
    let listed = list(&runtime).unwrap();
    assert_eq!(listed.len(), 9);
    let inspection = inspect(&runtime, "driving").unwrap();
    assert_eq!(inspection.metadata.name, "driving");
    assert_eq!(inspection.rubric.unwrap().criteria.len(), 6);
    for plugin in &listed {
        check(&runtime, &plugin.name).unwrap();
    }
    let future = inspect(&runtime, hostile::FUTURE_API).unwrap();
    assert!(!future.compatible);
    assert!(check(&runtime, hostile::FUTURE_API).is_err());
}

#[test]
fn the_concise_example_plugin_scores_by_path_with_its_config() {
    let dir = scratch_dir("example-plugin");
    write_rows(
        &dir.join("in.jsonl"),
        &[
            json!({"id": "short", "prompt": "q", "response": "2 + 2 = 4\n#### 4"}),
            json!({"id": "long", "prompt": "q", "response": "word ".repeat(50)}),
        ],
    );
    std::fs::write(
        dir.join("score.toml"),
        format!("[rubric]\nplugin = {EXAMPLE_CONCISE:?}\nconfig = {{ max_words = 40 }}\n"),
    )
    .unwrap();
    let summary = score(&ScoreArgs {
        rubric: None,
        config: Some(dir.join("score.toml")),
        ..math_args(&dir)
    })
    .unwrap();
    assert_eq!(summary.rubric.name, "concise");
    assert_eq!(summary.aggregator.name, "weighted-sum");
    let rows: Vec<serde_json::Value> = read_rows(&dir.join("out.jsonl"));
    assert_eq!(rows[0]["total"], json!(1.0));
    assert_eq!(rows[1]["total"], json!(0.0));
    assert_eq!(
        rows[1]["verdicts"][1]["explanation"],
        json!("50 words (budget 40)")
    );
    assert_eq!(rows[1]["aggregator"]["name"], json!("weighted-sum"));
}

#[test]
fn a_streamed_score_keeps_input_order_at_any_thread_count_and_stops_at_a_bad_row() {
    let dir = scratch_dir("streamed");
    // More rows than one of the stream's chunks (1 024), so workers share them.
    let rows: Vec<_> = (0..2500)
        .map(|i| {
            let response = format!("#### {}", i % 7);
            json!({"id": format!("r{i}"), "prompt": "q", "response": response, "reference": "3"})
        })
        .collect();
    write_rows(&dir.join("in.jsonl"), &rows);
    let with = |threads: usize, batch: usize| ScoreArgs {
        threads: Some(threads),
        batch_size: Some(batch),
        ..math_args(&dir)
    };
    let one = score(&with(1, 2500)).unwrap();
    let written = std::fs::read(dir.join("out.jsonl")).unwrap();
    for (threads, batch) in [(2, 7), (4, 1), (3, 64)] {
        let many = score(&with(threads, batch)).unwrap();
        let again = std::fs::read(dir.join("out.jsonl")).unwrap();
        assert!(again == written, "{threads} threads, batches of {batch}");
        assert_eq!(
            (many.n, many.scored, many.mean),
            (one.n, one.scored, one.mean)
        );
    }
    let out = read_rows::<serde_json::Value>(&dir.join("out.jsonl"));
    let ids: Vec<&str> = out.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, (0..2500).map(|i| format!("r{i}")).collect::<Vec<_>>());
    // The mean of the totals, and the std of the mean as the bootstrap's
    // limit: the population std over sqrt(n).
    let totals: Vec<f64> = out.iter().map(|r| r["total"].as_f64().unwrap()).collect();
    let mean = totals.iter().sum::<f64>() / 2500.0;
    let variance = totals.iter().map(|t| (t - mean).powi(2)).sum::<f64>() / 2500.0;
    assert!((one.mean.unwrap() - mean).abs() < 1e-12, "{one:?}");
    let std = (variance / 2500.0).sqrt();
    assert!(
        std > 0.0 && (one.bootstrap_std.unwrap() - std).abs() < 1e-12,
        "{one:?}"
    );

    // A bad row deep in the file, or an id that comes back chunks later:
    // the error names its line and the previous output stays.
    let lines: String = rows.iter().map(|r| format!("{r}\n")).collect();
    let bad_row = format!("{lines}\n{{\"id\": \"late\", \"prompt\": 3}}\n");
    let repeated_id = format!("{lines}{}\n", rows[3]);
    // Early, with hundreds of rows still to read behind it.
    let bad_early = format!("{}\n{{\"id\": 5}}\n{lines}", rows[0]);
    let cases = [
        (bad_row, "in.jsonl:2502:"),
        (bad_early, "in.jsonl:2:"),
        (repeated_id.clone(), "in.jsonl:2501: duplicate id \"r3\""),
    ];
    for (text, expected) in cases {
        std::fs::write(dir.join("in.jsonl"), text).unwrap();
        for threads in [1, 3] {
            std::fs::write(dir.join("out.jsonl"), "previous results\n").unwrap();
            let err = format!("{:#}", score(&with(threads, 16)).unwrap_err());
            assert!(err.contains(expected), "{err}");
            let kept = std::fs::read_to_string(dir.join("out.jsonl")).unwrap();
            assert_eq!(kept, "previous results\n");
        }
    }

    // Past `ids_in_memory` the ids spill to a scratch file: the output is
    // the same, and an id repeated across the spill is still refused.
    std::fs::write(dir.join("spill.toml"), "[scoring]\nids_in_memory = 8\n").unwrap();
    let spilling = |threads| ScoreArgs {
        config: Some(dir.join("spill.toml")),
        ..with(threads, 16)
    };
    std::fs::write(dir.join("in.jsonl"), &lines).unwrap();
    for threads in [1, 3] {
        score(&spilling(threads)).unwrap();
        assert!(std::fs::read(dir.join("out.jsonl")).unwrap() == written);
    }
    std::fs::write(dir.join("in.jsonl"), &repeated_id).unwrap();
    for threads in [1, 3] {
        let err = format!("{:#}", score(&spilling(threads)).unwrap_err());
        assert!(
            err.contains("in.jsonl:2501: duplicate id: line 2501's id repeats line 4's"),
            "{err}"
        );
    }
}
