//! A training run killed with SIGKILL and resumed ends with the same weights,
//! bit for bit, as an uninterrupted run with the same seed.

use crate::common::{complete_checkpoints, kill_when, scratch, verifine};
use std::path::Path;
use std::process::Stdio;

const CONFIG: &str = r#"
seed = 3
train_problems = 200
heldout_problems = 10
eval_every = 10
vocab_size = 300

[model]
hidden_size = 16
num_layers = 1
num_heads = 2
num_kv_heads = 1
intermediate_size = 32

[sft]
steps = 60
batch_size = 4

[grpo]
steps = 30
prompts_per_step = 2
max_new_tokens = 8
objective = { num_generations = 2, dynamic_sampling = false }

[checkpoints]
every = 5
keep = 3
"#;

#[test]
fn a_run_killed_with_sigkill_and_resumed_ends_with_the_same_weights() {
    let dir = scratch("resume");
    let config = dir.join("tiny.toml");
    std::fs::write(&config, CONFIG).unwrap();

    let whole = dir.join("whole");
    let status = verifine()
        .args(["train", "--config"])
        .arg(&config)
        .arg("--run-dir")
        .arg(&whole)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());

    let killed = dir.join("killed");
    let config_arg = config.to_str().unwrap();
    let was_killed = kill_when(
        &["train", "--config", config_arg, "--run-dir"],
        &killed,
        |run| complete_checkpoints(run) > 0,
    );
    assert!(
        was_killed && !killed.join("summary.json").exists(),
        "the run finished before the kill; make the test run longer"
    );

    let output = verifine()
        .args(["train", "--resume"])
        .arg(&killed)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(killed.join("summary.json")).unwrap()).unwrap();
    assert!(
        summary["resumed_from_step"].as_u64().unwrap() < 90,
        "{summary}"
    );
    assert!(
        std::fs::read(killed.join("model.safetensors")).unwrap()
            == std::fs::read(whole.join("model.safetensors")).unwrap(),
        "resumed weights differ from the uninterrupted run's"
    );
    // At most `keep` checkpoints remain, all complete.
    assert!(complete_checkpoints(&killed) <= 3);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn resume_and_config_flags_are_exclusive_and_resume_needs_a_checkpoint() {
    let dir = scratch("flags");
    let output = verifine()
        .args(["train", "--config", "x.toml", "--resume"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let output = verifine()
        .args(["train", "--resume"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no complete checkpoint"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_second_run_into_the_same_directory_needs_overwrite() {
    let dir = scratch("overwrite");
    let config = dir.join("tiny.toml");
    std::fs::write(
        &config,
        CONFIG
            .replace("steps = 60", "steps = 2")
            .replace("steps = 30", "steps = 1"),
    )
    .unwrap();
    let run = |extra: &[&str], target: &Path| {
        verifine()
            .args(["train", "--config"])
            .arg(&config)
            .arg("--run-dir")
            .arg(target)
            .args(extra)
            .stdout(Stdio::null())
            .output()
            .unwrap()
    };
    let target = dir.join("run");
    assert!(run(&[], &target).status.success());
    let again = run(&[], &target);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("--resume"));
    assert!(run(&["--overwrite"], &target).status.success());
    let stranger = dir.join("not-a-run");
    std::fs::create_dir_all(&stranger).unwrap();
    std::fs::write(stranger.join("precious.txt"), "keep").unwrap();
    let refused = run(&["--overwrite"], &stranger);
    assert!(!refused.status.success());
    assert!(stranger.join("precious.txt").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
