//! What the arms of a comparison need of a run: phases that end when a time
//! budget is spent (a control given another arm's time), the seconds each
//! phase took, SFT on its own rung of the task ladder, and rejection
//! sampling (RFT) as an advantage estimator that learns only from what the
//! reward passes.

use std::time::Duration;
use verifine_base::{Provenance, read_jsonl};
use verifine_train::config::{GrpoPhase, SftConfig};
use verifine_train::grpo::{AdvEstimator, GrpoConfig};
use verifine_train::hooks::{Answer, Fixed, Host, Reward, RewardFunction};
use verifine_train::task::{TaskConfig, steps};
use verifine_train::{TrainConfig, resume, train};

/// The same total for every answer, after a pause (so a budget of a few
/// hundred milliseconds spans several steps on any machine).
struct Constant {
    total: f64,
    pause: Duration,
}

impl RewardFunction for Constant {
    fn score(&mut self, _step: usize, answers: &[Answer]) -> Vec<Reward> {
        std::thread::sleep(self.pause);
        let reward = Reward {
            total: Some(self.total),
            criteria: Vec::new(),
        };
        vec![reward; answers.len()]
    }

    fn provenance(&self) -> Vec<Provenance> {
        vec![Provenance {
            name: "constant".to_string(),
            version: "1.0.0".to_string(),
            sha256: "rust".to_string(),
        }]
    }
}

fn host(total: f64, pause: Duration) -> Host {
    Host {
        reward: Box::new(Fixed(Constant { total, pause })),
        prompts: None,
        evaluator: None,
        curriculum: None,
        sft_targets: None,
        progress: Box::new(|_| {}),
    }
}

fn scratch(name: &str) -> verifine_test_support::ScratchDir {
    crate::common::scratch("arms", name)
}

fn phases(dir: &std::path::Path) -> (usize, usize) {
    let lines: Vec<serde_json::Value> = read_jsonl(&dir.join("metrics.jsonl")).unwrap();
    let count = |phase: &str| {
        lines
            .iter()
            .filter(|l| l["phase"] == phase && l.get("loss").is_some())
            .count()
    };
    (count("sft"), count("grpo"))
}

