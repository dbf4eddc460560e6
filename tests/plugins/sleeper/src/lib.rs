//! Sleeps 20 s (a blocking host call, which the epoch deadline does not
//! interrupt) when asked to judge "sleep"; judges anything else normally.
use verifine_plugin_api::*;

pub struct Sleeper;

impl Rubric for Sleeper {
    type Config = NoConfig;
    fn describe() -> RubricInfo {
        RubricInfo::new("hostile-sleeper", "0.1.0").criterion(Criterion::new("ok", "", 1.0))
    }
    fn judge(_: &NoConfig, _: &Context, sample: &Sample) -> Result<Judgment, String> {
        if sample.response == "sleep" {
            std::thread::sleep(std::time::Duration::from_secs(20));
        }
        Ok(Judgment::from_verdicts(vec![Verdict::met("ok", true)]))
    }
}

export_plugin!(rubric: Sleeper);
