//! The host's functions, as plain Rust calls.

use crate::__private::rubric::verifine::plugin::host;
use crate::{LogLevel, ModelQuery};

/// Writes to the host's log (tagged with the plugin's name by the host).
pub fn log(level: LogLevel, message: &str) {
    host::log(level, message);
}

/// Asks the host's judge model. One answer or error per query, in order.
/// Until a model backend is configured the host answers every query with
/// "no judge model configured", so plugins should fall back or report it.
pub fn judge_model(queries: &[ModelQuery]) -> Vec<Result<String, String>> {
    host::judge_model(queries)
}
