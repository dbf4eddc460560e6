//! `verifine labels import` as a person runs it: a forged row is refused
//! with its `file:line` and a non-zero exit, nothing is stored, and the
//! honest file of the same queue goes in afterwards.

use serde_json::{Value, json};
use std::path::Path;
use std::process::Output;

fn verifine(args: &[&Path]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_verifine"))
        .args(args)
        .output()
        .unwrap()
}

fn write_rows(path: &Path, rows: &[Value]) {
    let text: Vec<String> = rows.iter().map(Value::to_string).collect();
    std::fs::write(path, text.join("\n") + "\n").unwrap();
}

#[test]
fn a_forged_confirm_is_refused_at_its_line_and_the_honest_file_goes_in() {
    let run = verifine_test_support::scratch_path("cli-labels");
    std::fs::create_dir_all(run.join("judge")).unwrap();
    let asked: Vec<Value> = (0..2)
        .map(|i| {
            json!({
                "case": {"id": format!("j1-a{i}-0"), "scenario": "story-2", "prompt": "Ann has 3 coins and finds 1.",
                         "response": "3 + 1 = 5\n#### 5", "reference": "3 + 1 = 4\n#### 4"},
                "reason": "inconsistent",
                "judge": {"revision": 0, "total": 0.5, "dimensions": {"complete": 1.0, "grounded": 1.0, "valid": 0.0},
                          "explanation": "a step does not compute"},
                "label": null
            })
        })
        .collect();
    write_rows(&run.join("judge/batch-1.jsonl"), &asked);
    let file = run.join("judge/to-label.jsonl");
    let (export, import) = (Path::new("export"), Path::new("import"));
    let labels = Path::new("labels");
    assert!(verifine(&[labels, export, &run]).status.success());
    let mut rows: Vec<Value> = verifine_base::read_jsonl(&file).unwrap();
    assert_eq!(rows, asked, "the export is the run's batch");
    rows[0]["label"] = json!({"action": "change", "dimension": "valid", "score": 1.0});
    // The second row claims the judge gave nothing, then confirms that.
    let mut forged = rows.clone();
    forged[1]["judge"]["dimensions"] = json!({});
    forged[1]["label"] = json!({"action": "confirm"});
    write_rows(&file, &forged);

    let refused = verifine(&[labels, import, &run, &file]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains(&format!("{}:2: ", file.display())) && stderr.contains("judge view"),
        "{stderr}"
    );
    assert!(
        !run.join("judge/labels.jsonl").exists(),
        "nothing is stored"
    );

    rows[1]["label"] = json!({"action": "confirm"});
    write_rows(&file, &rows);
    let accepted = verifine(&[labels, import, &run, &file]);
    assert!(
        accepted.status.success(),
        "{}",
        String::from_utf8_lossy(&accepted.stderr)
    );
    let summary: Value = serde_json::from_slice(&accepted.stdout).unwrap();
    assert_eq!(summary["labelled"], 2);
    let stored: Vec<Value> = verifine_base::read_jsonl(&run.join("judge/labels.jsonl")).unwrap();
    assert_eq!(stored[1]["dimensions"], asked[1]["judge"]["dimensions"]);
    std::fs::remove_dir_all(&run).unwrap();
}
