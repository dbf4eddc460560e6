//! Human labels and the label queue. The judge loop exports the cases it
//! wants labelled with the judge's diagnostics (`verifine labels export`);
//! a person fills in each item's `label` — confirm the judge's scores,
//! change one dimension, give all scores, clarify a criterion, or revise
//! their own earlier label — and `verifine labels import` reads it back.
//! Every label revision is kept; the newest of each case counts.

use crate::cases::{Case, Dimensions};
use crate::error::{EvolveError, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use verifine_base::{FileError, read_jsonl, write_jsonl};

/// How a label came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LabelAction {
    /// Scored from scratch.
    Score,
    /// The judge's scores, confirmed.
    Confirm,
    /// The judge's scores with one dimension changed.
    Change,
    /// Scores given together with a clarification of a criterion.
    Clarify,
    /// The annotator's own earlier label of the case, revised.
    Revise,
}

/// A person's (or the simulated annotator's) judgment of one case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Label {
    /// The case labelled.
    pub case_id: String,
    /// Who labelled it.
    pub annotator: String,
    /// Score per dimension, in [0, 1].
    pub dimensions: Dimensions,
    /// The overall score, in [0, 1] (what the judge's total is compared with).
    pub total: f64,
    /// 0 for the first label of the case by this annotator, then 1, 2 …
    pub revision: u32,
    /// How it came about.
    pub action: LabelAction,
    /// The annotator's words, when any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Why the judge loop asks about a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueryReason {
    /// The judge's total sits near the decision boundary, or its dimensions disagree.
    Uncertain,
    /// The judge and the reference-based evaluator disagree.
    Inconsistent,
    /// A large reward in a frequent scenario: a wrong judgment here moves training most.
    HighImpact,
    /// Among the judge's highest totals (marks the boundary from above).
    Top,
    /// Among the judge's lowest totals.
    Bottom,
}

/// What the judge said about a queued case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeView {
    /// The judge revision that scored it.
    pub revision: u32,
    /// Its total (0 when judging failed).
    pub total: f64,
    /// Its sub-score per dimension.
    pub dimensions: Dimensions,
    /// Its explanation.
    pub explanation: String,
}

/// What a person writes into a queue item's `label`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case", deny_unknown_fields)]
pub enum LabelInput {
    /// The judge's dimension scores are right.
    Confirm,
    /// The judge's scores, except one dimension.
    Change {
        /// The dimension that is wrong.
        dimension: String,
        /// Its right score, in [0, 1].
        score: f64,
    },
    /// All dimension scores.
    Score {
        /// Score per dimension.
        dimensions: Dimensions,
    },
    /// A criterion needs clarifying (the note goes to the revision agent);
    /// scores optional (the judge's otherwise).
    Clarify {
        /// The dimension or criterion the note is about.
        criterion: String,
        /// The clarification.
        note: String,
        /// Scores, when the person also gives them.
        #[serde(default)]
        dimensions: Option<Dimensions>,
    },
    /// A new version of this person's own earlier label of the case.
    Revise {
        /// The revised scores.
        dimensions: Dimensions,
        /// Why.
        #[serde(default)]
        note: Option<String>,
    },
}

/// One case waiting for a label.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueItem {
    /// The case.
    pub case: Case,
    /// Why it was chosen.
    pub reason: QueryReason,
    /// The judge's diagnostics.
    pub judge: JudgeView,
    /// Filled in by the person; `null` when not (yet) labelled.
    #[serde(default)]
    pub label: Option<LabelInput>,
}

/// A clarification of a criterion, for the revision agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Clarification {
    /// The case it was written on.
    pub case_id: String,
    /// The dimension or criterion.
    pub criterion: String,
    /// The note.
    pub note: String,
}

/// Every label revision so far, oldest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelStore {
    labels: Vec<Label>,
}

impl LabelStore {
    /// Reads `path` (a missing file is an empty store).
    pub fn load(path: &Path) -> Result<Self> {
        if !path.exists() {
            return Ok(LabelStore::default());
        }
        Ok(LabelStore {
            labels: read_jsonl(path)?,
        })
    }

    /// Writes every revision to `path` atomically.
    pub fn save(&self, path: &Path) -> Result<()> {
        Ok(write_jsonl(path, &self.labels)?)
    }

    /// Adds labels (later revisions supersede earlier ones).
    pub fn extend(&mut self, labels: impl IntoIterator<Item = Label>) {
        self.labels.extend(labels);
    }

    /// Every revision, oldest first.
    pub fn all(&self) -> &[Label] {
        &self.labels
    }

