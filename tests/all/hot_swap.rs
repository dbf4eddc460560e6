//! Hot-swap during `verifine train`: an agent's revision closes a loophole
//! mid-run; bad candidates never replace the live revision; a storm of
//! candidates leaves the run consistent; rollback; a kill around a promotion
//! resumes with exactly one revision live.

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

/// A tiny run: 3 SFT steps, `grpo_steps` GRPO steps, a checkpoint every step.
fn tiny(rubric: &str, grpo_steps: usize) -> RunConfig {
    let text = format!(
        r#"
train_problems = 200
heldout_problems = 10
eval_every = 0
vocab_size = 300
[model]
hidden_size = 16
num_layers = 1
num_heads = 2
num_kv_heads = 1
intermediate_size = 32
[sft]
steps = 3
batch_size = 4
[grpo]
steps = {grpo_steps}
prompts_per_step = 2
max_new_tokens = 8
objective = {{ num_generations = 2, dynamic_sampling = false }}
[reward]
rubric = {{ plugin = "{rubric}" }}
[checkpoints]
every = 1
keep = 50
[hot_swap]
canary_size = 60
"#
    );
    RunConfig::from_toml(&text, "tiny").unwrap()
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
/// requests can wait for the run's first step boundary.
fn run_dir(name: &str) -> PathBuf {
    let dir = scratch_dir(name).keep().join("run");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), "").unwrap();
    dir
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