#[test]
fn a_grpo_phase_with_a_time_budget_ends_at_the_first_boundary_after_it() {
    let dir = scratch("grpo-budget");
    let config = TrainConfig {
        pass_at_k: 0,
        grpo: GrpoPhase {
            steps: 10_000,
            max_seconds: Some(0.3),
            ..crate::common::tiny().grpo
        },
        ..crate::common::tiny()
    };
    let boundaries = crate::common::Boundaries::default();
    let watching = crate::common::Watching {
        reward: Constant {
            total: 0.5,
            pause: Duration::from_millis(40),
        },
        boundaries: boundaries.clone(),
    };
    let summary = train(
        &config,
        "",
        &dir,
        Host {
            reward: Box::new(watching),
            ..host(0.5, Duration::ZERO)
        },
    )
    .unwrap();
    let (sft, grpo) = phases(&dir);
    assert_eq!(sft, config.sft.steps);
    assert!((2..10_000).contains(&grpo), "{grpo} GRPO steps");
    assert_eq!(summary.steps, config.sft.steps + grpo);
    assert!(
        summary.phase_seconds.grpo >= 0.3,
        "{:?}",
        summary.phase_seconds
    );
    // Ended at the step that spent it, not a step later: every boundary
    // before the last saw the budget unspent (timings, whatever the load).
    let seen: Vec<_> = boundaries
        .borrow()
        .iter()
        .map(|b| b.phase_seconds)
        .collect();
    let (last, before) = seen.split_last().unwrap();
    assert_eq!(last, &summary.phase_seconds);
    assert!(before.iter().all(|seconds| seconds.grpo < 0.3), "{seen:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_sft_phase_with_a_time_budget_ends_and_grpo_still_runs() {
    let dir = scratch("sft-budget");
    let config = TrainConfig {
        pass_at_k: 0,
        sft: SftConfig {
            steps: 1_000_000,
            max_seconds: Some(0.2),
            ..crate::common::tiny().sft
        },
        ..crate::common::tiny()
    };
    let summary = train(&config, "", &dir, host(0.5, Duration::ZERO)).unwrap();
    let (sft, grpo) = phases(&dir);
    assert!((1..1_000_000).contains(&sft), "{sft} SFT steps");
    assert_eq!(grpo, config.grpo.steps);
    assert!(summary.phase_seconds.sft >= 0.2);
    assert!(summary.phase_seconds.grpo > 0.0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sft_trains_on_its_own_rung_while_the_held_out_problems_are_the_task_s() {
    let dir = scratch("rungs");
    let instruction = "End with #### N".to_string();
    let config = TrainConfig {
        pass_at_k: 0,
        task: TaskConfig {
            min_steps: 3,
            max_steps: 3,
            instruction: instruction.clone(),
            ..TaskConfig::default()
        },
        sft: SftConfig {
            task: Some(TaskConfig {
                min_steps: 1,
                max_steps: 1,
                instruction,
                ..TaskConfig::default()
            }),
            ..crate::common::tiny().sft
        },
        ..crate::common::tiny()
    };
    train(&config, "", &dir, host(0.5, Duration::ZERO)).unwrap();
    let selection: Vec<serde_json::Value> = read_jsonl(&dir.join("sft_selection.jsonl")).unwrap();
    assert!(!selection.is_empty());
    for item in &selection {
        let target = item["target"].as_str().unwrap();
        assert_eq!(steps(target).len(), 1, "an easy-rung target: {target}");
    }
    let heldout: Vec<serde_json::Value> = read_jsonl(&dir.join("heldout_answers.jsonl")).unwrap();
    for answer in &heldout {
        let reference = answer["reference"].as_str().unwrap();
        assert_eq!(
            steps(reference).len(),
            3,
            "a hard-rung held-out problem: {reference}"
        );
        assert!(
            answer["prompt"]
                .as_str()
                .unwrap()
                .ends_with("End with #### N")
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The weights after a run of `estimator` under a constant reward: what an
/// all-equal group teaches depends on the estimator.
fn weights_move(estimator: AdvEstimator, total: f64) -> bool {
    let dir = scratch("rft");
    let config = TrainConfig {
        pass_at_k: 0,
        sft: SftConfig {
            steps: 0,
            ..crate::common::tiny().sft
        },
        grpo: GrpoPhase {
            objective: GrpoConfig {
                adv_estimator: estimator,
                dynamic_sampling: true,
                rft_batch_size: 1,
                ..crate::common::tiny().grpo.objective
            },
            ..crate::common::tiny().grpo
        },
        ..crate::common::tiny()
    };
    train(&config, "", &dir, host(total, Duration::ZERO)).unwrap();
    let lines: Vec<serde_json::Value> = read_jsonl(&dir.join("metrics.jsonl")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    lines
        .iter()
        .any(|l| l["phase"] == "grpo" && l.get("grad_norm").is_some_and(|g| !g.is_null()))
}

#[test]
fn rejection_sampling_learns_from_passed_answers_and_nothing_else() {
    // Every answer passed: GRPO sees no difference within a group and
    // learns nothing; RFT imitates every one.
    assert!(!weights_move(AdvEstimator::Grpo, 1.0));
    assert!(weights_move(AdvEstimator::RejectionSampling, 1.0));
    // Nothing passed: RFT has nothing to imitate.
    assert!(!weights_move(AdvEstimator::RejectionSampling, 0.0));
}

#[test]
fn rejection_sampling_trains_on_full_batches_and_a_resume_keeps_the_waiting_ones() {
    // Every answer passes; a step rolls out 4 (2 prompts × 2), a batch is 6.
    let dir = scratch("rft-batches");
    let whole = dir.join("whole");
    let tiny = crate::common::tiny();
    let config = TrainConfig {
        pass_at_k: 0,
        sft: SftConfig {
            steps: 0,
            ..tiny.sft
        },
        grpo: GrpoPhase {
            steps: 5,
            objective: GrpoConfig {
                adv_estimator: AdvEstimator::RejectionSampling,
                rft_batch_size: 6,
                ..tiny.grpo.objective
            },
            ..tiny.grpo
        },
        checkpoints: verifine_train::config::CheckpointConfig { every: 1, keep: 10 },
        ..tiny
    };
    train(&config, "", &whole, host(1.0, Duration::ZERO)).unwrap();
    let lines: Vec<serde_json::Value> = read_jsonl(&whole.join("metrics.jsonl")).unwrap();
    let steps: Vec<(u64, bool)> = lines
        .iter()
        .filter(|l| l["phase"] == "grpo")
        .map(|l| {
            (
                l["rft_waiting"].as_u64().unwrap(),
                l["grad_norm"].is_number(),
            )
        })
        .collect();
    assert_eq!(steps.len(), 5);
    // Fewer pass a step than a batch holds, so a full batch never waits;
    // no update before one was full (the first step passes at most 4), and
    // updates once it was.
    assert!(steps.iter().all(|&(waiting, _)| waiting < 6), "{steps:?}");
    assert!(!steps[0].1, "{steps:?}");
    assert!(steps.iter().any(|&(_, updated)| updated), "{steps:?}");

    // Stopped where passed answers were waiting, resumed: the same weights.
    let waiting_at = 1 + steps[..4].iter().position(|&(w, _)| w > 0).unwrap();
    let stopped = dir.join("stopped");
    crate::common::stopped_copy(&whole, &stopped, waiting_at);
    resume(&stopped, host(1.0, Duration::ZERO)).unwrap();
    assert_eq!(
        std::fs::read(whole.join("model.safetensors")).unwrap(),
        std::fs::read(stopped.join("model.safetensors")).unwrap(),
        "the resumed run lost the answers that were waiting"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
