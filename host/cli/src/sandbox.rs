//! The sandbox commands and training runs score in, with the judge models
//! its plugins may ask (below both `commands` and `run`, which use it).

use anyhow::Result;
use std::path::Path;
use std::sync::Arc;
use verifine_judge::{Judges, JudgesConfig};
use verifine_runtime::{Limits, Runtime};

/// A sandbox with `limits` whose plugins' model queries are answered by the
/// judges of the `judges` file, when one is given; the judges are returned
/// too, for their cost ledgers.
pub fn judged_runtime(
    limits: Limits,
    judges: Option<&Path>,
    allow_native: bool,
) -> Result<(Runtime, Option<Arc<Judges>>)> {
    let judges = match judges {
        Some(path) => Some(Arc::new(Judges::new(&JudgesConfig::load(path)?)?)),
        None => None,
    };
    let mut runtime = Runtime::new(limits)?.allow_native(allow_native);
    if let Some(judges) = &judges {
        runtime = runtime.with_judges(judges.clone());
    }
    Ok((runtime, judges))
}
