//! Human labels and the label queue. The judge loop exports the cases it
//! wants labelled with the judge's diagnostics (`verifine labels export`);
//! a person fills in each item's `label` — confirm the judge's scores,
//! change one dimension, give all scores, clarify a criterion, or revise
//! their own earlier label — and `verifine labels import` reads it back.
//! Every label revision is kept; the newest of each case counts.

use crate::cases::{Case, Dimensions};
use crate::error::Result;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use verifine_base::{read_jsonl, write_jsonl};

/// The simulated annotator's name on its labels.
pub(crate) const SIMULATED: &str = "annotator";
/// The name `verifine labels import` gives a person's labels by default.
pub const HUMAN: &str = "human";

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
#[serde(deny_unknown_fields)]
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

/// One case waiting for a label. A field it does not know is refused, not
/// ignored: in a filled-in queue file it is a typo or a forgery (an
/// `annotator`, say), and either must not pass silently.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueItem {
    /// The case.
    #[serde(deserialize_with = "StrictCase::deserialize")]
    pub case: Case,
    /// Why it was chosen.
    pub reason: QueryReason,
    /// The judge's diagnostics.
    pub judge: JudgeView,
    /// Filled in by the person; `null` when not (yet) labelled.
    #[serde(default, deserialize_with = "strict_label")]
    pub label: Option<LabelInput>,
}

/// A label with `confirm` carries nothing but the action. serde ignores
/// fields beside an internally tagged unit variant even under
/// `deny_unknown_fields`, so they are refused here: `{"action": "confirm",
/// "dimensions": {...}}` must not pass for a confirmation of those scores.
fn strict_label<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> std::result::Result<Option<LabelInput>, D::Error> {
    let Some(value) = Option::<serde_json::Value>::deserialize(deserializer)? else {
        return Ok(None);
    };
    if value.get("action").and_then(serde_json::Value::as_str) == Some("confirm") {
        let mut fields = value.as_object().into_iter().flat_map(|m| m.keys());
        if let Some(extra) = fields.find(|k| *k != "action") {
            return Err(D::Error::custom(format!(
                "unknown field `{extra}`: `confirm` takes no fields (it confirms the judge's scores as the run recorded them)"
            )));
        }
    }
    serde_json::from_value(value)
        .map(Some)
        .map_err(D::Error::custom)
}

/// [`Case`] as a queue item carries it, with unknown fields refused.
#[derive(Deserialize)]
#[serde(remote = "Case", deny_unknown_fields)]
struct StrictCase {
    id: String,
    scenario: String,
    prompt: String,
    response: String,
    reference: String,
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

/// The longest note a label may carry, in characters: the revision agent
/// reads every note, so one pasted document would crowd out the rest.
pub const MAX_NOTE_CHARS: usize = 4000;

/// The longest criterion a clarification may name, in characters.
pub const MAX_CRITERION_CHARS: usize = 200;

/// What a label is checked against: the judge's scores of the case as the
/// run recorded them (what `confirm` and `change` start from), and the
/// dimensions every label must score (the judge's, also for a case whose
/// judging failed and so has no scores of its own).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Recorded<'a> {
    pub(crate) judge: &'a Dimensions,
    pub(crate) dimensions: &'a BTreeSet<String>,
}

/// Checks one queue item's label against the item's own judge view (the
/// label page calls this before it saves an edit; `verifine labels import`
/// checks again against the run's records): `Ok` for a valid or an absent
/// label, else the reason.
pub fn check_item(
    item: &QueueItem,
    annotator: &str,
    store: &LabelStore,
) -> std::result::Result<(), String> {
    let dimensions = item.judge.dimensions.keys().cloned().collect();
    let recorded = Recorded {
        judge: &item.judge.dimensions,
        dimensions: &dimensions,
    };
    label_of(
        item.clone(),
        recorded,
        annotator,
        &store.latest(annotator),
        |_| 0.0,
    )
    .map(|_| ())
}

