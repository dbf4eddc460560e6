//! Judge revisions that retrain the judge's model. When the judge is a
//! YES/NO verifier — a rubric asking a local model (`[verifier] judge`
//! names it in the judges file) — the built-in agent's proposal is that
//! model fine-tuned (LoRA, as `verifine judge train` does) from the live
//! revision's checkpoint on every label accumulated so far: a case is met
//! when its label's total reaches the pass mark, or — when the verifier's
//! item asks about one thing only, such as the final answer's correctness —
//! when the label's score on that dimension does (`met_dimension`): a
//! correctness verifier retrained on overall quality learns to pass wrong
//! answers that look careful, and a policy rewarded by it learns to write
//! them. The rules stay as they
//! are; the revision carries the new checkpoint, and the same accept rule
//! decides, after which the judge asks the new model (hot-swapped: the
//! rubric's code is not rebuilt).
//!
//! Agreement on the accumulated set is partly in-sample for a model trained
//! on it, so the agent proposes only when the retrained model does no worse
//! than the live one on the questions it held out (split by question, never
//! trained on): balanced accuracy not lower there, and above the 0.5 of one
//! verdict for everything.

use crate::agent::{Proposal, RevisionAgent, RevisionRequest};
use crate::error::{EvolveError, Result};
use crate::judge::Judge;
use crate::labels::Label;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use verifine_base::{FileError, PASS_MARK};
use verifine_judge::asked::{single_queries, yes_no_ids};
use verifine_judge::local::LocalBackend;
use verifine_runtime::Sample;
use verifine_train::config::{FreezeConfig, ModelSize};
use verifine_train::model::{LoraConfig, LoraModule};
use verifine_train::optim::OptimConfig;
use verifine_train::verifier::{
    ClassBalance, VerdictExample, VerifierConfig, VerifierReport, train_verifier,
};

/// The balanced accuracy of answering the same verdict to everything: a
/// retrained verifier must beat it on its held-out questions to be
/// proposed (one retrained on 25 labels, 2 of them met, learned to answer
/// NO to everything, gold answers included, and the accept rule took it).
const CONSTANT_VERDICT: f64 = 0.5;

/// `[verifier]`: how a judge revision retrains the judge's model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetrainConfig {
    /// The judges-file name of the model retrained (a local backend: its
    /// checkpoint is what training changes).
    pub judge: String,
    /// Optimizer steps per retraining.
    pub steps: usize,
    /// Examples per step.
    pub batch_size: usize,
    /// AdamW's peak learning rate.
    pub learning_rate: f64,
    /// Steps over which the learning rate rises to its peak.
    pub warmup_steps: usize,
    /// LoRA rank (alpha is twice it; every projection adapted).
    pub lora_r: usize,
    /// The first this many blocks stay fixed (a step costs less).
    pub freeze_layers: usize,
    /// Share of the labelled questions held out to compare the retrained
    /// model with the live one.
    pub heldout_share: f64,
    /// Longest example in tokens.
    pub max_seq_len: usize,
    /// Stop a retraining after this many seconds, even before `steps`.
    pub max_seconds: Option<f64>,
    /// How the classes are evened out in the loss.
    pub balance: ClassBalance,
    /// Propose only a retrained model whose balanced accuracy on the
    /// held-out questions is not below the live model's and above 0.5 (off:
    /// every retraining is proposed, and the accept rule alone decides).
    pub compare_heldout: bool,
    /// The label dimension the verifier's item asks about (a correctness
    /// item: the simulated annotator's `complete`); unset, the label's total.
    pub met_dimension: Option<String>,
    /// A case is met when that score (or the total) is at least this.
    pub met_at: f64,
}

impl Default for RetrainConfig {
    fn default() -> Self {
        RetrainConfig {
            judge: "verifier".into(),
            steps: 40,
            batch_size: 8,
            learning_rate: 1e-3,
            warmup_steps: 4,
            lora_r: 16,
            freeze_layers: 0,
            heldout_share: 0.25,
            max_seq_len: 1024,
            max_seconds: None,
            balance: ClassBalance::Weighted,
            compare_heldout: true,
            met_dimension: None,
            met_at: PASS_MARK,
        }
    }
}

impl RetrainConfig {
    /// Whether a label says the verifier's item is met.
    pub fn met(&self, label: &Label) -> Result<bool> {
        let score = match &self.met_dimension {
            None => label.total,
            Some(name) => *label.dimensions.get(name).ok_or_else(|| {
                EvolveError::Invalid(format!(
                    "case {}: {}'s label has no dimension {name:?} ([verifier] met_dimension); \
                     it has {:?}",
                    label.case_id,
                    label.annotator,
                    label.dimensions.keys().collect::<Vec<_>>()
                ))
            })?,
        };
        Ok(score >= self.met_at)
    }
}

/// The built-in agent of a verifier judge: one retraining per judge loop.
pub struct VerifierAgent<'a> {
    config: &'a RetrainConfig,
    judge: &'a Judge,
    dir: PathBuf,
    seed: u64,
    done: bool,
}

