//! The accept rule and the calibration loop's limits, on judges whose
//! scores are given directly (no plugin): what is accepted, what is
//! refused, the cap on proposals per round, the review request, and a
//! resumed calibration replaying its log instead of asking again.

use super::{
    CalibrationConfig, CalibrationEntry, CalibrationOutcome, CalibrationStop, Hooks, LabelledSet,
    calibrate, decide,
};
use crate::agent::{Proposal, RevisionAgent, RevisionRequest};
use crate::judge::JudgeRevision;
use crate::testing::{case, label, scored};
use serde_json::json;
use std::cell::RefCell;

/// Six labelled cases: 0–2 from an earlier batch, 3–5 the newest.
pub(super) fn set() -> LabelledSet {
    let human = [0.0, 1.0, 0.5, 0.0, 1.0, 0.5];
    LabelledSet {
        cases: (0..6).map(case).collect(),
        labels: human
            .iter()
            .enumerate()
            .map(|(i, &h)| label(i, h))
            .collect(),
        current: vec![3, 4, 5],
        earlier: vec![0, 1, 2],
    }
}

/// Each revision moves case 3 a little closer to its label (so Pearson on
/// the newest batch rises every time) without touching earlier cases.
pub(super) fn creeping(k: u64) -> Vec<f64> {
    let c3 = 1.0 - (k as f64) * 0.04;
    vec![0.0, 1.0, 0.5, c3, 1.0, 0.0]
}

#[test]
fn an_improving_revision_is_accepted_and_one_that_breaks_an_earlier_case_is_refused() {
    let config = CalibrationConfig::default();
    let live = [0.0, 1.0, 0.5, 1.0, 1.0, 0.0];
    let better = [0.0, 1.0, 0.5, 0.0, 1.0, 0.5];
    let accepted = decide(&config, &set(), &live, &better);
    assert!(accepted.accepted, "{}", accepted.reason);
    assert!(accepted.current_after.pearson > accepted.current_before.pearson);

    // Just as good on the newest batch, but earlier case c1 drops from 1 to 0.
    let regressing = [0.0, 0.0, 0.5, 0.0, 1.0, 0.5];
    let refused = decide(&config, &set(), &live, &regressing);
    assert!(!refused.accepted);
    assert!(refused.reason.contains("c1"), "{}", refused.reason);
    assert_eq!(
        refused.worst_regression.as_ref().map(|w| w.0.as_str()),
        Some("c1")
    );

    // A regression within the margin is allowed.
    let slight = [0.0, 0.8, 0.5, 0.0, 1.0, 0.5];
    assert!(decide(&config, &set(), &live, &slight).accepted);
    // No gain on the newest batch: refused.
    assert!(!decide(&config, &set(), &live, &live).accepted);
}

#[test]
fn a_revision_that_wears_down_many_earlier_cases_within_the_margin_is_refused() {
    // Twelve earlier cases the live judge gets right, three new ones it
    // gets partly wrong.
    let earlier: Vec<f64> = [0.0, 1.0].repeat(6);
    let human: Vec<f64> = earlier.iter().copied().chain([0.0, 1.0, 0.5]).collect();
    let set = LabelledSet {
        cases: (0..human.len()).map(case).collect(),
        labels: human
            .iter()
            .enumerate()
            .map(|(i, &h)| label(i, h))
            .collect(),
        current: vec![12, 13, 14],
        earlier: (0..12).collect(),
    };
    let live: Vec<f64> = earlier.iter().copied().chain([0.2, 0.6, 0.7]).collect();
    // Perfect on the newest batch; every earlier case worse by at most 0.24
    // (inside the 0.25 margin), but together the accumulated Pearson falls.
    let worn: Vec<f64> = [
        0.24, 0.76, 0.24, 1.0, 0.0, 0.76, 0.24, 0.76, 0.0, 0.76, 0.24, 0.76,
    ]
    .into_iter()
    .chain([0.0, 1.0, 0.5])
    .collect();
    let config = CalibrationConfig::default();
    let refused = decide(&config, &set, &live, &worn);
    assert!(refused.current_after.pearson > refused.current_before.pearson);
    assert!(
        refused
            .worst_regression
            .as_ref()
            .is_some_and(|w| w.1 <= config.margin)
    );
    assert!(!refused.accepted);
    assert!(refused.reason.contains("accumulated"), "{}", refused.reason);
    let (before, after) = (
        refused.accumulated_before.unwrap(),
        refused.accumulated_after.unwrap(),
    );
    assert!(after.pearson < before.pearson);

    // Allowed to fall by that much, the same revision goes live.
    let tolerant = CalibrationConfig {
        max_accumulated_drop: before.pearson - after.pearson + 1e-9,
        max_accumulated_mae_rise: f64::INFINITY,
        ..config.clone()
    };
    assert!(decide(&tolerant, &set, &live, &worn).accepted);
}

