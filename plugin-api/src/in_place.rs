//! The fast path for rubrics: samples read in place, judgments written in
//! place.
//!
//! A [`Rubric`] gets each sample as owned strings and answers an owned
//! [`Judgment`]: simple to write, and every verdict's id and explanation is
//! an allocation, made in the sandbox and made again when the host decodes
//! the answer. A [`RubricInPlace`] gets a [`SampleView`] that borrows the
//! host's packed batch (no copy) and writes its judgment through a
//! [`JudgmentWriter`] straight into the answer (no allocation per sample:
//! the writer's buffers are reused from sample to sample). The bytes that
//! leave the sandbox are the same either way, so the host cannot tell the
//! paths apart, and [`judge_owned`] runs the fast path's rule where an
//! owned judgment is wanted (tests, [`Rubric::judge`]).

use crate::explanation::ExplanationText;
use crate::packed::{self, PackedError};
use crate::{Context, Criterion, Judgment, Rubric, Sample, Verdict};
use std::fmt::{self, Write as _};
use verifine_contract::wire::{put_text, put_varint};

/// One sample, borrowed: from the host's packed batch or from a [`Sample`].
#[derive(Debug, Clone, Copy)]
pub struct SampleView<'a> {
    /// The sample's id.
    pub id: &'a str,
    /// The prompt ("" when the rubric does not read it).
    pub prompt: &'a str,
    /// The response judged.
    pub response: &'a str,
    /// A reference answer or worked solution, when the data has one.
    pub reference: Option<&'a str>,
    /// The data row's own context as JSON text ("{}" when absent).
    pub context: &'a str,
    pub(crate) metadata: Metadata<'a>,
}

/// Where a view's metadata pairs are.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Metadata<'a> {
    /// `count` pairs encoded in `bytes` (already checked when the view was read).
    Packed {
        bytes: &'a [u8],
        count: usize,
    },
    Owned(&'a [(String, String)]),
}

impl<'a> SampleView<'a> {
    /// A view of an owned sample.
    pub fn of(sample: &'a Sample) -> Self {
        SampleView {
            id: &sample.id,
            prompt: &sample.prompt,
            response: &sample.response,
            reference: sample.reference.as_deref(),
            context: &sample.context,
            metadata: Metadata::Owned(&sample.metadata),
        }
    }

    /// The metadata pairs, in order.
    pub fn metadata(&self) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        let (packed, owned) = match self.metadata {
            Metadata::Packed { bytes, count } => (Some(packed::pairs(bytes, count)), None),
            Metadata::Owned(pairs) => (None, Some(pairs.iter().map(|(k, v)| (&**k, &**v)))),
        };
        packed
            .into_iter()
            .flatten()
            .chain(owned.into_iter().flatten())
    }

    /// An owned copy (what a [`Rubric`] is given).
    pub fn to_sample(&self) -> Sample {
        Sample {
            id: self.id.to_string(),
            prompt: self.prompt.to_string(),
            response: self.response.to_string(),
            reference: self.reference.map(str::to_string),
            context: self.context.to_string(),
            metadata: self
                .metadata()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }
}

/// A verdict whose strings are borrowed (see [`Verdict`] for the fields).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VerdictRef<'a> {
    /// The criterion's id.
    pub criterion: &'a str,
    /// Degree to which the criterion holds, in [0, 1].
    pub score: f64,
    /// Whether it holds, for a binary criterion.
    pub met: Option<bool>,
    /// The judge's confidence, in [0, 1].
    pub confidence: Option<f64>,
    /// Why.
    pub explanation: Option<&'a str>,
}

impl<'a> VerdictRef<'a> {
    /// A binary verdict: score 1 when met, 0 otherwise ([`Verdict::met`]).
    pub fn met(criterion: &'a str, met: bool) -> Self {
        VerdictRef {
            criterion,
            score: if met { 1.0 } else { 0.0 },
            met: Some(met),
            confidence: None,
            explanation: None,
        }
    }

    /// A graded verdict, its score clamped to [0, 1] ([`Verdict::scored`]).
    pub fn scored(criterion: &'a str, score: f64) -> Self {
        VerdictRef {
            criterion,
            score: score.clamp(0.0, 1.0),
            met: None,
            confidence: None,
            explanation: None,
        }
    }

    /// Attaches an explanation.
    pub fn because(self, explanation: &'a str) -> Self {
        VerdictRef {
            explanation: Some(explanation),
            ..self
        }
    }