    /// The newest label of each case by `annotator`.
    pub fn latest(&self, annotator: &str) -> BTreeMap<String, Label> {
        let mut latest: BTreeMap<String, Label> = BTreeMap::new();
        for label in self.labels.iter().filter(|l| l.annotator == annotator) {
            match latest.get(&label.case_id) {
                Some(old) if old.revision > label.revision => {}
                _ => {
                    latest.insert(label.case_id.clone(), label.clone());
                }
            }
        }
        latest
    }
}

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ImportSummary {
    /// Labels added (first labels and revisions).
    pub labelled: usize,
    /// Of those, revisions of an earlier label.
    pub revised: usize,
    /// Clarifications passed on to the revision agent.
    pub clarified: usize,
    /// Items left without a label (still queued).
    pub unlabelled: usize,
}

/// Reads a filled-in queue file and turns each labelled item into a label by
/// `annotator` (a revision when `store` already holds one of that case).
/// The dimensions must be the judge's; scores must lie in [0, 1]. An error
/// names `file:line`. Returns the labels, the clarifications and a summary;
/// nothing is written.
pub fn read_filled_queue(
    path: &Path,
    annotator: &str,
    store: &LabelStore,
    overall: impl Fn(&Dimensions) -> f64,
) -> Result<(Vec<Label>, Vec<Clarification>, ImportSummary)> {
    let items: Vec<QueueItem> = read_jsonl(path)?;
    let latest = store.latest(annotator);
    let mut summary = ImportSummary::default();
    let (mut labels, mut clarifications) = (Vec::new(), Vec::new());
    for (line, item) in items.into_iter().enumerate() {
        let read = label_of(item, annotator, &latest, &overall).map_err(|message| {
            EvolveError::File(FileError::Line {
                path: path.to_path_buf(),
                line: line + 1,
                message,
            })
        })?;
        let Some((label, clarification)) = read else {
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

/// Checks one queue item's label as [`read_filled_queue`] would (the label
/// page calls this before it saves an edit): `Ok` for a valid or an
/// absent label, else the reason.
pub fn check_item(
    item: &QueueItem,
    annotator: &str,
    store: &LabelStore,
) -> std::result::Result<(), String> {
    label_of(item.clone(), annotator, &store.latest(annotator), |_| 0.0).map(|_| ())
}

/// The label a queue item carries, with its clarification; `None` when
/// the item is not labelled.
fn label_of(
    item: QueueItem,
    annotator: &str,
    latest: &BTreeMap<String, Label>,
    overall: impl Fn(&Dimensions) -> f64,
) -> std::result::Result<Option<(Label, Option<Clarification>)>, String> {
    let Some(input) = item.label else {
        return Ok(None);
    };
    let judge = &item.judge.dimensions;
    let mut clarification = None;
    let (dimensions, action, note) = match input {
        LabelInput::Confirm => (judge.clone(), LabelAction::Confirm, None),
        LabelInput::Change { dimension, score } => {
            if !judge.contains_key(&dimension) {
                return Err(unknown_dimension(&dimension, judge));
            }
            let mut changed = judge.clone();
            changed.insert(dimension, score);
            (changed, LabelAction::Change, None)
        }
        LabelInput::Score { dimensions } => (dimensions, LabelAction::Score, None),
        LabelInput::Clarify {
            criterion,
            note,
            dimensions,
        } => {
            clarification = Some(Clarification {
                case_id: item.case.id.clone(),
                criterion,
                note: note.clone(),
            });
            let dimensions = dimensions.unwrap_or_else(|| judge.clone());
            (dimensions, LabelAction::Clarify, Some(note))
        }
        LabelInput::Revise { dimensions, note } => (dimensions, LabelAction::Revise, note),
    };
    if let Some(name) = dimensions.keys().find(|d| !judge.contains_key(*d)) {
        return Err(unknown_dimension(name, judge));
    }
    if let Some(missing) = judge.keys().find(|d| !dimensions.contains_key(*d)) {
        return Err(format!("the label has no score for dimension {missing:?}"));
    }
    if let Some((name, v)) = dimensions.iter().find(|(_, v)| !(0.0..=1.0).contains(*v)) {
        return Err(format!("dimension {name:?} scored {v}, outside [0, 1]"));
    }
    let revision = latest.get(&item.case.id).map_or(0, |l| l.revision + 1);
    if action == LabelAction::Revise && revision == 0 {
        return Err(format!(
            "`revise` needs an earlier label of case {:?} by {annotator}",
            item.case.id
        ));
    }
    let label = Label {
        case_id: item.case.id,
        annotator: annotator.to_string(),
        total: overall(&dimensions),
        dimensions,
        revision,
        action,
        note,
    };
    Ok(Some((label, clarification)))
}

fn unknown_dimension(name: &str, judge: &Dimensions) -> String {
    let known: Vec<&str> = judge.keys().map(String::as_str).collect();
    format!("unknown dimension {name:?}; the judge's dimensions are {known:?}")
}
