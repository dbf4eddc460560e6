//! Allocates without bound when asked to judge "bomb".
use verifine_plugin_api::*;

pub struct Bomb;

impl Rubric for Bomb {
    type Config = NoConfig;
    fn describe() -> RubricInfo {
        RubricInfo::new("hostile-alloc-bomb", "0.1.0").criterion(Criterion::new("ok", "", 1.0))
    }
    fn judge(_: &NoConfig, _: &Context, sample: &Sample) -> Result<Judgment, String> {
        if sample.response == "bomb" {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1u8; 16 << 20]);
                std::hint::black_box(&hoard);
            }
        }
        Ok(Judgment::from_verdicts(vec![Verdict::met("ok", true)]))
    }
}

export_plugin!(rubric: Bomb);
