//! A batch's judgments read where they lie. A rubric on the current
//! contract answers one packed buffer; it is checked once when it arrives
//! (every length, every string's UTF-8) and then read in place: a total,
//! a verdict's criterion or an explanation is a borrow of that buffer, so
//! a caller that only writes rows or sums rewards allocates nothing per
//! sample. [`JudgmentRef::to_judgment`] makes the owned record for what a
//! caller keeps.
//!
//! ```
//! use verifine_runtime::judgments::Judgments;
//! use verifine_runtime::{Judgment, Verdict};
//!
//! let judged = Judgment {
//!     total: Some(1.0),
//!     verdicts: vec![Verdict { criterion: "correct".into(), score: 1.0, met: Some(true),
//!                              confidence: None, explanation: None }],
//!     sub_scores: vec![], criteria: vec![], explanation: Some("42 vs 42".into()),
//! };
//! let batch = Judgments::from_owned(&[Ok(judged.clone()), Err("no reference".into())]);
//! let first = batch.get(0).unwrap().unwrap();
//! assert_eq!(first.total(), Some(1.0));
//! assert_eq!(first.verdicts().next().unwrap().criterion, "correct");
//! assert_eq!(first.to_judgment(), judged);
//! assert_eq!(batch.get(1).unwrap().unwrap_err(), "no reference");
//! ```

use crate::packed_answer::{self, Entry, Layout, Malformed, Reader, Span};
use crate::{Criterion, Judgment, SubScore, Verdict};
use serde::Serialize;
use serde::ser::{SerializeStruct, Serializer};

/// Why reading a checked answer again cannot fail.
const CHECKED: &str = "the answer was checked whole when it arrived";

/// One result per sample, in order: a judgment read in place, or the
/// rubric's error for that sample.
#[derive(Debug, Clone)]
pub struct Judgments {
    bytes: Vec<u8>,
    entries: Vec<Entry>,
}

impl Judgments {
    /// Checks a packed answer whole; where and why it does not decode
    /// otherwise (the byte offset).
    pub(crate) fn from_packed(bytes: Vec<u8>) -> Result<Self, String> {
        let entries = packed_answer::check(&bytes)?;
        Ok(Judgments { bytes, entries })
    }

    /// The same view over results that arrived owned (a native plugin, an
    /// older contract's component): encoded once, then read like a packed
    /// answer.
    pub fn from_owned(results: &[Result<Judgment, String>]) -> Self {
        let bytes = postcard::to_stdvec(results).expect("judgments always encode");
        Judgments::from_packed(bytes).expect("postcard's encoding is the packed answer's")
    }

    /// How many results (one per sample judged).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The result for sample `index`.
    pub fn get(&self, index: usize) -> Option<Result<JudgmentRef<'_>, &str>> {
        self.entries.get(index).map(|entry| self.read(entry))
    }

    /// Every result, in sample order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Result<JudgmentRef<'_>, &str>> + '_ {
        self.entries.iter().map(|entry| self.read(entry))
    }

    /// Every result as owned records (what [`crate::PluginInstance::judge`] returns).
    pub fn to_owned_results(&self) -> Vec<Result<Judgment, String>> {
        self.iter()
            .map(|result| result.map(|j| j.to_judgment()).map_err(str::to_string))
            .collect()
    }

    fn read<'a>(&'a self, entry: &'a Entry) -> Result<JudgmentRef<'a>, &'a str> {
        match entry {
            Ok(layout) => Ok(JudgmentRef {
                bytes: &self.bytes,
                layout,
            }),
            Err((start, end)) => Err(text(&self.bytes, *start, *end)),
        }
    }
}

/// The owned records of a packed answer in one pass: a caller that keeps
/// every judgment would read each string twice by checking the answer
/// first and copying from the view after.
pub(crate) fn decode_owned(bytes: &[u8]) -> Result<Vec<Result<Judgment, String>>, String> {
    packed_answer::results(
        bytes,
        |r| {
            Ok(Judgment {
                total: r.option(Reader::f64)?,
                verdicts: r.list(|r| VerdictRef::read(r).map(|v| v.to_verdict()))?,
                sub_scores: r.list(|r| SubScoreRef::read(r).map(|s| s.to_sub_score()))?,
                criteria: r.list(|r| CriterionRef::read(r).map(|c| c.to_criterion()))?,
                explanation: r.option(Reader::text)?.map(str::to_string),
            })
        },
        |r| r.text().map(str::to_string),
    )
}

fn text(bytes: &[u8], start: usize, end: usize) -> &str {
    packed_answer::utf8(&bytes[start..end]).expect(CHECKED)
}

/// One judgment, borrowed from its batch's answer. Serializes exactly as
/// [`Judgment`] does.
#[derive(Debug, Clone, Copy)]
pub struct JudgmentRef<'a> {
    bytes: &'a [u8],
    layout: &'a Layout,
}

impl<'a> JudgmentRef<'a> {
    /// The rubric's own total, if it gave one.
    pub fn total(&self) -> Option<f64> {
        self.layout.total
    }

    /// The verdicts, in the rubric's order.
    pub fn verdicts(&self) -> Items<'a, VerdictRef<'a>> {
        self.items(self.layout.verdicts, VerdictRef::read)
    }

    /// The named sub-scores.
    pub fn sub_scores(&self) -> Items<'a, SubScoreRef<'a>> {
        self.items(self.layout.sub_scores, SubScoreRef::read)
    }

