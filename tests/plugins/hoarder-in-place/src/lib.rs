//! `hoarder` on the fast path: the same keeping and churning, written in
//! place (see tests/plugins/hoarder).
use verifine_plugin_api::*;

#[path = "../../hoarder/src/keep.rs"]
mod keep;

pub struct Hoarder;

impl Rubric for Hoarder {
    type Config = NoConfig;
    fn describe() -> RubricInfo {
        RubricInfo::new("hostile-hoarder-in-place", "0.1.0")
            .criterion(Criterion::new("kept", "", 1.0))
    }
    fn judge(config: &NoConfig, ctx: &Context, sample: &Sample) -> Result<Judgment, String> {
        judge_owned::<Self>(config, ctx, sample)
    }
}

impl RubricInPlace for Hoarder {
    fn judge_in_place(
        _: &NoConfig,
        _: &Context,
        sample: &SampleView<'_>,
        out: &mut JudgmentWriter<'_>,
    ) -> Result<(), String> {
        let (kept, churned, all) = keep::keep(sample.response);
        out.verdict(VerdictRef::met("kept", kept))
            .sub_score("churned", churned as f64)
            .explain(format_args!("{all}"));
        Ok(())
    }
}

export_plugin!(rubric_in_place: Hoarder);
