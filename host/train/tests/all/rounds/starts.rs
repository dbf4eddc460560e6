//! Where a round starts (a base's weights and tokenizer, a size that must
//! match) and which prompts it trains on (the weighted pool, kept across a
//! resume).

use super::*;

#[test]
fn a_run_from_a_base_starts_from_its_weights_and_tokenizer() {
    let dir = scratch("init-from");
    let base = dir.join("base");
    let base_summary = base_run(&base);
    let base_answers = answers(&base);
    assert_eq!(base_answers.len(), 8);

    // No steps at all: the base's policy, answering the same.
    let copy = dir.join("copy");
    let config = TrainConfig {
        grpo: GrpoPhase {
            steps: 0,
            ..tiny().grpo
        },
        ..from_base(&base)
    };
    let summary = train(&config, "", &copy, host(Fixed(Constant::new(0.0)))).unwrap();
    assert_eq!(summary.steps, 0);
    assert_eq!(
        summary.heldout_accuracy_final,
        base_summary.heldout_accuracy_final
    );
    assert_eq!(answers(&copy), base_answers);
    for file in ["tokenizer.json", "model.safetensors"] {
        assert_eq!(
            std::fs::read(copy.join(file)).unwrap(),
            std::fs::read(base.join(file)).unwrap(),
            "{file}"
        );
    }

    // With GRPO and a KL term: the reference is the base model.
    let round = dir.join("round");
    let mut config = from_base(&base);
    config.grpo.objective.beta = 0.04;
    train(&config, "", &round, host(Fixed(Constant::new(0.5)))).unwrap();
    assert_eq!(
        std::fs::read(round.join("reference.safetensors")).unwrap(),
        std::fs::read(base.join("model.safetensors")).unwrap()
    );
    assert_eq!(answers(&round).len(), 8);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_base_of_another_size_is_refused() {
    let dir = scratch("init-from-bad");
    let base = dir.join("base");
    base_run(&base);
    let mut config = from_base(&base);
    config.model.hidden_size = 32;
    let err = train(
        &config,
        "",
        &dir.join("wide"),
        host(Fixed(Constant::new(0.0))),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("model.safetensors")
            && err.contains("hidden_size 16")
            && err.contains("hidden_size 32"),
        "{err}"
    );
    let policy = Policy::load(&base, &config.model).unwrap_err().to_string();
    assert!(policy.contains("hidden_size 32"), "{policy}");

    std::fs::remove_dir_all(&dir).unwrap();
}

/// Five training-distribution problems, weighted so only two can be drawn.
fn weighted_pool(weights: [f64; 5]) -> PromptPool {
    let (problems, _) = splits(11, 5, 0, &TrainConfig::default().task);
    PromptPool {
        problems,
        weights: weights.to_vec(),
    }
}

#[test]
fn grpo_prompts_come_from_the_pool_by_weight() {
    let dir = scratch("pool");
    let pool = weighted_pool([0.0, 1.0, 0.0, 2.0, 0.0]);
    let allowed: BTreeSet<String> = [1, 3]
        .iter()
        .map(|&i| pool.problems[i].prompt.clone())
        .collect();
    let reward = Constant::new(0.5);
    let seen = reward.grpo_prompts.clone();
    let mut config = tiny();
    config.grpo.steps = 4;
    train(
        &config,
        "",
        &dir,
        Host {
            prompts: Some(pool),
            ..host(Fixed(reward))
        },
    )
    .unwrap();
    let seen: BTreeSet<String> = seen.borrow().iter().cloned().collect();
    // 4 steps × 2 prompts × 2 generations were rewarded, all on pool prompts.
    assert!(!seen.is_empty());
    assert!(seen.is_subset(&allowed), "{seen:?}");

    let bad = weighted_pool([1.0, f64::NAN, 0.0, 0.0, 0.0]);
    let err = train(
        &config,
        "",
        &scratch("pool-bad"),
        Host {
            prompts: Some(bad),
            ..host(Fixed(Constant::new(0.5)))
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("weight 1"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_resume_with_another_pool_is_refused_and_with_the_same_one_continues() {
    let dir = scratch("pool-resume");
    let first = weighted_pool([1.0, 1.0, 0.0, 0.0, 0.0]);
    let with = |pool: PromptPool| Host {
        prompts: Some(pool),
        ..host(Fixed(Constant::new(0.5)))
    };
    train(&tiny(), "", &dir, with(first.clone())).unwrap();
    std::fs::remove_dir_all(dir.join("checkpoints/step-00000005")).unwrap();

    let other = weighted_pool([1.0, 2.0, 0.0, 0.0, 0.0]);
    let err = resume(&dir, with(other.clone())).unwrap_err().to_string();
    assert!(
        err.contains(&first.fingerprint()) && err.contains(&other.fingerprint()),
        "{err}"
    );
    let err = resume(&dir, host(Fixed(Constant::new(0.5))))
        .unwrap_err()
        .to_string();
    assert!(err.contains("prompt pool"), "{err}");
    let summary = resume(&dir, with(first)).unwrap();
    assert_eq!(summary.resumed_from_step, Some(4));
    std::fs::remove_dir_all(&dir).unwrap();
}
