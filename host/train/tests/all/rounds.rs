//! What a co-evolution loop needs of training, with plain Rust rewards:
//! starting from a base run (`init_from`), a weighted GRPO prompt pool, SFT
//! on the host's targets, a fixed evaluator for held-out accuracy, monitor
//! readings at step boundaries (GRPO and SFT), the held-out answers file
//! and a saved policy answering.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use verifine_base::{Provenance, read_jsonl};
use verifine_train::config::{GrpoPhase, SftConfig};
use verifine_train::hooks::{
    Answer, BoundaryOutcome, Fixed, HookError, Host, Monitor, PromptPool, Reward, RewardFunction,
    SftTargets, StepBoundary, StepHook,
};
use verifine_train::rollout::Sampling;
use verifine_train::sft_data::SftItem;
use verifine_train::task::{Problem, splits};
use verifine_train::{HeldoutAnswer, Policy, TrainConfig, resume, train};

/// The shared tiny run, with three SFT steps and no pass@k.
fn tiny() -> TrainConfig {
    TrainConfig {
        pass_at_k: 0,
        sft: SftConfig {
            steps: 3,
            ..crate::common::tiny().sft
        },
        ..crate::common::tiny()
    }
}

fn scratch(name: &str) -> PathBuf {
    crate::common::scratch("rounds", name)
}

fn provenance(name: &str) -> Vec<Provenance> {
    vec![Provenance {
        name: name.to_string(),
        version: "1.0.0".to_string(),
        sha256: "rust".to_string(),
    }]
}

/// The same reward for every answer; records the prompts of GRPO answers.
struct Constant {
    total: f64,
    grpo_prompts: Rc<RefCell<Vec<String>>>,
}

impl Constant {
    fn new(total: f64) -> Self {
        Constant {
            total,
            grpo_prompts: Rc::default(),
        }
    }
}

impl RewardFunction for Constant {
    fn score(&mut self, _step: usize, answers: &[Answer]) -> Vec<Reward> {
        for a in answers {
            if !a.id.starts_with("sft-") && !a.id.starts_with("heldout-") {
                self.grpo_prompts.borrow_mut().push(a.prompt.clone());
            }
        }
        answers
            .iter()
            .map(|_| Reward {
                total: Some(self.total),
                criteria: Vec::new(),
            })
            .collect()
    }

    fn provenance(&self) -> Vec<Provenance> {
        provenance("constant")
    }
}

/// Scores held-out answers 1 for even-numbered problems, else 0.
struct EvenProblems;

impl RewardFunction for EvenProblems {
    fn score(&mut self, _step: usize, answers: &[Answer]) -> Vec<Reward> {
        answers
            .iter()
            .map(|a| {
                let index: usize = a.id.strip_prefix("heldout-").unwrap().parse().unwrap();
                Reward {
                    total: Some(f64::from(u8::from(index.is_multiple_of(2)))),
                    criteria: Vec::new(),
                }
            })
            .collect()
    }

    fn provenance(&self) -> Vec<Provenance> {
        provenance("even-problems")
    }
}

fn host(reward: impl RewardFunction + StepHook + 'static) -> Host {
    Host {
        reward: Box::new(reward),
        prompts: None,
        evaluator: None,
        curriculum: None,
        sft_targets: None,
        progress: Box::new(|_| {}),
    }
}

fn answers(dir: &Path) -> Vec<HeldoutAnswer> {
    read_jsonl(&dir.join("heldout_answers.jsonl")).unwrap()
}

/// An SFT-only run: the base later runs start from.
fn base_run(dir: &Path) -> verifine_train::TrainSummary {
    let config = TrainConfig {
        grpo: GrpoPhase {
            steps: 0,
            ..tiny().grpo
        },
        ..tiny()
    };
    train(&config, "", dir, host(Fixed(Constant::new(0.0)))).unwrap()
}

fn from_base(base: &Path) -> TrainConfig {
    TrainConfig {
        init_from: Some(base.to_path_buf()),
        sft: SftConfig {
            steps: 0,
            ..tiny().sft
        },
        ..tiny()
    }
}

