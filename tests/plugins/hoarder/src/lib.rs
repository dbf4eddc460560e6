//! Keeps, across calls, every response that starts with "keep:" (in a
//! thread-local that lives as long as the instance), and churns through
//! temporary allocations on every sample. Memory that outlives the call it
//! was allocated in must never be handed out again by the call arena:
//! every judgment spells out all that is kept, so a block reused under it
//! would show as changed text. The owned path; `hoarder-in-place` is the
//! same on the fast path.
use verifine_plugin_api::*;

mod keep;

pub struct Hoarder;

impl Rubric for Hoarder {
    type Config = NoConfig;
    fn describe() -> RubricInfo {
        RubricInfo::new("hostile-hoarder", "0.1.0").criterion(Criterion::new("kept", "", 1.0))
    }
    fn judge(_: &NoConfig, _: &Context, sample: &Sample) -> Result<Judgment, String> {
        let (kept, churned, all) = keep::keep(&sample.response);
        Ok(Judgment::from_verdicts(vec![Verdict::met("kept", kept)])
            .with_sub_score("churned", churned as f64)
            .because(all))
    }
}

export_plugin!(rubric: Hoarder);
