//! Training on its own: a run whose reward is a plain Rust function, no
//! plugin runtime in sight. This is the whole contract between training and
//! the host above it (`hooks`): rewards, a step-boundary hook, progress.

use std::cell::RefCell;
use std::rc::Rc;
use verifine_base::Provenance;
use verifine_train::hooks::{
    Answer, BoundaryOutcome, Fixed, HookError, Host, Progress, Reward, RewardFunction,
    StepBoundary, StepHook,
};
use verifine_train::{TrainConfig, resume, train};

/// 1 when the response's `#### N` line matches the reference's, else 0.
struct ExactAnswer {
    calls: usize,
}

fn final_line(text: &str) -> Option<&str> {
    text.lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("####"))
}

impl RewardFunction for ExactAnswer {
    fn score(&mut self, _step: usize, answers: &[Answer]) -> Vec<Reward> {
        self.calls += 1;
        answers
            .iter()
            .map(|a| {
                let reference = a.reference.as_deref().and_then(final_line);
                let right = final_line(&a.response).is_some_and(|r| Some(r) == reference);
                let score = f64::from(u8::from(right));
                Reward {
                    total: Some(score),
                    criteria: vec![("exact".to_string(), score)],
                }
            })
            .collect()
    }

    fn provenance(&self) -> Vec<Provenance> {
        vec![Provenance {
            name: "exact-answer".to_string(),
            version: "1.0.0".to_string(),
            sha256: "rust".to_string(),
        }]
    }
}

use crate::common::tiny;

fn scratch(name: &str) -> verifine_test_support::ScratchDir {
    crate::common::scratch("train", name)
}

fn host(
    reward: impl RewardFunction + StepHook + 'static,
    progress: Box<dyn FnMut(Progress)>,
) -> Host {
    Host {
        reward: Box::new(reward),
        prompts: None,
        evaluator: None,
        curriculum: None,
        sft_targets: None,
        progress,
    }
}