#[test]
fn an_agent_closes_the_loophole_mid_run_and_the_run_continues() {
    let dir = scratch_dir("agent");
    let run = dir.join("run");
    let root = repo_root();
    let mut config = tiny(EXAMPLE_LOOPHOLE, 6);
    let agent = &mut config.hot_swap.agent;
    agent.command = vec![
        "sh".into(),
        root.join("examples/loophole-agent/agent.sh")
            .display()
            .to_string(),
    ];
    agent.source = Some(root.join("examples/loophole-rubric"));
    agent.every = 2;
    // A target directory of its own, kept between test runs: sharing the one
    // tests/build.rs uses would let the revision (same package name)
    // overwrite the workspace's build of the loophole rubric.
    agent.build_target_dir = Some(root.join("target/agent-revisions"));
    let summary = train(&config, &run).unwrap();
    assert_eq!(summary.steps, 9, "the run finished");

    let promoted: Vec<Value> = events(&run)
        .into_iter()
        .filter(|e| e["event"] == "promoted")
        .collect();
    assert_eq!(promoted.len(), 1, "{promoted:?}");
    let event = &promoted[0];
    assert_eq!(event["candidate"]["plugin"]["name"], "answer-mentioned");
    assert_eq!(event["candidate"]["plugin"]["version"], "0.2.0");
    assert_eq!(event["candidate"]["origin"]["kind"], "agent");
    assert_eq!(event["live_before"]["plugin"]["version"], "0.1.0");
    let (live, candidate) = (
        event["canary_live"].as_f64().unwrap(),
        event["canary_candidate"].as_f64().unwrap(),
    );
    assert!(
        candidate > live,
        "the fix agrees better with the labels: {live} -> {candidate}"
    );
    let swap_step = event["step"].as_u64().unwrap();
    assert_eq!(swap_step, 5, "asked after 2 GRPO steps (3 SFT + 2)");

    // Every GRPO line names the revision it was scored with.
    for line in metrics(&run).iter().filter(|l| l["phase"] == "grpo") {
        let version = &line["plugins"][0]["version"];
        let expected = if line["step"].as_u64().unwrap() < swap_step {
            "0.1.0"
        } else {
            "0.2.0"
        };
        assert_eq!(version, expected, "{line}");
    }

    // Rewards after the swap follow the corrected rule.
    let sha = event["candidate"]["plugin"]["sha256"].as_str().unwrap();
    let fixed = run.join("revisions").join(format!("{sha}.wasm"));
    let bait = "3 + 4 = 8\nMy first guess was 7.\n#### 8";
    assert_eq!(score_one(Path::new(EXAMPLE_LOOPHOLE), bait), Some(1.0));
    assert_eq!(score_one(&fixed, bait), Some(0.0));
    assert_eq!(score_one(&fixed, "3 + 4 = 7\n#### 7"), Some(1.0));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn trapping_looping_and_worse_candidates_never_go_live() {
    let run = run_dir("refused");
    for path in [
        hostile::INFINITE_LOOP,
        hostile::ALLOC_BOMB,
        hostile::PANICKER,
        hostile::FUTURE_API,
        EXAMPLE_LOOPHOLE,
    ] {
        promote(&run, &std::fs::read(path).unwrap(), path);
    }
    let mut bytes = b"\0asm-not-really".to_vec();
    bytes.extend([0u8; 16]);
    promote(&run, &bytes, "garbage.wasm");
    let mut config = tiny("math-answer", 2);
    config.limits.call_timeout_ms = 200;
    std::fs::remove_file(run.join("config.toml")).unwrap();
    let summary = train(&config, &run).unwrap();
    assert_eq!(summary.steps, 5, "the run finished");

    let events = events(&run);
    assert_eq!(events.len(), 6, "{events:#?}");
    for event in &events {
        assert_eq!(event["event"], "refused", "{event}");
        assert!(!event["reasons"].as_array().unwrap().is_empty(), "{event}");
    }
    let loophole = events
        .iter()
        .find(|e| e["candidate"]["plugin"]["name"] == "answer-mentioned");
    let reasons = loophole.unwrap()["reasons"].to_string();
    assert!(reasons.contains("canary agreement"), "{reasons}");
    for line in metrics(&run).iter().filter(|l| l["phase"] == "grpo") {
        assert_eq!(line["plugins"][0]["name"], "math-answer", "{line}");
    }
    assert!(
        !run.join("inbox/rubric").read_dir().unwrap().any(|_| true),
        "inbox emptied"
    );
}

#[test]
fn a_storm_of_candidates_leaves_the_run_consistent_and_rollback_restores() {
    let run = run_dir("storm");
    let good = verifine_runtime::spec_bytes("math-answer").unwrap().0;
    let bad = std::fs::read(EXAMPLE_LOOPHOLE).unwrap();
    let started = std::time::Instant::now();
    for i in 0..100 {
        let bytes = if i % 2 == 0 { &good } else { &bad };
        promote(&run, bytes, &format!("storm-{i}.wasm"));
    }
    // Typically ~0.1 s here; a slow disk does not change what is checked:
    // every request of the storm is waiting when the run reaches its first
    // step boundary.
    eprintln!("100 candidates submitted in {:?}", started.elapsed());
    inbox::submit(&run, Slot::Rubric, &Action::Rollback, None, None).unwrap();
    std::fs::remove_file(run.join("config.toml")).unwrap();
    let summary = train(&tiny("math-answer", 1), &run).unwrap();
    assert_eq!(summary.steps, 4);

    let events = events(&run);
    assert_eq!(events.len(), 101, "one event per request, none lost");
    let promoted = events.iter().filter(|e| e["event"] == "promoted").count();
    let refused = events.iter().filter(|e| e["event"] == "refused").count();
    assert_eq!((promoted, refused), (50, 50));
    assert_eq!(events[100]["event"], "rolled-back");
    // Order is submission order.
    for (i, e) in events[..100].iter().enumerate() {
        let path = e["candidate"]["origin"]["path"].as_str().unwrap();
        assert_eq!(path, format!("storm-{i}.wasm"));
    }
    // The live revision is still math-answer, with the history capped.
    let checkpoint = verifine_train::checkpoint::latest(&run.join("checkpoints")).unwrap();
    let state: Value =
        serde_json::from_slice(&std::fs::read(checkpoint.join("state.json")).unwrap()).unwrap();
    let slot = &state["live"]["slots"]["rubric"];
    assert_eq!(slot["live"]["plugin"]["name"], "math-answer");
    assert!(slot["previous"].as_array().unwrap().len() <= 5);
}

#[test]
fn a_kill_around_a_promotion_resumes_with_exactly_one_revision_live() {
    let run = run_dir("kill-promote");
    let fixed = verifine_runtime::spec_bytes("math-answer").unwrap().0;
    let request = promote(&run, &fixed, "math-answer-again.wasm");
    let saved = scratch_dir("kill-promote-request");
    copy_dir(&request, &saved.join("req"));
    std::fs::remove_file(run.join("config.toml")).unwrap();
    let config = tiny(EXAMPLE_LOOPHOLE, 2);
    train(&config, &run).unwrap();
    let weights = std::fs::read(run.join("model.safetensors")).unwrap();

    // Killed after the checkpoint that recorded the promotion (step 1) but
    // before the request left the inbox: the request comes back, and is
    // recognised as decided.
    for later in 2..=5 {
        std::fs::remove_dir_all(run.join(format!("checkpoints/step-{later:08}"))).unwrap();
    }
    copy_dir(&saved.join("req"), &request);
    let summary = resume(&run).unwrap();
    assert_eq!(summary.resumed_from_step, Some(1));
    assert_eq!(
        std::fs::read(run.join("model.safetensors")).unwrap(),
        weights
    );
    let events = events(&run);
    assert_eq!(
        events.iter().filter(|e| e["event"] == "promoted").count(),
        1
    );
    let resumed = events
        .iter()
        .find(|e| e["event"] == "resumed" && e["slot"] == "rubric");
    assert_eq!(
        resumed.unwrap()["candidate"]["plugin"]["name"],
        "math-answer"
    );
    assert!(!request.exists());
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn a_revision_dropped_into_the_watched_directory_goes_live() {
    let dir = scratch_dir("watched");
    let watch = dir.join("incoming");
    std::fs::create_dir_all(watch.join("rubric")).unwrap();
    let bytes = verifine_runtime::spec_bytes("math-answer").unwrap().0;
    std::fs::write(watch.join("rubric/math-answer.wasm"), &bytes).unwrap();
    let mut config = tiny(EXAMPLE_LOOPHOLE, 1);
    config.hot_swap.watch_dir = Some(watch.clone());
    let run = dir.join("run");
    train(&config, &run).unwrap();
    let events = events(&run);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["event"], "promoted");
    assert_eq!(events[0]["candidate"]["origin"]["kind"], "watched");
    assert_eq!(events[0]["step"], 1, "decided at the first step boundary");
    assert!(watch.join("rubric/math-answer.wasm.taken").exists());
    let last = metrics(&run)
        .into_iter()
        .rfind(|l| l["phase"] == "grpo")
        .unwrap();
    assert_eq!(last["plugins"][0]["name"], "math-answer");
}

#[test]
fn a_stored_revision_replaced_behind_the_runs_back_is_refused_on_resume() {
    let run = scratch_dir("revision-swapped").keep().join("run");
    let config = tiny("math-answer", 1);
    train(&config, &run).unwrap();
    let weights = std::fs::read(run.join("model.safetensors")).unwrap();
    let live = &metrics(&run)
        .into_iter()
        .find(|l| l["phase"] == "grpo")
        .unwrap()["plugins"][0];
    let stored = run
        .join("revisions")
        .join(format!("{}.wasm", live["sha256"].as_str().unwrap()));
    let original = std::fs::read(&stored).unwrap();

    // Another plugin's bytes under the live rubric's digest: it would score
    // as "math-answer" if it were loaded.
    std::fs::write(&stored, std::fs::read(EXAMPLE_LOOPHOLE).unwrap()).unwrap();
    std::fs::remove_dir_all(run.join("checkpoints/step-00000004")).unwrap();
    let err = format!("{:#}", resume(&run).unwrap_err());
    assert!(
        err.contains("does not match the checkpoint")
            && err.contains(&stored.display().to_string()),
        "{err}"
    );
    // A digest that is a path is refused before any file is read.
    let checkpoint = run.join("checkpoints/step-00000003/state.json");
    let state = std::fs::read_to_string(&checkpoint).unwrap();
    let sha = live["sha256"].as_str().unwrap();
    std::fs::write(&checkpoint, state.replace(sha, "../../../etc/passwd")).unwrap();
    let err = format!("{:#}", resume(&run).unwrap_err());
    assert!(err.contains("not 64 hex digits"), "{err}");

    // Put back, the run resumes and ends as before.
    std::fs::write(&checkpoint, state).unwrap();
    std::fs::write(&stored, original).unwrap();
    let summary = resume(&run).unwrap();
    assert_eq!(summary.resumed_from_step, Some(3));
    assert_eq!(
        std::fs::read(run.join("model.safetensors")).unwrap(),
        weights
    );
    assert!(events(&run).iter().any(|e| e["event"] == "resumed"));
}

#[test]
#[cfg(unix)]
fn whatever_lands_in_the_inbox_or_the_watched_directory_is_refused_and_the_run_goes_on() {
    let run = run_dir("hostile-inbox");
    let watch = run.parent().unwrap().join("incoming");
    let incoming = watch.join("rubric");
    std::fs::create_dir_all(&incoming).unwrap();
    let mkfifo = |path: &Path| {
        let status = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success());
    };
    // Watched directory: a directory, a FIFO (reading it would block), an
    // oversized (sparse) file, and a symlink.
    std::fs::create_dir_all(incoming.join("dir.wasm")).unwrap();
    mkfifo(&incoming.join("fifo.wasm"));
    std::fs::File::create(incoming.join("huge.wasm"))
        .unwrap()
        .set_len(200 << 20)
        .unwrap();
    std::os::unix::fs::symlink("/etc/passwd", incoming.join("link.wasm")).unwrap();
    // Inbox: a stray file where a request directory belongs, a request whose
    // request.json is a FIFO, and a promotion whose plugin.wasm is one.
    let inbox = run.join("inbox/rubric");
    std::fs::create_dir_all(&inbox).unwrap();
    std::fs::write(inbox.join("000-stray"), b"not a directory").unwrap();
    std::fs::create_dir_all(inbox.join("001-fifo-request")).unwrap();
    mkfifo(&inbox.join("001-fifo-request/request.json"));
    let request = promote(&run, b"placeholder", "fifo-plugin.wasm");
    std::fs::remove_file(request.join("plugin.wasm")).unwrap();
    mkfifo(&request.join("plugin.wasm"));

    let mut config = tiny("math-answer", 2);
    config.hot_swap.watch_dir = Some(watch.clone());
    std::fs::remove_file(run.join("config.toml")).unwrap();
    let summary = train(&config, &run).unwrap();
    assert_eq!(summary.steps, 5, "the run finished");

    let events = events(&run);
    let refused: Vec<String> = events
        .iter()
        .filter(|e| e["event"] == "refused")
        .map(|e| e["reasons"].to_string())
        .collect();
    assert_eq!(refused.len(), 7, "{events:#?}");
    assert!(
        refused.iter().any(|r| r.contains("more than")),
        "{refused:?}"
    );
    assert!(
        refused
            .iter()
            .filter(|r| r.contains("not a regular file"))
            .count()
            >= 4
    );
    assert!(
        refused
            .iter()
            .any(|r| r.contains("not a request directory"))
    );
    for line in metrics(&run).iter().filter(|l| l["phase"] == "grpo") {
        assert_eq!(line["plugins"][0]["name"], "math-answer", "{line}");
    }
    // Nothing is left to trip the next boundary or a resume.
    assert_eq!(std::fs::read_dir(&inbox).unwrap().count(), 0);
    for name in ["dir", "fifo", "huge", "link"] {
        assert!(
            incoming.join(format!("{name}.wasm.refused")).exists(),
            "{name}"
        );
    }
}

