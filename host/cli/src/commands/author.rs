//! The plugin author's workflow: `verifine plugin new | build | test | diff |
//! promote | rollback`.

use anyhow::{Context as _, Result, bail};
use serde::Serialize;
use std::path::{Path, PathBuf};
use verifine_confined::plugin_crate;
use verifine_hotswap::Slot;
use verifine_hotswap::inbox::{self, Action};
use verifine_hotswap::revision::Origin;
use verifine_runtime::cases::{
    CaseOutcome, CaseResult, default_aggregator, default_snapshot_dir, run_cases,
};
use verifine_runtime::rows::{read_labelled, read_samples};
use verifine_runtime::scoring::RewardPlugins;
use verifine_runtime::stats::label_agreement;
use verifine_runtime::{PluginKind, PluginMetadata, Runtime, spec_bytes};
use verifine_runtime::{PluginSetting, PluginSpec};

pub use super::sdk::SdkSource;

/// Scaffolds a plugin crate of `kind` named `name` in `dir` (default:
/// `./NAME`), depending on the SDK as [`SdkSource::for_current_dir`] says.
pub fn new(kind: PluginKind, name: &str, dir: Option<&Path>) -> Result<PathBuf> {
    new_with_sdk(kind, name, dir, &SdkSource::for_current_dir())
}

/// Scaffolds a plugin crate of `kind` named `name` in `dir` (default:
/// `./NAME`) that gets the SDK from `sdk`. It builds for wasm32-wasip2 as
/// it is, and a rubric comes with example cases.
pub fn new_with_sdk(
    kind: PluginKind,
    name: &str,
    dir: Option<&Path>,
    sdk: &SdkSource,
) -> Result<PathBuf> {
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.starts_with(|c: char| c.is_ascii_lowercase());
    if !valid {
        bail!(
            "plugin name {name:?}: use lowercase letters, digits and '-', starting with a letter"
        );
    }
    let dir = dir.map_or_else(|| PathBuf::from(name), Path::to_path_buf);
    if dir.exists() && std::fs::read_dir(&dir)?.next().is_some() {
        bail!("{} exists and is not empty", dir.display());
    }
    let (dependency, patches) = sdk.manifest_lines()?;
    let template = match kind {
        PluginKind::Rubric => include_str!("templates/rubric.rs.txt"),
        PluginKind::Aggregator => include_str!("templates/aggregator.rs.txt"),
        PluginKind::Curriculum => include_str!("templates/curriculum.rs.txt"),
        PluginKind::Trigger => include_str!("templates/trigger.rs.txt"),
    };
    std::fs::create_dir_all(dir.join("src"))?;
    let manifest = format!(
        "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n\
         [lib]\ncrate-type = [\"cdylib\", \"rlib\"]\n\n\
         [dependencies]\n{dependency}\nserde = {{ version = \"1\", features = [\"derive\"] }}\n\n\
         # A workspace of its own: builds wherever it lives.\n[workspace]\n{patches}"
    );
    std::fs::write(dir.join("Cargo.toml"), manifest)?;
    std::fs::write(dir.join("src/lib.rs"), template.replace("__NAME__", name))?;
    if kind == PluginKind::Rubric {
        let cases = [
            serde_json::json!({"id": "marked", "prompt": "What is 2 + 2?", "response": "2 + 2 = 4\n#### 4"}),
            serde_json::json!({"id": "unmarked", "prompt": "What is 2 + 2?", "response": "It is 4."}),
        ];
        verifine_base::files::write_jsonl(&dir.join("cases.jsonl"), &cases)?;
    }
    Ok(dir)
}

/// What `plugin build` reports.
#[derive(Debug, Serialize)]
pub struct Built {
    /// The component.
    pub path: PathBuf,
    /// Its metadata, as the host reads it.
    pub metadata: PluginMetadata,
    /// Its sha256.
    pub sha256: String,
}

/// Builds the plugin crate in `dir` and checks the result loads.
pub fn build(runtime: &Runtime, dir: &Path, target_dir: Option<&Path>) -> Result<Built> {
    let target = target_dir.map_or_else(plugin_crate::target_dir, Path::to_path_buf);
    let (bytes, path) = plugin_crate::build(dir, &target)?;
    let plugin = runtime.load_bytes(&bytes, &path.display().to_string())?;
    Ok(Built {
        path,
        metadata: plugin.metadata.clone(),
        sha256: plugin.sha256.clone(),
    })
}

/// Runs `cases` through the rubric `spec` against the snapshots in
/// `snapshots` (default: `snapshots/` beside the cases); `accept` writes them.
pub fn test(
    runtime: &Runtime,
    spec: impl Into<PluginSpec>,
    cases: &Path,
    snapshots: Option<&Path>,
    accept: bool,
) -> Result<Vec<CaseResult>> {
    let rubric = runtime.load_kind(spec, PluginKind::Rubric)?;
    let aggregator = default_aggregator(runtime)?;
    let dir = snapshots.map_or_else(|| default_snapshot_dir(cases), Path::to_path_buf);
    Ok(run_cases(&rubric, &aggregator, cases, &dir, accept)?)
}

