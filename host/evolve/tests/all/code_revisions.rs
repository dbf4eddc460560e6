//! Judge revisions that are code: the judge loop's agent hands in a revised
//! `worked-steps` crate, verifine builds it confined and locked, checks it
//! against the snapshot cases the crate ships, and the accept rule decides;
//! what is accepted becomes the live judge and is named (name, version,
//! sha256) in the calibration log, the events, summary.json and every
//! metrics line of the round it rewards.

#![cfg(unix)]

use crate::common::{read, scratch, tiny};
use serde_json::Value;
use std::path::{Path, PathBuf};
use verifine_evolve::start;
use verifine_hotswap::agent::Accept;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn lines(path: &Path) -> Vec<Value> {
    read(path)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_new_sub_criterion_in_code_goes_live_and_a_change_that_breaks_its_snapshots_is_refused() {
    let root = std::fs::canonicalize(repo_root()).unwrap();
    let dir = scratch("code-revisions");
    let mut config = tiny(100);
    let agent_dir = root.join("examples/judge-code-agent");
    config.agent.command = vec![
        "sh".into(),
        agent_dir.join("agent.sh").display().to_string(),
    ];
    config.agent.readable = vec![agent_dir];
    config.agent.code = Some(Accept::Crate);
    config.agent.source = Some(root.join("plugins/worked-steps"));
    // Kept between test runs, apart from the workspace's own target: a
    // revision has the built-in's package name.
    config.agent.build_target_dir = Some(root.join("target/agent-revisions"));
    config.agent.timeout_seconds = 900;
    // An accept rule that takes whatever scores: this test is about the
    // code's path, the rule has its own tests (`src/calibration/tests.rs`).
    config.calibration.min_gain = -3.0;
    config.calibration.margin = 3.0;
    config.calibration.max_accumulated_drop = 3.0;
    config.calibration.max_accumulated_mae_rise = 3.0;
    config.calibration.review_window = 0;
    let summary = start(config, &dir, Box::new(|_| {})).unwrap();
    assert!(summary.loops.iter().any(|l| l.ran), "{:?}", summary.loops);

    let log = lines(&dir.join("judge/calibration.jsonl"));
    assert_eq!(
        log.len(),
        2,
        "two code proposals, then the agent is done: {log:?}"
    );
    let admitted = &log[0];
    assert_eq!(admitted["code"]["status"], "admitted", "{admitted}");
    let plugin = &admitted["code"]["plugin"];
    assert_eq!(plugin["name"], "worked-steps");
    assert_eq!(plugin["version"], "0.2.0");
    let sha = plugin["sha256"].as_str().unwrap().to_string();
    assert_eq!(admitted["revision"], 1, "{admitted}");
    assert_eq!(admitted["rules"]["grounded"]["only-known-numbers"], 1.0);

    let refused = &log[1];
    assert_eq!(refused["code"]["status"], "refused", "{refused}");
    let reason = refused["decision"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("its code was refused") && reason.contains("snapshot"),
        "{reason}"
    );
    assert_eq!(refused["code"]["plugin"]["version"], "0.3.0");
    assert_eq!(refused["revision"], Value::Null);

    // The stored component is the one named, and its crate is kept for the
    // next agent.
    let stored = std::fs::read(dir.join(format!("judge/revisions/{sha}.wasm"))).unwrap();
    assert_eq!(verifine_base::sha256_hex(&stored), sha);
    assert!(
        dir.join(format!("judge/sources/{sha}/src/criteria.rs"))
            .exists()
    );

    // Hot-swap's events: promoted, then refused with the reason.
    let events = lines(&dir.join("judge/events.jsonl"));
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["promoted", "refused"]);
    assert_eq!(events[0]["candidate"]["plugin"]["sha256"], sha.as_str());
    assert_eq!(events[0]["candidate"]["origin"]["kind"], "agent");
    assert_eq!(events[0]["live_before"]["plugin"]["version"], "0.1.0");
    assert_eq!(events[1]["live_before"]["plugin"]["sha256"], sha.as_str());
    assert!(
        events[1]["reasons"][0]
            .as_str()
            .unwrap()
            .contains("snapshot")
    );

    // The live judge, summary.json and the round it rewarded name it.
    let state: Value = serde_json::from_str(&read(&dir.join("state.json"))).unwrap();
    assert_eq!(state["live"]["code"]["plugin"]["sha256"], sha.as_str());
    let judge_rows: Vec<(u64, String)> = summary
        .judge
        .iter()
        .map(|j| (u64::from(j.revision), j.plugin.clone().unwrap().version))
        .collect();
    assert_eq!(
        judge_rows,
        [(0, "0.1.0".to_string()), (1, "0.2.0".to_string())]
    );
    assert_eq!(summary.judge[1].plugin.as_ref().unwrap().sha256, sha);
    let metrics = lines(&dir.join("rows/R1/metrics.jsonl"));
    let grpo: Vec<&Value> = metrics.iter().filter(|l| l["phase"] == "grpo").collect();
    assert!(!grpo.is_empty());
    for line in grpo {
        assert_eq!(line["plugins"][0]["sha256"], sha.as_str(), "{line}");
        assert_eq!(line["plugins"][0]["version"], "0.2.0 rules r1", "{line}");
        assert!(
            line["criteria"]
                .get("grounded/only-known-numbers")
                .is_some(),
            "the new sub-criterion scored the round: {line}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