/// The label a queue item carries, with its clarification; `None` when
/// the item is not labelled. Scores are checked against `recorded`, never
/// against the judge view the item itself shows.
pub(crate) fn label_of(
    item: QueueItem,
    recorded: Recorded<'_>,
    annotator: &str,
    latest: &BTreeMap<String, Label>,
    overall: impl Fn(&Dimensions) -> f64,
) -> std::result::Result<Option<(Label, Option<Clarification>)>, String> {
    let Some(input) = item.label else {
        return Ok(None);
    };
    let id = &item.case.id;
    // `confirm`, `change` and a score-less `clarify` take the judge's scores.
    let judged = || match recorded.judge.is_empty() {
        true => Err(format!(
            "the judge gave case {id:?} no scores (its judging failed), so there is nothing to \
             confirm or change; give every score with `score`"
        )),
        false => Ok(recorded.judge.clone()),
    };
    let mut clarification = None;
    let (dimensions, action, note) = match input {
        LabelInput::Confirm => (judged()?, LabelAction::Confirm, None),
        LabelInput::Change { dimension, score } => {
            let mut changed = judged()?;
            if !changed.contains_key(&dimension) {
                return Err(unknown_dimension(&dimension, recorded.dimensions));
            }
            changed.insert(dimension, score);
            (changed, LabelAction::Change, None)
        }
        LabelInput::Score { dimensions } => (dimensions, LabelAction::Score, None),
        LabelInput::Clarify {
            criterion,
            note,
            dimensions,
        } => {
            bounded("criterion", &criterion, MAX_CRITERION_CHARS)?;
            bounded("note", &note, MAX_NOTE_CHARS)?;
            clarification = Some(Clarification {
                case_id: id.clone(),
                criterion,
                note: note.clone(),
            });
            let dimensions = match dimensions {
                Some(dimensions) => dimensions,
                None => judged()?,
            };
            (dimensions, LabelAction::Clarify, Some(note))
        }
        LabelInput::Revise { dimensions, note } => {
            if let Some(note) = &note {
                bounded("note", note, MAX_NOTE_CHARS)?;
            }
            (dimensions, LabelAction::Revise, note)
        }
    };
    check_scores(&dimensions, recorded.dimensions)?;
    let revision = latest.get(id).map_or(0, |l| l.revision + 1);
    if action == LabelAction::Revise && revision == 0 {
        return Err(format!(
            "`revise` needs an earlier label of case {id:?} by {annotator}"
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

/// A label scores exactly the judge's dimensions, each in [0, 1]: no
/// dimension left out, none made up, and never none at all.
fn check_scores(
    dimensions: &Dimensions,
    names: &BTreeSet<String>,
) -> std::result::Result<(), String> {
    if dimensions.is_empty() {
        return Err(format!(
            "a label with no scores; it needs one for each of the judge's dimensions {names:?}"
        ));
    }
    if let Some(name) = dimensions.keys().find(|d| !names.contains(*d)) {
        return Err(unknown_dimension(name, names));
    }
    if let Some(missing) = names.iter().find(|d| !dimensions.contains_key(*d)) {
        return Err(format!("the label has no score for dimension {missing:?}"));
    }
    if let Some((name, v)) = dimensions.iter().find(|(_, v)| !(0.0..=1.0).contains(*v)) {
        return Err(format!("dimension {name:?} scored {v}, outside [0, 1]"));
    }
    Ok(())
}

/// Refuses an empty `what`, or one longer than `max` characters.
fn bounded(what: &str, text: &str, max: usize) -> std::result::Result<(), String> {
    let chars = text.chars().count();
    if text.trim().is_empty() {
        return Err(format!("an empty {what}"));
    }
    if chars > max {
        return Err(format!("a {what} of {chars} characters; at most {max}"));
    }
    Ok(())
}

fn unknown_dimension(name: &str, names: &BTreeSet<String>) -> String {
    format!("unknown dimension {name:?}; the judge's dimensions are {names:?}")
}