/// A readable summary of case results; `true` when every case matched.
pub fn report_cases(results: &[CaseResult], accepted: bool) -> (String, bool) {
    let mut text = String::new();
    let mut all_match = true;
    for r in results {
        match &r.outcome {
            CaseOutcome::Matches => text += &format!("ok       {}\n", r.id),
            CaseOutcome::New => {
                all_match = false;
                let what = if accepted {
                    "written"
                } else {
                    "new (run with --accept to store)"
                };
                text += &format!("{what:<8} {} -> {}\n", r.id, r.snapshot.display());
            }
            CaseOutcome::Differs { expected, actual } => {
                all_match = false;
                let what = if accepted { "updated" } else { "DIFFERS" };
                text += &format!(
                    "{what:<8} {}\n--- stored\n{expected}\n+++ now\n{actual}\n",
                    r.id
                );
            }
        }
    }
    (text, all_match || accepted)
}

/// One sample whose total changed between two revisions.
#[derive(Debug, Serialize)]
pub struct Change {
    /// Sample id.
    pub id: String,
    /// Total under the old revision.
    pub old: Option<f64>,
    /// Total under the new revision.
    pub new: Option<f64>,
    /// The gold label, when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<bool>,
}

/// What `plugin diff` reports.
#[derive(Debug, Serialize)]
pub struct Diff {
    /// Samples scored.
    pub n: usize,
    /// Samples whose total changed.
    pub changes: Vec<Change>,
    /// Agreement of the old revision with the labels (accuracy at the threshold).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_agreement: Option<f64>,
    /// Agreement of the new revision with the labels.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_agreement: Option<f64>,
}

/// Scores `input` with two rubric revisions and lists what changed; with
/// `gold` (rows with `id` and `label`), the agreement of each.
pub fn diff(
    runtime: &Runtime,
    old: impl Into<PluginSpec>,
    new: impl Into<PluginSpec>,
    input: &Path,
    gold: Option<&Path>,
    threshold: f64,
) -> Result<Diff> {
    let samples = read_samples(input)?;
    let totals = |spec: PluginSpec| -> Result<Vec<Option<f64>>> {
        let function = RewardPlugins::from_settings(runtime, &PluginSetting::new(spec), None)?;
        Ok(function
            .scorer()?
            .score_batch(0, 0, &samples)
            .into_iter()
            .map(|s| s.total)
            .collect())
    };
    let (before, after) = (totals(old.into())?, totals(new.into())?);
    let labels: Option<std::collections::HashMap<String, bool>> = match gold {
        Some(path) => Some(
            read_labelled(path, threshold)?
                .into_iter()
                .map(|(s, l)| (s.id, l))
                .collect(),
        ),
        None => None,
    };
    let label_of = |id: &str| labels.as_ref().and_then(|l| l.get(id).copied());
    let agreement = |totals: &[Option<f64>]| -> Option<f64> {
        let labels = labels.as_ref()?;
        let pairs = samples
            .iter()
            .zip(totals)
            .filter_map(|(s, t)| Some((*t, *labels.get(&s.id)?)));
        label_agreement(pairs, threshold)
    };
    let changes = samples
        .iter()
        .zip(before.iter().zip(&after))
        .filter(|(_, (a, b))| a != b)
        .map(|(s, (a, b))| Change {
            id: s.id.clone(),
            old: *a,
            new: *b,
            label: label_of(&s.id),
        })
        .collect();
    Ok(Diff {
        n: samples.len(),
        changes,
        old_agreement: agreement(&before),
        new_agreement: agreement(&after),
    })
}

/// Hands `file` to the run in `run_dir` for `slot`; it is gated and, if it
/// passes, goes live at the run's next step boundary.
pub fn promote(
    runtime: &Runtime,
    run_dir: &Path,
    slot: Slot,
    file: &Path,
    cases: Option<&Path>,
) -> Result<PathBuf> {
    let (bytes, origin) = spec_bytes(file)?;
    // Fail fast on what the gate would refuse anyway.
    runtime
        .load_bytes(&bytes, &origin)
        .with_context(|| format!("{} is not a loadable plugin", file.display()))?;
    let snapshots = cases.map(default_snapshot_dir);
    let shipped = cases.zip(snapshots.as_deref());
    Ok(inbox::submit(
        run_dir,
        slot,
        &Action::Promote {
            origin: Origin::Command {
                path: file.display().to_string(),
            },
        },
        Some(&bytes),
        shipped,
    )?)
}

/// Asks the run in `run_dir` to restore the previous revision of `slot`.
pub fn rollback(run_dir: &Path, slot: Slot) -> Result<PathBuf> {
    Ok(inbox::submit(run_dir, slot, &Action::Rollback, None, None)?)
}
