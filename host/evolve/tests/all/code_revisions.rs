//! Judge revisions that are code: the judge loop's agent hands in a revised
//! `worked-steps` crate, verifine builds it confined and locked, checks it
//! against the snapshot cases the crate ships, and the accept rule decides;
//! what is accepted becomes the live judge and is named (name, version,
//! sha256) in the calibration log, the events, summary.json and every
//! metrics line of the round it rewards.

#![cfg(unix)]

use crate::common::{creeping, read, scored, scratch, set, tiny};
use serde_json::{Value, json};
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use verifine_evolve::agent::{Proposal, RevisionAgent, RevisionRequest};
use verifine_evolve::calibration::{CalibrationConfig, CalibrationEntry, Hooks, calibrate};
use verifine_evolve::judge::JudgeRevision;
use verifine_evolve::judge::code::{CodeSubmission, HandedIn, JudgeCode};
use verifine_evolve::start;
use verifine_hotswap::agent::Accept;
use verifine_hotswap::revision::Origin;
use verifine_runtime::Provenance;

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
    // code's path, the rule has its own tests (calibration.rs).
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

/// Proposes, in turn: code `[1]` with rules k = 1, code `[2]`, rules alone
/// (k = 3); then nothing.
struct Scripted(u64);

impl RevisionAgent for Scripted {
    fn name(&self) -> String {
        "scripted".into()
    }

    fn propose(&mut self, _: &RevisionRequest<'_>) -> verifine_evolve::Result<Option<Proposal>> {
        self.0 += 1;
        let code = |byte: u8| {
            Some(Ok(CodeSubmission {
                bytes: vec![byte],
                cases: None,
                source: None,
            }))
        };
        Ok(match self.0 {
            1 => Some(Proposal {
                rules: json!({"k": 1}),
                rationale: "new code".into(),
                code: code(1),
                verifier: None,
            }),
            2 => Some(Proposal {
                rules: json!({"k": 2}),
                rationale: "code that fails its cases".into(),
                code: code(2),
                verifier: None,
            }),
            3 => Some(Proposal {
                rules: json!({"k": 3}),
                rationale: "rules alone".into(),
                code: None,
                verifier: None,
            }),
            _ => None,
        })
    }
}

fn admitted() -> JudgeCode {
    JudgeCode {
        plugin: Provenance {
            name: "worked-steps".into(),
            version: "0.2.0".into(),
            sha256: "a".repeat(64),
        },
        api_version: "0.3.0".into(),
        source: false,
        origin: Origin::Agent {
            command: "scripted".into(),
            step: 1,
        },
    }
}

#[test]
fn refused_code_is_never_scored_later_rules_keep_the_live_code_and_a_replay_builds_nothing() {
    // r0 is live again after r1–r3 (a round rated below the kept policy):
    // what this loop accepts is numbered from 4, never reusing a number.
    let config = CalibrationConfig {
        review_window: 0,
        ..CalibrationConfig::default()
    };
    let initial = JudgeRevision {
        number: 0,
        rules: json!({"k": 0}),
        origin: "initial".into(),
        code: None,
        verifier: None,
    };
    // What each scored revision ran: (k, the component's sha256).
    let scored_runs = RefCell::new(Vec::new());
    let mut score = |r: &JudgeRevision| {
        let k = r.rules["k"].as_u64().unwrap();
        let sha = r.code.as_ref().map(|c| c.plugin.sha256[..1].to_string());
        scored_runs.borrow_mut().push((k, sha));
        Ok(scored(creeping(k)))
    };
    let mut log = Vec::new();
    let outcome = calibrate(
        &config,
        1,
        &set(),
        initial.clone(),
        4,
        &[],
        &mut Scripted(0),
        &[],
        Hooks {
            score: &mut score,
            admit: &mut |code, live| {
                assert_eq!(live.number, if code.bytes == [1] { 0 } else { 4 });
                Ok(match code.bytes[0] {
                    1 => HandedIn::Admitted(admitted()),
                    _ => HandedIn::Refused {
                        plugin: None,
                        reason: "shipped snapshot cases: `correct` differs".into(),
                    },
                })
            },
            log: &mut |entry: &CalibrationEntry, _, _| {
                log.push(entry.clone());
                Ok(())
            },
        },
    )
    .unwrap();
    let revisions: Vec<Option<u32>> = log.iter().map(|e| e.revision).collect();
    assert_eq!(revisions, [Some(4), None, Some(5)]);
    assert!(
        log[1].decision.reason.contains("its code was refused")
            && log[1].decision.reason.contains("`correct` differs"),
        "{}",
        log[1].decision.reason
    );
    let runs = scored_runs.borrow().clone();
    let a = Some("a".to_string());
    assert_eq!(
        runs,
        [(0, None), (1, a.clone()), (3, a.clone())],
        "the refused proposal was not scored; rules alone ran the live code"
    );
    assert_eq!(outcome.live.number, 5);
    assert_eq!(outcome.live.code, Some(admitted()));
    assert_eq!(log[2].code, None);

    // Resumed: the log replays, nothing is built or admitted again, the
    // same judge ends up live.
    let replayed = calibrate(
        &config,
        1,
        &set(),
        initial,
        4,
        &log,
        &mut Scripted(3),
        &[],
        Hooks {
            score: &mut |r: &JudgeRevision| Ok(scored(creeping(r.rules["k"].as_u64().unwrap()))),
            admit: &mut |_, _| panic!("a replay admits nothing"),
            log: &mut |_, _, _| panic!("a replay writes no new entry"),
        },
    )
    .unwrap();
    assert_eq!(replayed.live, outcome.live);
}
