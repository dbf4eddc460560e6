//! What a run leaves at the end: `model.safetensors`,
//! `heldout_answers.jsonl` (the final policy's greedy held-out answers, as
//! judged), `summary.json`, `report.md` and `plot.png`.

use super::Run;
use crate::config::TrainConfig;
use crate::error::{Result, TrainError};
use crate::metrics_log;
use crate::model::save_weights;
use crate::plot;
use serde::{Deserialize, Serialize};
use verifine_base::{Provenance, write_atomically, write_jsonl};

/// What `summary.json` holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainSummary {
    /// Greedy held-out accuracy after SFT (before GRPO), pure run.
    pub heldout_accuracy_sft: f64,
    /// Greedy held-out accuracy at the end, pure run.
    pub heldout_accuracy_final: f64,
    /// Mean reward of the greedy held-out answers after SFT (before GRPO).
    #[serde(default)]
    pub heldout_mean_reward_sft: f64,
    /// Mean reward of the greedy held-out answers at the end.
    #[serde(default)]
    pub heldout_mean_reward_final: f64,
    /// With self-verification: held-out accuracy after SFT with final
    /// verification (FV) up to `max_turns`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heldout_accuracy_fv_sft: Option<f64>,
    /// With self-verification: held-out FV accuracy at the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heldout_accuracy_fv_final: Option<f64>,
    /// Held-out pass@k after SFT (`pass_at_k` sampled answers per problem).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heldout_pass_at_k_sft: Option<f64>,
    /// Held-out pass@k at the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heldout_pass_at_k_final: Option<f64>,
    /// With self-verification: mean answer turns per GRPO rollout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_turns: Option<f64>,
    /// SFT + GRPO updates.
    pub steps: usize,
    /// Wall-clock seconds of the whole run (all sessions of a resumed run).
    pub wall_seconds: f64,
    /// Seconds in each phase's steps (no evaluations, no checkpoints): the
    /// time an equal-time control arm is given.
    #[serde(default)]
    pub phase_seconds: super::PhaseSeconds,
    /// Completion tokens generated per second of GRPO time.
    pub tokens_per_second: f64,
    /// Share of GRPO time spent in reward plugins.
    pub plugin_time_share: f64,
    /// SFT samples kept by the curriculum, of all candidates.
    pub sft_samples_kept: usize,
    /// SFT candidates.
    pub sft_samples: usize,
    /// The plugin revisions that produced the rewards and the curriculum.
    pub plugins: Vec<Provenance>,
    /// The step this session resumed from, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed_from_step: Option<usize>,
}

impl Run {
    pub(super) fn finish(&mut self) -> Result<TrainSummary> {
        // Evaluated at the last step boundary already, unless the run had no
        // GRPO step or resumed from its last checkpoint (then the same
        // greedy evaluation again, logged only if it was not yet).
        let evaluated = match self.final_eval.take() {
            Some(evaluated) => evaluated,
            None => {
                let evaluated = self.evaluate(true)?;
                if !self.state.final_logged {
                    self.log_eval(evaluated.evaluation)?;
                }
                evaluated
            }
        };
        let final_eval = evaluated.evaluation;
        save_weights(&self.varmap, &self.run_dir.join("model.safetensors"))?;
        if let Some(base) = &self.base {
            base.export(&self.config, &self.model, &self.run_dir)?;
        }
        write_jsonl(
            &self.run_dir.join("heldout_answers.jsonl"),
            &evaluated.answers,
        )?;
        let sft = self
            .state
            .accuracy_sft
            .ok_or_else(|| TrainError::Invalid("the run ended before SFT was evaluated".into()))?;
        let totals = &self.state.totals;
        let svr = self.config.self_verification.enabled;
        let summary = TrainSummary {
            heldout_accuracy_sft: sft.pr,
            heldout_accuracy_final: final_eval.pr,
            heldout_mean_reward_sft: sft.mean_reward,
            heldout_mean_reward_final: final_eval.mean_reward,
            heldout_accuracy_fv_sft: sft.fv,
            heldout_accuracy_fv_final: final_eval.fv,
            heldout_pass_at_k_sft: sft.pass_at_k,
            heldout_pass_at_k_final: final_eval.pass_at_k,
            mean_turns: svr.then(|| totals.turns as f64 / totals.rollouts.max(1) as f64),
            steps: self.config.total_steps(),
            wall_seconds: self.wall_seconds(),
            phase_seconds: self.state.phase_seconds,
            tokens_per_second: totals.tokens as f64 / totals.seconds.max(1e-9),
            plugin_time_share: totals.plugin_seconds / totals.seconds.max(1e-9),
            sft_samples_kept: self.pool.kept(),
            sft_samples: self.pool.items.len(),
            plugins: self.plugins.clone(),
            resumed_from_step: self.resumed_from,
        };
        write_atomically(&self.run_dir.join("summary.json"), |w| {
            Ok(serde_json::to_writer_pretty(&mut *w, &summary)?)
        })?;
        let report = report(&summary, &self.config);
        write_atomically(&self.run_dir.join("report.md"), |w| {
            w.write_all(report.as_bytes())
        })?;
        let lines = metrics_log::read(&self.run_dir.join("metrics.jsonl"))?;
        plot::draw(
            &plot::Series::from_metrics(&lines),
            &self.run_dir.join("plot.png"),
        )?;
        Ok(summary)
    }
}

