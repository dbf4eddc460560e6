//! The reference-free judge: a rubric component whose rules (sub-criteria,
//! weights, gate: its config table) are what revisions change, whose code a
//! revision may replace too (see [`crate::judge::code`]), and whose judge model a
//! revision may retrain (see [`crate::verifier`]); its dimensions stay fixed
//! across revisions. Every revision is numbered and kept.

pub mod code;

use crate::cases::{Case, Dimensions};
use crate::error::{EvolveError, Result};
use code::JudgeCode;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use verifine_base::{PASS_MARK, PluginSpec};
use verifine_judge::{BackendConfig, JudgesConfig, LocalConfig};
use verifine_runtime::scorer_pool::score_all;
use verifine_runtime::scoring::RewardPlugins;
use verifine_runtime::{Plugin, Runtime, Sample, SharedJudgeModels};

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
    /// The checkpoint directory of the model that answers the rubric's
    /// judge-model queries, when a revision retrained it (`None`: the
    /// judges file's model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verifier: Option<PathBuf>,
}

impl JudgeRevision {
    /// Revision 0: the configured rubric with `rules`, its own component
    /// and the judges file's model.
    pub fn initial(rules: serde_json::Value) -> Self {
        JudgeRevision {
            number: 0,
            rules,
            origin: "initial".into(),
            code: None,
            verifier: None,
        }
    }
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
/// configured one, and those code revisions brought (loaded on first use),
/// asking the configured judge models or a revision's retrained one.
pub struct Judge {
    runtime: Runtime,
    spec: PluginSpec,
    configured: RewardPlugins,
    judge_dir: PathBuf,
    loaded: Mutex<HashMap<String, Arc<Plugin>>>,
    threads: usize,
    /// What every case carries as its context when the judge sees it.
    context: Option<String>,
    /// The judges file and the name of its model that revisions retrain.
    retrained: Option<(JudgesConfig, String)>,
    /// The judge models of each retrained checkpoint (loaded on first use).
    checkpoints: Mutex<HashMap<PathBuf, SharedJudgeModels>>,
}

impl Judge {
    /// Loads the rubric `spec` with the default aggregator; code revisions
    /// are stored under `judge_dir` (see [`crate::judge::code`]).
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
            context: None,
            retrained: None,
            checkpoints: Mutex::new(HashMap::new()),
        })
    }

    /// Every case the judge sees carries `context` (JSON: the rubric item
    /// a YES/NO verifier is asked about, for `healthbench`).
    pub fn with_context(mut self, context: Option<&serde_json::Value>) -> Self {
        self.context = context.map(|c| c.to_string());
        self
    }

    /// Revisions may retrain `name`'s model from the judges file `judges`
    /// (it must be a local one: its checkpoint is what training changes).
    pub fn retraining(mut self, judges: JudgesConfig, name: &str) -> Result<Self> {
        let Some(judge) = judges.judges.get(name) else {
            return Err(EvolveError::Invalid(format!(
                "[verifier] judge = {name:?}: the judges file names {:?}",
                judges.judges.keys().collect::<Vec<_>>()
            )));
        };
        if !matches!(
            judge.backend,
            BackendConfig::LocalGguf(_) | BackendConfig::LocalSafetensors(_)
        ) {
            return Err(EvolveError::Invalid(format!(
                "[verifier] judge = {name:?}: a retrained judge must run in this process \
                 (kind = \"local-gguf\" or \"local-safetensors\")"
            )));
        }
        self.retrained = Some((judges, name.to_string()));
        Ok(self)
    }

    /// The model that answers under `revision`, as the local backend loads
    /// it: its retrained checkpoint, or the judges file's model.
    pub(crate) fn model_under(&self, revision: &JudgeRevision) -> Result<LocalConfig> {
        let Some((judges, name)) = &self.retrained else {
            return Err(EvolveError::Invalid(
                "no [verifier] judge: nothing to retrain".into(),
            ));
        };
        let mut local = match &judges.judges[name].backend {
            BackendConfig::LocalGguf(local) | BackendConfig::LocalSafetensors(local) => {
                local.clone()
            }
            _ => unreachable!("checked by Judge::retraining"),
        };
        if let Some(checkpoint) = &revision.verifier {
            local.path = checkpoint.clone();
        }
        Ok(local)
    }

    /// The judge models with `checkpoint` in the retrained judge's place.
    fn models_with(&self, checkpoint: &Path) -> Result<SharedJudgeModels> {
        if let Some(models) = self.checkpoints().get(checkpoint) {
            return Ok(models.clone());
        }
        let Some((judges, name)) = &self.retrained else {
            return Err(EvolveError::Invalid(format!(
                "a judge revision names the retrained model {}, and no [verifier] judge is configured",
                checkpoint.display()
            )));
        };
        let mut judges = judges.clone();
        let judge = judges
            .judges
            .get_mut(name)
            .expect("checked by Judge::retraining");
        if let BackendConfig::LocalGguf(local) | BackendConfig::LocalSafetensors(local) =
            &judge.backend
        {
            judge.backend = BackendConfig::LocalSafetensors(LocalConfig {
                path: checkpoint.to_path_buf(),
                ..local.clone()
            });
        }
        let models: SharedJudgeModels = Arc::new(verifine_judge::Judges::new(&judges)?);
        self.checkpoints()
            .insert(checkpoint.to_path_buf(), models.clone());
        Ok(models)
    }

    fn checkpoints(&self) -> MutexGuard<'_, HashMap<PathBuf, SharedJudgeModels>> {
        self.checkpoints
            .lock()
            .expect("judge checkpoints lock poisoned")
    }

    /// The sample the judge sees for `case`: no reference, the configured
    /// context.
    pub(crate) fn sample(&self, case: &Case) -> Sample {
        let mut sample = Sample::new(&case.id, &case.prompt, &case.response);
        if let Some(context) = &self.context {
            sample.context = context.clone();
        }
        sample
    }

    /// How training's rewards are shaped to show the judge what
    /// [`Judge::sample`] shows it.
    pub(crate) fn shape(&self) -> verifine_reward::SampleShape {
        verifine_reward::SampleShape {
            context: self.context.clone(),
            reference_free: true,
        }
    }

    /// The component `revision` runs, as a spec another runtime can load.
    pub(crate) fn spec_under(&self, revision: &JudgeRevision) -> PluginSpec {
        match &revision.code {
            Some(code) => {
                PluginSpec::File(code::component_path(&self.judge_dir, &code.plugin.sha256))
            }
            None => self.spec.clone(),
        }
    }

    /// The reward plugins that score under `revision`: its component and
    /// its rules (for training).
    pub fn plugins(&self, revision: &JudgeRevision) -> Result<RewardPlugins> {
        let mut plugins = self.configured.clone();
        if let Some(code) = &revision.code {
            plugins.rubric = self.component(code)?;
        }
        if let Some(checkpoint) = &revision.verifier {
            plugins.rubric = plugins.rubric.asking(self.models_with(checkpoint)?);
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
        let samples: Vec<Sample> = cases.iter().map(|c| self.sample(c)).collect();
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
