//! The watched directory and the guards around it: a dropped revision
//! goes live and one that behaves passes its window; a stored revision
//! replaced behind the run's back, hostile inbox entries, and candidates
//! that behave only at step zero or only on the canary never stay live.

use super::*;

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
    let scratch = scratch_dir("revision-swapped");
    let run = scratch.join("run");
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