#[test]
fn a_revision_that_ranks_better_but_scores_further_from_the_labels_is_refused() {
    // Perfectly ordered on the newest batch and better ordered overall, but
    // the newest totals are squeezed towards the top: the accumulated MAE
    // rises.
    let live = [0.0, 1.0, 0.5, 0.1, 0.9, 0.9];
    let inflated = [0.0, 1.0, 0.5, 0.4, 0.9, 0.65];
    let config = CalibrationConfig::default();
    let refused = decide(&config, &set(), &live, &inflated);
    assert!(refused.current_after.pearson > refused.current_before.pearson);
    let (before, after) = (
        refused.accumulated_before.unwrap(),
        refused.accumulated_after.unwrap(),
    );
    assert!(after.pearson >= before.pearson);
    assert!(after.mae > before.mae);
    assert!(!refused.accepted);
    assert!(refused.reason.contains("MAE"), "{}", refused.reason);
}

/// Proposes rules `{"k": n}` for n = 1, 2, …; a judge under rules n scores
/// through `scores(n)`.
struct Counting(usize);

impl RevisionAgent for Counting {
    fn name(&self) -> String {
        "counting".into()
    }

    fn propose(&mut self, request: &RevisionRequest<'_>) -> crate::Result<Option<Proposal>> {
        self.0 += 1;
        assert!(!request.tried.contains(&json!({"k": self.0})));
        Ok(Some(Proposal {
            rules: json!({"k": self.0}),
            rationale: format!("try {}", self.0),
            code: None,
            verifier: None,
        }))
    }
}

fn run(
    config: &CalibrationConfig,
    scores: impl Fn(u64) -> Vec<f64>,
    done: &[CalibrationEntry],
) -> (CalibrationOutcome, Vec<CalibrationEntry>, usize) {
    let log = RefCell::new(Vec::new());
    let mut agent = Counting(done.len());
    let initial = JudgeRevision::initial(json!({"k": 0}));
    let outcome = calibrate(
        config,
        1,
        &set(),
        initial,
        1,
        done,
        &mut agent,
        &[],
        Hooks {
            score: &mut |r: &JudgeRevision| Ok(scored(scores(r.rules["k"].as_u64().unwrap()))),
            admit: &mut |_, _| unreachable!("rules only"),
            log: &mut |e: &CalibrationEntry, _, _| {
                log.borrow_mut().push(e.clone());
                Ok(())
            },
        },
    )
    .unwrap();
    let asked = agent.0 - done.len();
    (outcome, log.into_inner(), asked)
}

#[test]
fn at_most_max_versions_proposals_are_made_per_round() {
    let config = CalibrationConfig {
        review_window: 0,
        ..CalibrationConfig::default()
    };
    let (outcome, log, asked) = run(&config, creeping, &[]);
    assert_eq!(outcome.stop, CalibrationStop::VersionCap);
    assert_eq!((log.len(), asked), (20, 20));
    assert_eq!(outcome.accepted, 20);
    assert_eq!(outcome.live.number, 20);
}

#[test]
fn when_agreement_stops_rising_the_loop_asks_for_review() {
    // Every proposal scores like the initial judge: nothing is accepted.
    let config = CalibrationConfig::default();
    let (outcome, log, _) = run(&config, |_| creeping(0), &[]);
    let CalibrationStop::ReviewRequested { reason } = &outcome.stop else {
        panic!("{:?}", outcome.stop)
    };
    assert!(reason.contains("10 iterations"), "{reason}");
    assert_eq!(log.len(), config.review_window);
    assert!(log.iter().all(|e| e.revision.is_none()));
    assert_eq!(outcome.live.number, 0);
}

#[test]
fn a_resumed_calibration_replays_its_log_and_asks_only_for_what_is_left() {
    let config = CalibrationConfig {
        review_window: 0,
        max_versions: 6,
        ..CalibrationConfig::default()
    };
    let (whole, whole_log, _) = run(&config, creeping, &[]);
    let (resumed, rest, asked) = run(&config, creeping, &whole_log[..4]);
    assert_eq!(asked, 2);
    assert_eq!(rest, whole_log[4..].to_vec());
    assert_eq!(resumed.live, whole.live);
}

/// As [`creeping`], but the second proposal moves case 3 away from its
/// label: the accept rule rejects it.
fn second_is_worse(k: u64) -> Vec<f64> {
    if k == 2 {
        creeping(0).into_iter().map(|t| 1.0 - t).collect()
    } else {
        creeping(k)
    }
}

