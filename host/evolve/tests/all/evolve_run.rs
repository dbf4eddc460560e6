//! `verifine evolve` end to end on a tiny model: every task runs, the
//! outputs exist with the table in order, and the frozen test labels decide
//! nothing (a run whose test set was labelled by another annotator takes
//! exactly the same decisions).

use std::path::Path;
use verifine_evolve::{EvolveConfig, start};

use crate::common::{read, scratch, tiny};

#[test]
fn a_tiny_run_finishes_every_task_and_frozen_labels_decide_nothing() {
    let a = scratch("a");
    let summary = start(tiny(100), &a, Box::new(|_| {})).unwrap();
    let names: Vec<&str> = summary.rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["base", "random-initial", "guided-initial", "R1"]);
    for row in &summary.rows {
        assert!(row.rb_ci[0] <= row.rb && row.rb <= row.rb_ci[1], "{row:?}");
        assert!((0.0..=1.0).contains(&row.accuracy));
    }
    assert_eq!(summary.judge[0].revision, 0);
    assert_eq!(summary.loops.len(), 1);
    assert!(
        summary.loops[0].ran,
        "the trigger fires on a stall: {:?}",
        summary.loops
    );
    for file in [
        "report.md",
        "plot.png",
        "summary.json",
        "judge/test.jsonl",
        "judge/batch-1.jsonl",
        "judge/labels.jsonl",
        "judge/calibration.jsonl",
        "curriculum.jsonl",
        "failures.jsonl",
        "monitor.jsonl",
    ] {
        assert!(a.join(file).exists(), "{file}");
    }
    assert!(read(&a.join("report.md")).contains("| R1 |"));

    // Test-time selection: the annotator picking by its own scores is the
    // upper bound at every budget, and its curve never falls.
    let selection = verifine_evolve::open(&a, Box::new(|_| {}))
        .unwrap()
        .select("R1", 3, 4)
        .unwrap();
    let names: Vec<&str> = selection
        .curves
        .iter()
        .map(|c| c.selector.as_str())
        .collect();
    assert_eq!(names.len(), 6, "{names:?}");
    assert_eq!(
        (names[0], names[4], names[5]),
        ("random", "RB", "annotator (upper bound)")
    );
    let upper = &selection.curves[5].mean;
    assert!(upper.windows(2).all(|w| w[0] <= w[1]), "{upper:?}");
    for curve in &selection.curves {
        assert_eq!(curve.mean.len(), 3);
        assert!(
            curve.mean.iter().zip(upper).all(|(m, u)| m <= u),
            "{curve:?}"
        );
    }
    for file in ["selection.json", "selection.md", "selection.png"] {
        assert!(a.join(file).exists(), "{file}");
    }

    // Another annotator for the frozen test set: its labels differ, and
    // nothing the loop decided does.
    let b = scratch("b");
    start(tiny(200), &b, Box::new(|_| {})).unwrap();
    assert_ne!(
        read(&a.join("judge/test.jsonl")),
        read(&b.join("judge/test.jsonl"))
    );
    for file in [
        "judge/calibration.jsonl",
        "judge/labels.jsonl",
        "judge/loops.jsonl",
        "curriculum.jsonl",
        "monitor.jsonl",
        "rows/R1/heldout_answers.jsonl",
    ] {
        assert_eq!(read(&a.join(file)), read(&b.join(file)), "{file}");
    }
    let state = |d: &Path| {
        serde_json::from_str::<serde_json::Value>(&read(&d.join("state.json"))).unwrap()["revisions"].clone()
    };
    assert_eq!(state(&a), state(&b));
    std::fs::remove_dir_all(&a).unwrap();
    std::fs::remove_dir_all(&b).unwrap();
}

