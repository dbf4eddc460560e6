//! Judges nothing: every sample gets a judgment of math-answer's shape (two
//! verdicts, a total, an explanation of similar length) without reading the
//! text. The `math_answer` bench runs it on the same batch, so the time of
//! lowering the samples into the sandbox and lifting the judgments back is
//! measured apart from the plugin's own work: on the fast path
//! ([`RubricInPlace`]) by default, on the owned path with the feature
//! `owned-path`.
use verifine_plugin_api::*;

pub struct BoundaryOnly;

impl Rubric for BoundaryOnly {
    type Config = NoConfig;
    // What math-answer reads, so the same bytes cross the boundary.
    const READS: SampleFields = SampleFields::RESPONSE.union(SampleFields::REFERENCE);
    fn describe() -> RubricInfo {
        RubricInfo::new("boundary-only", "0.1.0")
            .criterion(Criterion::new("format", "", 0.1))
            .criterion(Criterion::new("correct", "", 0.9))
    }
    fn judge(_: &NoConfig, _: &Context, sample: &Sample) -> Result<Judgment, String> {
        let answered = !sample.response.is_empty();
        Ok(Judgment::from_verdicts(vec![
            Verdict::met("format", answered),
            Verdict::met("correct", answered),
        ])
        .with_total(Some(if answered { 1.0 } else { 0.0 }))
        .because("answer 18 (by ####) vs reference 18".to_string()))
    }
}

impl RubricInPlace for BoundaryOnly {
    fn judge_in_place(
        _: &NoConfig,
        _: &Context,
        sample: &SampleView<'_>,
        out: &mut JudgmentWriter<'_>,
    ) -> Result<(), String> {
        let answered = !sample.response.is_empty();
        out.verdict(VerdictRef::met("format", answered))
            .verdict(VerdictRef::met("correct", answered))
            .total(if answered { 1.0 } else { 0.0 })
            .explain(format_args!("answer 18 (by ####) vs reference 18"));
        Ok(())
    }
}

#[cfg(not(feature = "owned-path"))]
export_plugin!(rubric_in_place: BoundaryOnly);
#[cfg(feature = "owned-path")]
export_plugin!(rubric: BoundaryOnly);
