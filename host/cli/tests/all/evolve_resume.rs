//! An evolve run killed with SIGKILL — in the middle of a training round
//! and again in the judge loop — and resumed ends with the same outputs as
//! an uninterrupted run: nothing lost, nothing repeated.

use crate::common::{complete_checkpoints, kill_when, scratch, verifine};
use std::path::Path;
use std::process::Stdio;

const CONFIG: &str = r#"
rounds = 1
round_steps = 24
check_every = 4
anchor_problems = 6
anchor_samples = 2
pool_problems = 16
pool_samples = 1
test_cases = 10
bootstrap = 50
threads = 1

[train]
train_problems = 100
heldout_problems = 8
vocab_size = 300
pass_at_k = 0
[train.model]
hidden_size = 16
num_layers = 1
num_heads = 2
num_kv_heads = 1
intermediate_size = 32
[train.sft]
steps = 20
batch_size = 4
[train.grpo]
prompts_per_step = 2
max_new_tokens = 12
objective = { num_generations = 2, dynamic_sampling = false }
[train.checkpoints]
every = 2
keep = 2

[trigger]
plugin = "plateau-trigger"
config = { every = 4, window = 1, threshold = 100.0 }

[queries]
uncertain = 3
inconsistent = 3
high_impact = 2
boundary = 1

[calibration]
max_versions = 4
"#;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn an_evolve_run_killed_mid_round_and_mid_judge_loop_resumes_to_the_same_outputs() {
    let dir = scratch("evolve");
    let config = dir.join("tiny.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let whole = dir.join("whole");
    let status = verifine()
        .args(["evolve", "--config"])
        .arg(&config)
        .arg("--run-dir")
        .arg(&whole)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());

    let killed = dir.join("killed");
    let config_arg = config.to_str().unwrap();
    let mid_round = kill_when(
        &["evolve", "--config", config_arg, "--run-dir"],
        &killed,
        |run| complete_checkpoints(&run.join("rows/guided-initial")) >= 1,
    );
    let mid_loop = kill_when(&["evolve", "--resume"], &killed, |run| {
        run.join("judge/batch-1.jsonl").exists()
    });
    let status = verifine()
        .args(["evolve", "--resume"])
        .arg(&killed)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    assert!(mid_round, "the first kill came too late to test anything");
    eprintln!("killed in the judge loop: {mid_loop}");

    for file in [
        "summary.json",
        "judge/calibration.jsonl",
        "judge/labels.jsonl",
        "judge/test.jsonl",
        "judge/loops.jsonl",
        "curriculum.jsonl",
        "failures.jsonl",
        "monitor.jsonl",
        "rows/guided-initial/heldout_answers.jsonl",
        "rows/R1/heldout_answers.jsonl",
    ] {
        assert_eq!(read(&whole.join(file)), read(&killed.join(file)), "{file}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