    /// Attaches a confidence, clamped to [0, 1].
    pub fn with_confidence(self, confidence: f64) -> Self {
        VerdictRef {
            confidence: Some(confidence.clamp(0.0, 1.0)),
            ..self
        }
    }

    fn of(verdict: &'a Verdict) -> Self {
        VerdictRef {
            criterion: &verdict.criterion,
            score: verdict.score,
            met: verdict.met,
            confidence: verdict.confidence,
            explanation: verdict.explanation.as_deref(),
        }
    }
}

/// The writer's buffers, kept from sample to sample so that writing a
/// judgment allocates nothing once they have grown.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    total: Option<f64>,
    verdicts: Vec<u8>,
    verdict_count: usize,
    sub_scores: Vec<u8>,
    sub_score_count: usize,
    criteria: Vec<u8>,
    criterion_count: usize,
    explanation: String,
    explained: bool,
}

impl Scratch {
    /// Gives every buffer an allocation of its own, so that growing one
    /// later is a reallocation (which keeps a block where it was born: see
    /// [`crate::call_arena`]).
    pub(crate) fn reserve(&mut self) {
        self.verdicts.reserve(64);
        self.sub_scores.reserve(64);
        self.criteria.reserve(64);
        self.explanation.reserve(64);
    }
}

/// Where a [`RubricInPlace`] writes one sample's judgment. Parts may come in
/// any order; a later total or explanation replaces an earlier one.
pub struct JudgmentWriter<'s> {
    scratch: &'s mut Scratch,
}

impl<'s> JudgmentWriter<'s> {
    pub(crate) fn new(scratch: &'s mut Scratch) -> Self {
        scratch.total = None;
        scratch.verdicts.clear();
        scratch.verdict_count = 0;
        scratch.sub_scores.clear();
        scratch.sub_score_count = 0;
        scratch.criteria.clear();
        scratch.criterion_count = 0;
        scratch.explanation.clear();
        scratch.explained = false;
        JudgmentWriter { scratch }
    }

    /// The rubric's own total.
    pub fn total(&mut self, total: f64) -> &mut Self {
        self.scratch.total = Some(total);
        self
    }

    /// Adds a verdict.
    pub fn verdict(&mut self, verdict: VerdictRef<'_>) -> &mut Self {
        let out = &mut self.scratch.verdicts;
        put_text(out, verdict.criterion);
        put_f64(out, verdict.score);
        match verdict.met {
            None => out.push(0),
            Some(met) => out.extend_from_slice(&[1, u8::from(met)]),
        }
        put_option(out, verdict.confidence, put_f64);
        put_option(out, verdict.explanation, put_text);
        self.scratch.verdict_count += 1;
        self
    }

    /// Adds a named sub-score.
    pub fn sub_score(&mut self, name: &str, value: f64) -> &mut Self {
        put_text(&mut self.scratch.sub_scores, name);
        put_f64(&mut self.scratch.sub_scores, value);
        self.scratch.sub_score_count += 1;
        self
    }

    /// Declares a row-level criterion ([`Judgment::with_criteria`]).
    pub fn criterion(&mut self, criterion: &Criterion) -> &mut Self {
        let out = &mut self.scratch.criteria;
        put_text(out, &criterion.id);
        put_text(out, &criterion.description);
        put_f64(out, criterion.weight);
        put_text(out, &criterion.dimension);
        put_varint(out, criterion.tags.len());
        for tag in &criterion.tags {
            put_text(out, tag);
        }
        self.scratch.criterion_count += 1;
        self
    }

    /// Sets the overall explanation, formatted in place:
    /// `out.explain(format_args!("answer {} vs {}", found, expected))`.
    pub fn explain(&mut self, explanation: fmt::Arguments<'_>) -> &mut Self {
        self.scratch.explanation.clear();
        // Writing into a String cannot fail; a Display impl that reports
        // an error leaves what it wrote so far.
        let _ = self.scratch.explanation.write_fmt(explanation);
        self.scratch.explained = true;
        self
    }

