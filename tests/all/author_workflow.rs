//! The plugin author's workflow, as the book walks through it
//! (docs/src/plugins/writing.md): scaffold,
//! build, snapshot-test, diff against another revision, hand to a run.

use verifine::commands::author::{self, report_cases};
use verifine_hotswap::Slot;
use verifine_runtime::cases::CaseOutcome;
use verifine_runtime::{Limits, PluginKind, Runtime};
use verifine_tests::{EXAMPLE_CONCISE, EXAMPLE_LOOPHOLE, repo_root, scratch_dir, write_rows};

/// Shared with the hot-swap test: dependencies compiled once for wasm32.
fn target_dir() -> std::path::PathBuf {
    repo_root().join("target/agent-revisions")
}

#[test]
fn every_scaffolded_kind_builds_and_loads() {
    let runtime = Runtime::new(Limits::default()).unwrap();
    let dir = scratch_dir("scaffold");
    for kind in PluginKind::ALL {
        let name = format!("my-{kind}");
        let crate_dir = author::new(kind, &name, Some(&dir.join(&name))).unwrap();
        let built = author::build(&runtime, &crate_dir, Some(&target_dir())).unwrap();
        assert_eq!(built.metadata.name, name);
        assert_eq!(built.metadata.kind, kind);
    }
    let err = author::new(PluginKind::Rubric, "Bad Name", Some(&dir.join("bad"))).unwrap_err();
    assert!(format!("{err}").contains("lowercase"), "{err}");
    let err = author::new(
        PluginKind::Rubric,
        "my-rubric",
        Some(&dir.join("my-rubric")),
    )
    .unwrap_err();
    assert!(format!("{err}").contains("not empty"), "{err}");
}

#[test]
fn snapshot_cases_are_stored_with_accept_and_catch_a_changed_rule() {
    let runtime = Runtime::new(Limits::default()).unwrap();
    let dir = scratch_dir("snapshots");
    let crate_dir = author::new(
        PluginKind::Rubric,
        "says-done",
        Some(&dir.join("says-done")),
    )
    .unwrap();
    let built = author::build(&runtime, &crate_dir, Some(&target_dir())).unwrap();
    let wasm = built.path.display().to_string();
    let cases = crate_dir.join("cases.jsonl");

    let first = author::test(&runtime, &wasm, &cases, None, false).unwrap();
    assert!(first.iter().all(|r| r.outcome == CaseOutcome::New));
    assert!(
        !report_cases(&first, false).1,
        "new snapshots are not a pass"
    );
    author::test(&runtime, &wasm, &cases, None, true).unwrap();
    let snap = std::fs::read_to_string(crate_dir.join("snapshots/cases__marked.snap")).unwrap();
    assert!(
        snap.starts_with("---\nsource: verifine plugin test\n"),
        "{snap}"
    );
    let again = author::test(&runtime, &wasm, &cases, None, false).unwrap();
    assert!(again.iter().all(|r| r.outcome == CaseOutcome::Matches));
    assert!(report_cases(&again, false).1);

    // Another rule on the same cases differs, and says how.
    let other = author::test(&runtime, EXAMPLE_CONCISE, &cases, None, false).unwrap();
    assert!(
        other
            .iter()
            .any(|r| matches!(r.outcome, CaseOutcome::Differs { .. }))
    );
    let (text, passed) = report_cases(&other, false);
    assert!(
        !passed && text.contains("DIFFERS") && text.contains("concise"),
        "{text}"
    );
}

#[test]
fn diff_lists_changed_samples_and_the_agreement_of_each_revision() {
    let runtime = Runtime::new(Limits::default()).unwrap();
    let dir = scratch_dir("diff");
    let reference = "3 + 4 = 7\n#### 7";
    let row = |id: &str, response: &str| serde_json::json!({"id": id, "prompt": "Start with 3, then add 4.", "response": response, "reference": reference});
    write_rows(
        &dir.join("samples.jsonl"),
        &[
            row("right", "3 + 4 = 7\n#### 7"),
            row("wrong", "3 + 4 = 8\n#### 8"),
            row("bait", "3 + 4 = 8\nMy first guess was 7.\n#### 8"),
        ],
    );
    write_rows(
        &dir.join("gold.jsonl"),
        &[
            serde_json::json!({"id": "right", "prompt": "", "response": "", "label": true}),
            serde_json::json!({"id": "wrong", "prompt": "", "response": "", "label": false}),
            serde_json::json!({"id": "bait", "prompt": "", "response": "", "label": false}),
        ],
    );
    let diff = author::diff(
        &runtime,
        EXAMPLE_LOOPHOLE,
        "math-answer",
        &dir.join("samples.jsonl"),
        Some(&dir.join("gold.jsonl")),
        0.5,
    )
    .unwrap();
    assert_eq!(diff.n, 3);
    let bait = diff.changes.iter().find(|c| c.id == "bait").unwrap();
    assert_eq!((bait.old, bait.label), (Some(1.0), Some(false)));
    assert!(bait.new.unwrap() < 0.5);
    assert!((diff.old_agreement.unwrap() - 2.0 / 3.0).abs() < 1e-9);
    assert_eq!(diff.new_agreement, Some(1.0));
}

#[test]
fn promote_and_rollback_refuse_what_a_run_could_not_use() {
    let runtime = Runtime::new(Limits::default()).unwrap();
    let dir = scratch_dir("promote");
    let wasm = std::path::Path::new(EXAMPLE_LOOPHOLE);
    let err = author::promote(&runtime, &dir, Slot::Rubric, wasm, None).unwrap_err();
    assert!(format!("{err}").contains("not a run directory"), "{err}");
    std::fs::write(dir.join("config.toml"), "").unwrap();
    let err = "judge".parse::<Slot>().unwrap_err();
    assert!(format!("{err}").contains("unknown slot"), "{err}");
    std::fs::write(dir.join("junk.wasm"), b"not wasm").unwrap();
    let err =
        author::promote(&runtime, &dir, Slot::Rubric, &dir.join("junk.wasm"), None).unwrap_err();
    assert!(
        format!("{err:#}").contains("not a loadable plugin"),
        "{err:#}"
    );
    let queued = author::promote(&runtime, &dir, Slot::Rubric, wasm, None).unwrap();
    assert!(queued.join("plugin.wasm").exists() && queued.join("request.json").exists());
    let rollback = author::rollback(&dir, Slot::Aggregator).unwrap();
    assert!(rollback.starts_with(dir.join("inbox/aggregator")));
}
