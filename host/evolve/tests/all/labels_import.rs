//! `verifine labels import` trusts nothing in the filled-in file: every row
//! is checked against the run's own record of what it asked (its
//! `judge/batch-*.jsonl`), a refused row names `file:line` and why, and a
//! refused file stores nothing — after which the honest file of the same
//! batch is accepted.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use verifine_base::FileError;
use verifine_evolve::labels::{
    ImportSummary, JudgeView, LabelStore, MAX_NOTE_CHARS, QueryReason, QueueItem,
};
use verifine_evolve::queue;
use verifine_evolve::{Case, EvolveError};

const ANNOTATOR: &str = "human";

/// A run whose judge loops asked about four cases: three the judge scored
/// (loop 1) and one whose judging failed, so it has no scores (loop 2).
/// `human` has already labelled the first and clarified a criterion on it.
struct Run {
    dir: PathBuf,
    file: PathBuf,
}

fn item(id: &str, dimensions: Value, explanation: &str) -> QueueItem {
    let dimensions = serde_json::from_value(dimensions).unwrap();
    QueueItem {
        case: Case {
            id: id.into(),
            scenario: "story-2".into(),
            prompt: "Ann has 3 coins and finds 1.".into(),
            response: "3 + 1 = 4\n#### 4".into(),
            reference: "3 + 1 = 4\n#### 4".into(),
        },
        reason: QueryReason::Uncertain,
        judge: JudgeView {
            revision: 0,
            total: 0.7,
            dimensions,
            explanation: explanation.into(),
        },
        label: None,
    }
}

