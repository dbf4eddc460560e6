//! The label queue's export/import round trip: the judge's diagnostics go
//! out with each queried case, filled-in labels come back (confirmed,
//! changed, clarified, revised), and hostile rows are refused with
//! `file:line`.

use verifine_evolve::labels::{JudgeView, LabelInput, LabelStore, QueryReason, QueueItem};
use verifine_evolve::{Case, EvolveError, queue};

#[test]
fn the_label_queue_goes_out_with_diagnostics_and_comes_back_as_labels() {
    let dir = verifine_test_support::scratch_path("queue");
    std::fs::create_dir_all(dir.join("judge")).unwrap();
    let dims = |g: f64| {
        [
            ("complete".to_string(), 1.0),
            ("grounded".to_string(), g),
            ("valid".to_string(), 1.0),
        ]
        .into()
    };
    let items: Vec<QueueItem> = (0..4)
        .map(|i| QueueItem {
            case: Case {
                id: format!("j1-a{i}-0"),
                scenario: "story-2".into(),
                prompt: "Ann has 3 coins.".into(),
                response: "1 + 1 = 2\n#### 2".into(),
                reference: "3 + 1 = 4\n#### 4".into(),
            },
            reason: QueryReason::Uncertain,
            judge: JudgeView {
                revision: 0,
                total: 1.0,
                dimensions: dims(1.0),
                explanation: "all checks pass".into(),
            },
            label: None,
        })
        .collect();
    verifine_base::write_jsonl(&dir.join("judge/batch-1.jsonl"), &items).unwrap();

    let out = dir.join("to-label.jsonl");
    assert_eq!(queue::export(&dir, "human", &out).unwrap(), 4);
    let mut exported: Vec<QueueItem> = verifine_base::read_jsonl(&out).unwrap();
    assert_eq!(
        exported, items,
        "the export carries the judge's diagnostics"
    );
    exported[0].label = Some(LabelInput::Confirm);
    exported[1].label = Some(LabelInput::Change {
        dimension: "grounded".into(),
        score: 0.0,
    });
    exported[2].label = Some(LabelInput::Clarify {
        criterion: "grounded".into(),
        note: "steps must use the problem's numbers".into(),
        dimensions: None,
    });
    verifine_base::write_jsonl(&out, &exported).unwrap();
    let summary = queue::import(&dir, &out, "human").unwrap();
    assert_eq!(
        (
            summary.labelled,
            summary.clarified,
            summary.unlabelled,
            summary.revised
        ),
        (3, 1, 1, 0)
    );
    let pending = queue::pending(&dir, "human").unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].case.id, "j1-a3-0");

    // A person revises an earlier label: a new revision supersedes it.
    exported[1].label = Some(LabelInput::Revise {
        dimensions: dims(0.5),
        note: Some("partly grounded".into()),
    });
    verifine_base::write_jsonl(&out, &exported[1..2]).unwrap();
    assert_eq!(queue::import(&dir, &out, "human").unwrap().revised, 1);
    let store = LabelStore::load(&dir.join("judge/labels.jsonl")).unwrap();
    let latest = store.latest("human");
    assert_eq!(latest["j1-a1-0"].revision, 1);
    assert_eq!(latest["j1-a1-0"].dimensions["grounded"], 0.5);
    assert_eq!(latest["j1-a0-0"].dimensions, dims(1.0));

    // Hostile input: a dimension the judge does not have, named with file:line.
    exported[3].label = Some(LabelInput::Change {
        dimension: "style".into(),
        score: 1.0,
    });
    verifine_base::write_jsonl(&out, &exported[3..]).unwrap();
    let err = queue::import(&dir, &out, "human").unwrap_err();
    assert!(matches!(err, EvolveError::File(_)), "{err}");
    assert!(
        err.to_string().contains("to-label.jsonl:1") && err.to_string().contains("style"),
        "{err}"
    );
    // Out of range.
    exported[3].label = Some(LabelInput::Score {
        dimensions: dims(1.5),
    });
    verifine_base::write_jsonl(&out, &exported[3..]).unwrap();
    assert!(
        queue::import(&dir, &out, "human")
            .unwrap_err()
            .to_string()
            .contains("outside [0, 1]")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
