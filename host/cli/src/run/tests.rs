//! Tiny runs end to end: outputs, resume, self-verification, curriculum, bf16.
use super::*;
use verifine_runtime::PluginSetting;
use verifine_train::config::{CheckpointConfig, GrpoPhase, ModelSize, SelfVerification, SftConfig};
use verifine_train::metrics_log;

/// A run small enough for a unit test (a few seconds).
fn tiny_config() -> RunConfig {
    RunConfig {
        training: tiny_training(),
        ..RunConfig::default()
    }
}

/// The shared tiny run, with a periodic evaluation and checkpoints every
/// other step over three steps of each phase.
fn tiny_training() -> TrainConfig {
    let tiny = verifine_train::test_support::tiny_config();
    TrainConfig {
        train_problems: 200,
        heldout_problems: 10,
        eval_every: 2,
        model: ModelSize {
            max_seq_len: 160,
            ..tiny.model
        },
        sft: SftConfig {
            steps: 3,
            ..tiny.sft
        },
        grpo: GrpoPhase {
            steps: 3,
            ..tiny.grpo
        },
        checkpoints: CheckpointConfig { every: 2, keep: 10 },
        ..tiny
    }
}

fn scratch(name: &str) -> verifine_test_support::ScratchDir {
    verifine_test_support::scratch_path(&format!("train-{name}"))
}

