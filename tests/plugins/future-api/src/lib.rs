//! A well-behaved rubric stamped with contract version 9.0.0, which no host
//! of major version 0 may load.
use verifine_plugin_api::*;

pub struct FromTheFuture;

impl Rubric for FromTheFuture {
    type Config = NoConfig;
    fn describe() -> RubricInfo {
        RubricInfo::new("hostile-future-api", "0.1.0").criterion(Criterion::new("ok", "", 1.0))
    }
    fn judge(_: &NoConfig, _: &Context, _: &Sample) -> Result<Judgment, String> {
        Ok(Judgment::from_verdicts(vec![Verdict::met("ok", true)]))
    }
}

export_plugin!(@stamped "9.0.0", rubric: FromTheFuture);
export_native_plugin!(@stamped "9.0.0", rubric: FromTheFuture);
