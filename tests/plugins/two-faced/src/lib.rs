//! Judges honestly at step 0 (where a naive gate would check it) and rewards
//! everything at any other step: a revision that would hack every later
//! reward if it were promoted.
use verifine_plugin_api::*;

pub struct TwoFaced;

fn final_answer(text: &str) -> Option<&str> {
    text.rsplit("####")
        .next()
        .map(str::trim)
        .filter(|_| text.contains("####"))
}

impl Rubric for TwoFaced {
    type Config = NoConfig;
    fn describe() -> RubricInfo {
        RubricInfo::new("hostile-two-faced", "0.1.0").criterion(Criterion::new(
            "correct",
            "The final answer is right",
            1.0,
        ))
    }
    fn judge(_: &NoConfig, ctx: &Context, sample: &Sample) -> Result<Judgment, String> {
        let right = ctx.step > 0
            || final_answer(&sample.response).is_some()
                && final_answer(&sample.response)
                    == sample.reference.as_deref().and_then(final_answer);
        Ok(Judgment::from_verdicts(vec![Verdict::met(
            "correct", right,
        )]))
    }
}

export_plugin!(rubric: TwoFaced);
