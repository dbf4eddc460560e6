//! Which policy the loop carries forward (`round_start = "kept"`). Every
//! judge-revised round continues the kept policy: the one the fixed
//! evaluator rates best so far on a validation set that neither the rounds
//! (the pool) nor the report (the held-out set) use. A round rated below it
//! is not carried forward: the next round starts from the kept policy
//! again, and the judge revision that trained the kept policy is made live
//! again (VeriFine keeps the judge that the fixed evaluator supports). Each
//! decision is a line of `kept.jsonl`.

use super::Evolve;
use crate::cases::Case;
use crate::config::RoundStart;
use crate::error::{EvolveError, Result};
use crate::judge::code::record_event;
use crate::summary::KeptDecision;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use verifine_base::{read_jsonl_if_exists, write_jsonl};
use verifine_hotswap::EventKind;
use verifine_train::policy::Policy;
use verifine_train::problem::Problem;
use verifine_train::rollout::Sampling;
use verifine_train::task::generate;

/// Mixed into the seed for the validation set's problems.
const VALIDATION_STREAM: u64 = 0x7A11_D0E5;

/// The policy later rounds start from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct KeptPolicy {
    /// Its row (`base`, `R1` …).
    pub(super) row: String,
    /// Its finished training run.
    pub(super) dir: PathBuf,
    /// The fixed evaluator's mean total of its greedy answers to the
    /// validation set.
    validation_rb: f64,
    /// The judge revision that trained it (0 for the base).
    judge_revision: u32,
}

impl Evolve {
    /// Where round `round`'s policy starts: the row (or `base`) and its run.
    pub(super) fn round_start(&mut self, round: u32) -> Result<(String, PathBuf)> {
        match self.config.round_start {
            RoundStart::Kept if round > 0 => {
                let kept = self.kept()?;
                Ok((kept.row, kept.dir))
            }
            _ => Ok(("base".to_string(), self.base_dir())),
        }
    }

    /// The kept policy (the base until a round is kept).
    fn kept(&mut self) -> Result<KeptPolicy> {
        if let Some(kept) = &self.state.kept {
            return Ok(kept.clone());
        }
        let base = KeptPolicy {
            row: "base".into(),
            dir: self.base_dir(),
            validation_rb: self.validation_rb(&self.base_dir())?,
            judge_revision: 0,
        };
        self.state.kept = Some(base.clone());
        Ok(base)
    }

    /// After round row `name` (finished in `dir`): keeps it when the fixed
    /// evaluator rates it at least as well as the kept policy on the
    /// validation set; otherwise makes the kept policy's judge revision live
    /// again (an event of judge loop `round` when that changes the judge's
    /// component). Later rounds' curricula and queries read the kept policy.
    pub(super) fn keep_or_revert(&mut self, name: &str, round: u32, dir: &Path) -> Result<()> {
        let before = self.kept()?;
        let validation_rb = self.validation_rb(dir)?;
        let revision = self.state.trained_with.get(name).copied().ok_or_else(|| {
            EvolveError::Invalid(format!("row {name} has no judge revision on record"))
        })?;
        let kept = validation_rb >= before.validation_rb;
        if kept {
            self.state.kept = Some(KeptPolicy {
                row: name.to_string(),
                dir: dir.to_path_buf(),
                validation_rb,
                judge_revision: revision,
            });
        } else if let Some(supported) = self
            .state
            .revisions
            .iter()
            .find(|r| r.number == before.judge_revision)
        {
            if supported.code != self.state.live.code {
                record_event(
                    &self.judge_dir(),
                    round,
                    EventKind::RolledBack,
                    self.judge.record(&self.state.live)?,
                    Some(self.judge.record(supported)?),
                    &format!(
                        "{name} is rated below the kept policy {} on the validation set \
                         ({validation_rb:.3} < {:.3}): the judge that trained it is live again",
                        before.row, before.validation_rb
                    ),
                )?;
            }
            self.state.live = supported.clone();
        }
        tracing::info!(
            row = name,
            validation_rb,
            kept_before = %before.row,
            kept,
            "evolve: kept policy"
        );
        self.state.newest_policy = self.state.kept.as_ref().map(|k| k.dir.clone());
        let path = self.dir.join("kept.jsonl");
        let mut lines: Vec<KeptDecision> = read_jsonl_if_exists(&path)?;
        lines.retain(|l| l.row != name);
        lines.push(KeptDecision {
            row: name.to_string(),
            validation_rb,
            before: (before.row, before.validation_rb),
            kept,
            live: self.state.live.number,
        });
        Ok(write_jsonl(&path, &lines)?)
    }

    /// The validation set: fresh problems apart from the held-out set and
    /// the pool.
    pub(super) fn validation(&self) -> Vec<Problem> {
        let heldout = self.heldout();
        let pool = self.pool();
        let unseen = |p: &Problem| {
            heldout.iter().all(|h| h.prompt != p.prompt)
                && pool.iter().all(|i| i.problem.prompt != p.prompt)
        };
        let wanted = self.config.validation_problems;
        generate(
            self.config.train.seed ^ VALIDATION_STREAM,
            wanted * 3,
            &self.config.train.task,
        )
        .into_iter()
        .filter(unseen)
        .take(wanted)
        .collect()
    }

    /// The fixed evaluator's mean total of the greedy answers of the policy
    /// in `dir` to the validation set.
    fn validation_rb(&self, dir: &Path) -> Result<f64> {
        let problems = self.validation();
        let policy = Policy::load(dir, &self.config.train.model)?;
        let answers = policy.answer(
            &problems,
            Sampling::Greedy,
            1,
            self.config.train.grpo.max_new_tokens,
            self.config.train.seed ^ VALIDATION_STREAM,
        )?;
        let cases: Vec<Case> = problems
            .iter()
            .zip(answers)
            .enumerate()
            .flat_map(|(i, (p, responses))| {
                responses
                    .into_iter()
                    .map(move |r| Case::new(format!("validation-{i}"), p, r))
            })
            .collect();
        let totals = self.evaluator_totals(&cases)?;
        Ok(totals.iter().sum::<f64>() / totals.len().max(1) as f64)
    }
}
