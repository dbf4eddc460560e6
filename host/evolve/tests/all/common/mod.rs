//! What the evolve tests share: a tiny run's config and scratch directories.

use std::path::Path;
use verifine_evolve::EvolveConfig;
use verifine_train::TrainConfig;
use verifine_train::config::{GrpoPhase, SftConfig};

/// A tiny run: a small model, few steps, small sets; the trigger checks
/// every 2 steps over a window of 1, so it fires on any stall.
pub fn tiny(test_seed: u64) -> EvolveConfig {
    let text = format!(
        r#"
rounds = 1
round_steps = 4
check_every = 2
anchor_problems = 6
anchor_samples = 2
pool_problems = 16
pool_samples = 1
test_cases = 10
bootstrap = 50
threads = 1

[judge]
plugin = "worked-steps"
config = {{ grounded = {{ has-steps = 1.0 }}, valid = {{ steps-compute = 1.0 }}, complete = {{ final-marked = 1.0, final-follows = 1.0 }}, gate = "final-marked" }}

[trigger]
plugin = "plateau-trigger"
config = {{ every = 2, window = 1, threshold = 100.0 }}

[queries]
uncertain = 3
inconsistent = 3
high_impact = 2
boundary = 1

[annotator]
test_seed = {test_seed}

[calibration]
max_versions = 4
"#
    );
    let mut config = EvolveConfig::parse(&text).unwrap();
    // The shared tiny run, with the answers a worked solution needs and
    // four SFT steps.
    let tiny = verifine_train::test_support::tiny_config();
    config.train = TrainConfig {
        pass_at_k: 0,
        eval_every: TrainConfig::default().eval_every,
        sft: SftConfig {
            steps: 4,
            ..tiny.sft
        },
        grpo: GrpoPhase {
            steps: TrainConfig::default().grpo.steps,
            max_new_tokens: 12,
            ..tiny.grpo
        },
        ..tiny
    };
    config
}

pub fn scratch(name: &str) -> verifine_test_support::ScratchDir {
    verifine_test_support::scratch_path(&format!("evolve-{name}"))
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
