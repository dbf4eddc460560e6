//! The reference-free judge: a rubric component whose rules (sub-criteria,
//! weights, gate: its config table) are what revisions change, and whose
//! code a revision may replace too (see [`crate::code`]); its dimensions
//! stay fixed across revisions. Every revision is numbered and kept.

use crate::cases::{Case, Dimensions};
use crate::code::JudgeCode;
use crate::error::Result;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use verifine_base::PASS_MARK;
use verifine_base::{PluginSpec, Provenance};
use verifine_runtime::scoring::{RewardPlugins, score_all};
use verifine_runtime::{Plugin, Runtime, Sample};

/// One revision of the judge's rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeRevision {
    /// 0 for the initial judge, then 1, 2 … in order of acceptance.
    pub number: u32,
    /// The rubric's config table (as JSON) for this revision.
    pub rules: serde_json::Value,
    /// Where it came from ("initial", or the agent's rationale).
    pub origin: String,
    /// The component it runs, when not the configured one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<JudgeCode>,
}

/// The judge's verdict on one case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeScore {
    /// The total in [0, 1]; 0 when judging failed (see `error`).
    pub total: f64,
    /// Sub-score per dimension.
    pub dimensions: Dimensions,
    /// The judge's explanation.
    pub explanation: String,
    /// Why judging failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl JudgeScore {
    /// How sure the judge is: distance of the total from the decision
    /// boundary 0.5, scaled to [0, 1].
    pub fn confidence(&self) -> f64 {
        ((self.total - PASS_MARK).abs() * 2.0).min(1.0)
    }

    /// The spread of the dimension sub-scores (largest − smallest): large
    /// when the dimensions disagree about the case.
    pub fn disagreement(&self) -> f64 {
        let values = self.dimensions.values();
        let max = values.clone().fold(f64::NEG_INFINITY, |m, &v| m.max(v));
        let min = values.fold(f64::INFINITY, |m, &v| m.min(v));
        if max.is_finite() { max - min } else { 0.0 }
    }
}

/// The judge's components, ready to score under any revision: the
/// configured one, and those code revisions brought (loaded on first use).
pub struct Judge {
    runtime: Runtime,
    spec: PluginSpec,
    configured: RewardPlugins,
    judge_dir: PathBuf,
    loaded: Mutex<HashMap<String, Arc<Plugin>>>,
    threads: usize,
}

impl Judge {
    /// Loads the rubric `spec` with the default aggregator; code revisions
    /// are stored under `judge_dir` (see [`crate::code`]).
    pub fn load(
        runtime: Runtime,
        spec: &PluginSpec,
        threads: usize,
        judge_dir: &Path,
    ) -> Result<Self> {
        let configured = RewardPlugins::load(
            &runtime,
            spec.clone(),
            &serde_json::json!({}),
            None,
            &serde_json::json!({}),
        )?;
        Ok(Judge {
            runtime,
            spec: spec.clone(),
            configured,
            judge_dir: judge_dir.to_path_buf(),
            loaded: Mutex::new(HashMap::new()),
            threads: threads.max(1),
        })
    }

    /// The configured component's provenance.
    pub fn provenance(&self) -> Provenance {
        self.configured.rubric.provenance()
    }

    /// The reward plugins that score under `revision`: its component and
    /// its rules (for training).
    pub fn plugins(&self, revision: &JudgeRevision) -> Result<RewardPlugins> {
        let mut plugins = self.configured.clone();
        if let Some(code) = &revision.code {
            plugins.rubric = self.component(code)?;
        }
        plugins.rubric_config = revision.rules.to_string();
        Ok(plugins)
    }

    /// The configured component as the config names it.
    pub(crate) fn configured_spec(&self) -> String {
        self.spec.to_string()
    }

    pub(crate) fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    pub(crate) fn judge_dir(&self) -> &Path {
        &self.judge_dir
    }

    pub(crate) fn loaded(&self) -> MutexGuard<'_, HashMap<String, Arc<Plugin>>> {
        self.loaded.lock().expect("judge components lock poisoned")
    }

    /// Scores `cases` under `revision`'s rules; the judge never sees the
    /// reference. A case whose judging failed gets total 0 and its error.
    pub fn score(&self, revision: &JudgeRevision, cases: &[Case]) -> Result<Vec<JudgeScore>> {
        let samples: Vec<Sample> = cases
            .iter()
            .map(|c| Sample::new(&c.id, &c.prompt, &c.response))
            .collect();
        let scored = score_all(
            &self.plugins(revision)?,
            &samples,
            64,
            self.threads,
            &|_| {},
        )?;
        Ok(scored
            .into_iter()
            .map(|s| {
                let judgment = s.judgment.as_ref();
                JudgeScore {
                    total: s.total.unwrap_or(0.0).clamp(0.0, 1.0),
                    dimensions: judgment
                        .map(|j| {
                            j.sub_scores
                                .iter()
                                .filter(|s| s.name != "gate")
                                .map(|s| (s.name.clone(), s.value))
                                .collect()
                        })
                        .unwrap_or_default(),
                    explanation: judgment
                        .and_then(|j| j.explanation.clone())
                        .unwrap_or_default(),
                    error: s.error,
                }
            })
            .collect())
    }
}
