//! The label queue on disk, for `verifine labels export` / `import`: every
//! queried case of a run that `annotator` has not labelled yet goes out
//! with the judge's diagnostics; filled-in labels come back into
//! `judge/labels.jsonl` (and clarifications into
//! `judge/clarifications.jsonl`), where the next judge loop reads them.
//!
//! The filled-in file is a person's (or anyone's) text, so import trusts
//! none of it: every row is checked against what the run itself recorded
//! in its `judge/batch-*.jsonl` (which cases it asked about, and what the
//! judge said of each), and one refused row stores nothing at all.

use crate::annotator::overall;
use crate::error::{EvolveError, Result};
use crate::labels::{
    Clarification, ImportSummary, JudgeView, Label, LabelStore, QueueItem, Recorded, label_of,
};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;
use verifine_base::{FileError, read_jsonl_if_exists, write_jsonl};

/// The largest filled-in queue file import reads: far above any real
/// queue (a few hundred cases), far below what would exhaust memory.
pub const MAX_IMPORT_BYTES: u64 = 64 << 20;

/// The longest annotator name labels are recorded under.
pub const MAX_ANNOTATOR_CHARS: usize = 64;

/// Every case the run in `dir` asked about, in query order (oldest loop
/// first), as its batches recorded them.
fn asked(dir: &Path) -> Result<Vec<QueueItem>> {
    let mut out = Vec::new();
    for round in 1.. {
        let path = dir.join("judge").join(format!("batch-{round}.jsonl"));
        if !path.exists() {
            break;
        }
        out.extend(read_jsonl_if_exists::<QueueItem>(&path)?);
    }
    Ok(out)
}

/// The queried cases of the run in `dir` that `annotator` has not labelled,
/// in query order (oldest loop first).
pub fn pending(dir: &Path, annotator: &str) -> Result<Vec<QueueItem>> {
    let latest = LabelStore::load(&dir.join("judge").join("labels.jsonl"))?.latest(annotator);
    let mut items = asked(dir)?;
    items.retain(|i| !latest.contains_key(&i.case.id));
    Ok(items)
}

/// Writes the pending queue to `out`.
pub fn export(dir: &Path, annotator: &str, out: &Path) -> Result<usize> {
    let items = pending(dir, annotator)?;
    write_jsonl(out, &items)?;
    Ok(items.len())
}

/// Reads a filled-in queue file into the run's labels as `annotator`'s.
/// Each row must be a case the run asked about, once, shown as the run
/// recorded it; a label confirms or changes the judge's scores as the run
/// recorded them. A refused row is an error naming `file:line`, and then
/// nothing is stored.
pub fn import(dir: &Path, file: &Path, annotator: &str) -> Result<ImportSummary> {
    check_annotator(annotator)?;
    let judge = dir.join("judge");
    let labels_path = judge.join("labels.jsonl");
    let mut store = LabelStore::load(&labels_path)?;
    let (labels, clarifications, summary) =
        read_filled_queue(file, &asked(dir)?, annotator, &store)?;
    // Clarifications first, without repeats: a retry after a failure
    // between the two writes adds nothing twice. The labels are the commit.
    if !clarifications.is_empty() {
        let path = judge.join("clarifications.jsonl");
        let mut all: Vec<Clarification> = read_jsonl_if_exists(&path)?;
        for clarification in clarifications {
            if !all.contains(&clarification) {
                all.push(clarification);
            }
        }
        write_jsonl(&path, &all)?;
    }
    store.extend(labels);
    store.save(&labels_path)?;
    Ok(summary)
}

/// Reads a filled-in queue file and turns each labelled item into a label
/// by `annotator` (a revision when `store` already holds one of that case),
/// checking every row against `asked`, the run's own record of its queries.
/// Returns the labels, the clarifications and a summary; writes nothing.
fn read_filled_queue(
    path: &Path,
    asked: &[QueueItem],
    annotator: &str,
    store: &LabelStore,
) -> Result<(Vec<Label>, Vec<Clarification>, ImportSummary)> {
    let records: BTreeMap<&str, &QueueItem> =
        asked.iter().map(|i| (i.case.id.as_str(), i)).collect();
    // The judge's dimensions are fixed across revisions: what a label of a
    // case the judge failed on must score.
    let dimensions: BTreeSet<String> = asked
        .iter()
        .flat_map(|i| i.judge.dimensions.keys().cloned())
        .collect();
    let latest = store.latest(annotator);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut summary = ImportSummary::default();
    let (mut labels, mut clarifications) = (Vec::new(), Vec::new());
    for (line, item) in numbered_rows(path)? {
        let refuse = |message: String| line_error(path, line, message);
        let id = item.case.id.clone();
        let Some(record) = records.get(id.as_str()) else {
            return Err(refuse(format!(
                "case {id:?} is not one this run asked about (no judge/batch-*.jsonl of the run holds it)"
            )));
        };
        if let Some(first) = seen.insert(id.clone(), line) {
            return Err(refuse(format!(
                "case {id:?} appears twice in the file: lines {first} and {line}"
            )));
        }
        as_recorded(&item, record).map_err(&refuse)?;
        let own: BTreeSet<String> = record.judge.dimensions.keys().cloned().collect();
        let recorded = Recorded {
            judge: &record.judge.dimensions,
            dimensions: if own.is_empty() { &dimensions } else { &own },
        };
        let Some((label, clarification)) =
            label_of(item, recorded, annotator, &latest, overall).map_err(&refuse)?
        else {
            summary.unlabelled += 1;
            continue;
        };
        summary.labelled += 1;
        summary.revised += usize::from(label.revision > 0);
        if let Some(clarification) = clarification {
            summary.clarified += 1;
            clarifications.push(clarification);
        }
        labels.push(label);
    }
    Ok((labels, clarifications, summary))
}

