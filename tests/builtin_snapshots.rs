//! Snapshot tests of every built-in plugin over fixture inputs: what each
//! plugin decides is part of its contract, reviewed in tests/snapshots/.

use serde_json::{Value, json};
use verifine::commands::score::{ScoreArgs, score};
use verifine_runtime::{
    Candidate, Context, Criterion, DimensionHistory, Judgment, Limits, MonitorPoint, Runtime,
    Scoring, Verdict,
};
use verifine_tests::{fixture, scratch_dir};

/// Scores a fixture through `verifine score` and returns the output rows with
/// the plugin hash redacted (it changes with every rebuild of the plugin).
fn score_fixture(rubric: &str) -> Vec<Value> {
    score_fixture_with(rubric, None)
}

/// [`score_fixture`] under the plugin config of a fixture TOML (`[rubric]`
/// table), when given.
fn score_fixture_with(rubric: &str, config: Option<&str>) -> Vec<Value> {
    let dir = scratch_dir(&format!("snap-{rubric}-{}", config.unwrap_or("default")));
    let output = dir.join("out.jsonl");
    let summary = score(&ScoreArgs {
        rubric: Some(rubric.into()),
        config: config.map(fixture),
        input: fixture(&format!("{rubric}.jsonl")),
        output: output.clone(),
        threads: Some(1),
        ..ScoreArgs::default()
    })
    .unwrap();
    assert_eq!(summary.rubric.name, rubric);
    std::fs::read_to_string(output)
        .unwrap()
        .lines()
        .map(|line| {
            let mut row: Value = serde_json::from_str(line).unwrap();
            for key in ["plugin", "aggregator"] {
                if let Some(p) = row.get_mut(key) {
                    p["sha256"] = json!("[sha256]");
                }
            }
            row
        })
        .collect()
}

#[test]
fn math_answer() {
    insta::assert_json_snapshot!(score_fixture("math-answer"));
}

#[test]
fn worked_steps() {
    let rows = score_fixture("worked-steps");
    let total = |id: &str| rows.iter().find(|r| r["id"] == id).unwrap()["total"].clone();
    // The loose default rewards a valid chain that ignores the problem.
    assert_eq!(total("ungrounded-valid-chain"), json!(1.0));
    insta::assert_json_snapshot!(rows);
}

#[test]
fn worked_steps_strict() {
    let rows = score_fixture_with("worked-steps", Some("worked-steps-strict.toml"));
    let total = |id: &str| rows.iter().find(|r| r["id"] == id).unwrap()["total"].clone();
    assert_eq!(total("correct"), json!(1.0));
    assert_ne!(total("ungrounded-valid-chain"), json!(1.0));
    insta::assert_json_snapshot!(rows);
}

#[test]
fn driving() {
    insta::assert_json_snapshot!(score_fixture("driving"));
}

#[test]
fn navigation() {
    insta::assert_json_snapshot!(score_fixture("navigation"));
}

#[test]
fn healthbench() {
    let rows = score_fixture("healthbench");
    assert_eq!(rows[0]["total"], json!(0.5), "the HealthBench test vector");
    insta::assert_json_snapshot!(rows);
}

/// The cases `worked-steps` ships in its crate are what a revision of it
/// (an agent's, in the judge loop) is checked against: the built-in passes
/// them.
#[test]
fn worked_steps_passes_the_snapshot_cases_its_crate_ships() {
    use verifine_runtime::cases::{default_aggregator, require_all_match, run_cases};
    let runtime = runtime();
    let rubric = runtime.load("worked-steps").unwrap();
    let aggregator = default_aggregator(&runtime).unwrap();
    let crate_dir = verifine_tests::repo_root().join("plugins/worked-steps");
    let cases = crate_dir.join("cases.jsonl");
    let results = run_cases(
        &rubric,
        &aggregator,
        &cases,
        &crate_dir.join("snapshots"),
        false,
    )
    .unwrap();
    assert_eq!(results.len(), 7);
    require_all_match(&results).unwrap();
}

#[test]
fn prbench() {
    insta::assert_json_snapshot!(score_fixture("prbench"));
}

fn runtime() -> Runtime {
    Runtime::new(Limits::default()).unwrap()
}

