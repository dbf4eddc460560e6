//! Promotions mid-run: an agent closes a loophole; bad candidates, storms
//! and kills around a promotion leave exactly one revision live.

use super::*;

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