#[test]
fn a_run_with_a_rust_reward_names_it_and_reports_progress() {
    let dir = scratch("rust-reward");
    let steps = Rc::new(RefCell::new(Vec::new()));
    let seen = steps.clone();
    let progress = Box::new(move |p: Progress| seen.borrow_mut().push(p));
    let summary = train(
        &tiny(),
        "# saved as given\n",
        &dir,
        host(Fixed(ExactAnswer { calls: 0 }), progress),
    )
    .unwrap();
    assert_eq!(summary.steps, 4);
    assert_eq!(summary.plugins[0].name, "exact-answer");
    assert_eq!(
        std::fs::read_to_string(dir.join("config.toml")).unwrap(),
        "# saved as given\n"
    );
    let steps = steps.borrow();
    assert_eq!(
        steps.first(),
        Some(&Progress::Started { total: 4, done: 0 })
    );
    assert_eq!(steps.last(), Some(&Progress::Finished));
    let reported: Vec<usize> = steps
        .iter()
        .filter_map(|p| match p {
            Progress::Step { step, .. } => Some(*step),
            _ => None,
        })
        .collect();
    assert_eq!(reported, [1, 2, 3, 4]);
    let metrics = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    assert!(
        metrics.contains("\"exact\""),
        "per-criterion means: {metrics}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What a [`Recording`] hook was told; the test keeps a handle on it.
#[derive(Default)]
struct Seen {
    boundaries: Vec<StepBoundary>,
    after_checkpoint: usize,
    restored: Option<(serde_json::Value, usize)>,
}

/// A hook that asks for a checkpoint at step 3 and records what it is told.
struct Recording {
    reward: ExactAnswer,
    seen: Rc<RefCell<Seen>>,
}

impl RewardFunction for Recording {
    fn score(&mut self, step: usize, answers: &[Answer]) -> Vec<Reward> {
        self.reward.score(step, answers)
    }

    fn provenance(&self) -> Vec<Provenance> {
        self.reward.provenance()
    }
}

impl StepHook for Recording {
    fn at_boundary(&mut self, boundary: StepBoundary) -> Result<BoundaryOutcome, HookError> {
        self.seen.borrow_mut().boundaries.push(boundary);
        Ok(BoundaryOutcome {
            needs_checkpoint: boundary.step == 3,
            reward_changed: false,
        })
    }

    fn after_checkpoint(&mut self) -> Result<(), HookError> {
        self.seen.borrow_mut().after_checkpoint += 1;
        Ok(())
    }

    fn state(&self) -> serde_json::Value {
        serde_json::json!({ "boundaries": self.seen.borrow().boundaries.len() })
    }

    fn restore(&mut self, state: &serde_json::Value, step: usize) -> Result<(), HookError> {
        self.seen.borrow_mut().restored = Some((state.clone(), step));
        Ok(())
    }
}

/// A recording hook and the handle to what it sees.
fn recording() -> (Recording, Rc<RefCell<Seen>>) {
    let seen = Rc::new(RefCell::new(Seen::default()));
    let hook = Recording {
        reward: ExactAnswer { calls: 0 },
        seen: seen.clone(),
    };
    (hook, seen)
}

#[test]
fn the_hook_sees_every_boundary_and_its_state_comes_back_on_resume() {
    let dir = scratch("hook");
    let mut config = tiny();
    config.checkpoints.every = 0;
    let (hook, seen) = recording();
    train(&config, "", &dir, host(hook, Box::new(|_| {}))).unwrap();
    let first = seen.borrow();
    let steps: Vec<(usize, usize)> = first
        .boundaries
        .iter()
        .map(|b| (b.step, b.grpo_steps))
        .collect();
    assert_eq!(steps, [(1, 0), (2, 0), (3, 1), (4, 2)]);
    assert!(first.boundaries.iter().all(|b| b.total_steps == 4));
    assert_eq!(first.after_checkpoint, 4);
    // Checkpoints only where the hook asked (step 3) and at the end.
    let mut names: Vec<String> = std::fs::read_dir(dir.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["step-00000003", "step-00000004"]);

    std::fs::remove_dir_all(dir.join("checkpoints/step-00000004")).unwrap();
    let (hook, seen) = recording();
    resume(&dir, host(hook, Box::new(|_| {}))).unwrap();
    assert_eq!(
        seen.borrow().restored,
        Some((serde_json::json!({ "boundaries": 3 }), 3))
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Answers rewards no sane judge gives: huge, infinite, NaN, negative huge.
struct Absurd {
    calls: usize,
}

impl RewardFunction for Absurd {
    fn score(&mut self, _step: usize, answers: &[Answer]) -> Vec<Reward> {
        self.calls += 1;
        let values = [1e300, f64::INFINITY, f64::NAN, -1e300, 0.5, 1.0];
        answers
            .iter()
            .enumerate()
            .map(|(i, _)| Reward {
                total: Some(values[(i + self.calls) % values.len()]),
                criteria: Vec::new(),
            })
            .collect()
    }

    fn provenance(&self) -> Vec<Provenance> {
        vec![]
    }
}

fn metrics(dir: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn rewards_outside_the_range_are_failures_and_the_run_goes_on() {
    let dir = scratch("absurd");
    let mut config = tiny();
    config.grpo.prompts_per_step = 3;
    let summary = train(
        &config,
        "",
        &dir,
        host(Fixed(Absurd { calls: 0 }), Box::new(|_| {})),
    )
    .unwrap();
    assert_eq!(summary.steps, 4);
    let grpo: Vec<serde_json::Value> = metrics(&dir)
        .into_iter()
        .filter(|l| l["phase"] == "grpo")
        .collect();
    for line in &grpo {
        // Six rollouts a step, four of them absurd.
        assert_eq!(line["reward_failures"], 4, "{line}");
        let mean = line["reward_mean"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&mean), "{line}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_non_finite_gradient_skips_its_update_and_the_run_goes_on() {
    let dir = scratch("inf-gradient");
    let mut config = tiny();
    config.grpo.prompts_per_step = 3;
    // A range wide enough to let 1e300 through, and advantages that are not
    // rescaled: the update's loss overflows f32.
    config.reward.range = [-1e301, 1e301];
    config.grpo.objective.scale_rewards = verifine_train::grpo::ScaleRewards::None;
    let summary = train(
        &config,
        "",
        &dir,
        host(Fixed(Absurd { calls: 0 }), Box::new(|_| {})),
    )
    .unwrap();
    assert_eq!(summary.steps, 4);
    let skipped: Vec<serde_json::Value> = metrics(&dir)
        .into_iter()
        .filter(|l| l["phase"] == "grpo" && l["skipped"].is_string())
        .collect();
    assert!(!skipped.is_empty(), "the overflowing updates were skipped");
    assert!(skipped.iter().all(|l| l["grad_norm"].is_null()));
    // The weights stayed finite: the final evaluation ran and the model saved.
    assert!(summary.heldout_accuracy_final.is_finite());
    assert!(dir.join("model.safetensors").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_reward_range_that_is_not_one_is_refused() {
    let mut config = tiny();
    config.reward.range = [1.0, -1.0];
    let err = train(
        &config,
        "",
        &scratch("bad-range"),
        host(Fixed(ExactAnswer { calls: 0 }), Box::new(|_| {})),
    )
    .unwrap_err();
    assert!(err.to_string().contains("reward.range"), "{err}");
}

/// Rewards the answers to even-numbered held-out problems (by their id),
/// whatever they say, and every training answer.
struct EvenProblems;

impl RewardFunction for EvenProblems {
    fn score(&mut self, _step: usize, answers: &[Answer]) -> Vec<Reward> {
        answers
            .iter()
            .map(|a| {
                let even = match a.id.strip_prefix("heldout-") {
                    Some(index) => index.parse::<usize>().unwrap().is_multiple_of(2),
                    None => true,
                };
                Reward {
                    total: Some(f64::from(u8::from(even))),
                    criteria: Vec::new(),
                }
            })
            .collect()
    }

    fn provenance(&self) -> Vec<Provenance> {
        vec![Provenance {
            name: "even-problems".to_string(),
            version: "1.0.0".to_string(),
            sha256: "rust".to_string(),
        }]
    }
}

#[test]
fn pass_at_k_counts_each_held_out_problem_once_whatever_its_samples() {
    let dir = scratch("pass-at-k");
    let config = TrainConfig {
        pass_at_k: 3,
        ..tiny()
    };
    let summary = train(
        &config,
        "",
        &dir,
        host(Fixed(EvenProblems), Box::new(|_| {})),
    )
    .unwrap();
    // Four of the eight held-out problems are even-numbered.
    assert_eq!(summary.heldout_accuracy_sft, 0.5);
    assert_eq!(summary.heldout_pass_at_k_sft, Some(0.5));
    assert_eq!(summary.heldout_pass_at_k_final, Some(0.5));
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(report.contains("pass@3"), "{report}");
    // Every training group is solved, none informative (all rewards equal).
    for line in metrics(&dir).iter().filter(|l| l["phase"] == "grpo") {
        assert_eq!(line["groups_solved"], 1.0, "{line}");
        assert_eq!(line["groups_informative"], 0.0, "{line}");
    }
}
