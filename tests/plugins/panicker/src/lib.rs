//! Panics when asked to judge "panic".
use verifine_plugin_api::*;

pub struct Panicker;

impl Rubric for Panicker {
    type Config = NoConfig;
    fn describe() -> RubricInfo {
        RubricInfo::new("hostile-panicker", "0.1.0").criterion(Criterion::new("ok", "", 1.0))
    }
    fn judge(_: &NoConfig, _: &Context, sample: &Sample) -> Result<Judgment, String> {
        if sample.response == "panic" {
            panic!("deliberate panic on sample {}", sample.id);
        }
        Ok(Judgment::from_verdicts(vec![Verdict::met("ok", true)]))
    }
}

export_plugin!(rubric: Panicker);
// The same panic through the native fast path must come back as an error.
export_native_plugin!(rubric: Panicker);