#[test]
fn a_candidate_that_behaves_only_at_step_zero_is_not_promoted() {
    let run = run_dir("two-faced");
    // Honest at step 0 (where the canary used to be scored): it agrees with
    // the canary there as well as math-answer does.
    let bytes = std::fs::read(hostile::TWO_FACED).unwrap();
    promote(&run, &bytes, "two-faced.wasm");
    let mut config = tiny("math-answer", 2);
    config.hot_swap.canary_size = 30;
    std::fs::remove_file(run.join("config.toml")).unwrap();
    let summary = train(&config, &run).unwrap();
    assert_eq!(summary.steps, 5);
    let events = events(&run);
    assert_eq!(events.len(), 1, "{events:#?}");
    assert_eq!(events[0]["event"], "refused", "{:#}", events[0]);
    assert!(
        events[0]["reasons"]
            .to_string()
            .contains("canary agreement")
    );
    for line in metrics(&run).iter().filter(|l| l["phase"] == "grpo") {
        assert_eq!(line["plugins"][0]["name"], "math-answer", "{line}");
    }
}

#[test]
fn a_revision_that_behaves_only_on_the_canary_is_rolled_back_on_live_rollouts() {
    let run = run_dir("canary-aware");
    // Honest on the gate's canary, generous with every live rollout.
    let bytes = std::fs::read(hostile::CANARY_AWARE).unwrap();
    promote(&run, &bytes, "canary-aware.wasm");
    let config = tiny("math-answer", 12);
    std::fs::remove_file(run.join("config.toml")).unwrap();
    let summary = train(&config, &run).unwrap();
    assert_eq!(summary.steps, 15);
    let first_run = events(&run);
    let kinds: Vec<&str> = first_run
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["promoted", "auto-rolled-back"], "{first_run:#?}");
    let rollback = &first_run[1];
    assert_eq!(rollback["candidate"]["plugin"]["name"], "math-answer");
    assert!(
        rollback["reasons"].to_string().contains("live rollouts"),
        "{rollback:#}"
    );
    let shadow = &rollback["shadow"];
    assert!(shadow["rollouts"].as_u64().unwrap() >= 32, "{shadow}");
    assert!(shadow["live_leniency"].as_f64().unwrap() > 0.5, "{shadow}");
    // Scored by the hostile revision only until the rollback (at the
    // boundary after `step` steps), then by math-answer again.
    let step = rollback["step"].as_u64().unwrap();
    for line in metrics(&run).iter().filter(|l| l["phase"] == "grpo") {
        let expected = if line["step"].as_u64().unwrap() >= step {
            "math-answer"
        } else {
            "hostile-canary-aware"
        };
        assert_eq!(line["plugins"][0]["name"], expected, "{line}");
    }

    // Killed while the revision was still watched (after the promotion at
    // step 1, before the rollback): the resumed run keeps watching from what
    // the checkpoint counted, and rolls back at the same boundary, to the
    // same weights.
    let promoted = first_run[0]["step"].as_u64().unwrap();
    let killed_at = step - 1;
    assert!(killed_at > promoted, "rolled back at {step}");
    let weights = std::fs::read(run.join("model.safetensors")).unwrap();
    for later in killed_at + 1..=15 {
        std::fs::remove_dir_all(run.join(format!("checkpoints/step-{later:08}"))).unwrap();
    }
    let summary = resume(&run).unwrap();
    assert_eq!(summary.resumed_from_step, Some(killed_at as usize));
    let again: Vec<Value> = events(&run)
        .into_iter()
        .filter(|e| e["event"] == "auto-rolled-back")
        .collect();
    assert_eq!(again.len(), 2, "{again:#?}");
    assert_eq!(again[1]["step"], rollback["step"]);
    assert_eq!(again[1]["shadow"], rollback["shadow"]);
    assert_eq!(
        std::fs::read(run.join("model.safetensors")).unwrap(),
        weights
    );
}

#[test]
fn a_watched_revision_that_behaves_passes_its_window_and_stays_live() {
    let run = run_dir("shadow-passed");
    // The live rule handed in again: no live rollout tells the two apart.
    let mut config = tiny("math-answer", 6);
    config.hot_swap.gate.shadow_steps = 3;
    let (math_answer, _) =
        verifine_runtime::spec_bytes(verifine_runtime::PluginSpec::from("math-answer")).unwrap();
    promote(&run, &math_answer, "math-answer-again.wasm");
    std::fs::remove_file(run.join("config.toml")).unwrap();
    let summary = train(&config, &run).unwrap();
    assert_eq!(summary.steps, 9);
    let kinds: Vec<String> = events(&run)
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["promoted", "shadow-passed"]);
}