#[test]
fn a_tiny_run_writes_its_outputs_and_logs_every_step() {
    let dir = scratch("outputs");
    let config = tiny_config();
    let summary = train(&config, &dir).unwrap();
    assert_eq!(summary.steps, 6);
    for file in [
        "config.toml",
        "tokenizer.json",
        "metrics.jsonl",
        "sft_selection.jsonl",
        "model.safetensors",
        "summary.json",
        "report.md",
        "plot.png",
    ] {
        assert!(dir.join(file).exists(), "{file} missing");
    }
    let lines = metrics_log::read(&dir.join("metrics.jsonl")).unwrap();
    let phases: Vec<&str> = lines.iter().map(|l| l["phase"].as_str().unwrap()).collect();
    // 3 SFT steps, eval after SFT, 3 GRPO steps with an eval after the
    // second, and the final eval.
    assert_eq!(
        phases,
        [
            "sft", "sft", "sft", "eval", "grpo", "grpo", "eval", "grpo", "eval"
        ]
    );
    let grpo_line = lines.iter().find(|l| l["phase"] == "grpo").unwrap();
    assert_eq!(
        grpo_line["plugins"][0]["name"], "math-answer",
        "{grpo_line}"
    );
    assert!(grpo_line["criteria"].is_object(), "{grpo_line}");
    assert!(summary.plugin_time_share < 1.0);
    // Checkpoints every 2 steps and at the end.
    let mut names: Vec<String> = std::fs::read_dir(dir.join("checkpoints"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["step-00000002", "step-00000004", "step-00000006"]);

    let again = train(&config, &dir).unwrap_err();
    assert!(format!("{again:#}").contains("--resume"), "{again:#}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn resuming_from_an_earlier_checkpoint_ends_with_the_same_weights() {
    let dir = scratch("resume");
    let mut config = tiny_config();
    config.training.grpo.objective.beta = 0.04;
    let first = train(&config, &dir).unwrap();
    let weights = std::fs::read(dir.join("model.safetensors")).unwrap();
    let metrics = std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    assert!(metrics.contains("\"kl\""), "beta > 0 logs the KL term");
    assert!(dir.join("reference.safetensors").exists());

    // Roll back to the checkpoint in the middle of GRPO (step 4) and
    // to the one in the middle of SFT (step 2).
    for back_to in [4, 2] {
        for later in (back_to + 1)..=6 {
            let _ = std::fs::remove_dir_all(dir.join(format!("checkpoints/step-{later:08}")));
        }
        let resumed = resume(&dir).unwrap();
        assert_eq!(resumed.resumed_from_step, Some(back_to));
        assert_eq!(
            std::fs::read(dir.join("model.safetensors")).unwrap(),
            weights,
            "resumed from step {back_to}"
        );
        assert_eq!(resumed.heldout_accuracy_final, first.heldout_accuracy_final);
        let strip = |text: &str| -> Vec<serde_json::Value> {
            text.lines()
                .map(|l| {
                    let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
                    // Timings, the only figures a resume may change.
                    let line = v.as_object_mut().unwrap();
                    line.remove("tokens_per_second");
                    line.remove("train_seconds");
                    v
                })
                .collect()
        };
        assert_eq!(
            strip(&std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap()),
            strip(&metrics)
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn self_verification_runs_report_turns_and_both_evaluation_modes() {
    let dir = scratch("svr");
    let mut config = tiny_config();
    config.training.self_verification = SelfVerification {
        enabled: true,
        max_turns: 2,
        ..SelfVerification::default()
    };
    config.training.model.max_seq_len = 200;
    let summary = train(&config, &dir).unwrap();
    let turns = summary.mean_turns.unwrap();
    assert!((1.0..=2.0).contains(&turns), "{turns}");
    assert!(summary.heldout_accuracy_fv_sft.is_some());
    assert!(summary.heldout_accuracy_fv_final.is_some());
    let lines = metrics_log::read(&dir.join("metrics.jsonl")).unwrap();
    let grpo = lines.iter().find(|l| l["phase"] == "grpo").unwrap();
    assert!(
        grpo["mean_turns"].is_number() && grpo["verdicts_no"].is_number(),
        "{grpo}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_sft_curriculum_drops_exactly_the_targets_the_judge_fails() {
    let dir = scratch("curriculum");
    let mut config = tiny_config();
    config.training.sft.noisy_target_share = 0.3;
    config.training.sft.curriculum = Some(PluginSetting::new("weakness-curriculum"));
    let summary = train(&config, &dir).unwrap();
    let items: Vec<verifine_train::sft_data::SftItem> =
        verifine_base::files::read_jsonl(&dir.join("sft_selection.jsonl")).unwrap();
    let noisy = items.iter().filter(|i| i.noisy).count();
    assert!(
        noisy > 30 && noisy < 90,
        "about 30% of 200 targets slipped: {noisy}"
    );
    for item in &items {
        assert_eq!(item.weight.is_none(), item.noisy, "{item:?}");
        // math-answer: 1 for the right answer, a small format credit
        // (< min_reference_score 0.5) for a well-formed wrong one.
        let score = item.judge_score.unwrap();
        assert!(
            if item.noisy {
                score < 0.5
            } else {
                score == 1.0
            },
            "{item:?}"
        );
    }
    assert_eq!(summary.sft_samples_kept, 200 - noisy);
    assert!(
        summary
            .plugins
            .iter()
            .any(|p| p.name == "weakness-curriculum")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_reference_free_reward_never_sees_the_reference_and_the_evaluator_does() {
    let dir = scratch("reference-free");
    let mut config = tiny_config();
    // math-answer needs a reference: as the reward, kept from it, every
    // answer's reward fails; as the evaluator it judges the held-out set.
    config.training.reward.reference_free = true;
    config.training.reward.evaluator = Some(PluginSetting::new("math-answer"));
    let summary = train(&config, &dir).unwrap();
    let lines = metrics_log::read(&dir.join("metrics.jsonl")).unwrap();
    let grpo: Vec<_> = lines.iter().filter(|l| l["phase"] == "grpo").collect();
    assert_eq!(grpo.len(), 3);
    let g = &config.training.grpo;
    for line in grpo {
        let rollouts = g.prompts_per_step * g.objective.num_generations;
        assert_eq!(line["reward_failures"], rollouts as u64, "{line}");
    }
    let answers: Vec<serde_json::Value> =
        verifine_base::files::read_jsonl(&dir.join("heldout_answers.jsonl")).unwrap();
    assert_eq!(answers.len(), config.training.heldout_problems);
    assert!(
        answers.iter().all(|a| a["evaluator_total"].is_number()),
        "the evaluator judged every held-out answer with its reference"
    );
    assert!(summary.plugins.iter().any(|p| p.name == "math-answer"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_reference_free_reward_is_written_in_the_reward_table() {
    let text = r#"
[reward]
rubric = { plugin = "healthbench", config = { judge = "verifier", batch = 1, answer = "yes-no" } }
evaluator = { plugin = "math-answer" }
reference_free = true
context = { rubrics = [{ criterion = "The final answer is right.", points = 1.0 }] }
"#;
    let reward = RunConfig::from_toml(text, "reward.toml")
        .unwrap()
        .training
        .reward;
    assert!(reward.reference_free);
    assert_eq!(reward.evaluator.unwrap().plugin.to_string(), "math-answer");
    let context = reward.context.unwrap();
    assert_eq!(context["rubrics"][0]["points"], 1.0);
    let typo = text.replace("reference_free", "reference_fre");
    let err = RunConfig::from_toml(&typo, "reward.toml").unwrap_err();
    assert!(format!("{err:#}").contains("reference_fre"), "{err:#}");
}

#[test]
fn a_fixed_context_reaches_the_rubric_and_the_canary() {
    let mut config = tiny_config();
    config.training.reward.context =
        Some(serde_json::json!({"rubrics": [{"criterion": "x", "points": 1.0}]}));
    let cases = canary_cases(&config).unwrap();
    assert!(!cases.is_empty());
    assert!(
        cases
            .iter()
            .all(|c| c.sample.context == r#"{"rubrics":[{"criterion":"x","points":1.0}]}"#)
    );
    assert!(cases.iter().all(|c| c.sample.reference.is_some()));
    config.training.reward.reference_free = true;
    assert!(
        canary_cases(&config)
            .unwrap()
            .iter()
            .all(|c| c.sample.reference.is_none())
    );
}

#[test]
fn bf16_compute_trains_the_f32_master_weights() {
    let dir = scratch("bf16");
    let mut config = tiny_config();
    config.training.model.compute_dtype = verifine_train::model::ComputeDType::Bf16;
    config.training.grpo.steps = 1;
    let summary = train(&config, &dir).unwrap();
    assert_eq!(summary.steps, 4);
    let lines = metrics_log::read(&dir.join("metrics.jsonl")).unwrap();
    let losses: Vec<f64> = lines
        .iter()
        .filter(|l| l["phase"] == "sft")
        .map(|l| l["loss"].as_f64().unwrap())
        .collect();
    assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
