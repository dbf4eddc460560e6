//! Snapshot cases of a rubric plugin: inputs in a JSONL file, the expected
//! result of each in an insta-compatible `.snap` file. `verifine plugin test`
//! writes and checks them; the hot-swap gate checks the cases a candidate
//! ships.

use crate::builders::EMPTY_JSON;
use crate::error::{Result, RuntimeError};
use crate::rows::{OutputRow, read_samples};
use crate::scoring::{DEFAULT_AGGREGATOR, RewardPlugins};
use crate::{Plugin, Sample};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use verifine_base::FileError;

/// How one case compared with its snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaseOutcome {
    /// Same as the snapshot.
    Matches,
    /// No snapshot yet (written with `--accept`).
    New,
    /// Differs from the snapshot.
    Differs {
        /// The stored snapshot's content.
        expected: String,
        /// What the plugin produced now.
        actual: String,
    },
}

/// One case's result.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// The case id.
    pub id: String,
    /// Where its snapshot lives.
    pub snapshot: PathBuf,
    /// The comparison.
    pub outcome: CaseOutcome,
    /// The plugin's result now, as snapshot content.
    pub actual: String,
}

/// The snapshot directory of a cases file: `snapshots/` beside it.
pub fn default_snapshot_dir(cases: &Path) -> PathBuf {
    cases
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .join("snapshots")
}

/// Runs every case of `cases` through `rubric` and compares with the
/// snapshots in `snapshot_dir`; with `accept`, new and differing snapshots
/// are (re)written.
pub fn run_cases(
    rubric: &Arc<Plugin>,
    aggregator: &Arc<Plugin>,
    cases: &Path,
    snapshot_dir: &Path,
    accept: bool,
) -> Result<Vec<CaseResult>> {
    let samples = read_samples(cases)?;
    let function = RewardPlugins {
        rubric: rubric.clone(),
        rubric_config: EMPTY_JSON.to_string(),
        aggregator: aggregator.clone(),
        aggregator_config: EMPTY_JSON.to_string(),
        aggregator_explicit: false,
    };
    let mut scorer = function.scorer()?;
    let scored = scorer.score_batch(0, 0, &samples);
    let stem = cases
        .file_stem()
        .map_or("cases".into(), |s| s.to_string_lossy().into_owned());
    let mut results = Vec::with_capacity(samples.len());
    for (sample, scored) in samples.iter().zip(&scored) {
        let actual = snapshot_content(sample, scored, rubric);
        let snapshot = snapshot_dir.join(format!("{stem}__{}.snap", file_safe(&sample.id)));
        let outcome = match std::fs::read_to_string(&snapshot) {
            Ok(text) => {
                let expected = snapshot_body(&text);
                if expected.trim_end() == actual.trim_end() {
                    CaseOutcome::Matches
                } else {
                    CaseOutcome::Differs {
                        expected: expected.to_string(),
                        actual: actual.clone(),
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => CaseOutcome::New,
            Err(e) => return Err(FileError::io("reading", &snapshot, e).into()),
        };
        if accept && outcome != CaseOutcome::Matches {
            std::fs::create_dir_all(snapshot_dir)
                .map_err(|e| FileError::io("creating", snapshot_dir, e))?;
            let text = format!(
                "---\nsource: verifine plugin test\nexpression: \"{}\"\n---\n{actual}\n",
                sample.id.replace('"', "'")
            );
            verifine_base::files::write_atomically(&snapshot, |w| w.write_all(text.as_bytes()))?;
        }
        results.push(CaseResult {
            id: sample.id.clone(),
            snapshot,
            outcome,
            actual,
        });
    }
    Ok(results)
}

/// Checks shipped cases: every case must have a snapshot and match it.
pub fn require_all_match(results: &[CaseResult]) -> Result<()> {
    let failing: Vec<String> = results
        .iter()
        .filter_map(|r| match &r.outcome {
            CaseOutcome::Matches => None,
            CaseOutcome::New => Some(format!("{}: no snapshot", r.id)),
            CaseOutcome::Differs { .. } => Some(format!("{}: differs from its snapshot", r.id)),
        })
        .collect();
    if !failing.is_empty() {
        return Err(RuntimeError::Cases(format!(
            "{} of {} cases fail: {}",
            failing.len(),
            results.len(),
            failing.join("; ")
        )));
    }
    Ok(())
}

/// The aggregator snapshot cases use: the default one.
pub fn default_aggregator(runtime: &crate::Runtime) -> Result<Arc<Plugin>> {
    runtime.load_kind(DEFAULT_AGGREGATOR, crate::PluginKind::Aggregator)
}

/// What a snapshot records: the output row without the sha256 (a rebuild of
/// the same logic must still match), pretty JSON.
fn snapshot_content(
    sample: &Sample,
    scored: &crate::scoring::ScoredSample,
    rubric: &Arc<Plugin>,
) -> String {
    let row = OutputRow {
        id: sample.id.clone(),
        total: scored.total,
        rubric_total: scored.rubric_total,
        verdicts: scored
            .judgment
            .as_ref()
            .map(|j| j.verdicts.clone())
            .unwrap_or_default(),
        sub_scores: scored
            .judgment
            .as_ref()
            .map(|j| j.sub_scores.clone())
            .unwrap_or_default(),
        criteria: Vec::new(),
        explanation: scored.judgment.as_ref().and_then(|j| j.explanation.clone()),
        plugin: rubric.provenance(),
        aggregator: None,
        error: scored.error.clone(),
    };
    let mut value = serde_json::to_value(&row).expect("output rows serialize");
    if let Some(plugin) = value.get_mut("plugin").and_then(|p| p.as_object_mut()) {
        plugin.remove("sha256");
        plugin.remove("version");
    }
    serde_json::to_string_pretty(&value).expect("JSON values serialize")
}

/// The content after insta's header (`---` … `---`).
fn snapshot_body(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("---\n") else {
        return text;
    };
    match rest.find("\n---\n") {
        Some(end) => &rest[end + 5..],
        None => text,
    }
}

fn file_safe(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
