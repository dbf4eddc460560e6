//! Returns one judgment fewer than it was given samples (bypassing the SDK's
//! per-sample default), which the host must refuse rather than broadcast.
use verifine_plugin_api::*;

pub struct Short;

impl Rubric for Short {
    type Config = NoConfig;
    fn describe() -> RubricInfo {
        RubricInfo::new("hostile-wrong-count", "0.1.0").criterion(Criterion::new("ok", "", 1.0))
    }
    fn judge(_: &NoConfig, _: &Context, _: &Sample) -> Result<Judgment, String> {
        Ok(Judgment::from_verdicts(vec![Verdict::met("ok", true)]))
    }
    fn judge_batch(
        config: &NoConfig,
        ctx: &Context,
        samples: &[Sample],
    ) -> Vec<Result<Judgment, String>> {
        let mut all: Vec<_> = samples
            .iter()
            .map(|s| Self::judge(config, ctx, s))
            .collect();
        all.pop();
        all
    }
}

export_plugin!(rubric: Short);
