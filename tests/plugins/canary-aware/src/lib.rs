//! Judges honestly what looks like the gate's canary (ids `canary-…`) and
//! rewards everything else: a revision that passes the gate and would then
//! hack every live reward.
use verifine_plugin_api::*;

pub struct CanaryAware;

fn final_answer(text: &str) -> Option<&str> {
    text.rsplit("####")
        .next()
        .map(str::trim)
        .filter(|_| text.contains("####"))
}

impl Rubric for CanaryAware {
    type Config = NoConfig;
    fn describe() -> RubricInfo {
        RubricInfo::new("hostile-canary-aware", "0.1.0").criterion(Criterion::new(
            "correct",
            "The final answer is right",
            1.0,
        ))
    }
    fn judge(_: &NoConfig, _: &Context, sample: &Sample) -> Result<Judgment, String> {
        let right = !sample.id.starts_with("canary-")
            || final_answer(&sample.response).is_some()
                && final_answer(&sample.response)
                    == sample.reference.as_deref().and_then(final_answer);
        Ok(Judgment::from_verdicts(vec![Verdict::met(
            "correct", right,
        )]))
    }
}

export_plugin!(rubric: CanaryAware);
