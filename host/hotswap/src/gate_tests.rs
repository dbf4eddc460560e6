//! The gate on its own, with built-in plugins: each check refuses with a
//! reason that names what failed, and the canary compares a candidate with
//! the live revision.

use super::*;
use verifine_runtime::{Limits, PluginSetting};

/// The reward function math-answer and its default aggregator make, and
/// the rubric slot holding math-answer live.
fn math_answer_live(runtime: &Runtime) -> (RewardPlugins, RevisionHistory) {
    let reward =
        RewardPlugins::from_settings(runtime, &PluginSetting::new("math-answer"), None).unwrap();
    let live = Revision::new(
        reward.rubric.clone(),
        Origin::Config {
            spec: "math-answer".into(),
        },
    );
    (reward, RevisionHistory::new(live, 2))
}

fn submission(plugin: &str) -> Submission {
    Submission {
        bytes: verifine_runtime::spec_bytes(plugin).unwrap().0,
        origin: Origin::Command {
            path: format!("{plugin}.wasm"),
        },
        cases: None,
    }
}

/// Four answers to one problem, labelled by whether the final answer is
/// the reference's: math-answer agrees with every label.
fn canary() -> Vec<CanaryCase> {
    let problem = "Start with 3, then add 4. What is the result?";
    [
        ("#### 7", true),
        ("#### 8", false),
        ("It is 7.\n#### 7", true),
        ("#### 12", false),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, (response, label))| CanaryCase {
        sample: Sample::new(format!("c{i}"), problem, response).with_reference("#### 7"),
        label,
    })
    .collect()
}

fn check(gate: &Gate, runtime: &Runtime, slot: &RevisionHistory, candidate: &str) -> GateDecision {
    let (reward, _) = math_answer_live(runtime);
    gate.check(runtime, slot, &reward.aggregator, &submission(candidate), 7)
}

#[test]
fn a_candidate_as_good_as_the_live_revision_passes_the_canary() {
    let runtime = Runtime::new(Limits::default()).unwrap();
    let (reward, slot) = math_answer_live(&runtime);
    let gate = Gate::new(GateConfig::default(), canary(), reward);
    let decision = check(&gate, &runtime, &slot, "math-answer");
    assert!(decision.accepted, "{:?}", decision.reasons);
    assert_eq!(decision.canary_live, Some(1.0));
    assert_eq!(decision.canary_candidate, Some(1.0));
    assert_eq!(decision.canary_leniency, Some(0.0));
    assert!(decision.revision.is_some());
}

#[test]
fn a_candidate_that_agrees_less_with_the_labels_is_refused_unless_the_margin_allows_it() {
    let runtime = Runtime::new(Limits::default()).unwrap();
    let (reward, slot) = math_answer_live(&runtime);
    // worked-steps never reads the reference: it cannot tell 7 from 8.
    let gate = Gate::new(GateConfig::default(), canary(), reward.clone());
    let decision = check(&gate, &runtime, &slot, "worked-steps");
    assert!(!decision.accepted);
    let candidate = decision.canary_candidate.unwrap();
    assert!(candidate < 1.0, "{candidate}");
    assert_eq!(decision.reasons.len(), 1, "{:?}", decision.reasons);
    assert!(
        decision.reasons[0].contains("below the live revision's 1.000"),
        "{}",
        decision.reasons[0]
    );

    let lenient = GateConfig {
        canary_margin: 1.0,
        ..GateConfig::default()
    };
    let gate = Gate::new(lenient, canary(), reward);
    assert!(check(&gate, &runtime, &slot, "worked-steps").accepted);
}

#[test]
fn a_plugin_of_another_kind_is_refused_before_any_case_is_scored() {
    let runtime = Runtime::new(Limits::default()).unwrap();
    let (reward, slot) = math_answer_live(&runtime);
    let gate = Gate::new(GateConfig::default(), canary(), reward);
    let decision = check(&gate, &runtime, &slot, "weighted-sum");
    assert!(!decision.accepted);
    assert_eq!(
        decision.reasons,
        ["weighted-sum is a aggregator plugin; this slot takes rubric plugins"]
    );
    assert_eq!(decision.canary_candidate, None);
}

#[test]
fn bytes_that_are_not_a_component_are_refused_with_the_loaders_reason() {
    let runtime = Runtime::new(Limits::default()).unwrap();
    let (reward, slot) = math_answer_live(&runtime);
    let gate = Gate::new(GateConfig::default(), Vec::new(), reward.clone());
    let junk = Submission {
        bytes: b"\0asm but not really".to_vec(),
        ..submission("math-answer")
    };
    let decision = gate.check(&runtime, &slot, &reward.aggregator, &junk, 0);
    assert!(!decision.accepted);
    assert!(decision.revision.is_none());
    assert_eq!(decision.reasons.len(), 1);
}

#[test]
fn without_a_canary_a_loadable_rubric_passes_and_nothing_is_compared() {
    let runtime = Runtime::new(Limits::default()).unwrap();
    let (reward, slot) = math_answer_live(&runtime);
    let gate = Gate::new(GateConfig::default(), Vec::new(), reward);
    assert!(!gate.has_canary());
    let decision = check(&gate, &runtime, &slot, "worked-steps");
    assert!(decision.accepted, "{:?}", decision.reasons);
    assert_eq!(decision.canary_candidate, None);
}

#[test]
fn snapshot_cases_are_refused_for_an_aggregator() {
    let runtime = Runtime::new(Limits::default()).unwrap();
    let (reward, _) = math_answer_live(&runtime);
    let aggregator = Revision::new(
        reward.aggregator.clone(),
        Origin::Config {
            spec: "weighted-sum".into(),
        },
    );
    let slot = RevisionHistory::new(aggregator, 2);
    let gate = Gate::new(GateConfig::default(), Vec::new(), reward.clone());
    let candidate = Submission {
        cases: Some(("cases.jsonl".into(), "snapshots".into())),
        ..submission("weighted-sum")
    };
    let decision = gate.check(&runtime, &slot, &reward.rubric, &candidate, 0);
    assert_eq!(
        decision.reasons,
        ["snapshot cases are only defined for rubric plugins"]
    );
}

#[test]
fn the_canary_disputes_are_the_cases_the_reward_gets_wrong() {
    let runtime = Runtime::new(Limits::default()).unwrap();
    let (reward, _) = math_answer_live(&runtime);
    let gate = Gate::new(GateConfig::default(), canary(), reward.clone());
    assert!(
        gate.disputed(&reward.rubric, &reward.aggregator)
            .unwrap()
            .is_empty()
    );
    let worked_steps = runtime.load("worked-steps").unwrap();
    let disputed = gate.disputed(&worked_steps, &reward.aggregator).unwrap();
    assert!(!disputed.is_empty());
    for case in &disputed {
        assert!(case["id"].as_str().unwrap().starts_with('c'), "{case}");
        assert!(case["label"].is_boolean(), "{case}");
    }
}

#[test]
fn the_canary_is_scored_at_the_current_step_and_two_unpredictable_later_ones() {
    let steps = canary_steps(40);
    assert_eq!(steps[0], 40);
    assert!(steps[1..].iter().all(|&s| s > 40), "{steps:?}");
    // Drawn afresh each time: a plugin cannot learn them from one check.
    let draws: std::collections::BTreeSet<Vec<u64>> = (0..8).map(|_| canary_steps(40)).collect();
    assert!(draws.len() > 1);
}
