//! What the training integration tests share: a tiny run, a scratch
//! directory and a reward that records every step boundary.

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;
use verifine_base::Provenance;
use verifine_train::hooks::{
    Answer, BoundaryOutcome, HookError, Reward, RewardFunction, StepBoundary, StepHook,
};

pub use verifine_train::test_support::tiny_config as tiny;

/// A fresh path `verifine-<suite>-<name>-…`, not created (a run creates
/// its own directory).
pub fn scratch(suite: &str, name: &str) -> verifine_test_support::ScratchDir {
    verifine_test_support::scratch_path(&format!("{suite}-{name}"))
}

/// Every step boundary a run reported, in order.
pub type Boundaries = Rc<RefCell<Vec<StepBoundary>>>;

/// A fixed reward that records the boundaries it is called at, so a test
/// sees what a host's hook would.
pub struct Watching<R> {
    pub reward: R,
    pub boundaries: Boundaries,
}

impl<R: RewardFunction> RewardFunction for Watching<R> {
    fn score(&mut self, step: usize, answers: &[Answer]) -> Vec<Reward> {
        self.reward.score(step, answers)
    }

    fn provenance(&self) -> Vec<Provenance> {
        self.reward.provenance()
    }
}

impl<R> StepHook for Watching<R> {
    fn at_boundary(&mut self, boundary: StepBoundary) -> Result<BoundaryOutcome, HookError> {
        self.boundaries.borrow_mut().push(boundary);
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

/// A copy of the finished run `whole` at `stopped`, as if it had been
/// killed after its checkpoint at `step`: later checkpoints and the final
/// outputs are gone, so a resume redoes the steps after it.
pub fn stopped_copy(whole: &Path, stopped: &Path, step: usize) {
    copy_dir(whole, stopped);
    let last = format!("step-{step:08}");
    for entry in std::fs::read_dir(stopped.join("checkpoints")).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap().to_string_lossy().as_ref() > last.as_str() {
            std::fs::remove_dir_all(path).unwrap();
        }
    }
    for output in ["model.safetensors", "summary.json", "hf", "adapter"] {
        let path = stopped.join(output);
        if path.is_dir() {
            std::fs::remove_dir_all(path).unwrap();
        } else if path.exists() {
            std::fs::remove_file(path).unwrap();
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}