impl Run {
    fn new(name: &str) -> Run {
        let dir = std::env::temp_dir().join(format!(
            "verifine-labels-import-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let scored = json!({"complete": 1.0, "grounded": 0.25, "valid": 1.0});
        let first: Vec<QueueItem> = (0..3)
            .map(|i| item(&format!("j1-a{i}-0"), scored.clone(), "checks ran"))
            .collect();
        let failed = vec![item("j2-f0-0", json!({}), "the judge plugin trapped")];
        verifine_base::write_jsonl(&dir.join("judge/batch-1.jsonl"), &first).unwrap();
        verifine_base::write_jsonl(&dir.join("judge/batch-2.jsonl"), &failed).unwrap();
        let run = Run {
            file: dir.join("to-label.jsonl"),
            dir,
        };
        let mut earlier = run.queue()[0].clone();
        earlier["label"] = json!({"action": "clarify", "criterion": "grounded", "note": "steps must use the problem's numbers"});
        let summary = run.import(&[earlier]).expect("the first label is accepted");
        assert_eq!((summary.labelled, summary.clarified), (1, 1));
        run
    }

    /// The pending queue as export writes it, one JSON value per row.
    fn queue(&self) -> Vec<Value> {
        queue::export(&self.dir, ANNOTATOR, &self.file).unwrap();
        verifine_base::read_jsonl(&self.file).unwrap()
    }

    /// The pending queue (j1-a1, j1-a2, j2-f0) honestly labelled.
    fn honest(&self) -> Vec<Value> {
        let mut rows = self.queue();
        assert_eq!(rows.len(), 3);
        rows[0]["label"] = json!({"action": "confirm"});
        rows[1]["label"] = json!({"action": "change", "dimension": "grounded", "score": 1.0});
        rows[2]["label"] = json!({"action": "score", "dimensions": {"complete": 0.0, "grounded": 0.5, "valid": 0.5}});
        rows
    }

    fn write(&self, rows: &[Value]) {
        let text: Vec<String> = rows.iter().map(Value::to_string).collect();
        std::fs::write(&self.file, text.join("\n") + "\n").unwrap();
    }

    fn import(&self, rows: &[Value]) -> Result<ImportSummary, EvolveError> {
        self.write(rows);
        queue::import(&self.dir, &self.file, ANNOTATOR)
    }

    /// The bytes of everything import may write.
    fn stored(&self) -> [Option<Vec<u8>>; 2] {
        ["labels.jsonl", "clarifications.jsonl"]
            .map(|f| std::fs::read(self.dir.join("judge").join(f)).ok())
    }

    /// Importing `rows` fails at `line` of the file for a reason that says
    /// `why`, stores nothing, and the honest file is accepted afterwards.
    fn refuses(&self, rows: &[Value], line: usize, why: &str) {
        let before = self.stored();
        let err = self.import(rows).expect_err("a hostile file is refused");
        assert_refused_at(&err, &self.file, line, why);
        assert_eq!(self.stored(), before, "a refused file stores nothing");
        self.accepts_the_honest_file();
    }

    fn accepts_the_honest_file(&self) {
        let summary = self
            .import(&self.honest())
            .expect("the honest file is accepted");
        assert_eq!((summary.labelled, summary.unlabelled), (3, 0));
        let store = LabelStore::load(&self.dir.join("judge/labels.jsonl")).unwrap();
        let latest = store.latest(ANNOTATOR);
        assert_eq!(latest.len(), 4);
        assert_eq!(
            latest["j1-a1-0"].dimensions["grounded"], 0.25,
            "confirm keeps the run's judge scores"
        );
        assert_eq!(latest["j1-a2-0"].dimensions["grounded"], 1.0);
        assert_eq!(latest["j2-f0-0"].dimensions["valid"], 0.5);
        std::fs::remove_dir_all(&self.dir).unwrap();
    }
}

fn assert_refused_at(err: &EvolveError, file: &Path, line: usize, why: &str) {
    match err {
        EvolveError::File(FileError::Line {
            path,
            line: at,
            message,
        }) => {
            assert_eq!((path.as_path(), *at), (file, line), "{err}");
            assert!(message.contains(why), "expected {why:?} in: {err}");
        }
        other => panic!("expected a file:line refusal, got: {other}"),
    }
    let shown = format!("{}:{line}: ", file.display());
    assert!(err.to_string().starts_with(&shown), "{err}");
}

/// The honest rows with `edit` applied to row `index`.
fn with(run: &Run, index: usize, edit: impl FnOnce(&mut Value)) -> Vec<Value> {
    let mut rows = run.honest();
    edit(&mut rows[index]);
    rows
}

#[test]
fn a_confirm_confirms_the_runs_judge_view_not_the_files() {
    let run = Run::new("forged-confirm");
    // Empty dimensions in the file's judge view: not a confirmation.
    run.refuses(
        &with(&run, 0, |r| r["judge"]["dimensions"] = json!({})),
        1,
        "judge view",
    );
    let run = Run::new("forged-view");
    // A judge view that gives the case full marks, confirmed.
    run.refuses(
        &with(&run, 1, |r| {
            r["judge"]["dimensions"]["grounded"] = json!(1.0);
            r["label"] = json!({"action": "confirm"});
        }),
        2,
        "not the one the run recorded",
    );
    // The judge gave the failed case nothing to confirm or change.
    let run = Run::new("confirm-failed");
    run.refuses(
        &with(&run, 2, |r| r["label"] = json!({"action": "confirm"})),
        3,
        "nothing to confirm",
    );
    let run = Run::new("change-failed");
    run.refuses(
        &with(
            &run,
            2,
            |r| r["label"] = json!({"action": "change", "dimension": "valid", "score": 1.0}),
        ),
        3,
        "judging failed",
    );
}

#[test]
fn a_case_the_run_did_not_ask_about_is_refused() {
    let run = Run::new("unknown-id");
    run.refuses(
        &with(&run, 1, |r| r["case"]["id"] = json!("j9-z0-0")),
        2,
        "not one this run asked about",
    );
}

#[test]
fn the_same_case_twice_is_refused_naming_both_lines() {
    let run = Run::new("duplicate");
    let mut rows = run.honest();
    let mut again = rows[0].clone();
    again["label"] = json!({"action": "change", "dimension": "valid", "score": 0.0});
    rows.push(again);
    run.refuses(&rows, 4, "appears twice in the file: lines 1 and 4");
}

/// Where a field is smuggled in, how, and what the refusal says.
type Forgery = (&'static str, fn(&mut Value), &'static str);

#[test]
fn unknown_fields_are_refused_wherever_they_stand() {
    let forgeries: [Forgery; 6] = [
        (
            "row",
            |r| r["annotator"] = json!("simulated"),
            "unknown field `annotator`",
        ),
        (
            "case",
            |r| r["case"]["weight"] = json!(9),
            "unknown field `weight`",
        ),
        (
            "judge",
            |r| r["judge"]["trusted"] = json!(true),
            "unknown field `trusted`",
        ),
        (
            "confirm",
            |r| r["label"]["dimensions"] = json!({}),
            "unknown field `dimensions`",
        ),
        (
            "change",
            |r| r["label"]["revision"] = json!(7),
            "unknown field `revision`",
        ),
        (
            "action",
            |r| r["label"] = json!({"action": "approve"}),
            "unknown variant `approve`",
        ),
    ];
    for (name, forge, why) in forgeries {
        let run = Run::new(&format!("unknown-field-{name}"));
        let index = if name == "change" { 1 } else { 0 };
        run.refuses(&with(&run, index, forge), index + 1, why);
    }
}

#[test]
fn scores_outside_zero_to_one_are_refused() {
    let run = Run::new("change-range");
    run.refuses(
        &with(&run, 1, |r| r["label"]["score"] = json!(1.5)),
        2,
        "outside [0, 1]",
    );
    let run = Run::new("score-range");
    run.refuses(
        &with(&run, 2, |r| r["label"]["dimensions"]["valid"] = json!(-0.1)),
        3,
        "outside [0, 1]",
    );
    // Beyond a double (JSON has no NaN or infinity to send instead).
    let run = Run::new("score-huge");
    run.write(&run.honest());
    let text = std::fs::read_to_string(&run.file)
        .unwrap()
        .replacen("0.5", "1e999", 1);
    std::fs::write(&run.file, text).unwrap();
    let before = run.stored();
    let err = queue::import(&run.dir, &run.file, ANNOTATOR).unwrap_err();
    assert_refused_at(&err, &run.file, 3, "number out of range");
    assert_eq!(run.stored(), before);
    run.accepts_the_honest_file();
}

#[test]
fn a_label_scores_exactly_the_judges_dimensions() {
    let cases: [(usize, Value, &str); 4] = [
        (2, json!({"action": "score", "dimensions": {}}), "no scores"),
        (
            2,
            json!({"action": "score", "dimensions": {"complete": 1.0, "grounded": 1.0}}),
            "no score for dimension \"valid\"",
        ),
        (
            1,
            json!({"action": "change", "dimension": "style", "score": 1.0}),
            "unknown dimension \"style\"",
        ),
        (
            0,
            json!({"action": "clarify", "criterion": "valid", "note": "n", "dimensions": {"complete": 1.0, "grounded": 1.0, "valid": 1.0, "style": 1.0}}),
            "unknown dimension \"style\"",
        ),
    ];
    for (n, (index, label, why)) in cases.into_iter().enumerate() {
        let run = Run::new(&format!("dimensions-{n}"));
        run.refuses(&with(&run, index, |r| r["label"] = label), index + 1, why);
    }
}

#[test]
fn a_case_shown_otherwise_than_the_run_asked_is_refused() {
    let run = Run::new("edited-response");
    run.refuses(
        &with(&run, 0, |r| r["case"]["response"] = json!("#### 4")),
        1,
        "the response of case",
    );
    let run = Run::new("edited-reason");
    run.refuses(
        &with(&run, 0, |r| r["reason"] = json!("top")),
        1,
        "asked about as Uncertain",
    );
}

#[test]
fn notes_criteria_and_annotators_are_bounded() {
    let long = "n".repeat(MAX_NOTE_CHARS + 1);
    let run = Run::new("long-note");
    run.refuses(
        &with(
            &run,
            0,
            |r| r["label"] = json!({"action": "clarify", "criterion": "grounded", "note": long}),
        ),
        1,
        "a note of 4001 characters",
    );
    let run = Run::new("empty-criterion");
    run.refuses(
        &with(&run, 0, |r| {
            r["label"] = json!({"action": "clarify", "criterion": " ", "note": "n"})
        }),
        1,
        "an empty criterion",
    );
    let run = Run::new("annotator");
    run.write(&run.honest());
    let before = run.stored();
    for name in ["", "two\nlines", &"a".repeat(65)] {
        let err = queue::import(&run.dir, &run.file, name).unwrap_err();
        assert!(matches!(err, EvolveError::Invalid(_)), "{err}");
    }
    assert_eq!(run.stored(), before);
    run.accepts_the_honest_file();
}

#[test]
fn line_numbers_count_blank_lines() {
    let run = Run::new("blank-lines");
    let mut rows = run.honest();
    rows[2]["label"]["dimensions"]["valid"] = json!(2.0);
    let text: Vec<String> = rows.iter().map(Value::to_string).collect();
    std::fs::write(
        &run.file,
        format!("\n{}\n\n{}\n", text[..2].join("\n"), text[2]),
    )
    .unwrap();
    let err = queue::import(&run.dir, &run.file, ANNOTATOR).unwrap_err();
    assert_refused_at(&err, &run.file, 5, "outside [0, 1]");
    run.accepts_the_honest_file();
}
