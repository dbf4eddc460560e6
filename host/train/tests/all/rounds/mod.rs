//! What a co-evolution loop needs of training, with plain Rust rewards:
//! starting from a base run (`init_from`), a weighted GRPO prompt pool, SFT
//! on the host's targets, a fixed evaluator for held-out accuracy, monitor
//! readings at step boundaries (GRPO and SFT), the held-out answers file
//! and a saved policy answering. `starts`: where a run starts and what it
//! trains on; `evaluation`: what it measures and leaves behind.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::Path;
use std::rc::Rc;
use verifine_base::{Provenance, read_jsonl};
use verifine_train::config::{GrpoPhase, SftConfig};
use verifine_train::hooks::{
    Answer, Fixed, Host, Monitor, PromptPool, Reward, RewardFunction, SftTargets, StepHook,
};
use verifine_train::problem::Problem;
use verifine_train::rollout::Sampling;
use verifine_train::sft_data::SftItem;
use verifine_train::task::splits;
use verifine_train::{HeldoutAnswer, Policy, TrainConfig, resume, train};

use crate::common::{Boundaries, Watching};

mod evaluation;
mod starts;

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

fn scratch(name: &str) -> verifine_test_support::ScratchDir {
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