    /// Row-level criteria (empty when the verdicts refer to the described ones).
    pub fn criteria(&self) -> Items<'a, CriterionRef<'a>> {
        self.items(self.layout.criteria, CriterionRef::read)
    }

    /// The overall explanation.
    pub fn explanation(&self) -> Option<&'a str> {
        self.layout
            .explanation
            .map(|(start, end)| text(self.bytes, start, end))
    }

    /// The owned record, for a caller that keeps it.
    pub fn to_judgment(&self) -> Judgment {
        Judgment {
            total: self.total(),
            verdicts: self.verdicts().map(|v| v.to_verdict()).collect(),
            sub_scores: self.sub_scores().map(|s| s.to_sub_score()).collect(),
            criteria: self.criteria().map(|c| c.to_criterion()).collect(),
            explanation: self.explanation().map(str::to_string),
        }
    }

    fn items<T>(&self, span: Span, read: ReadItem<'a, T>) -> Items<'a, T> {
        Items {
            reader: Reader::new(self.bytes, span.at),
            left: span.count,
            read,
        }
    }
}

impl Serialize for JudgmentRef<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut record = serializer.serialize_struct("Judgment", 5)?;
        record.serialize_field("total", &self.total())?;
        record.serialize_field("verdicts", &self.verdicts())?;
        record.serialize_field("sub_scores", &self.sub_scores())?;
        record.serialize_field("criteria", &self.criteria())?;
        record.serialize_field("explanation", &self.explanation())?;
        record.end()
    }
}

type ReadItem<'a, T> = fn(&mut Reader<'a>) -> Result<T, Malformed>;

/// A list inside a judgment, read as it is iterated. Serializes as a
/// sequence.
pub struct Items<'a, T> {
    reader: Reader<'a>,
    left: usize,
    read: ReadItem<'a, T>,
}

impl<'a, T> Items<'a, T> {
    /// An empty list (a row without a judgment).
    pub fn empty() -> Self {
        Items {
            reader: Reader::new(&[], 0),
            left: 0,
            read: |_| unreachable!("an empty list has nothing to read"),
        }
    }

    /// Whether the list has no items.
    pub fn is_empty(&self) -> bool {
        self.left == 0
    }
}

impl<T> Clone for Items<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Items<'_, T> {}

impl<T> std::fmt::Debug for Items<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Items({} left)", self.left)
    }
}

impl<T> Iterator for Items<'_, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        Some((self.read)(&mut self.reader).expect(CHECKED))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<T> ExactSizeIterator for Items<'_, T> {}

impl<T: Serialize> Serialize for Items<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(*self)
    }
}

/// A verdict, borrowed. Serializes exactly as [`Verdict`] does.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct VerdictRef<'a> {
    /// The criterion's id.
    pub criterion: &'a str,
    /// The score given.
    pub score: f64,
    /// Whether the criterion is met, for binary criteria.
    pub met: Option<bool>,
    /// The rubric's confidence in the verdict.
    pub confidence: Option<f64>,
    /// Why.
    pub explanation: Option<&'a str>,
}

impl<'a> VerdictRef<'a> {
    fn read(reader: &mut Reader<'a>) -> Result<Self, Malformed> {
        let (criterion, score, met, confidence, explanation) = reader.verdict()?;
        Ok(VerdictRef {
            criterion,
            score,
            met,
            confidence,
            explanation,
        })
    }

    /// The owned record.
    pub fn to_verdict(&self) -> Verdict {
        Verdict {
            criterion: self.criterion.to_string(),
            score: self.score,
            met: self.met,
            confidence: self.confidence,
            explanation: self.explanation.map(str::to_string),
        }
    }
}

/// A named sub-score, borrowed. Serializes exactly as [`SubScore`] does.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SubScoreRef<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its value.
    pub value: f64,
}

impl<'a> SubScoreRef<'a> {
    fn read(reader: &mut Reader<'a>) -> Result<Self, Malformed> {
        let (name, value) = reader.sub_score()?;
        Ok(SubScoreRef { name, value })
    }

    /// The owned record.
    pub fn to_sub_score(&self) -> SubScore {
        SubScore {
            name: self.name.to_string(),
            value: self.value,
        }
    }
}

/// A row-level criterion, borrowed. Serializes exactly as [`Criterion`] does.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CriterionRef<'a> {
    /// Its id, as verdicts name it.
    pub id: &'a str,
    /// What it asks.
    pub description: &'a str,
    /// Its signed weight.
    pub weight: f64,
    /// The dimension it belongs to.
    pub dimension: &'a str,
    /// Its tags.
    pub tags: Items<'a, &'a str>,
}

impl<'a> CriterionRef<'a> {
    fn read(reader: &mut Reader<'a>) -> Result<Self, Malformed> {
        let (id, description, weight, dimension) = reader.criterion_head()?;
        let span = reader.texts()?;
        Ok(CriterionRef {
            id,
            description,
            weight,
            dimension,
            tags: Items {
                reader: Reader::new(reader.bytes(), span.at),
                left: span.count,
                read: Reader::text,
            },
        })
    }

    /// The owned record.
    pub fn to_criterion(&self) -> Criterion {
        Criterion {
            id: self.id.to_string(),
            description: self.description.to_string(),
            weight: self.weight,
            dimension: self.dimension.to_string(),
            tags: self.tags.map(str::to_string).collect(),
        }
    }
}

#[cfg(test)]
#[path = "judgments_tests.rs"]
mod tests;
