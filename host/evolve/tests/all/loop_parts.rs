//! The judge loop's parts with the real built-in plugins: the trigger
//! firing from a monitor history, the curriculum dropping and recovering
//! pool targets after a judge update, and the label queue's export/import
//! round trip.

use serde_json::json;
use std::sync::Arc;
use verifine_evolve::cases::Case;
use verifine_evolve::curriculum::{PoolDecision, TargetNoise, assess, pool};
use verifine_evolve::judge::{Judge, JudgeRevision};
use verifine_evolve::labels::{JudgeView, LabelInput, QueryReason, QueueItem};
use verifine_evolve::reward::{MonitorLog, RoundReward};
use verifine_evolve::{EvolveError, queue};
use verifine_reward::FixedReward;
use verifine_runtime::scoring::RewardPlugins;
use verifine_runtime::{Limits, Plugin, PluginKind, Runtime};
use verifine_train::hooks::{Monitor, StepBoundary, StepHook};
use verifine_train::task::TaskConfig;

fn runtime() -> Runtime {
    Runtime::new(Limits::default()).unwrap()
}

fn plugin(runtime: &Runtime, name: &str, kind: PluginKind) -> Arc<Plugin> {
    runtime.load_kind(name, kind).unwrap()
}

fn loose() -> JudgeRevision {
    JudgeRevision {
        number: 0,
        rules: json!({
            "grounded": {"has-steps": 1.0},
            "valid": {"steps-compute": 1.0},
            "complete": {"final-marked": 1.0, "final-follows": 1.0},
            "gate": "final-marked"
        }),
        origin: "initial".into(),
        code: None,
        verifier: None,
    }
}

fn strict() -> JudgeRevision {
    let mut rules = loose().rules;
    rules["grounded"] = json!({"has-steps": 1.0, "numbers-appear": 1.0, "operands-in-order": 1.0});
    JudgeRevision {
        number: 1,
        rules,
        origin: "test".into(),
        code: None,
        verifier: None,
    }
}

#[test]
fn the_trigger_fires_on_a_plateau_and_holds_while_the_evaluator_rises() {
    let runtime = runtime();
    let trigger = plugin(&runtime, "plateau-trigger", PluginKind::Trigger);
    let judge =
        RewardPlugins::load(&runtime, "worked-steps", &json!({}), None, &json!({})).unwrap();
    let run = |accuracies: &[f64]| {
        let log = MonitorLog::default();
        let reward = FixedReward::new(&judge, None).unwrap();
        let mut hook = RoundReward::new(
            reward,
            &trigger,
            &json!({"every": 10, "window": 4, "threshold": 0.5}),
            1,
            log.clone(),
        );
        for (i, &a) in accuracies.iter().enumerate() {
            let monitor = Monitor {
                heldout_accuracy: a,
                heldout_score: a,
                mean_reward: a,
            };
            let step = (i + 1) * 10;
            hook.at_boundary(StepBoundary {
                step,
                grpo_steps: step,
                total_steps: 100,
                monitor: Some(monitor),
                phase_seconds: Default::default(),
            })
            .unwrap();
            // A boundary without a reading records nothing.
            hook.at_boundary(StepBoundary {
                step: step + 1,
                grpo_steps: step + 1,
                total_steps: 100,
                monitor: None,
                phase_seconds: Default::default(),
            })
            .unwrap();
        }
        log.borrow().clone()
    };
    let flat = run(&[0.4, 0.4, 0.41, 0.4, 0.4]);
    assert_eq!(flat.len(), 5);
    assert!(flat[..4].iter().all(|r| !r.fired));
    assert!(flat[4].fired, "{}", flat[4].reason);
    assert_eq!(
        flat[4].evaluator_score, 40.0,
        "accuracy is passed in percent"
    );
    let rising = run(&[0.2, 0.3, 0.4, 0.5, 0.6]);
    assert!(rising.iter().all(|r| !r.fired), "{:?}", rising.last());
}