    /// Sets the overall explanation, written piece by piece:
    /// `out.explain_with(|text| { text.push_str("answer ").push_number(42.0); })`.
    /// The same text as [`JudgmentWriter::explain`] would write, cheaper in
    /// a component.
    pub fn explain_with(&mut self, write: impl FnOnce(&mut ExplanationText<'_>)) -> &mut Self {
        self.scratch.explanation.clear();
        write(&mut ExplanationText::appending_to(
            &mut self.scratch.explanation,
        ));
        self.scratch.explained = true;
        self
    }

    /// Writes an owned judgment (how a [`Rubric`]'s answer takes this path).
    pub fn judgment(&mut self, judgment: &Judgment) -> &mut Self {
        if let Some(total) = judgment.total {
            self.total(total);
        }
        for verdict in &judgment.verdicts {
            self.verdict(VerdictRef::of(verdict));
        }
        for sub in &judgment.sub_scores {
            self.sub_score(&sub.name, sub.value);
        }
        for criterion in &judgment.criteria {
            self.criterion(criterion);
        }
        if let Some(explanation) = &judgment.explanation {
            self.explain(format_args!("{explanation}"));
        }
        self
    }

    /// Appends the judgment as `Ok(judgment)` of the contract's
    /// `result<judgment, string>` in postcard (fields in the contract's order).
    fn finish(self, out: &mut Vec<u8>) {
        let s = self.scratch;
        out.push(0);
        put_option(out, s.total, put_f64);
        for (count, bytes) in [
            (s.verdict_count, &s.verdicts),
            (s.sub_score_count, &s.sub_scores),
            (s.criterion_count, &s.criteria),
        ] {
            put_varint(out, count);
            out.extend_from_slice(bytes);
        }
        put_option(out, s.explained.then_some(s.explanation.as_str()), put_text);
    }
}

/// A rubric on the fast path. Implement [`Rubric`] as well, its
/// [`Rubric::judge`] as `judge_owned::<Self>(config, ctx, sample)` (one
/// rule, two ways to call it), and export it with
/// `export_plugin!(rubric_in_place: MyRubric)`.
pub trait RubricInPlace: Rubric {
    /// Judges one sample into `out`; an `Err` marks the sample as failed
    /// (what was written is dropped).
    fn judge_in_place(
        config: &Self::Config,
        ctx: &Context,
        sample: &SampleView<'_>,
        out: &mut JudgmentWriter<'_>,
    ) -> Result<(), String>;
}

/// The fast path's judgment of an owned sample, as an owned [`Judgment`].
pub fn judge_owned<R: RubricInPlace>(
    config: &R::Config,
    ctx: &Context,
    sample: &Sample,
) -> Result<Judgment, String> {
    let mut scratch = Scratch::default();
    let mut writer = JudgmentWriter::new(&mut scratch);
    R::judge_in_place(config, ctx, &SampleView::of(sample), &mut writer)?;
    let mut bytes = Vec::new();
    writer.finish(&mut bytes);
    let judged: Result<Judgment, String> =
        postcard::from_bytes(&bytes).expect("the writer writes the contract's encoding");
    judged
}

/// Judges the packed batch `samples` (contract 0.3's `judge-packed`) on the
/// fast path, appending `list<result<judgment, string>>` in postcard to
/// `answer`. `config` is the parsed plugin config, or why it did not parse
/// (every sample's error then).
pub(crate) fn judge_packed<R: RubricInPlace>(
    config: &Result<R::Config, String>,
    ctx: &Context,
    samples: &[u8],
    scratch: &mut Scratch,
    answer: &mut Vec<u8>,
) -> Result<(), PackedError> {
    let mut views = packed::views(samples)?;
    put_varint(answer, views.len());
    while let Some(view) = views.next_view()? {
        let start = answer.len();
        let outcome = config.as_ref().map_err(String::clone).and_then(|config| {
            let mut writer = JudgmentWriter::new(scratch);
            R::judge_in_place(config, ctx, &view, &mut writer)?;
            writer.finish(answer);
            Ok(())
        });
        if let Err(error) = outcome {
            answer.truncate(start);
            answer.push(1);
            put_text(answer, &error);
        }
    }
    views.finish()
}

/// Writes `judgment` as postcard's `Ok(judgment)` (for tests of the encoding).
#[cfg(test)]
pub(crate) fn encode_ok(judgment: &Judgment) -> Vec<u8> {
    let mut scratch = Scratch::default();
    let mut writer = JudgmentWriter::new(&mut scratch);
    writer.judgment(judgment);
    let mut out = Vec::new();
    writer.finish(&mut out);
    out
}

fn put_f64(out: &mut Vec<u8>, value: f64) {
    out.extend_from_slice(&value.to_le_bytes());
}

fn put_option<T>(out: &mut Vec<u8>, value: Option<T>, put: fn(&mut Vec<u8>, T)) {
    match value {
        None => out.push(0),
        Some(value) => {
            out.push(1);
            put(out, value);
        }
    }
}

#[cfg(test)]
#[path = "in_place_tests.rs"]
mod tests;
