//! What a round measures and leaves: held-out accuracy by the evaluator,
//! monitor readings, a saved policy's answers, an SFT round on the host's
//! targets.

use super::*;

#[test]
fn held_out_accuracy_is_the_evaluators_not_the_training_rewards() {
    let dir = scratch("evaluator");
    let summary = train(
        &tiny(),
        "",
        &dir,
        Host {
            evaluator: Some(Box::new(EvenProblems)),
            ..host(Fixed(Constant::new(0.0)))
        },
    )
    .unwrap();
    // Four of the eight held-out problems are even-numbered; the training
    // reward (0 for everything) would give 0.
    assert_eq!(summary.heldout_accuracy_sft, 0.5);
    assert_eq!(summary.heldout_accuracy_final, 0.5);
    let answers = answers(&dir);
    let (_, heldout) = splits(0, 100, 8, &tiny().task);
    for (i, (a, problem)) in answers.iter().zip(&heldout).enumerate() {
        let even = i % 2 == 0;
        assert_eq!(a.id, format!("heldout-{i}"));
        assert_eq!(a.correct, even, "{a:?}");
        assert_eq!(a.evaluator_total, Some(if even { 1.0 } else { 0.0 }));
        assert_eq!(a.prompt, problem.prompt);
        assert_eq!(a.reference, problem.solution);
        assert_eq!(a.answer, problem.answer);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Each boundary's step and monitor reading.
fn readings(boundaries: &Boundaries) -> Vec<(usize, Option<Monitor>)> {
    boundaries
        .borrow()
        .iter()
        .map(|b| (b.step, b.monitor))
        .collect()
}

#[test]
fn monitor_readings_come_at_evaluation_steps_and_the_last_one() {
    let dir = scratch("monitor");
    let mut config = tiny();
    config.grpo.steps = 3;
    config.eval_every = 2;
    let boundaries = Boundaries::default();
    let hook = Watching {
        reward: Constant::new(0.25),
        boundaries: boundaries.clone(),
    };
    train(
        &config,
        "",
        &dir,
        Host {
            evaluator: Some(Box::new(EvenProblems)),
            ..host(hook)
        },
    )
    .unwrap();
    let readings = readings(&boundaries);
    let steps: Vec<usize> = readings.iter().map(|(s, _)| *s).collect();
    assert_eq!(steps, [1, 2, 3, 4, 5, 6]);
    let expected = Monitor {
        heldout_accuracy: 0.5,
        heldout_score: 0.5,
        mean_reward: 0.25,
    };
    for (step, monitor) in readings.iter() {
        // GRPO step 2 (every 2) and GRPO step 3 (the last).
        let due = *step == 5 || *step == 6;
        assert_eq!(*monitor, due.then_some(expected), "step {step}");
    }
    // Evaluations: after SFT, at GRPO step 2, the final one — once each.
    let metrics = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    let phases: Vec<String> = metrics
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["phase"].to_string())
        .collect();
    let evals: Vec<usize> = phases
        .iter()
        .enumerate()
        .filter(|(_, p)| *p == "\"eval\"")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(evals, [3, 6, 8], "{phases:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_saved_policy_answers_copies_per_problem_as_the_run_evaluated() {
    let dir = scratch("policy");
    let config = tiny();
    train(&config, "", &dir, host(Fixed(Constant::new(0.5)))).unwrap();
    let policy = Policy::load(&dir, &config.model).unwrap();
    let (train_set, heldout) = splits(config.seed, 100, 8, &config.task);
    let problems: Vec<Problem> = train_set[..3].to_vec();
    let sampled = policy
        .answer(&problems, Sampling::Temperature(1.0), 4, 8, 7)
        .unwrap();
    assert_eq!(sampled.len(), 3);
    assert!(sampled.iter().all(|copies| copies.len() == 4));
    assert_eq!(
        policy
            .answer(&problems, Sampling::Temperature(1.0), 4, 8, 7)
            .unwrap(),
        sampled
    );
    // Greedy answers are the ones the run's final evaluation judged.
    let greedy = policy
        .answer(&heldout, Sampling::Greedy, 1, config.grpo.max_new_tokens, 0)
        .unwrap();
    let judged: Vec<Vec<String>> = answers(&dir)
        .into_iter()
        .map(|a| vec![a.response])
        .collect();
    assert_eq!(greedy, judged);
    assert!(
        policy
            .answer(&[], Sampling::Greedy, 1, 8, 0)
            .unwrap()
            .is_empty()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Three training-distribution problems: the first and last kept (the last
/// twice as often), the middle one dropped.
fn host_targets(weights: [Option<f64>; 3]) -> SftTargets {
    let (problems, _) = splits(5, 3, 0, &TrainConfig::default().task);
    let items = problems
        .iter()
        .zip(weights)
        .enumerate()
        .map(|(i, (p, weight))| SftItem {
            problem: i,
            target: p.solution.clone(),
            noisy: false,
            judge_score: Some(0.9),
            weight,
            reason: format!("decided by the host ({i})"),
        })
        .collect();
    SftTargets { problems, items }
}

#[test]
fn an_sft_round_trains_on_the_hosts_targets_from_a_base_with_monitor_readings() {
    let dir = scratch("sft-round");
    let base = dir.join("base");
    base_run(&base);
    let mut config = from_base(&base);
    config.sft.steps = 4;
    config.sft.eval_every = 2;
    config.grpo.steps = 0;
    let boundaries = Boundaries::default();
    let with = |targets: SftTargets, boundaries: &Boundaries| Host {
        evaluator: Some(Box::new(EvenProblems)),
        sft_targets: Some(targets),
        ..host(Watching {
            reward: Constant::new(0.25),
            boundaries: boundaries.clone(),
        })
    };
    let targets = host_targets([Some(1.0), None, Some(2.0)]);
    let round = dir.join("round");
    let summary = train(&config, "", &round, with(targets.clone(), &boundaries)).unwrap();
    assert_eq!((summary.sft_samples, summary.sft_samples_kept), (3, 2));
    let selection: Vec<SftItem> = read_jsonl(&round.join("sft_selection.jsonl")).unwrap();
    assert_eq!(selection, targets.items);
    assert_ne!(
        std::fs::read(round.join("model.safetensors")).unwrap(),
        std::fs::read(base.join("model.safetensors")).unwrap(),
        "SFT steps continue from the base"
    );

    // A reading every two SFT steps: the evaluator's accuracy, and the
    // training reward over the same held-out answers.
    let expected = Monitor {
        heldout_accuracy: 0.5,
        heldout_score: 0.5,
        mean_reward: 0.25,
    };
    let got = readings(&boundaries);
    assert_eq!(
        got,
        [
            (1, None),
            (2, Some(expected)),
            (3, None),
            (4, Some(expected))
        ]
    );
    // Evaluated at steps 2 and 4, logged once each (the end of SFT reuses
    // the boundary's line).
    let evals: Vec<u64> = std::fs::read_to_string(round.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["phase"] == "eval")
        .map(|v| v["step"].as_u64().unwrap())
        .collect();
    assert_eq!(evals, [2, 4]);

    // The targets are part of what a resume must match.
    let other = host_targets([Some(1.0), Some(1.0), Some(2.0)]);
    let err = resume(&round, with(other, &Boundaries::default()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("SFT targets"), "{err}");
    resume(&round, with(targets, &Boundaries::default())).unwrap();

    // Targets that drop everything are refused before training.
    let err = train(
        &config,
        "",
        &dir.join("none-kept"),
        with(host_targets([None, None, None]), &boundaries),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("none of the 3"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
