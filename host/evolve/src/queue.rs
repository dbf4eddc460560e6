//! The label queue on disk, for `verifine labels export` / `import`: every
//! queried case of a run that `annotator` has not labelled yet goes out
//! with the judge's diagnostics; filled-in labels come back into
//! `judge/labels.jsonl` (and clarifications into
//! `judge/clarifications.jsonl`), where the next judge loop reads them.

use crate::annotator::overall;
use crate::error::Result;
use crate::labels::{Clarification, ImportSummary, LabelStore, QueueItem};
use crate::round::read_optional;
use std::path::Path;
use verifine_base::write_jsonl;

/// The queried cases of the run in `dir` that `annotator` has not labelled,
/// in query order (oldest loop first).
pub fn pending(dir: &Path, annotator: &str) -> Result<Vec<QueueItem>> {
    let judge = dir.join("judge");
    let latest = LabelStore::load(&judge.join("labels.jsonl"))?.latest(annotator);
    let mut out = Vec::new();
    for round in 1.. {
        let path = judge.join(format!("batch-{round}.jsonl"));
        if !path.exists() {
            break;
        }
        let items: Vec<QueueItem> = read_optional(&path)?;
        out.extend(
            items
                .into_iter()
                .filter(|i| !latest.contains_key(&i.case.id)),
        );
    }
    Ok(out)
}

/// Writes the pending queue to `out`.
pub fn export(dir: &Path, annotator: &str, out: &Path) -> Result<usize> {
    let items = pending(dir, annotator)?;
    write_jsonl(out, &items)?;
    Ok(items.len())
}

/// Reads a filled-in queue file into the run's labels as `annotator`'s.
pub fn import(dir: &Path, file: &Path, annotator: &str) -> Result<ImportSummary> {
    let judge = dir.join("judge");
    let labels_path = judge.join("labels.jsonl");
    let mut store = LabelStore::load(&labels_path)?;
    let (labels, clarifications, summary) =
        crate::labels::read_filled_queue(file, annotator, &store, overall)?;
    store.extend(labels);
    store.save(&labels_path)?;
    if !clarifications.is_empty() {
        let path = judge.join("clarifications.jsonl");
        let mut all: Vec<Clarification> = read_optional(&path)?;
        all.extend(clarifications);
        write_jsonl(&path, &all)?;
    }
    Ok(summary)
}