#[test]
fn weighted_sum() {
    let plugin = runtime().load("weighted-sum").unwrap();
    let criteria = vec![
        Criterion {
            id: "a".into(),
            description: String::new(),
            weight: 7.0,
            dimension: "x".into(),
            tags: vec![],
        },
        Criterion {
            id: "b".into(),
            description: String::new(),
            weight: 5.0,
            dimension: "x".into(),
            tags: vec![],
        },
        Criterion {
            id: "c".into(),
            description: String::new(),
            weight: 10.0,
            dimension: "x".into(),
            tags: vec![],
        },
        Criterion {
            id: "d".into(),
            description: String::new(),
            weight: -6.0,
            dimension: "x".into(),
            tags: vec![],
        },
    ];
    let verdict = |id: &str, score: f64| Verdict {
        criterion: id.into(),
        score,
        met: None,
        confidence: None,
        explanation: None,
    };
    let judgment = |verdicts| Judgment {
        total: None,
        verdicts,
        sub_scores: vec![],
        criteria: vec![],
        explanation: None,
    };
    let items = vec![
        Scoring {
            criteria: criteria.clone(),
            judgment: judgment(vec![
                verdict("a", 1.0),
                verdict("b", 0.0),
                verdict("c", 1.0),
                verdict("d", 1.0),
            ]),
        },
        Scoring {
            criteria: criteria.clone(),
            judgment: judgment(vec![verdict("a", 0.5), verdict("c", 0.25)]),
        },
        Scoring {
            criteria: criteria.clone(),
            judgment: judgment(vec![verdict("d", 1.0)]),
        },
        Scoring {
            criteria: criteria.clone(),
            judgment: judgment(vec![verdict("zzz", 1.0)]),
        },
        Scoring {
            criteria: criteria[3..].to_vec(),
            judgment: judgment(vec![verdict("d", 0.0)]),
        },
    ];
    let rewards = plugin
        .instance()
        .aggregate(
            &Context {
                step: 3,
                round: 0,
                config: "{}".into(),
            },
            &items,
        )
        .unwrap();
    assert_eq!(rewards[0], Ok(Some(0.5)));
    insta::assert_json_snapshot!(rewards);
}

#[test]
fn weakness_curriculum() {
    let plugin = runtime().load("weakness-curriculum").unwrap();
    let candidate =
        |id: &str, tag: &str, dim: &str, scores: &[f64], reference: Option<f64>| Candidate {
            sample_id: id.into(),
            tags: vec![tag.into()],
            history: vec![DimensionHistory {
                dimension: dim.into(),
                scores: scores.to_vec(),
            }],
            reward_mean: 0.5,
            reward_std: 0.2,
            rollouts: 8,
            reference_score: reference,
        };
    let candidates = vec![
        candidate(
            "merge-causality",
            "scenario:merge",
            "causality",
            &[0.1, 0.2, 0.3],
            Some(0.9),
        ),
        candidate(
            "merge-causality-2",
            "scenario:merge",
            "causality",
            &[0.4],
            None,
        ),
        candidate(
            "highway-causality",
            "scenario:highway",
            "causality",
            &[0.9, 1.0],
            Some(1.0),
        ),
        candidate("highway-safety", "scenario:highway", "safety", &[1.0], None),
        candidate("unreliable", "scenario:merge", "safety", &[0.0], Some(0.2)),
    ];
    let decisions = plugin
        .instance()
        .select(
            &Context {
                step: 0,
                round: 1,
                config: "{}".into(),
            },
            &candidates,
        )
        .unwrap()
        .unwrap();
    insta::assert_json_snapshot!(decisions);
}

#[test]
fn plateau_trigger() {
    let plugin = runtime().load("plateau-trigger").unwrap();
    let mut instance = plugin.instance();
    let points = |evaluator: &[f64], judge: &[f64], every: u64| -> Vec<MonitorPoint> {
        evaluator
            .iter()
            .zip(judge)
            .enumerate()
            .map(|(i, (e, j))| MonitorPoint {
                step: i as u64 * every,
                round: 0,
                evaluator_score: *e,
                judge_reward: *j,
            })
            .collect()
    };
    let ctx = |config: Value| Context {
        step: 0,
        round: 0,
        config: config.to_string(),
    };
    let cases = [
        (
            "improving",
            points(
                &[10.0, 11.0, 12.0, 13.0, 14.0],
                &[10.0, 11.0, 12.0, 13.0, 14.0],
                150,
            ),
            json!({}),
        ),
        (
            "plateau",
            points(
                &[10.0, 10.1, 10.1, 10.2, 10.2],
                &[10.0, 10.1, 10.1, 10.2, 10.2],
                150,
            ),
            json!({}),
        ),
        (
            "diverging",
            points(
                &[10.0, 11.0, 12.0, 13.0, 14.0],
                &[10.0, 12.0, 14.0, 16.0, 18.0],
                150,
            ),
            json!({}),
        ),
        (
            "warming-up",
            points(&[10.0, 10.0], &[10.0, 10.0], 150),
            json!({}),
        ),
        (
            "custom-schedule",
            points(&[0.5, 0.5, 0.5], &[0.5, 0.5, 0.5], 10),
            json!({"every": 10, "window": 2, "threshold": 0.01}),
        ),
        (
            "bad-config",
            points(&[0.5], &[0.5], 10),
            json!({"every": 0}),
        ),
    ];
    let outcomes: Vec<Value> = cases
        .iter()
        .map(|(name, history, config)| {
            let result = instance.check(&ctx(config.clone()), history).unwrap();
            json!({"case": name, "result": result})
        })
        .collect();
    insta::assert_json_snapshot!(outcomes);
}