#[cfg(unix)]
#[test]
fn an_open_review_request_pauses_later_judge_loops_unless_told_otherwise() {
    let loops = |pause: bool| {
        let mut config = tiny(100);
        config.rounds = 2;
        // Every loop asks for review after its first proposal.
        config.calibration.review_window = 1;
        config.calibration.review_min_gain = 1.0;
        config.calibration.pause_on_review = pause;
        let dir = scratch(if pause { "pause" } else { "continue" });
        // An agent that always has a new proposal.
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("agent.sh");
        std::fs::write(
            &script,
            "#!/bin/sh\nn=$(wc -l < \"$1/tried.jsonl\")\n\
             printf '{\"grounded\": {\"has-steps\": 1.0, \"numbers-appear\": 0.%s}}' $((n + 1)) > \"$1/revised-rules.json\"\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        config.agent.command = vec![script.display().to_string()];
        let run = dir.join("run");
        let summary = start(config, &run, Box::new(|_| {})).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        summary.loops
    };
    let paused = loops(true);
    assert!(
        paused[0].ran && paused[0].note.starts_with("review requested"),
        "{paused:?}"
    );
    assert!(
        !paused[1].ran && paused[1].note.starts_with("paused"),
        "{paused:?}"
    );
    let going_on = loops(false);
    assert!(going_on[1].ran, "{going_on:?}");
}

#[test]
fn with_a_human_labeller_the_loop_stops_for_labels_and_resumes_after_import() {
    use verifine_evolve::config::Labeller;
    use verifine_evolve::labels::{LabelInput, QueueItem};
    let mut config = tiny(100);
    config.labeller = Labeller::Human;
    let dir = scratch("human");
    let err = start(config, &dir, Box::new(|_| {}))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("wait for labels") && err.contains("--resume"),
        "{err}"
    );

    let out = dir.join("to-label.jsonl");
    let n = verifine_evolve::queue::export(&dir, "human", &out).unwrap();
    assert!(n > 0);
    let mut items: Vec<QueueItem> = verifine_base::read_jsonl(&out).unwrap();
    for item in &mut items {
        item.label = Some(LabelInput::Confirm);
    }
    verifine_base::write_jsonl(&out, &items).unwrap();
    assert_eq!(
        verifine_evolve::queue::import(&dir, &out, "human")
            .unwrap()
            .labelled,
        n
    );

    let summary = verifine_evolve::resume(&dir, Box::new(|_| {})).unwrap();
    assert!(summary.loops[0].ran, "{:?}", summary.loops);
    assert_eq!(summary.rows.len(), 4);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn in_sft_membership_mode_rounds_train_only_on_what_the_judge_keeps() {
    use verifine_evolve::config::RoundMode;
    use verifine_train::sft_data::SftItem;
    let shipped = EvolveConfig::parse(include_str!(
        "../../../../examples/evolve/sft-membership.toml"
    ))
    .unwrap();
    assert_eq!(shipped.mode, RoundMode::SftMembership);
    let bad = include_str!("../../../../examples/evolve/sft-membership.toml")
        .replace("min_score = 0.9", "min_score = 1.5");
    let err = EvolveConfig::parse(&bad).unwrap_err().to_string();
    assert!(err.contains("membership.min_score 1.5"), "{err}");

    let mut config = tiny(100);
    config.mode = RoundMode::SftMembership;
    config.membership.min_score = 0.9;
    let dir = scratch("membership");
    let summary = start(config, &dir, Box::new(|_| {})).unwrap();
    let names: Vec<&str> = summary.rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["base", "random-initial", "guided-initial", "R1"]);
    assert!(summary.rows[0].membership.is_none());
    // SFT steps feed the trigger as GRPO steps do: it fires on the stall.
    assert!(summary.loops[0].ran, "{:?}", summary.loops);
    for row in &summary.rows[1..] {
        let tally = row.membership.expect("an SFT round's membership");
        // 16 pool problems: each target and one sampled answer.
        assert_eq!(tally.candidates, 32, "{row:?}");
        let run = dir.join("rows").join(&row.name);
        let items: Vec<SftItem> =
            verifine_base::read_jsonl(&run.join("sft_selection.jsonl")).unwrap();
        assert_eq!(
            items.iter().filter(|i| i.weight.is_some()).count(),
            tally.kept
        );
        for item in &items {
            let score = item.judge_score.unwrap();
            if item.weight.is_some() {
                assert!(score >= 0.9, "{item:?}");
            } else {
                assert!(
                    score < 0.9 || item.reason.contains("curriculum"),
                    "{item:?}"
                );
            }
        }
        // SFT steps only, evaluated every check_every steps.
        let lines: Vec<serde_json::Value> =
            verifine_base::read_jsonl(&run.join("metrics.jsonl")).unwrap();
        let phases: Vec<(String, u64)> = lines
            .iter()
            .map(|l| {
                (
                    l["phase"].as_str().unwrap().to_string(),
                    l["step"].as_u64().unwrap(),
                )
            })
            .collect();
        assert!(
            phases.iter().all(|(p, _)| p == "sft" || p == "eval"),
            "{phases:?}"
        );
        let evals: Vec<u64> = phases
            .iter()
            .filter(|(p, _)| p == "eval")
            .map(|(_, s)| *s)
            .collect();
        assert_eq!(evals, [2, 4]);
    }
    assert!(read(&dir.join("report.md")).contains("## SFT membership"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A tiny run whose judge loop asks the agent script `body` (`$1` is its
/// request directory); the run's directory and its result.
#[cfg(unix)]
fn with_agent(
    name: &str,
    body: &str,
) -> (
    verifine_test_support::ScratchDir,
    verifine_evolve::Result<verifine_evolve::EvolveSummary>,
) {
    use std::os::unix::fs::PermissionsExt;
    let mut config = tiny(100);
    config.calibration.review_window = 0;
    let dir = scratch(name);
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("agent.sh");
    std::fs::write(&script, format!("#!/bin/sh\nd=\"$1\"\n{body}\n")).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    config.agent.command = vec![script.display().to_string()];
    config.agent.timeout_seconds = 30;
    let run = dir.join("run");
    let result = start(config, &run, Box::new(|_| {}));
    (dir, result)
}

#[cfg(unix)]
#[test]
fn the_agent_cannot_read_or_forge_the_runs_records() {
    let (dir, result) = with_agent(
        "hostile-agent",
        "got=''\n\
         for f in ../../labels.jsonl ../../test.jsonl ../../calibration.jsonl ../../../config.toml ../../../state.json; do\n\
           cat \"$d/$f\" >/dev/null 2>&1 && got=\"$got read:$f\"\n\
         done\n\
         for f in ../../calibration.jsonl ../../../forged; do\n\
           (echo '{\"round\": 1, \"forged\": true}' >> \"$d/$f\") 2>/dev/null && got=\"$got wrote:$f\"\n\
         done\n\
         ls \"$d/..\" >/dev/null 2>&1 && got=\"$got listed\"\n\
         cat /proc/$PPID/environ >/dev/null 2>&1 && got=\"$got environ\"\n\
         [ -s \"$d/tried.jsonl\" ] && exit 0\n\
         printf '{\"grounded\": {\"has-steps\": 1.0, \"numbers-appear\": 0.5}}' > \"$d/revised-rules.json\"\n\
         echo \"escaped:${got:- none}\" > \"$d/rationale.txt\"",
    );
    let summary = result.expect("the run goes on");
    assert!(summary.loops.iter().any(|l| l.ran), "{:?}", summary.loops);
    let log = read(&dir.join("run/judge/calibration.jsonl"));
    assert!(!log.contains("forged"), "{log}");
    assert!(log.contains("escaped: none"), "{log}");
    assert!(!dir.join("run/forged").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(unix)]
#[test]
fn a_fifo_or_a_link_for_an_answer_fails_the_proposal_without_hanging() {
    for (name, body) in [
        ("fifo-answer", "mkfifo \"$d/revised-rules.json\""),
        (
            "link-answer",
            "ln -s /etc/passwd \"$d/rationale.txt\"\necho '{}' > \"$d/revised-rules.json\"",
        ),
    ] {
        let started = std::time::Instant::now();
        let (dir, result) = with_agent(name, body);
        let err = result
            .err()
            .unwrap_or_else(|| panic!("{name}: taken"))
            .to_string();
        assert!(err.contains("not a regular file"), "{name}: {err}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "{name}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn seeds_run_once_each_and_report_across_them() {
    let dir = scratch("seeds");
    let mut started = Vec::new();
    let report = verifine_evolve::seeds::run(
        &tiny(99),
        &dir,
        &[0, 1],
        || Box::new(|_| {}),
        |seed, how| started.push((seed, how)),
    )
    .unwrap();
    use verifine_evolve::seeds::SeedStart;
    assert_eq!(started, [(0, SeedStart::Fresh), (1, SeedStart::Fresh)]);
    assert_eq!(report.seeds, [0, 1]);
    for seed in [0, 1] {
        let summary = verifine_evolve::summary::read(&dir.join(format!("seed-{seed}"))).unwrap();
        let rbs: Vec<f64> = report.rows.iter().map(|r| r.rb_per_seed[seed]).collect();
        let own: Vec<f64> = summary.rows.iter().map(|r| r.rb).collect();
        assert_eq!(rbs, own, "seed {seed}'s column is its own run's table");
    }
    assert!(read(&dir.join("seeds.md")).contains("## Checks"));
    // A loop seed varies the loop only: the SFT base and the frozen judge
    // test set are those of `[train] seed`; the sampled answers queried are not.
    let at = |seed: u64, file: &str| {
        std::fs::read(dir.join(format!("seed-{seed}")).join(file))
            .unwrap_or_else(|e| panic!("seed {seed} {file}: {e}"))
    };
    assert!(at(0, "base/model.safetensors") == at(1, "base/model.safetensors"));
    assert!(at(0, "judge/test.jsonl") == at(1, "judge/test.jsonl"));
    assert_eq!(report.rows[0].rb_per_seed[0], report.rows[0].rb_per_seed[1]);
    assert!(at(0, "judge/batch-1.jsonl") != at(1, "judge/batch-1.jsonl"));
    // Asked again, finished seeds are read, not run.
    let mut again = Vec::new();
    verifine_evolve::seeds::run(
        &tiny(99),
        &dir,
        &[0, 1],
        || Box::new(|_| {}),
        |s, h| again.push((s, h)),
    )
    .unwrap();
    assert_eq!(again, [(0, SeedStart::Finished), (1, SeedStart::Finished)]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every shipped evolve config parses, its judge's initial rules are ones
/// the judge accepts, and the judges file it names reads.
#[test]
fn every_example_config_parses_and_its_judge_takes_its_rules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let runtime = verifine_runtime::Runtime::new(Default::default()).unwrap();
    let mut checked = 0;
    for entry in std::fs::read_dir(root.join("examples/evolve")).unwrap() {
        let path = entry.unwrap().path();
        let text = read(&path);
        if path.extension().is_none_or(|e| e != "toml") || text.contains("[judges.") {
            continue;
        }
        let config =
            EvolveConfig::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let judge = verifine_runtime::scoring::RewardPlugins::load(
            &runtime,
            config.judge.plugin.clone(),
            &config.judge.config_json(),
            None,
            &serde_json::json!({}),
        )
        .unwrap();
        // The case as the judge sees it: with the config's context.
        let mut sample =
            verifine_runtime::Sample::new("s", "Start with 2, then add 3.", "2 + 3 = 5\n#### 5");
        if let Some(context) = &config.judge_context {
            sample.context = context.to_string();
        }
        let scored =
            verifine_runtime::scorer_pool::score_all(&judge, &[sample], 1, 1, &|_| {}).unwrap();
        // Without its judges file here, a model-backed judge can only say so.
        if let Some(error) = &scored[0].error {
            assert!(
                config.judges.is_some() && error.contains("no judge model configured"),
                "{}: the judge refuses its rules: {error}",
                path.display()
            );
        }
        if let Some(judges) = &config.judges {
            verifine_judge::JudgesConfig::load(&root.join(judges))
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
        checked += 1;
    }
    assert!(checked >= 3, "{checked} configs");
}