#[test]
fn after_a_judge_update_the_pool_drops_misread_targets_and_recovers_them_when_it_loosens() {
    let runtime = runtime();
    let curriculum = plugin(&runtime, "weakness-curriculum", PluginKind::Curriculum);
    let judge_dir = std::env::temp_dir().join("verifine-loop-parts-judge");
    let judge = Judge::load(runtime, &"worked-steps".into(), 1, &judge_dir).unwrap();
    let config = json!({"min_reference_score": 0.99});
    let items = pool(5, 60, 0.5, &TaskConfig::default(), &[]);
    let answers: Vec<Vec<String>> = items
        .iter()
        .map(|i| vec![i.problem.solution.clone()])
        .collect();
    let decide = |revision: &JudgeRevision, previous: &[PoolDecision]| {
        let previous = previous.iter().map(|d| (d.id.clone(), d.clone())).collect();
        assess(
            &judge,
            revision,
            &items,
            &answers,
            &curriculum,
            &config,
            1,
            &previous,
        )
        .unwrap()
    };
    let first = decide(&loose(), &[]);
    let misread: Vec<usize> = (0..items.len())
        .filter(|&i| items[i].noise == Some(TargetNoise::Misread))
        .collect();
    let slipped: Vec<usize> = (0..items.len())
        .filter(|&i| items[i].noise == Some(TargetNoise::Slip))
        .collect();
    assert!(!misread.is_empty() && !slipped.is_empty());
    // The loose judge misses misread operands but sees slips.
    assert!(misread.iter().all(|&i| first[i].weight > 0.0));
    assert!(slipped.iter().all(|&i| first[i].weight == 0.0));
    assert!(first.iter().all(|d| d.change.is_none()));

    let updated = decide(&strict(), &first);
    for &i in &misread {
        assert_eq!(updated[i].weight, 0.0, "{}", items[i].target);
        assert!(
            updated[i].change.as_deref().unwrap().starts_with("dropped"),
            "{:?}",
            updated[i]
        );
    }
    let clean = (0..items.len())
        .find(|&i| items[i].noise.is_none())
        .unwrap();
    assert!(updated[clean].weight > 0.0 && updated[clean].change.is_none());

    let loosened = decide(&loose(), &updated);
    for &i in &misread {
        assert!(
            loosened[i]
                .change
                .as_deref()
                .unwrap()
                .starts_with("recovered"),
            "{:?}",
            loosened[i]
        );
    }
}

#[test]
fn the_label_queue_goes_out_with_diagnostics_and_comes_back_as_labels() {
    let dir = verifine_test_support::scratch_path("queue");
    std::fs::create_dir_all(dir.join("judge")).unwrap();
    let dims = |g: f64| {
        [
            ("complete".to_string(), 1.0),
            ("grounded".to_string(), g),
            ("valid".to_string(), 1.0),
        ]
        .into()
    };
    let items: Vec<QueueItem> = (0..4)
        .map(|i| QueueItem {
            case: Case {
                id: format!("j1-a{i}-0"),
                scenario: "story-2".into(),
                prompt: "Ann has 3 coins.".into(),
                response: "1 + 1 = 2\n#### 2".into(),
                reference: "3 + 1 = 4\n#### 4".into(),
            },
            reason: QueryReason::Uncertain,
            judge: JudgeView {
                revision: 0,
                total: 1.0,
                dimensions: dims(1.0),
                explanation: "all checks pass".into(),
            },
            label: None,
        })
        .collect();
    verifine_base::write_jsonl(&dir.join("judge/batch-1.jsonl"), &items).unwrap();

    let out = dir.join("to-label.jsonl");
    assert_eq!(queue::export(&dir, "human", &out).unwrap(), 4);
    let mut exported: Vec<QueueItem> = verifine_base::read_jsonl(&out).unwrap();
    assert_eq!(
        exported, items,
        "the export carries the judge's diagnostics"
    );
    exported[0].label = Some(LabelInput::Confirm);
    exported[1].label = Some(LabelInput::Change {
        dimension: "grounded".into(),
        score: 0.0,
    });
    exported[2].label = Some(LabelInput::Clarify {
        criterion: "grounded".into(),
        note: "steps must use the problem's numbers".into(),
        dimensions: None,
    });
    verifine_base::write_jsonl(&out, &exported).unwrap();
    let summary = queue::import(&dir, &out, "human").unwrap();
    assert_eq!(
        (
            summary.labelled,
            summary.clarified,
            summary.unlabelled,
            summary.revised
        ),
        (3, 1, 1, 0)
    );
    let pending = queue::pending(&dir, "human").unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].case.id, "j1-a3-0");

    // A person revises an earlier label: a new revision supersedes it.
    exported[1].label = Some(LabelInput::Revise {
        dimensions: dims(0.5),
        note: Some("partly grounded".into()),
    });
    verifine_base::write_jsonl(&out, &exported[1..2]).unwrap();
    assert_eq!(queue::import(&dir, &out, "human").unwrap().revised, 1);
    let store = verifine_evolve::labels::LabelStore::load(&dir.join("judge/labels.jsonl")).unwrap();
    let latest = store.latest("human");
    assert_eq!(latest["j1-a1-0"].revision, 1);
    assert_eq!(latest["j1-a1-0"].dimensions["grounded"], 0.5);
    assert_eq!(latest["j1-a0-0"].dimensions, dims(1.0));

    // Hostile input: a dimension the judge does not have, named with file:line.
    exported[3].label = Some(LabelInput::Change {
        dimension: "style".into(),
        score: 1.0,
    });
    verifine_base::write_jsonl(&out, &exported[3..]).unwrap();
    let err = queue::import(&dir, &out, "human").unwrap_err();
    assert!(matches!(err, EvolveError::File(_)), "{err}");
    assert!(
        err.to_string().contains("to-label.jsonl:1") && err.to_string().contains("style"),
        "{err}"
    );
    // Out of range.
    exported[3].label = Some(LabelInput::Score {
        dimensions: dims(1.5),
    });
    verifine_base::write_jsonl(&out, &exported[3..]).unwrap();
    assert!(
        queue::import(&dir, &out, "human")
            .unwrap_err()
            .to_string()
            .contains("outside [0, 1]")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
