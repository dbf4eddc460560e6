//! `verifine judge distill` on the shared GSM8K solutions: a teacher
//! (`math-answer`, which checks the final answer against the reference)
//! labels each solution's `format` and `correct`; a student learns both
//! from the text alone, is reported against held-out labels, and then
//! answers a row-rubric plugin's queries as a judge backend.
#![cfg(feature = "local-judge")]

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use verifine::commands::judge::distill::{DistillArgs, distill};
use verifine::commands::score::{ScoreArgs, score};

fn scratch(name: &str) -> verifine_test_support::ScratchDir {
    verifine_test_support::scratch_dir(&format!("distill-{name}"))
}

const ITEM: &str = "The final answer is correct.";

/// The first `questions` GSM8K questions × 4 models' solutions as score
/// rows (with the reference, for the teacher) and as row-rubric rows (the
/// item the student backend will be asked about, with the label).
fn gsm8k_rows(dir: &Path, questions: usize) -> (PathBuf, PathBuf) {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data/gsm8k/model_solutions.jsonl");
    let text = std::fs::read_to_string(shared).unwrap();
    let (mut plain, mut rubric) = (String::new(), String::new());
    for (q, line) in text.lines().take(questions).enumerate() {
        let row: Value = serde_json::from_str(line).unwrap();
        for model in [
            "6b_finetuning",
            "6b_verification",
            "175b_finetuning",
            "175b_verification",
        ] {
            let id = format!("{q}-{model}");
            let solution = &row[model]["solution"];
            plain += &format!(
                "{}\n",
                json!({"id": id, "prompt": row["question"], "response": solution, "reference": row["ground_truth"]})
            );
            rubric += &format!(
                "{}\n",
                json!({"id": id, "prompt": row["question"], "response": solution,
                       "context": {"rubrics": [{"criterion": ITEM, "points": 1,
                                   "met": row[model]["is_correct"]}]}})
            );
        }
    }
    let (a, b) = (dir.join("rows.jsonl"), dir.join("rubric-rows.jsonl"));
    std::fs::write(&a, plain).unwrap();
    std::fs::write(&b, rubric).unwrap();
    (a, b)
}

fn args(dir: &Path, rows: PathBuf, teacher: PathBuf) -> DistillArgs {
    DistillArgs {
        rows,
        teacher,
        teacher_summary: None,
        rubric: None,
        gate: None,
        aggregator: "weighted-sum".into(),
        heldout: 0.25,
        epochs: 30,
        hidden: 32,
        buckets: 2048,
        learning_rate: 0.01,
        seed: 0,
        run_dir: dir.join("student"),
    }
}

#[test]
fn a_student_learns_from_a_teacher_and_reports_against_held_out_labels() {
    let dir = scratch("math");
    let (rows, _) = gsm8k_rows(&dir, 150);
    let teacher = dir.join("teacher.jsonl");
    let summary_path = dir.join("teacher-summary.json");
    let teacher_run = score(&ScoreArgs {
        rubric: Some("math-answer".into()),
        input: rows.clone(),
        output: teacher.clone(),
        ..ScoreArgs::default()
    })
    .unwrap();
    std::fs::write(&summary_path, serde_json::to_string(&teacher_run).unwrap()).unwrap();
    let mut a = args(&dir, rows, teacher);
    a.rubric = Some("math-answer".into());
    a.gate = Some("format".into());
    a.teacher_summary = Some(summary_path);
    let summary = distill(&a).unwrap();
    assert_eq!(summary.train_pairs + summary.heldout_pairs, 600);
    assert!(summary.heldout_pairs > 100 && summary.heldout_pairs < 200);
    let ids: Vec<&str> = summary.criteria.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["format", "correct"]);
    // `format` is readable from the text: the student beats the majority.
    let format = &summary.criteria[0];
    let baseline = format.heldout_met_share.map(|m| m.max(1.0 - m)).unwrap();
    assert!(format.heldout_accuracy.unwrap() >= baseline, "{format:?}");
    // Totals come from the aggregator for every held-out row.
    assert_eq!(summary.compared_totals, summary.heldout_pairs);
    assert!(summary.mae.unwrap() >= 0.0 && summary.pearson.is_some());
    assert!(summary.losses.last() < summary.losses.first());
    // The teacher ran no judge model: no latency to compare with.
    assert!(summary.teacher_seconds_per_sample.is_none());
    for file in [
        "student.json",
        "student.safetensors",
        "report.md",
        "summary.json",
    ] {
        assert!(dir.join("student").join(file).is_file(), "{file}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_distilled_student_is_a_judge_backend_for_row_rubrics() {
    let dir = scratch("backend");
    let (_, rubric_rows) = gsm8k_rows(&dir, 60);
    // The teacher: the labels, through `healthbench` (pre-judged verdicts).
    let teacher = dir.join("teacher.jsonl");
    score(&ScoreArgs {
        rubric: Some("healthbench".into()),
        input: rubric_rows.clone(),
        output: teacher.clone(),
        ..ScoreArgs::default()
    })
    .unwrap();
    let summary = distill(&args(&dir, rubric_rows.clone(), teacher)).unwrap();
    assert_eq!(summary.criteria.len(), 1);
    assert_eq!(
        summary.criteria[0].text, ITEM,
        "row criteria are known by their text"
    );

    // The same rows without labels, judged by the student.
    let unlabelled: String = std::fs::read_to_string(&rubric_rows)
        .unwrap()
        .lines()
        .map(|l| {
            let mut row: Value = serde_json::from_str(l).unwrap();
            row["context"]["rubrics"][0]
                .as_object_mut()
                .unwrap()
                .remove("met");
            format!("{row}\n")
        })
        .collect();
    std::fs::write(dir.join("unlabelled.jsonl"), unlabelled).unwrap();
    std::fs::write(
        dir.join("judges.toml"),
        "[judges.judge]\nbackend = { kind = \"student\", path = \"student\" }\n",
    )
    .unwrap();
    for answer in ["json", "yes-no"] {
        std::fs::write(
            dir.join("score.toml"),
            format!("[rubric]\nplugin = \"healthbench\"\nconfig = {{ answer = \"{answer}\" }}\n"),
        )
        .unwrap();
        let out = dir.join(format!("student-{answer}.jsonl"));
        let scored = score(&ScoreArgs {
            config: Some(dir.join("score.toml")),
            input: dir.join("unlabelled.jsonl"),
            output: out,
            judges: Some(dir.join("judges.toml")),
            ..ScoreArgs::default()
        })
        .unwrap();
        assert_eq!(scored.errors, 0, "{answer}: {scored}");
        assert_eq!(scored.judges["judge"].total.calls, 240);
    }
    // An item the student never saw fails the sample, naming the item.
    let other = std::fs::read_to_string(dir.join("unlabelled.jsonl"))
        .unwrap()
        .replace(ITEM, "Mentions a unit.");
    std::fs::write(dir.join("other.jsonl"), other).unwrap();
    let scored = score(&ScoreArgs {
        config: Some(dir.join("score.toml")),
        input: dir.join("other.jsonl"),
        output: dir.join("other-out.jsonl"),
        judges: Some(dir.join("judges.toml")),
        ..ScoreArgs::default()
    })
    .unwrap();
    assert_eq!(scored.errors, 240);
    let first = std::fs::read_to_string(dir.join("other-out.jsonl")).unwrap();
    assert!(
        first.contains("not trained on the item"),
        "{}",
        &first[..300]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
