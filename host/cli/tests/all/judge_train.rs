//! `verifine judge train` end to end on a tiny random checkpoint: the loss
//! falls, the checkpoint it writes loads as a local judge that gives the
//! verdict confidence training measured for the same row (so the judge is
//! asked exactly what the verifier learnt), and labels that cannot teach a
//! verifier are refused with where they are.

use std::path::{Path, PathBuf};
use verifine::commands::judge::labelled::{self, LabelFormat};
use verifine::commands::judge::train::{Balance, TrainArgs, train};
use verifine_judge::config::{LocalConfig, PromptTemplate};
use verifine_judge::local::LocalBackend;
use verifine_train::verifier::HeldoutVerdict;

fn scratch(name: &str) -> verifine_test_support::ScratchDir {
    verifine_test_support::scratch_dir(&format!("judge-train-{name}"))
}

/// Answer rows (a run's `heldout_answers.jsonl` layout): `questions`
/// questions, a right and a wrong answer to each.
fn write_answers(path: &Path, questions: usize) {
    let rows: Vec<String> = (0..questions)
        .flat_map(|q| {
            let prompt = format!("What is {q} + 2?");
            [(q + 2, true), (q + 3, false)].map(|(answer, correct)| {
                serde_json::json!({
                    "prompt": prompt,
                    "response": format!("{q} + 2 = {answer}\n#### {answer}"),
                    "reference": format!("#### {}", q + 2),
                    "correct": correct,
                })
                .to_string()
            })
        })
        .collect();
    std::fs::write(path, rows.join("\n") + "\n").unwrap();
}

fn args(base: &Path, labels: &Path, run_dir: &Path) -> TrainArgs {
    TrainArgs {
        model: base.to_path_buf(),
        labels: vec![labels.to_path_buf()],
        format: LabelFormat::Answers,
        rubric: "healthbench".into(),
        reference_guided: false,
        run_dir: run_dir.to_path_buf(),
        overwrite: false,
        steps: 30,
        batch_size: 4,
        learning_rate: 1e-2,
        warmup_steps: None,
        lora_r: 4,
        freeze_layers: 0,
        balance: Balance::Weighted,
        heldout_share: 0.25,
        max_seq_len: 2048,
        max_seconds: None,
        max_rows: None,
        seed: 3,
    }
}

fn judge(path: PathBuf) -> LocalBackend {
    LocalBackend::from_safetensors(&LocalConfig {
        path,
        template: PromptTemplate::Model,
        cuda: false,
        prefix_cache_prompts: 0,
        weight_products: Default::default(),
    })
    .unwrap()
}

#[test]
fn a_verifier_trains_and_its_checkpoint_judges_as_training_measured() {
    let dir = scratch("end-to-end");
    let base = dir.join("base");
    verifine_train::test_support::write_tiny_checkpoint(&base, 0.0).unwrap();
    let labels = dir.join("answers.jsonl");
    write_answers(&labels, 8);
    // A repeated row counts once.
    let text = std::fs::read_to_string(&labels).unwrap();
    let first = text.lines().next().unwrap().to_string();
    std::fs::write(&labels, format!("{text}{first}\n")).unwrap();
    let run_dir = dir.join("run");
    let frozen_below = TrainArgs {
        freeze_layers: 1,
        ..args(&base, &labels, &run_dir)
    };
    let report = train(&frozen_below).unwrap();
    assert_eq!(report.repeats, 1);
    assert_eq!(report.train_examples + report.heldout_examples, 16);
    assert_eq!(report.heldout_examples, 4, "2 of 8 questions, both answers");
    assert_eq!(report.steps, 30);
    let (first, last) = (report.loss_first.unwrap(), report.loss_last.unwrap());
    assert!(last < 0.5 * first, "the loss falls: {first} -> {last}");
    let after = report.after.as_ref().unwrap();
    assert_eq!(after.base_rate, 0.5);
    for file in [
        "report.json",
        "report.md",
        "metrics.jsonl",
        "hf/model.safetensors",
    ] {
        assert!(run_dir.join(file).is_file(), "{file}");
    }
    // The checkpoint, loaded as a judge, asked a held-out row through the
    // rubric, gives the P(YES) training measured for it.
    let verdicts: Vec<HeldoutVerdict> =
        verifine_base::read_jsonl(&run_dir.join("heldout_verdicts.jsonl")).unwrap();
    let rows = labelled::read(&labels, LabelFormat::Answers).unwrap();
    let row = rows
        .iter()
        .position(|r| r.source == verdicts[0].source)
        .unwrap();
    let queries = labelled::queries(&rows[row..=row], &"healthbench".into(), false).unwrap();
    let local = judge(run_dir.join("hf"));
    let answer = local.exchange_all(&[&queries[0]]).remove(0).answer.unwrap();
    let p_yes = answer.logprobs[0]
        .top
        .iter()
        .find(|(text, _)| text == "YES")
        .map(|(_, lp)| lp.exp())
        .unwrap();
    assert!(
        (p_yes - verdicts[0].p_yes).abs() < 1e-3,
        "judge {p_yes} vs training {}",
        verdicts[0].p_yes
    );
    // Frozen blocks must leave one to train.
    let all_frozen = TrainArgs {
        freeze_layers: 2,
        ..args(&base, &labels, &dir.join("all-frozen"))
    };
    let err = train(&all_frozen).unwrap_err();
    assert!(format!("{err:#}").contains("nothing trains"), "{err:#}");
    // A second run into the same directory needs --overwrite.
    let err = train(&args(&base, &labels, &run_dir)).unwrap_err();
    assert!(err.to_string().contains("--overwrite"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn labels_that_cannot_teach_a_verifier_are_refused_with_where_they_are() {
    let dir = scratch("refusals");
    let base = dir.join("base");
    verifine_train::test_support::write_tiny_checkpoint(&base, 0.0).unwrap();
    // One class only.
    let labels = dir.join("all-right.jsonl");
    let right: Vec<String> = (0..6)
        .map(|q| {
            serde_json::json!({"prompt": format!("q{q}"), "response": "a", "correct": true})
                .to_string()
        })
        .collect();
    std::fs::write(&labels, right.join("\n")).unwrap();
    let err = train(&args(&base, &labels, &dir.join("one-class"))).unwrap_err();
    assert!(format!("{err:#}").contains("one class only"), "{err:#}");
    // A row without its label: named by file and line.
    let broken = dir.join("broken.jsonl");
    std::fs::write(
        &broken,
        "{\"prompt\": \"q\", \"response\": \"a\", \"correct\": true}\n\n{\"prompt\": \"q2\", \"response\": \"b\"}\n",
    )
    .unwrap();
    let err = train(&args(&base, &broken, &dir.join("broken"))).unwrap_err();
    let text = format!("{err:#}");
    assert!(text.contains("broken.jsonl:3"), "{text}");
    assert!(text.contains("correct"), "{text}");
    // A model that does not exist is named.
    let err = train(&args(&dir.join("nowhere"), &labels, &dir.join("none"))).unwrap_err();
    assert!(format!("{err:#}").contains("nowhere"), "{err:#}");
    std::fs::remove_dir_all(&dir).unwrap();
}
