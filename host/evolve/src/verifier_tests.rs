//! A judge revision that retrains the judge's model: the built-in agent of
//! a verifier judge fine-tunes the live model on the accumulated labels,
//! the revision carries the new checkpoint and keeps the rules, the judge
//! then asks that checkpoint (the rubric's code is not rebuilt), and the
//! same accept rule decides. Labels that cannot teach a verifier propose
//! nothing (a config that cannot retrain is refused: `config.rs`).

use super::{RetrainConfig, VerifierAgent};
use crate::agent::{RevisionAgent, RevisionRequest};
use crate::calibration::{CalibrationConfig, Hooks, LabelledSet, calibrate};
use crate::cases::Case;
use crate::judge::{Judge, JudgeRevision};
use crate::testing::{label, scratch};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use verifine_judge::{BackendConfig, JudgeConfig, JudgesConfig, LocalConfig, PromptTemplate};
use verifine_runtime::scorer_pool::score_all;
use verifine_runtime::{Runtime, Sample};

const ITEM: &str = "The response's final answer is the correct answer to the problem.";

fn judges(model: &Path) -> JudgesConfig {
    let backend = BackendConfig::LocalSafetensors(LocalConfig {
        path: model.to_path_buf(),
        template: PromptTemplate::Model,
        cuda: false,
        prefix_cache_prompts: 0,
        weight_products: Default::default(),
    });
    JudgesConfig {
        judges: [(
            "verifier".to_string(),
            JudgeConfig {
                backend,
                price: Default::default(),
                budget: Default::default(),
            },
        )]
        .into(),
        cache_dir: None,
    }
}

/// `healthbench` asking the tiny model one YES/NO item about each case.
fn verifier_judge(model: &Path, dir: &Path) -> Judge {
    let config = judges(model);
    let runtime = Runtime::new(Default::default())
        .unwrap()
        .with_judges(Arc::new(verifine_judge::Judges::new(&config).unwrap()));
    Judge::load(runtime, &"healthbench".into(), 1, &dir.join("judge"))
        .unwrap()
        .with_context(Some(
            &json!({"rubrics": [{"criterion": ITEM, "points": 1.0}]}),
        ))
        .retraining(config, "verifier")
        .unwrap()
}

fn initial() -> JudgeRevision {
    JudgeRevision::initial(json!({"judge": "verifier", "batch": 1, "answer": "yes-no"}))
}

/// `questions` questions, a right (label 1) and a wrong (label 0) answer
/// to each; the newest batch is the last third.
fn labelled(questions: usize, right: impl Fn(usize) -> bool) -> LabelledSet {
    let mut set = LabelledSet::default();
    for q in 0..questions {
        for (answer, correct) in [(q + 2, right(q)), (q + 3, !right(q))] {
            let i = set.cases.len();
            set.cases.push(Case {
                id: format!("c{i}"),
                scenario: "s".into(),
                prompt: format!("What is {q} + 2?"),
                response: format!("{q} + 2 = {answer}\n#### {answer}"),
                reference: format!("#### {}", q + 2),
            });
            set.labels.push(label(i, if correct { 1.0 } else { 0.0 }));
            if q * 3 >= questions * 2 {
                set.current.push(i)
            } else {
                set.earlier.push(i)
            }
        }
    }
    set
}

/// Each case's verdict confidence under `revision`.
fn confidences(judge: &Judge, revision: &JudgeRevision, cases: &[Case]) -> Vec<Option<f64>> {
    let samples: Vec<Sample> = cases
        .iter()
        .map(|c| {
            let mut sample = Sample::new(&c.id, &c.prompt, &c.response);
            sample.context = json!({"rubrics": [{"criterion": ITEM, "points": 1.0}]}).to_string();
            sample
        })
        .collect();
    score_all(&judge.plugins(revision).unwrap(), &samples, 8, 1, &|_| {})
        .unwrap()
        .into_iter()
        .map(|s| s.judgment.unwrap().verdicts[0].confidence)
        .collect()
}

/// What the judge loop hands the agent: the live revision and every label.
fn request<'a>(live: &'a JudgeRevision, set: &'a LabelledSet) -> RevisionRequest<'a> {
    RevisionRequest {
        live,
        disputed: &[],
        clarifications: &[],
        tried: &[],
        cases: &set.cases,
        labels: &set.labels,
    }
}

