//! Hot-swap during `verifine train`: an agent's revision closes a loophole
//! mid-run; bad candidates never replace the live revision; a storm of
//! candidates leaves the run consistent; rollback; a kill around a promotion
//! resumes with exactly one revision live (`promotions`); the watched
//! directory, and revisions that behave only where they are watched or are
//! replaced behind the run's back (`guards`).

use serde_json::Value;
use std::path::{Path, PathBuf};
use verifine::run::{RunConfig, resume, train};
use verifine_hotswap::Slot;
use verifine_hotswap::inbox::{self, Action};
use verifine_hotswap::revision::Origin;
use verifine_runtime::PluginSetting;
use verifine_runtime::scoring::RewardPlugins;
use verifine_runtime::{Limits, Runtime, Sample};
use verifine_tests::{EXAMPLE_LOOPHOLE, hostile, read_rows, repo_root, scratch_dir};
use verifine_train::TrainConfig;
use verifine_train::config::{CheckpointConfig, GrpoPhase, SftConfig};
use verifine_train::test_support::tiny_config;

mod guards;
mod promotions;

/// The shared tiny run with 3 SFT steps, `grpo_steps` GRPO steps and a
/// checkpoint every step, rewarded by `rubric`, canaries of 60 cases.
fn tiny(rubric: &str, grpo_steps: usize) -> RunConfig {
    let text = format!(
        r#"
[reward]
rubric = {{ plugin = "{rubric}" }}
[hot_swap]
canary_size = 60
"#
    );
    let mut config = RunConfig::from_toml(&text, "tiny").unwrap();
    let tiny = tiny_config();
    config.training = TrainConfig {
        train_problems: 200,
        heldout_problems: 10,
        sft: SftConfig {
            steps: 3,
            ..tiny.sft
        },
        grpo: GrpoPhase {
            steps: grpo_steps,
            ..tiny.grpo
        },
        checkpoints: CheckpointConfig { every: 1, keep: 50 },
        reward: config.training.reward.clone(),
        ..tiny
    };
    config
}

fn events(run: &Path) -> Vec<Value> {
    read_rows(&run.join("events.jsonl"))
}

fn metrics(run: &Path) -> Vec<Value> {
    read_rows(&run.join("metrics.jsonl"))
}

/// Puts a promotion of `wasm` into the run's inbox.
fn promote(run: &Path, wasm: &[u8], path: &str) -> PathBuf {
    let origin = Origin::Command {
        path: path.to_string(),
    };
    inbox::submit(
        run,
        Slot::Rubric,
        &Action::Promote { origin },
        Some(wasm),
        None,
    )
    .unwrap()
}

/// A run directory that already holds a config (what `promote` checks), so
/// requests can wait for the run's first step boundary; removed with the
/// value unless the test fails.
fn run_dir(name: &str) -> RunDir {
    let scratch = scratch_dir(name);
    let run = scratch.join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("config.toml"), "").unwrap();
    RunDir {
        run,
        _scratch: scratch,
    }
}

/// `run/` inside a scratch directory that goes with it.
struct RunDir {
    run: PathBuf,
    _scratch: verifine_tests::ScratchDir,
}

impl std::ops::Deref for RunDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.run
    }
}

fn score_one(wasm: &Path, response: &str) -> Option<f64> {
    let runtime = Runtime::new(Limits::default()).unwrap();
    let slot = PluginSetting::new(wasm);
    let function = RewardPlugins::from_settings(&runtime, &slot, None).unwrap();
    let sample = Sample::new(
        "bait",
        "Start with 3, then add 4. What is the result?",
        response,
    )
    .with_reference("3 + 4 = 7\n#### 7");
    function.scorer().unwrap().score_batch(0, 0, &[sample])[0].total
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}
