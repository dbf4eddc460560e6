//! The SFT curriculum of `verifine train`: a curriculum plugin asked about
//! every SFT target.

use std::sync::Arc;
use thiserror::Error;
use verifine_runtime::{
    Candidate, Context, Plugin, PluginInstance, PluginKind, PluginSetting, Provenance, Runtime,
    RuntimeError, Selection,
};
use verifine_train::hooks::{HookError, SftCandidate, SftCurriculum, SftDecision};

/// The curriculum a config names could not be loaded.
#[derive(Debug, Error)]
#[error("loading the SFT curriculum {plugin}: {source}")]
pub struct CurriculumError {
    /// The plugin as the config names it.
    pub plugin: String,
    /// Why.
    #[source]
    pub source: RuntimeError,
}

/// The SFT curriculum: a curriculum plugin asked about every SFT target.
pub struct PluginCurriculum {
    plugin: Arc<Plugin>,
    /// One instance for the whole pool, as a plugin with state across
    /// calls expects.
    instance: PluginInstance,
    context: Context,
}

impl PluginCurriculum {
    /// Loads the curriculum `slot` names.
    pub fn load(runtime: &Runtime, slot: &PluginSetting) -> Result<Self, CurriculumError> {
        let plugin = runtime
            .load_kind(&slot.plugin, PluginKind::Curriculum)
            .map_err(|source| CurriculumError {
                plugin: slot.plugin.to_string(),
                source,
            })?;
        Ok(PluginCurriculum {
            instance: plugin.instance(),
            plugin,
            context: Context::empty().with_config(&slot.config_json()),
        })
    }
}

impl SftCurriculum for PluginCurriculum {
    fn provenance(&self) -> Provenance {
        self.plugin.provenance()
    }

    fn select(&mut self, candidates: &[SftCandidate]) -> Result<Vec<SftDecision>, HookError> {
        let candidates: Vec<Candidate> = candidates
            .iter()
            .map(|c| Candidate {
                sample_id: c.id.clone(),
                tags: c.tags.clone(),
                history: Vec::new(),
                reward_mean: c.judge_score.unwrap_or(0.0),
                reward_std: 0.0,
                rollouts: 0,
                reference_score: c.judge_score,
            })
            .collect();
        let decisions = self
            .instance
            .select(&self.context, &candidates)?
            .map_err(|e| format!("refused the batch: {e}"))?;
        Ok(decisions
            .into_iter()
            .map(|d| SftDecision {
                weight: match d.selection {
                    Selection::Drop => None,
                    Selection::Keep(w) => Some(w),
                },
                reason: d.reason,
            })
            .collect())
    }
}

/// The loaded curriculum a run's config names, if any.
pub fn curriculum(
    runtime: &Runtime,
    slot: Option<&PluginSetting>,
) -> Result<Option<PluginCurriculum>, CurriculumError> {
    slot.map(|slot| PluginCurriculum::load(runtime, slot))
        .transpose()
}
