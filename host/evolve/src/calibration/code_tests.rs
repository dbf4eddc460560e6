//! Judge revisions that are code, in calibration: refused code is never
//! scored, a revision of rules alone keeps the live code, and a resumed
//! calibration builds and admits nothing again.

use super::tests::{creeping, set};
use super::{CalibrationConfig, CalibrationEntry, Hooks, calibrate};
use crate::agent::{Proposal, RevisionAgent, RevisionRequest};
use crate::judge::JudgeRevision;
use crate::judge::code::{CodeSubmission, HandedIn, JudgeCode};
use crate::testing::scored;
use serde_json::json;
use std::cell::RefCell;
use verifine_hotswap::revision::Origin;
use verifine_runtime::Provenance;

/// Proposes, in turn: code `[1]` with rules k = 1, code `[2]`, rules alone
/// (k = 3); then nothing.
struct Scripted(u64);

impl RevisionAgent for Scripted {
    fn name(&self) -> String {
        "scripted".into()
    }

    fn propose(&mut self, _: &RevisionRequest<'_>) -> crate::Result<Option<Proposal>> {
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
    let initial = JudgeRevision::initial(json!({"k": 0}));
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
