//! Problems from a dataset file instead of the generator: GSM8K-style JSONL
//! rows `{"question": …, "answer": "worked solution … #### 42"}`, the
//! training split from one file and the held-out split from another, so a
//! held-out problem is never trained on.

use crate::error::{Result, TrainError};
use crate::problem::Problem;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use verifine_base::SplitMix64;

/// Mixed into the run's seed for the data set's shuffle ("DATA SET" in
/// hex), so the shuffle's draws are not the run's own first draws.
const DATASET_SHUFFLE_SALT: u64 = 0x0DA7_A5E7;

/// `[task.dataset]`: where the problems come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetConfig {
    /// Training problems (JSONL); a seeded shuffle picks `train_problems`.
    pub train: PathBuf,
    /// Held-out problems (JSONL); the first `heldout_problems` in file order.
    pub test: PathBuf,
}

#[derive(Deserialize)]
struct Row {
    question: String,
    answer: String,
}

/// Reads every problem of a GSM8K-style file; a row without a `#### N`
/// integer answer is refused with its file:line.
pub fn read_problems(path: &Path) -> Result<Vec<Problem>> {
    let rows: Vec<Row> = verifine_base::read_jsonl(path)?;
    rows.into_iter()
        .enumerate()
        .map(|(i, row)| {
            let line_error = |message: String| {
                TrainError::from(verifine_base::FileError::Line {
                    path: path.to_path_buf(),
                    line: i + 1,
                    message,
                })
            };
            let (worked, final_answer) = row
                .answer
                .rsplit_once("####")
                .ok_or_else(|| line_error("the answer has no `#### N` final answer".into()))?;
            let number = final_answer.trim().replace(',', "");
            let answer: i64 = number.parse().map_err(|_| {
                line_error(format!(
                    "the final answer {:?} is not an integer",
                    final_answer.trim()
                ))
            })?;
            let solution = format!("{}\n#### {answer}", strip_annotations(worked.trim_end()));
            Ok(Problem {
                prompt: row.question.trim().to_string(),
                solution,
                answer,
            })
        })
        .collect()
}

/// Removes GSM8K's calculator annotations `<<48/2=24>>`.
fn strip_annotations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<<") {
        match rest[start..].find(">>") {
            Some(len) => {
                out.push_str(&rest[..start]);
                rest = &rest[start + len + 2..];
            }
            None => break,
        }
    }
    out.push_str(rest);
    out
}

/// The training and held-out problems of `dataset`: `train` of the
/// training file (seeded shuffle), the first `heldout` of the test file.
pub fn splits(
    dataset: &DatasetConfig,
    seed: u64,
    train: usize,
    heldout: usize,
) -> Result<(Vec<Problem>, Vec<Problem>)> {
    let mut train_set = read_problems(&dataset.train)?;
    let mut rng = SplitMix64::new(seed ^ DATASET_SHUFFLE_SALT);
    for i in (1..train_set.len()).rev() {
        train_set.swap(i, rng.below(i + 1));
    }
    train_set.truncate(train);
    let mut heldout_set = read_problems(&dataset.test)?;
    heldout_set.truncate(heldout);
    Ok((train_set, heldout_set))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(lines: &[&str]) -> PathBuf {
        let path = std::env::temp_dir().join(format!(
            "verifine-dataset-{}-{}.jsonl",
            std::process::id(),
            lines.len()
        ));
        std::fs::write(&path, lines.join("\n")).unwrap();
        path
    }

    #[test]
    fn reads_gsm8k_rows_without_calculator_annotations() {
        let path = write(&[
            "{\"question\": \"Ann has 3 bags of 4 apples. How many?\", \"answer\": \"3*4=<<3*4=12>>12 apples\\n#### 1,200\"}",
        ]);
        let problems = read_problems(&path).unwrap();
        assert_eq!(problems[0].answer, 1200);
        assert_eq!(problems[0].solution, "3*4=12 apples\n#### 1200");
        assert_eq!(problems[0].prompt, "Ann has 3 bags of 4 apples. How many?");
    }

    #[test]
    fn a_row_without_an_integer_answer_names_its_line() {
        let path = write(&[
            "{\"question\": \"q\", \"answer\": \"#### 1\"}",
            r#"{"question": "q", "answer": "no marker"}"#,
            r#"{"question": "q", "answer": "x"}"#,
        ]);
        let error = read_problems(&path).unwrap_err().to_string();
        assert!(error.contains(&format!("{}:2", path.display())), "{error}");
    }

    #[test]
    fn shared_gsm8k_reads_whole() {
        // The shared data sits beside the clone (as on CI): without it this
        // test fails rather than passing without reading anything.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/gsm8k");
        assert!(
            root.is_dir(),
            "{} is not here (shared/data beside the clone)",
            root.display()
        );
        let dataset = DatasetConfig {
            train: root.join("train.jsonl"),
            test: root.join("test.jsonl"),
        };
        let (train, test) = splits(&dataset, 0, 100_000, 100_000).unwrap();
        assert_eq!((train.len(), test.len()), (7473, 1319));
        for p in train.iter().chain(&test) {
            assert_eq!(
                math_answer::answer::reference_answer(&p.solution),
                Some(p.answer as f64),
                "{}",
                p.solution
            );
        }
    }
}