fn report(summary: &TrainSummary, config: &TrainConfig) -> String {
    let plugins: Vec<String> = summary
        .plugins
        .iter()
        // The host names its revisions; a short sha256 is shown whole.
        .map(|p| {
            let short = p.sha256.get(..12).unwrap_or(&p.sha256);
            format!("{} {} ({short})", p.name, p.version)
        })
        .collect();
    let mut text = format!(
        "# verifine training run\n\n\
         ![reward and held-out accuracy](plot.png)\n\n\
         | | |\n|---|---|\n\
         | held-out accuracy after SFT | {:.3} |\n\
         | held-out accuracy after GRPO | {:.3} |\n",
        summary.heldout_accuracy_sft, summary.heldout_accuracy_final,
    );
    if let (Some(sft), Some(last)) = (
        summary.heldout_accuracy_fv_sft,
        summary.heldout_accuracy_fv_final,
    ) {
        text += &format!(
            "| held-out accuracy with final verification, after SFT → after GRPO | {sft:.3} → {last:.3} |\n\
             | mean answer turns per GRPO rollout | {:.2} |\n",
            summary.mean_turns.unwrap_or(1.0)
        );
    }
    if let (Some(sft), Some(last)) = (
        summary.heldout_pass_at_k_sft,
        summary.heldout_pass_at_k_final,
    ) {
        text += &format!(
            "| held-out pass@{} (sampled at temperature {}), after SFT → after GRPO | {sft:.3} → {last:.3} |\n",
            config.pass_at_k, config.grpo.temperature
        );
    }
    text += &format!(
        "| steps (SFT + GRPO) | {} + {} |\n\
         | SFT samples kept | {} of {} |\n\
         | wall time (SFT steps, GRPO steps) | {:.1} s ({:.1} s, {:.1} s) |\n\
         | rollout tokens/s | {:.0} |\n\
         | reward plugin share of GRPO time | {:.2}% |\n\
         | plugins | {} |\n\n\
         Held-out accuracy: greedy answers to {} unseen problems scored ≥ 0.5 by the reward rubric.\n",
        config.sft.steps,
        config.grpo.steps,
        summary.sft_samples_kept,
        summary.sft_samples,
        summary.wall_seconds,
        summary.phase_seconds.sft,
        summary.phase_seconds.grpo,
        summary.tokens_per_second,
        summary.plugin_time_share * 100.0,
        plugins.join(", "),
        config.heldout_problems,
    );
    if let Some(step) = summary.resumed_from_step {
        text += &format!("\nResumed from the checkpoint at step {step}.\n");
    }
    text
}
