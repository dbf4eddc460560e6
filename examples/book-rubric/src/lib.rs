//! A rubric: the response marks a final answer (`#### N`) and it is the reference's.
use verifine_plugin_api::*;

criteria! {
    /// What the rubric checks; a misspelled criterion does not compile.
    pub enum Checks { Marked = "marked", Correct = "correct" }
}

/// The text after the last `####`, or all of it.
fn final_answer(text: &str) -> &str {
    text.rsplit("####").next().unwrap_or(text).trim()
}

/// The plugin: no config, reads only the response and the reference.
pub struct FinalAnswer;

impl Rubric for FinalAnswer {
    type Config = NoConfig;
    const READS: SampleFields = SampleFields::RESPONSE.union(SampleFields::REFERENCE);

    fn describe() -> RubricInfo {
        RubricInfo::new("final-answer", env!("CARGO_PKG_VERSION"))
            .criterion(Criterion::new(&Checks::Marked, "Ends with `#### N`", 0.2))
            .criterion(Criterion::new(&Checks::Correct, "N is correct", 0.8))
    }

    fn judge(_: &NoConfig, _: &Context, sample: &Sample) -> Result<Judgment, String> {
        let marked = sample.response.contains("####");
        let expected = sample.reference.as_deref().map(final_answer);
        let correct = marked && expected == Some(final_answer(&sample.response));
        Ok(Judgment::from_verdicts(vec![
            Verdict::met(&Checks::Marked, marked),
            Verdict::met(&Checks::Correct, correct),
        ]))
    }
}

export_plugin!(rubric: FinalAnswer);
