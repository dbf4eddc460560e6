//! Loops forever when asked to judge "loop"; judges anything else normally,
//! so tests can show the host recovers and goes on.
use verifine_plugin_api::*;

pub struct Spinner;

impl Rubric for Spinner {
    type Config = NoConfig;
    fn describe() -> RubricInfo {
        RubricInfo::new("hostile-infinite-loop", "0.1.0").criterion(Criterion::new("ok", "", 1.0))
    }
    fn judge(_: &NoConfig, _: &Context, sample: &Sample) -> Result<Judgment, String> {
        if sample.response == "loop" {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        Ok(Judgment::from_verdicts(vec![Verdict::met("ok", true)]))
    }
}

export_plugin!(rubric: Spinner);