/// Whether a row shows its case as the run recorded it: the same case,
/// asked for the same reason, with the same judge view. A label of a case
/// the person saw otherwise would label something the run never asked.
fn as_recorded(item: &QueueItem, record: &QueueItem) -> std::result::Result<(), String> {
    let (case, id) = (&record.case, &record.case.id);
    let changed = [
        ("scenario", item.case.scenario == case.scenario),
        ("prompt", item.case.prompt == case.prompt),
        ("response", item.case.response == case.response),
        ("reference", item.case.reference == case.reference),
    ]
    .into_iter()
    .find(|(_, same)| !same);
    if let Some((field, _)) = changed {
        return Err(format!(
            "the {field} of case {id:?} is not the one the run recorded; a label is for the case the run asked about"
        ));
    }
    if item.reason != record.reason {
        return Err(format!(
            "case {id:?} was asked about as {:?}, not {:?}",
            record.reason, item.reason
        ));
    }
    if !same_view(&item.judge, &record.judge) {
        let judge = &record.judge;
        return Err(format!(
            "the judge view of case {id:?} is not the one the run recorded (judge r{}, total {}, \
             dimensions {:?}); labels are checked against the run's record, not the file's",
            judge.revision, judge.total, judge.dimensions
        ));
    }
    Ok(())
}

/// Equal up to the last bits of a float that a JSON round trip may move.
fn same_view(a: &JudgeView, b: &JudgeView) -> bool {
    let close = |x: f64, y: f64| (x - y).abs() <= 1e-9;
    a.revision == b.revision
        && a.explanation == b.explanation
        && close(a.total, b.total)
        && a.dimensions.len() == b.dimensions.len()
        && a.dimensions
            .iter()
            .zip(&b.dimensions)
            .all(|((ka, va), (kb, vb))| ka == kb && close(*va, *vb))
}

/// The rows of a filled-in queue file with their 1-based line numbers
/// (blank lines skipped but counted), each a strict [`QueueItem`].
fn numbered_rows(path: &Path) -> Result<Vec<(usize, QueueItem)>> {
    let file = std::fs::File::open(path).map_err(|e| FileError::io("opening", path, e))?;
    let mut text = String::new();
    file.take(MAX_IMPORT_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| FileError::io("reading", path, e))?;
    if text.len() as u64 > MAX_IMPORT_BYTES {
        return Err(EvolveError::Invalid(format!(
            "{}: larger than {} MiB; a label queue file is far smaller",
            path.display(),
            MAX_IMPORT_BYTES >> 20
        )));
    }
    let mut rows = Vec::new();
    for (i, row) in text.lines().enumerate() {
        if row.trim().is_empty() {
            continue;
        }
        let item = serde_json::from_str(row).map_err(|e| {
            // serde's own "at line 1 column N" is about the row, not the file.
            let message = e.to_string();
            let at = format!(" at line {} column {}", e.line(), e.column());
            let message = message.strip_suffix(&at).unwrap_or(&message);
            line_error(path, i + 1, format!("{message} (column {})", e.column()))
        })?;
        rows.push((i + 1, item));
    }
    Ok(rows)
}

/// Labels are recorded under the annotator's name: a name that could not
/// be told apart when printed, or that swamps the label file, is refused.
fn check_annotator(annotator: &str) -> Result<()> {
    let chars = annotator.chars().count();
    if chars == 0 || chars > MAX_ANNOTATOR_CHARS || annotator.chars().any(char::is_control) {
        return Err(EvolveError::Invalid(format!(
            "annotator {annotator:?}: a name of 1 to {MAX_ANNOTATOR_CHARS} printable characters"
        )));
    }
    Ok(())
}

fn line_error(path: &Path, line: usize, message: String) -> EvolveError {
    EvolveError::File(FileError::Line {
        path: path.to_path_buf(),
        line,
        message,
    })
}