impl<'a> VerifierAgent<'a> {
    /// Retrains into `dir` (its `hf/` is the proposed checkpoint; a
    /// finished retraining there is reused when a loop resumes).
    pub fn new(config: &'a RetrainConfig, judge: &'a Judge, dir: PathBuf, seed: u64) -> Self {
        VerifierAgent {
            config,
            judge,
            dir,
            seed,
            done: false,
        }
    }

    /// The labelled cases as the verifier will be asked them.
    fn examples(&self, request: &RevisionRequest<'_>) -> Result<Vec<VerdictExample>> {
        let model = self.judge.model_under(request.live)?;
        let samples: Vec<Sample> = request.cases.iter().map(|c| self.judge.sample(c)).collect();
        let queries = single_queries(
            &self.judge.spec_under(request.live),
            &request.live.rules,
            &samples,
        )?;
        let backend = match model.path.is_dir() {
            true => LocalBackend::from_safetensors(&model)?,
            false => LocalBackend::new(&model)?,
        };
        request
            .cases
            .iter()
            .zip(request.labels)
            .zip(queries)
            .map(|((case, label), query)| {
                let ids = query
                    .and_then(|q| yes_no_ids(&backend, &q))
                    .map_err(|why| EvolveError::Invalid(format!("case {}: {why}", case.id)))?;
                Ok(VerdictExample {
                    group: case.prompt.clone(),
                    source: case.id.clone(),
                    prompt: ids.prompt,
                    yes: ids.yes,
                    no: ids.no,
                    met: self.config.met(label)?,
                })
            })
            .collect()
    }

    fn retrain(&self, request: &RevisionRequest<'_>) -> Result<Option<VerifierReport>> {
        let examples = self.examples(request)?;
        let met = examples.iter().filter(|e| e.met).count();
        let mut questions: Vec<&str> = examples.iter().map(|e| e.group.as_str()).collect();
        questions.sort_unstable();
        questions.dedup();
        if met == 0 || met == examples.len() || questions.len() < 2 {
            tracing::info!(
                labels = examples.len(),
                met,
                questions = questions.len(),
                "verifier retrain: the labels need both verdicts and two questions"
            );
            return Ok(None);
        }
        let c = self.config;
        let from = self.judge.model_under(request.live)?.path;
        let config = VerifierConfig {
            seed: self.seed,
            model: ModelSize {
                from: Some(from),
                max_seq_len: c.max_seq_len,
                lora: Some(LoraConfig {
                    r: c.lora_r,
                    alpha: 2.0 * c.lora_r as f64,
                    dropout: 0.0,
                    target_modules: LoraModule::ALL.to_vec(),
                }),
                freeze: FreezeConfig {
                    embeddings: true,
                    layers: c.freeze_layers,
                },
                ..ModelSize::default()
            },
            steps: c.steps,
            batch_size: c.batch_size,
            optim: OptimConfig {
                learning_rate: c.learning_rate,
                warmup_steps: c.warmup_steps,
                ..OptimConfig::default()
            },
            heldout_share: c.heldout_share,
            balance: c.balance,
            max_seconds: c.max_seconds,
        };
        std::fs::create_dir_all(&self.dir).map_err(|e| FileError::io("creating", &self.dir, e))?;
        let report = train_verifier(&config, examples, &self.dir, &mut |m| {
            tracing::info!("verifier retrain: {m}")
        })?;
        Ok(Some(report))
    }
}

impl RevisionAgent for VerifierAgent<'_> {
    fn name(&self) -> String {
        "verifier retrain (built-in)".to_string()
    }

    fn propose(&mut self, request: &RevisionRequest<'_>) -> Result<Option<Proposal>> {
        if std::mem::replace(&mut self.done, true) {
            return Ok(None);
        }
        let report_path = self.dir.join("report.json");
        let report: VerifierReport = if report_path.is_file() {
            let text = std::fs::read_to_string(&report_path)
                .map_err(|e| FileError::io("reading", &report_path, e))?;
            serde_json::from_str(&text)
                .map_err(|e| EvolveError::Invalid(format!("{}: {e}", report_path.display())))?
        } else {
            match self.retrain(request)? {
                Some(report) => report,
                None => return Ok(None),
            }
        };
        let (Some(before), Some(after)) = (&report.before, &report.after) else {
            return Ok(None);
        };
        if self.config.compare_heldout
            && (after.balanced_accuracy < before.balanced_accuracy
                || after.balanced_accuracy <= CONSTANT_VERDICT)
        {
            tracing::info!(
                before = before.balanced_accuracy,
                after = after.balanced_accuracy,
                "verifier retrain: worse on its held-out questions, or no better than one \
                 verdict for all, not proposed"
            );
            return Ok(None);
        }
        Ok(Some(Proposal {
            rules: request.live.rules.clone(),
            rationale: format!(
                "retrained the judge model on {} labels ({} met) for {} steps: on {} held-out \
                 labels balanced accuracy {:.3} -> {:.3}, accuracy {:.3} -> {:.3}",
                report.train_examples,
                report.train_met,
                report.steps,
                after.examples,
                before.balanced_accuracy,
                after.balanced_accuracy,
                before.accuracy,
                after.accuracy
            ),
            code: None,
            verifier: Some(self.dir.join("hf")),
        }))
    }
}

#[cfg(test)]
#[path = "verifier_tests.rs"]
mod tests;
