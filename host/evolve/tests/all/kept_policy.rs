//! `round_start = "kept"`: judge-revised rounds continue the policy the
//! fixed evaluator rates best on the validation set, a round rated below it
//! is not carried forward (and its judge yields to the kept policy's), and
//! the initial-judge rows train for the chain's whole budget.

use crate::common::{read, scratch, tiny};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use verifine_evolve::config::RoundStart;
use verifine_evolve::start;
use verifine_evolve::summary::KeptDecision;

/// A row's training config, as its run directory saved it.
fn row_config(dir: &Path, row: &str) -> toml::Value {
    toml::from_str(&read(&dir.join("rows").join(row).join("config.toml"))).unwrap()
}

#[test]
fn rounds_continue_the_kept_policy_and_a_worse_round_is_not_carried_forward() {
    let dir = scratch("kept");
    let mut config = tiny(100);
    config.rounds = 3;
    config.round_start = RoundStart::Kept;
    config.validation_problems = 8;
    // A base that learns the answer format, and rounds whose learning rate
    // wrecks it: some round must then be rated below the kept policy.
    config.train.task.max_steps = 2;
    config.train.model.hidden_size = 32;
    config.train.model.intermediate_size = 64;
    config.train.sft.steps = 300;
    config.train.sft.optim.learning_rate = 3e-3;
    config.train.grpo.max_new_tokens = 32;
    config.train.grpo.optim.learning_rate = 0.5;
    let summary = start(config.clone(), &dir, Box::new(|_| {})).unwrap();

    // Same budget for every row: the initial-judge rows train the chain's.
    for row in ["random-initial", "guided-initial"] {
        let steps = row_config(&dir, row)["grpo"]["steps"].as_integer().unwrap();
        assert_eq!(steps as usize, 3 * config.round_steps, "{row}");
    }
    let decisions: Vec<KeptDecision> = read(&dir.join("kept.jsonl"))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let rows: Vec<&str> = decisions.iter().map(|d| d.row.as_str()).collect();
    assert_eq!(rows, ["R1", "R2", "R3"]);
    assert_eq!(decisions[0].before.0, "base");

    let state: Value = serde_json::from_str(&read(&dir.join("state.json"))).unwrap();
    let trained_with: BTreeMap<String, u32> =
        serde_json::from_value(state["trained_with"].clone()).unwrap();
    let revision_of = |row: &str| if row == "base" { 0 } else { trained_with[row] };
    // A revision accepted after an earlier one was made live again takes a
    // number of its own: numbers are unique and rise in acceptance order.
    let numbers: Vec<u64> = state["revisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["number"].as_u64().unwrap())
        .collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
    let calibrated: Vec<u64> = read(&dir.join("judge/calibration.jsonl"))
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).unwrap()["revision"].as_u64())
        .collect();
    assert_eq!(
        calibrated,
        numbers[1..],
        "every accepted revision is on record once"
    );
    let mut kept = "base".to_string();
    for (i, decision) in decisions.iter().enumerate() {
        let name = decision.row.as_str();
        // Each round started from the policy kept before it.
        assert_eq!(decision.before.0, kept, "{name}");
        let row = summary.rows.iter().find(|r| r.name == name).unwrap();
        assert_eq!(row.started_from.as_deref(), Some(kept.as_str()));
        assert_eq!(row.validation_rb, Some(decision.validation_rb));
        let init_from = row_config(&dir, name)["init_from"]
            .as_str()
            .unwrap()
            .to_string();
        let expected = match kept.as_str() {
            "base" => dir.join("base"),
            other => dir.join("rows").join(other),
        };
        assert_eq!(Path::new(&init_from), expected, "{name}");
        // Kept exactly when rated at least as well; otherwise the kept
        // policy's judge revision is live again.
        assert_eq!(decision.kept, decision.validation_rb >= decision.before.1);
        if decision.kept {
            kept = name.to_string();
        } else {
            assert_eq!(decision.live, revision_of(&decision.before.0), "{name}");
        }
        if let Some(next) = decisions.get(i + 1) {
            assert_eq!(next.before.0, kept);
        }
    }
    // The summary names what the loop delivers: the last kept policy.
    assert_eq!(summary.kept.as_deref(), Some(kept.as_str()));
    assert!(read(&dir.join("report.md")).contains(&format!("The loop delivers **{kept}**")));
    assert_eq!(state["kept"]["row"], kept.as_str());
    // The rounds' learning rate made sure the refusing path ran, with a
    // judge revision to take back.
    assert!(
        decisions
            .iter()
            .any(|d| !d.kept && trained_with[&d.row] != revision_of(&d.before.0)),
        "{decisions:?} {trained_with:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