#[test]
fn a_run_from_a_base_starts_from_its_weights_and_tokenizer() {
    let dir = scratch("init-from");
    let base = dir.join("base");
    let base_summary = base_run(&base);
    let base_answers = answers(&base);
    assert_eq!(base_answers.len(), 8);

    // No steps at all: the base's policy, answering the same.
    let copy = dir.join("copy");
    let config = TrainConfig {
        grpo: GrpoPhase {
            steps: 0,
            ..tiny().grpo
        },
        ..from_base(&base)
    };
    let summary = train(&config, "", &copy, host(Fixed(Constant::new(0.0)))).unwrap();
    assert_eq!(summary.steps, 0);
    assert_eq!(
        summary.heldout_accuracy_final,
        base_summary.heldout_accuracy_final
    );
    assert_eq!(answers(&copy), base_answers);
    for file in ["tokenizer.json", "model.safetensors"] {
        assert_eq!(
            std::fs::read(copy.join(file)).unwrap(),
            std::fs::read(base.join(file)).unwrap(),
            "{file}"
        );
    }

    // With GRPO and a KL term: the reference is the base model.
    let round = dir.join("round");
    let mut config = from_base(&base);
    config.grpo.objective.beta = 0.04;
    train(&config, "", &round, host(Fixed(Constant::new(0.5)))).unwrap();
    assert_eq!(
        std::fs::read(round.join("reference.safetensors")).unwrap(),
        std::fs::read(base.join("model.safetensors")).unwrap()
    );
    assert_eq!(answers(&round).len(), 8);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_base_of_another_size_is_refused() {
    let dir = scratch("init-from-bad");
    let base = dir.join("base");
    base_run(&base);
    let mut config = from_base(&base);
    config.model.hidden_size = 32;
    let err = train(
        &config,
        "",
        &dir.join("wide"),
        host(Fixed(Constant::new(0.0))),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("model.safetensors")
            && err.contains("hidden_size 16")
            && err.contains("hidden_size 32"),
        "{err}"
    );
    let policy = Policy::load(&base, &config.model).unwrap_err().to_string();
    assert!(policy.contains("hidden_size 32"), "{policy}");

    std::fs::remove_dir_all(&dir).unwrap();
}

/// Five training-distribution problems, weighted so only two can be drawn.
fn weighted_pool(weights: [f64; 5]) -> PromptPool {
    let (problems, _) = splits(11, 5, 0, &TrainConfig::default().task);
    PromptPool {
        problems,
        weights: weights.to_vec(),
    }
}

#[test]
fn grpo_prompts_come_from_the_pool_by_weight() {
    let dir = scratch("pool");
    let pool = weighted_pool([0.0, 1.0, 0.0, 2.0, 0.0]);
    let allowed: BTreeSet<String> = [1, 3]
        .iter()
        .map(|&i| pool.problems[i].prompt.clone())
        .collect();
    let reward = Constant::new(0.5);
    let seen = reward.grpo_prompts.clone();
    let mut config = tiny();
    config.grpo.steps = 4;
    train(
        &config,
        "",
        &dir,
        Host {
            prompts: Some(pool),
            ..host(Fixed(reward))
        },
    )
    .unwrap();
    let seen: BTreeSet<String> = seen.borrow().iter().cloned().collect();
    // 4 steps × 2 prompts × 2 generations were rewarded, all on pool prompts.
    assert!(!seen.is_empty());
    assert!(seen.is_subset(&allowed), "{seen:?}");

    let bad = weighted_pool([1.0, f64::NAN, 0.0, 0.0, 0.0]);
    let err = train(
        &config,
        "",
        &scratch("pool-bad"),
        Host {
            prompts: Some(bad),
            ..host(Fixed(Constant::new(0.5)))
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("weight 1"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_resume_with_another_pool_is_refused_and_with_the_same_one_continues() {
    let dir = scratch("pool-resume");
    let first = weighted_pool([1.0, 1.0, 0.0, 0.0, 0.0]);
    let with = |pool: PromptPool| Host {
        prompts: Some(pool),
        ..host(Fixed(Constant::new(0.5)))
    };
    train(&tiny(), "", &dir, with(first.clone())).unwrap();
    std::fs::remove_dir_all(dir.join("checkpoints/step-00000005")).unwrap();

    let other = weighted_pool([1.0, 2.0, 0.0, 0.0, 0.0]);
    let err = resume(&dir, with(other.clone())).unwrap_err().to_string();
    assert!(
        err.contains(&first.fingerprint()) && err.contains(&other.fingerprint()),
        "{err}"
    );
    let err = resume(&dir, host(Fixed(Constant::new(0.5))))
        .unwrap_err()
        .to_string();
    assert!(err.contains("prompt pool"), "{err}");
    let summary = resume(&dir, with(first)).unwrap();
    assert_eq!(summary.resumed_from_step, Some(4));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn held_out_accuracy_is_the_evaluators_not_the_training_rewards() {
    let dir = scratch("evaluator");
    let summary = train(
        &tiny(),
        "",
        &dir,
        Host {
            evaluator: Some(Box::new(EvenProblems)),
            ..host(Fixed(Constant::new(0.0)))
        },
    )
    .unwrap();
    // Four of the eight held-out problems are even-numbered; the training
    // reward (0 for everything) would give 0.
    assert_eq!(summary.heldout_accuracy_sft, 0.5);
    assert_eq!(summary.heldout_accuracy_final, 0.5);
    let answers = answers(&dir);
    let (_, heldout) = splits(0, 100, 8, &tiny().task);
    for (i, (a, problem)) in answers.iter().zip(&heldout).enumerate() {
        let even = i % 2 == 0;
        assert_eq!(a.id, format!("heldout-{i}"));
        assert_eq!(a.correct, even, "{a:?}");
        assert_eq!(a.evaluator_total, Some(if even { 1.0 } else { 0.0 }));
        assert_eq!(a.prompt, problem.prompt);
        assert_eq!(a.reference, problem.solution);
        assert_eq!(a.answer, problem.answer);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Each boundary's step and monitor reading.
type Readings = Rc<RefCell<Vec<(usize, Option<Monitor>)>>>;

/// Records every boundary's monitor reading.
struct Watching {
    reward: Constant,
    readings: Readings,
}

impl RewardFunction for Watching {
    fn score(&mut self, step: usize, answers: &[Answer]) -> Vec<Reward> {
        self.reward.score(step, answers)
    }

    fn provenance(&self) -> Vec<Provenance> {
        self.reward.provenance()
    }
}

impl StepHook for Watching {
    fn at_boundary(&mut self, boundary: StepBoundary) -> Result<BoundaryOutcome, HookError> {
        self.readings
            .borrow_mut()
            .push((boundary.step, boundary.monitor));
        Ok(BoundaryOutcome::default())
    }

    fn after_checkpoint(&mut self) -> Result<(), HookError> {
        Ok(())
    }

    fn state(&self) -> serde_json::Value {
        serde_json::Value::Null
    }

    fn restore(&mut self, _: &serde_json::Value, _: usize) -> Result<(), HookError> {
        Ok(())
    }
}

#[test]
fn monitor_readings_come_at_evaluation_steps_and_the_last_one() {
    let dir = scratch("monitor");
    let mut config = tiny();
    config.grpo.steps = 3;
    config.eval_every = 2;
    let readings = Readings::default();
    let hook = Watching {
        reward: Constant::new(0.25),
        readings: readings.clone(),
    };
    train(
        &config,
        "",
        &dir,
        Host {
            evaluator: Some(Box::new(EvenProblems)),
            ..host(hook)
        },
    )
    .unwrap();
    let readings = readings.borrow();
    let steps: Vec<usize> = readings.iter().map(|(s, _)| *s).collect();
    assert_eq!(steps, [1, 2, 3, 4, 5, 6]);
    let expected = Monitor {
        heldout_accuracy: 0.5,
        heldout_score: 0.5,
        mean_reward: 0.25,
    };
    for (step, monitor) in readings.iter() {
        // GRPO step 2 (every 2) and GRPO step 3 (the last).
        let due = *step == 5 || *step == 6;
        assert_eq!(*monitor, due.then_some(expected), "step {step}");
    }
    // Evaluations: after SFT, at GRPO step 2, the final one — once each.
    let metrics = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    let phases: Vec<String> = metrics
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["phase"].to_string())
        .collect();
    let evals: Vec<usize> = phases
        .iter()
        .enumerate()
        .filter(|(_, p)| *p == "\"eval\"")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(evals, [3, 6, 8], "{phases:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_saved_policy_answers_copies_per_problem_as_the_run_evaluated() {
    let dir = scratch("policy");
    let config = tiny();
    train(&config, "", &dir, host(Fixed(Constant::new(0.5)))).unwrap();
    let policy = Policy::load(&dir, &config.model).unwrap();
    let (train_set, heldout) = splits(config.seed, 100, 8, &config.task);
    let problems: Vec<Problem> = train_set[..3].to_vec();
    let sampled = policy
        .answer(&problems, Sampling::Temperature(1.0), 4, 8, 7)
        .unwrap();
    assert_eq!(sampled.len(), 3);
    assert!(sampled.iter().all(|copies| copies.len() == 4));
    assert_eq!(
        policy
            .answer(&problems, Sampling::Temperature(1.0), 4, 8, 7)
            .unwrap(),
        sampled
    );
    // Greedy answers are the ones the run's final evaluation judged.
    let greedy = policy
        .answer(&heldout, Sampling::Greedy, 1, config.grpo.max_new_tokens, 0)
        .unwrap();
    let judged: Vec<Vec<String>> = answers(&dir)
        .into_iter()
        .map(|a| vec![a.response])
        .collect();
    assert_eq!(greedy, judged);
    assert!(
        policy
            .answer(&[], Sampling::Greedy, 1, 8, 0)
            .unwrap()
            .is_empty()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Three training-distribution problems: the first and last kept (the last
/// twice as often), the middle one dropped.
fn host_targets(weights: [Option<f64>; 3]) -> SftTargets {
    let (problems, _) = splits(5, 3, 0, &TrainConfig::default().task);
    let items = problems
        .iter()
        .zip(weights)
        .enumerate()
        .map(|(i, (p, weight))| SftItem {
            problem: i,
            target: p.solution.clone(),
            noisy: false,
            judge_score: Some(0.9),
            weight,
            reason: format!("decided by the host ({i})"),
        })
        .collect();
    SftTargets { problems, items }
}

#[test]
fn an_sft_round_trains_on_the_hosts_targets_from_a_base_with_monitor_readings() {
    let dir = scratch("sft-round");
    let base = dir.join("base");
    base_run(&base);
    let mut config = from_base(&base);
    config.sft.steps = 4;
    config.sft.eval_every = 2;
    config.grpo.steps = 0;
    let readings = Readings::default();
    let with = |targets: SftTargets, readings: &Readings| Host {
        evaluator: Some(Box::new(EvenProblems)),
        sft_targets: Some(targets),
        ..host(Watching {
            reward: Constant::new(0.25),
            readings: readings.clone(),
        })
    };
    let targets = host_targets([Some(1.0), None, Some(2.0)]);
    let round = dir.join("round");
    let summary = train(&config, "", &round, with(targets.clone(), &readings)).unwrap();
    assert_eq!((summary.sft_samples, summary.sft_samples_kept), (3, 2));
    let selection: Vec<SftItem> = read_jsonl(&round.join("sft_selection.jsonl")).unwrap();
    assert_eq!(selection, targets.items);
    assert_ne!(
        std::fs::read(round.join("model.safetensors")).unwrap(),
        std::fs::read(base.join("model.safetensors")).unwrap(),
        "SFT steps continue from the base"
    );

    // A reading every two SFT steps: the evaluator's accuracy, and the
    // training reward over the same held-out answers.
    let expected = Monitor {
        heldout_accuracy: 0.5,
        heldout_score: 0.5,
        mean_reward: 0.25,
    };
    let got: Vec<(usize, Option<Monitor>)> = readings.borrow().clone();
    assert_eq!(
        got,
        [
            (1, None),
            (2, Some(expected)),
            (3, None),
            (4, Some(expected))
        ]
    );
    // Evaluated at steps 2 and 4, logged once each (the end of SFT reuses
    // the boundary's line).
    let evals: Vec<u64> = std::fs::read_to_string(round.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["phase"] == "eval")
        .map(|v| v["step"].as_u64().unwrap())
        .collect();
    assert_eq!(evals, [2, 4]);

    // The targets are part of what a resume must match.
    let other = host_targets([Some(1.0), Some(1.0), Some(2.0)]);
    let err = resume(&round, with(other, &Readings::default()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("SFT targets"), "{err}");
    resume(&round, with(targets, &Readings::default())).unwrap();

    // Targets that drop everything are refused before training.
    let err = train(
        &config,
        "",
        &dir.join("none-kept"),
        with(host_targets([None, None, None]), &readings),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("none of the 3"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