fn retrain() -> RetrainConfig {
    RetrainConfig {
        steps: 30,
        batch_size: 4,
        learning_rate: 1e-2,
        warmup_steps: 2,
        lora_r: 4,
        max_seq_len: 2048,
        ..RetrainConfig::default()
    }
}

#[test]
fn a_verifier_revision_retrains_the_model_and_the_judge_asks_the_new_checkpoint() {
    let dir = scratch("verifier-revision");
    let model = dir.join("base");
    verifine_train::test_support::write_tiny_checkpoint(&model, 0.0).unwrap();
    let judge = verifier_judge(&model, &dir);
    let set = labelled(8, |_| true);
    let live = initial();
    let before = judge.score(&live, &set.cases).unwrap();
    assert!(
        before.iter().all(|s| s.error.is_none()),
        "the configured model answers: {:?}",
        before[0]
    );
    let config = RetrainConfig {
        compare_heldout: false,
        ..retrain()
    };
    let out = dir.join("retrained");
    let mut agent = VerifierAgent::new(&config, &judge, out.clone(), 3);
    let request = request(&live, &set);
    let proposal = agent.propose(&request).unwrap().expect("a retraining");
    // The rules stay; the checkpoint is new and was trained on every label.
    assert_eq!(proposal.rules, live.rules);
    assert_eq!(proposal.verifier.as_deref(), Some(out.join("hf").as_path()));
    assert!(out.join("hf/model.safetensors").is_file());
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(
        report["train_examples"].as_u64().unwrap() + report["heldout_examples"].as_u64().unwrap(),
        16
    );
    assert!(
        proposal.rationale.contains("held-out"),
        "{}",
        proposal.rationale
    );
    // One retraining per judge loop.
    assert_eq!(agent.propose(&request).unwrap(), None);

    // The judge under the candidate asks the retrained checkpoint.
    let candidate = JudgeRevision {
        number: 1,
        verifier: proposal.verifier.clone(),
        ..live.clone()
    };
    let after = judge.score(&candidate, &set.cases).unwrap();
    assert!(after.iter().all(|s| s.error.is_none()), "{:?}", after[0]);
    // Verdicts are YES or NO; the retrained model's confidence in them (the
    // model's probability of its answer) is its own.
    assert_ne!(
        confidences(&judge, &live, &set.cases),
        confidences(&judge, &candidate, &set.cases),
        "the retrained model answers with other probabilities"
    );
    // A loop that resumes reuses the finished retraining.
    let mut again = VerifierAgent::new(&config, &judge, out.clone(), 3);
    assert_eq!(again.propose(&request).unwrap().unwrap(), proposal);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn calibration_logs_the_retrained_checkpoint_and_only_a_held_out_win_is_proposed() {
    let dir = scratch("verifier-calibration");
    let model = dir.join("base");
    verifine_train::test_support::write_tiny_checkpoint(&model, 0.0).unwrap();
    let judge = verifier_judge(&model, &dir);
    let set = labelled(9, |q| q % 2 == 0);
    let config = retrain();
    let mut agent = VerifierAgent::new(&config, &judge, dir.join("round-1"), 5);
    let mut logged = Vec::new();
    let outcome = calibrate(
        &CalibrationConfig::default(),
        1,
        &set,
        initial(),
        1,
        &[],
        &mut agent,
        &[],
        Hooks {
            score: &mut |revision| judge.score(revision, &set.cases),
            admit: &mut |_, _| unreachable!("a retraining hands in no code"),
            log: &mut |entry, _, _| {
                logged.push(entry.clone());
                Ok(())
            },
        },
    )
    .unwrap();
    // At most one proposal; when made, it names the checkpoint and held
    // out no worse than the live model.
    assert!(logged.len() <= 1, "{logged:?}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("round-1/report.json")).unwrap())
            .unwrap();
    let (before, after) = (
        report["before"]["balanced_accuracy"].as_f64().unwrap(),
        report["after"]["balanced_accuracy"].as_f64().unwrap(),
    );
    match logged.first() {
        Some(entry) => {
            assert!(after >= before && after > 0.5, "{before} -> {after}");
            assert_eq!(entry.verifier, Some(dir.join("round-1/hf")));
            assert_eq!(
                outcome.live.verifier.is_some(),
                entry.revision.is_some(),
                "an accepted retraining makes its checkpoint live"
            );
        }
        None => assert!(
            after < before || after <= 0.5,
            "{before} -> {after}: not proposed"
        ),
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn labels_of_one_verdict_propose_nothing_and_an_unknown_judge_is_refused() {
    let dir = scratch("verifier-refusals");
    let model = dir.join("base");
    verifine_train::test_support::write_tiny_checkpoint(&model, 0.0).unwrap();
    let judge = verifier_judge(&model, &dir);
    let mut set = labelled(4, |_| true);
    for l in &mut set.labels {
        l.total = 1.0;
    }
    let config = retrain();
    let live = initial();
    let mut agent = VerifierAgent::new(&config, &judge, dir.join("one-class"), 0);
    let request = request(&live, &set);
    assert_eq!(agent.propose(&request).unwrap(), None);
    assert!(!dir.join("one-class/hf").exists(), "nothing was trained");

    // A judges-file name that is not there, or a judge that is not local.
    let err = Judge::load(
        Runtime::new(Default::default()).unwrap(),
        &"healthbench".into(),
        1,
        &dir.join("judge"),
    )
    .unwrap()
    .retraining(judges(&model), "golden")
    .err()
    .unwrap();
    assert!(err.to_string().contains("\"verifier\""), "{err}");

    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_correctness_verifier_learns_the_labels_correctness_not_their_overall_score() {
    // A wrong answer whose steps compute: the overall mean passes, the
    // correctness dimension does not.
    let mut careful_but_wrong = label(0, 0.61);
    careful_but_wrong.dimensions = [
        ("grounded".to_string(), 0.33),
        ("valid".to_string(), 1.0),
        ("complete".to_string(), 0.5),
    ]
    .into();
    let overall = RetrainConfig::default();
    assert!(overall.met(&careful_but_wrong).unwrap());
    let correctness = RetrainConfig {
        met_dimension: Some("complete".into()),
        met_at: 1.0,
        ..RetrainConfig::default()
    };
    assert!(!correctness.met(&careful_but_wrong).unwrap());
    careful_but_wrong.dimensions.insert("complete".into(), 1.0);
    assert!(correctness.met(&careful_but_wrong).unwrap());

    // A label without the dimension is named, with what it has.
    let err = correctness.met(&label(7, 1.0)).unwrap_err().to_string();
    assert!(
        err.contains("c7") && err.contains("\"complete\"") && err.contains("grounded"),
        "{err}"
    );
}

#[test]
fn a_retraining_that_answers_one_verdict_to_everything_is_not_proposed() {
    // The report of a real retraining (SmolLM2 on 25 labels, 2 of them met):
    // better than the live model on its held-out questions, but only by
    // answering NO to all of them, gold answers included.
    let dir = scratch("verifier-constant");
    let model = dir.join("base");
    verifine_train::test_support::write_tiny_checkpoint(&model, 0.0).unwrap();
    let judge = verifier_judge(&model, &dir);
    let metrics = |accuracy: f64, balanced: f64, yes_recall: f64| {
        json!({"examples": 9, "base_rate": 0.222, "majority_accuracy": 0.778,
               "accuracy": accuracy, "balanced_accuracy": balanced,
               "yes": {"precision": null, "recall": yes_recall},
               "no": {"precision": 0.778, "recall": 1.0},
               "ece": 0.22, "mean_p_yes": 0.0001, "auc": 0.786})
    };
    let report = json!({"from": "r0", "repeats": 0, "train_examples": 25, "train_met": 2,
        "heldout_examples": 9, "balance": "weighted", "steps": 40, "train_seconds": 217.6,
        "loss_first": 0.556, "loss_last": 0.064,
        "before": metrics(0.333, 0.214, 0.0), "after": metrics(0.778, 0.5, 0.0)});
    std::fs::create_dir_all(dir.join("round-1")).unwrap();
    std::fs::write(dir.join("round-1/report.json"), report.to_string()).unwrap();
    let set = labelled(4, |q| q == 0);
    let config = retrain();
    let live = initial();
    let mut agent = VerifierAgent::new(&config, &judge, dir.join("round-1"), 0);
    let request = request(&live, &set);
    assert_eq!(agent.propose(&request).unwrap(), None);
    std::fs::remove_dir_all(&dir).unwrap();
}
