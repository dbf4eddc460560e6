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
        inputs.push(json!({
            "id": row["prompt_id"],
            "prompt": conversation(&row),
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
    for row in assert_totals(&output, &expected) {
        assert_eq!(row.criteria.len(), row.verdicts.len());
    }
    let mean = summary.mean.unwrap();
    assert_eq!(summary.mean_clipped, Some(mean.clamp(0.0, 1.0)));
    assert!(summary.bootstrap_std.unwrap() > 0.0);
}

/// Checks each scored row's total against the expected one (`None`:
/// undefined) and returns the rows.
fn assert_totals(output: &std::path::Path, expected: &[Option<f64>]) -> Vec<OutputRow> {
    let rows: Vec<OutputRow> = read_rows(output);
    assert_eq!(rows.len(), expected.len());
    for (row, expected) in rows.iter().zip(expected) {
        match (row.total, expected) {
            (Some(total), Some(e)) => {
                assert!((total - e).abs() < 1e-9, "{}: {total} vs {e}", row.id)
            }
            (total, e) => assert_eq!(total, *e, "{}", row.id),
        }
    }
    rows
}

/// A HealthBench example's conversation as one prompt ("role: content" lines).
fn conversation(row: &Value) -> String {
    row["prompt"]
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
        .collect::<Vec<_>>()
        .join("\n")
}

/// With no verdicts in the data, `healthbench` asks the configured judge
/// model with HealthBench's grader template, three rubric items per query
/// (the default batch), every query of a sample sharing its text up to
/// `# Rubric items`; the totals follow the judge's answers and the summary
/// carries what the judge cost.
#[test]
fn healthbench_examples_score_through_a_judge_model_with_cost() {
    use verifine_judge::scripted_server::{completion, serve};
    let dir = scratch_dir("healthbench-judge");
    // The judge says YES when the rubric item has an even number of
    // characters (the template puts each item on one line).
    let met = |criterion: &str| {
        let words: Vec<&str> = criterion.split_whitespace().collect();
        words.join(" ").chars().count().is_multiple_of(2)
    };
    let server = serve(move |_, body| {
        let question = body["messages"][0]["content"].as_str().unwrap_or_default();
        let items = question
            .split("# Rubric items\n")
            .nth(1)
            .unwrap_or_default();
        let items = items.split("\n\n# Instructions").next().unwrap_or_default();
        let verdicts: Vec<bool> = items
            .lines()
            .map(|line| met(line.split_once(". ").map_or(line, |(_, item)| item)))
            .collect();
        completion(&serde_json::to_string(&verdicts).unwrap())
    });
    let source = std::fs::read_to_string(shared_data("healthbench/examples.jsonl")).unwrap();
    let mut inputs = Vec::new();
    let mut expected = Vec::new();
    let mut queries = 0;
    for text in source.lines() {
        let row: Value = serde_json::from_str(text).unwrap();
        let rubrics = row["rubrics"].as_array().unwrap();
        queries += rubrics.len().div_ceil(3);
        let (mut achieved, mut positive) = (0.0, 0.0);
        for r in rubrics {
            let points = r["points"].as_f64().unwrap();
            positive += points.max(0.0);
            if met(r["criterion"].as_str().unwrap()) {
                achieved += points;
            }
        }
        expected.push((positive > 0.0).then(|| achieved / positive));
        inputs.push(json!({
            "id": row["prompt_id"],
            "prompt": conversation(&row),
            "response": "(a response)",
            "context": {"rubrics": rubrics},
        }));
    }
    let judges = dir.join("judges.toml");
    std::fs::write(
        &judges,
        format!(
            "[judges.judge]\nbackend = {{ kind = \"openai-http\", base_url = \"{}\", model = \"tiny\", concurrency = 8 }}\n\
             price = {{ input = 1.0, cached_input = 0.5, output = 4.0 }}\n",
            server.url
        ),
    )
    .unwrap();
    let (input, output) = (dir.join("in.jsonl"), dir.join("out.jsonl"));
    write_rows(&input, &inputs);
    let summary = score(&ScoreArgs {
        rubric: Some("healthbench".into()),
        input,
        output: output.clone(),
        judges: Some(judges),
        ..ScoreArgs::default()
    })
    .unwrap();
    assert_eq!(summary.errors, 0);
    assert_totals(&output, &expected);
    // One call per three rubric items; each answer reports 30 input (10
    // cached) and 5 output tokens.
    let cost = &summary.judges["judge"];
    assert_eq!(cost.total.calls, queries as u64);
    let received = server.received.lock().unwrap();
    assert_eq!(received.len(), queries);
    // A sample's queries differ only after the marker.
    let mut prefixes = std::collections::BTreeMap::new();
    for request in received.iter() {
        let text = request.body["messages"][0]["content"].as_str().unwrap();
        let (prefix, _) = text.split_once("# Rubric items\n").expect("the marker");
        let conversation = prefix.split("assistant: ").next().unwrap().to_string();
        let first = prefixes
            .entry(conversation)
            .or_insert_with(|| prefix.to_string());
        assert_eq!(first, prefix);
    }
    assert_eq!(prefixes.len(), 30, "one shared prefix per sample");
    let usd = queries as f64 * (20.0 * 1.0 + 10.0 * 0.5 + 5.0 * 4.0) / 1e6;
    assert!((cost.total.usd - usd).abs() < 1e-12, "{cost:?}");
    assert!((cost.per_1000_tasks.usd - usd * 1000.0 / 30.0).abs() < 1e-9);
    assert!(summary.to_string().contains("judge judge: calls="));
}

/// The same examples through a local candle judge (a random-weight GGUF
/// written here, so its verdicts mean nothing): one constrained YES/NO
/// query per item (`answer = "yes-no"`), each verdict carrying the judge's
/// probability as its confidence; a sample's queries share their prefix, so
/// most input tokens are reused; the summary counts device seconds.
#[test]
fn healthbench_examples_score_through_a_local_judge_with_cost() {
    use verifine_judge::local::tiny::{TinySpec, write_tiny_llama};
    let dir = scratch_dir("healthbench-local");
    let model = dir.join("judge.gguf");
    // Byte-level pieces make the longest conversations ~4 500 tokens.
    let spec = TinySpec {
        context: 8192,
        ..TinySpec::default()
    };
    write_tiny_llama(&model, spec).unwrap();
    let source = std::fs::read_to_string(shared_data("healthbench/examples.jsonl")).unwrap();
    let mut inputs = Vec::new();
    let mut items = 0;
    for text in source.lines() {
        let row: Value = serde_json::from_str(text).unwrap();
        items += row["rubrics"].as_array().unwrap().len();
        inputs.push(json!({
            "id": row["prompt_id"],
            "prompt": conversation(&row),
            "response": "(a response)",
            "context": {"rubrics": row["rubrics"]},
        }));
    }
    let judges = dir.join("judges.toml");
    std::fs::write(
        &judges,
        "[judges.judge]\nbackend = { kind = \"local-gguf\", path = \"judge.gguf\" }\n\
         price = { input = 0.1, cached_input = 0.0, output = 0.1 }\n",
    )
    .unwrap();
    let config = dir.join("score.toml");
    std::fs::write(
        &config,
        "[rubric]\nplugin = \"healthbench\"\n[rubric.config]\nanswer = \"yes-no\"\n",
    )
    .unwrap();
    let (input, output) = (dir.join("in.jsonl"), dir.join("out.jsonl"));
    write_rows(&input, &inputs);
    let summary = score(&ScoreArgs {
        config: Some(config),
        input,
        output: output.clone(),
        judges: Some(judges),
        ..ScoreArgs::default()
    })
    .unwrap();
    assert_eq!(summary.errors, 0, "{summary}");
    for row in read_rows::<OutputRow>(&output) {
        for verdict in &row.verdicts {
            let confidence = verdict
                .confidence
                .expect("a constrained verdict's confidence");
            assert!((0.5..=1.0).contains(&confidence), "{verdict:?}");
        }
    }
    let cost = &summary.judges["judge"].total;
    assert_eq!(cost.calls, items as u64);
    assert!(
        cost.usage.cached_input * 2 > cost.usage.input,
        "prefix reuse: {cost:?}"
    );
    assert!(cost.device_seconds > 0.0 && cost.usd > 0.0);
    assert!(summary.to_string().contains("device_seconds="));
}

/// A judge model that cannot answer a batch (it rambles instead of giving
/// a JSON list) and cannot answer some items even alone: each batch is
/// asked again item by item, every row is still scored over the items
/// that got a verdict, and the row names the ones that did not. No row is
/// lost to one item.
#[test]
fn a_bad_batch_answer_is_asked_again_item_by_item_and_no_row_is_lost() {
    use verifine_judge::scripted_server::{completion, serve};
    let dir = scratch_dir("healthbench-retry");
    let line = |c: &str| c.split_whitespace().collect::<Vec<_>>().join(" ");
    let met = move |criterion: &str| line(criterion).chars().count() % 2 == 0;
    // One item in five cannot be judged at all.
    let hopeless = move |criterion: &str| line(criterion).len() % 5 == 0;
    let server = serve(move |_, body| {
        let question = body["messages"][0]["content"].as_str().unwrap_or_default();
        let items = question
            .split("# Rubric items\n")
            .nth(1)
            .unwrap_or_default();
        let items: Vec<&str> = items
            .split("\n\n# Instructions")
            .next()
            .unwrap_or_default()
            .lines()
            .map(|l| l.split_once(". ").map_or(l, |(_, item)| item))
            .collect();
        match items.as_slice() {
            [one] if !hopeless(one) => {
                completion(&json!({"explanation": "checked", "criteria_met": met(one)}).to_string())
            }
            _ => completion("Let me think about each of these items carefully"),
        }
    });
    let source = std::fs::read_to_string(shared_data("healthbench/examples.jsonl")).unwrap();
    let (mut inputs, mut expected, mut unjudged) = (Vec::new(), Vec::new(), Vec::new());
    for text in source.lines() {
        let row: Value = serde_json::from_str(text).unwrap();
        let rubrics = row["rubrics"].as_array().unwrap();
        let (mut achieved, mut positive, mut missing) = (0.0, 0.0, Vec::new());
        for (i, r) in rubrics.iter().enumerate() {
            let criterion = r["criterion"].as_str().unwrap();
            if hopeless(criterion) {
                missing.push(format!("item-{i}"));
                continue;
            }
            let points = r["points"].as_f64().unwrap();
            positive += points.max(0.0);
            if met(criterion) {
                achieved += points;
            }
        }
        // A row none of whose items can be judged fails, naming them.
        let none_judged = missing.len() == rubrics.len();
        expected.push((positive > 0.0 && !none_judged).then(|| achieved / positive));
        unjudged.push(missing);
        inputs.push(json!({
            "id": row["prompt_id"], "prompt": conversation(&row),
            "response": "(a response)", "context": {"rubrics": rubrics},
        }));
    }
    assert!(
        unjudged.iter().any(|m| !m.is_empty()),
        "the test needs hopeless items"
    );
    let judges = dir.join("judges.toml");
    std::fs::write(
        &judges,
        format!(
            "[judges.judge]\nbackend = {{ kind = \"openai-http\", base_url = \"{}\", model = \"tiny\", concurrency = 8 }}\n",
            server.url
        ),
    )
    .unwrap();
    let (input, output) = (dir.join("in.jsonl"), dir.join("out.jsonl"));
    write_rows(&input, &inputs);
    let summary = score(&ScoreArgs {
        rubric: Some("healthbench".into()),
        input,
        output: output.clone(),
        judges: Some(judges),
        ..ScoreArgs::default()
    })
    .unwrap();
    let rows = assert_totals(&output, &expected);
    let mut failed = 0;
    for ((row, missing), text) in rows.iter().zip(&unjudged).zip(source.lines()) {
        let items = serde_json::from_str::<Value>(text).unwrap()["rubrics"]
            .as_array()
            .unwrap()
            .len();
        if missing.len() == items {
            let error = row.error.as_deref().unwrap_or_default();
            assert!(
                missing.iter().all(|id| error.contains(id.as_str())),
                "{error}"
            );
            failed += 1;
            continue;
        }
        let explanation = row.explanation.as_deref().unwrap_or_default();
        for id in missing {
            assert!(
                explanation.contains(&format!("{id} (")),
                "{}: {explanation}",
                row.id
            );
        }
        assert_eq!(explanation.contains("unjudged"), !missing.is_empty());
    }
    assert_eq!(summary.errors, failed);
    assert!(failed < 3, "most rows keep a score");
}