#[test]
fn a_forged_or_moved_log_entry_is_not_replayed() {
    let config = CalibrationConfig {
        review_window: 0,
        max_versions: 4,
        ..CalibrationConfig::default()
    };
    let (_, log, _) = run(&config, second_is_worse, &[]);
    assert_eq!(log[1].revision, None, "{:?}", log[1].decision);
    let replay = |done: &[CalibrationEntry]| {
        calibrate(
            &config,
            1,
            &set(),
            JudgeRevision::initial(json!({"k": 0})),
            1,
            done,
            &mut Counting(done.len()),
            &[],
            Hooks {
                score: &mut |r: &JudgeRevision| {
                    Ok(scored(second_is_worse(r.rules["k"].as_u64().unwrap())))
                },
                admit: &mut |_, _| unreachable!("rules only"),
                log: &mut |_, _, _| Ok(()),
            },
        )
    };
    // What an agent that could write the log would plant before `--resume`:
    // its rejected proposal, recorded as accepted.
    let mut forged = log[..2].to_vec();
    forged[1].decision.accepted = true;
    forged[1].revision = Some(2);
    let err = replay(&forged).unwrap_err().to_string();
    assert!(
        err.contains("entry 2") && err.contains("rejects it"),
        "{err}"
    );
    // An entry moved out of its place is refused too.
    let mut moved = log[..2].to_vec();
    moved.swap(0, 1);
    assert!(
        replay(&moved)
            .unwrap_err()
            .to_string()
            .contains("round 1 iteration 2")
    );
    // The genuine log replays.
    let outcome = replay(&log[..2]).unwrap();
    assert_eq!(
        outcome.live.rules,
        run(&config, second_is_worse, &[]).0.live.rules
    );
}

#[cfg(unix)]
#[test]
fn an_external_agent_answers_through_files_and_never_sees_the_gold_solution() {
    use crate::command_agent::{AgentConfig, CommandAgent};
    use std::os::unix::fs::PermissionsExt;
    let dir = verifine_test_support::scratch_dir("agent");
    let script = dir.join("agent.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nset -eu\nd=\"$1\"\n[ -s \"$d/tried.jsonl\" ] && exit 0\n\
         grep -q GOLD-SOLUTION \"$d/disputed.jsonl\" && exit 7\n\
         grep -q '\"c3\"' \"$d/disputed.jsonl\" || exit 3\n\
         printf '{\"k\": 7}' > \"$d/revised-rules.json\"\necho 'seven, from the files' > \"$d/rationale.txt\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = AgentConfig {
        command: vec![script.display().to_string()],
        timeout_seconds: 30,
        ..AgentConfig::default()
    };
    let mut agent = CommandAgent::new(config, dir.join("work"), &dir.join("judge"), 1);
    let mut log = Vec::new();
    let initial = JudgeRevision::initial(json!({"k": 0}));
    let outcome = calibrate(
        &CalibrationConfig::default(),
        1,
        &set(),
        initial,
        1,
        &[],
        &mut agent,
        &[],
        Hooks {
            score: &mut |r: &JudgeRevision| Ok(scored(creeping(r.rules["k"].as_u64().unwrap()))),
            admit: &mut |_, _| unreachable!("rules only"),
            log: &mut |e: &CalibrationEntry, _, _| {
                log.push(e.clone());
                Ok(())
            },
        },
    )
    .unwrap();
    assert_eq!(outcome.stop, CalibrationStop::AgentDone);
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].rules, json!({"k": 7}));
    assert_eq!(log[0].rationale, "seven, from the files");
    assert_eq!(
        outcome.live.rules,
        json!({"k": 7}),
        "{}",
        log[0].decision.reason
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_revision_that_pays_more_for_wrong_answers_is_refused_when_the_check_is_on() {
    // Cases 0 and 3 answer 4 where the reference says 5; their labels are 0.
    let mut set = set();
    for (i, case) in set.cases.iter_mut().enumerate() {
        case.reference = "5 + 0 = 5\n#### 5".into();
        case.response = if i % 3 == 0 { "#### 4" } else { "#### 5" }.into();
    }
    let live = [0.1, 1.0, 0.5, 0.2, 0.6, 0.6];
    // Agrees better with the labels everywhere it matters, but lifts both
    // wrong answers by 0.05.
    let lifted = [0.15, 1.0, 0.5, 0.25, 1.0, 0.5];
    let unchecked = decide(&CalibrationConfig::default(), &set, &live, &lifted);
    assert!(unchecked.accepted, "{}", unchecked.reason);
    let (before, after) = unchecked.wrong_reward.unwrap();
    assert!((before - 0.15).abs() < 1e-12 && (after - 0.2).abs() < 1e-12);

    let checked = CalibrationConfig {
        max_wrong_reward_rise: Some(0.0),
        ..CalibrationConfig::default()
    };
    let refused = decide(&checked, &set, &live, &lifted);
    assert!(!refused.accepted);
    assert!(
        refused
            .reason
            .contains("2 labelled answers with a wrong final answer"),
        "{}",
        refused.reason
    );
    // Lowering what wrong answers get passes the check.
    let lowered = [0.05, 1.0, 0.5, 0.1, 1.0, 0.5];
    assert!(decide(&checked, &set, &live, &lowered).accepted);
}
