//! The policy loop's parts: the SFT base (once), the fixed anchor set and
//! candidate pool, and a round — failure discovery on the anchor set with
//! the newest policy, the curriculum over the pool, then `train` from the
//! base (or the kept policy, `kept.rs`) with the live judge as the reward
//! and the fixed evaluator as the progress measure. Also what the other
//! tasks ask of the policy: its answers, the held-out and anchor sets, the
//! evaluator's totals.

use super::{Evolve, EvolveProgress};
use crate::cases::Case;
use crate::config::{RoundMode, RoundStart};
use crate::curriculum::{PoolDecision, PoolItem, assess, pool};
use crate::error::{EvolveError, Result};
use crate::failures::discover;
use crate::reward::{MonitorLog, MonitorRecord, RoundReward};
use serde::Serialize;
use std::path::Path;
use verifine_base::{PASS_MARK, read_jsonl, read_jsonl_if_exists, write_jsonl};
use verifine_reward::FixedReward;
use verifine_train::hooks::{Fixed, HookedReward, Host, Progress, PromptPool, RewardFunction};
use verifine_train::policy::Policy;
use verifine_train::problem::Problem;
use verifine_train::rollout::Sampling;
use verifine_train::task::{generate, splits};
use verifine_train::{HeldoutAnswer, TrainConfig};

/// Mixed into the seed for the anchor set's problems.
const ANCHOR_STREAM: u64 = 0xA4C4_0125;
/// Mixed into the seed for the policy's sampled answers.
const ANSWER_STREAM: u64 = 0x5A3F_1E00;

impl Evolve {
    /// Trains the SFT base (the config's `[train]` with GRPO off).
    pub(super) fn base(&mut self) -> Result<()> {
        let mut config = self.config.train.clone();
        config.grpo.steps = 0;
        let reward = FixedReward::new(&self.evaluator, None)?;
        let host = self.host(Box::new(Fixed(reward)), None, None, config.total_steps());
        train_or_resume(&config, &self.base_dir(), host)?;
        self.state.newest_policy = Some(self.base_dir());
        Ok(())
    }

    /// A policy round: a policy from the base (or, for a judge-revised
    /// round with `round_start = "kept"`, from the kept policy) and
    /// `round_steps` steps on the pool, weighted by the curriculum
    /// (uniformly when not `guided`), with the live judge deciding: as the
    /// GRPO reward, or, in `sft-membership` mode, as the judge of which SFT
    /// candidates are kept.
    pub(super) fn round(&mut self, name: &str, round: u32, guided: bool) -> Result<()> {
        // With kept rounds the newest policy (failures, curriculum,
        // queries) is already the one this round starts from.
        let (started_from, start) = self.round_start(round)?;
        let keeping = self.config.round_start == RoundStart::Kept;
        // Kept rounds form a chain: the initial-judge rows get its budget.
        let steps = match keeping && round == 0 {
            true => self.config.round_steps * self.config.rounds as usize,
            false => self.config.round_steps,
        };
        let items = self.pool();
        let membership = self.config.mode == RoundMode::SftMembership;
        let answers = if guided || membership {
            self.pool_answers(&items, round)?
        } else {
            Vec::new()
        };
        let weights: Vec<f64> = if guided {
            self.discover_failures(round)?;
            let decisions = self.assess_pool(&items, &answers, round)?;
            crate::curriculum::sampling_weights(&decisions, round)
        } else {
            vec![1.0; items.len()]
        };
        let mut config = self.config.train.clone();
        if config.model.from.is_some() {
            // A pretrained policy goes on from the checkpoint its start
            // exported (new adapters over the merged weights).
            config.model.from = Some(start.join("hf"));
        } else {
            config.init_from = Some(start);
        }
        config.sampling_seed = self.config.seed;
        config.pass_at_k = 0;
        let (prompts, sft_targets) = if membership {
            config.sft.steps = steps;
            config.sft.eval_every = self.config.check_every;
            config.grpo.steps = 0;
            (None, Some(self.membership(&items, &answers, &weights)?))
        } else {
            config.sft.steps = 0;
            config.grpo.steps = steps;
            config.eval_every = self.config.check_every;
            let prompts = PromptPool {
                problems: items.into_iter().map(|i| i.problem).collect(),
                weights,
            };
            (Some(prompts), None)
        };
        let log = MonitorLog::default();
        let judge = FixedReward::new(
            &self.judge.plugins(&self.state.live)?,
            Some(&format!("rules r{}", self.state.live.number)),
        )?
        .with_shape(self.judge.shape());
        let reward = RoundReward::new(
            judge,
            &self.trigger,
            &self.config.trigger.config_json(),
            round,
            log.clone(),
        );
        let evaluator = FixedReward::new(&self.evaluator, None)?;
        let mut host = self.host(
            Box::new(reward),
            prompts,
            Some(Box::new(evaluator)),
            config.total_steps(),
        );
        host.sft_targets = sft_targets;
        let dir = self.row_dir(name);
        train_or_resume(&config, &dir, host)?;
        let records = log.borrow().clone();
        #[derive(Serialize)]
        struct Line<'a> {
            row: &'a str,
            round: u32,
            #[serde(flatten)]
            record: &'a MonitorRecord,
        }
        let mut lines: Vec<serde_json::Value> =
            read_jsonl_if_exists(&self.dir.join("monitor.jsonl"))?;
        lines.retain(|l| l["row"] != name);
        lines.extend(records.iter().map(|r| {
            serde_json::to_value(Line {
                row: name,
                round,
                record: r,
            })
            .unwrap_or_default()
        }));
        write_jsonl(&self.dir.join("monitor.jsonl"), &lines)?;
        self.state
            .fired
            .insert(name.to_string(), records.iter().any(|r| r.fired));
        self.state
            .trained_with
            .insert(name.to_string(), self.state.live.number);
        self.state
            .started_from
            .insert(name.to_string(), started_from);
        if keeping && round > 0 {
            self.keep_or_revert(name, round, &dir)?;
        } else if guided && !keeping {
            self.state.newest_policy = Some(dir);
        }
        Ok(())
    }

    /// The candidate pool (the same every round).
    pub(super) fn pool(&self) -> Vec<PoolItem> {
        let heldout = self.heldout();
        let exclude: Vec<&str> = heldout.iter().map(|p| p.prompt.as_str()).collect();
        let c = &self.config;
        pool(
            c.train.seed,
            c.pool_problems,
            c.pool_noisy_share,
            &c.train.task,
            &exclude,
        )
    }

    /// The held-out policy test set (the rounds' held-out problems).
    pub(super) fn heldout(&self) -> Vec<Problem> {
        let t = &self.config.train;
        splits(t.seed, 0, t.heldout_problems, &t.task).1
    }

    /// The fixed anchor set P: problems apart from the held-out set whose
    /// gold solutions the evaluator accepts (the quality check).
    pub(super) fn anchor(&self) -> Result<Vec<Problem>> {
        let heldout = self.heldout();
        let candidates: Vec<Problem> = generate(
            self.config.train.seed ^ ANCHOR_STREAM,
            self.config.anchor_problems * 2,
            &self.config.train.task,
        )
        .into_iter()
        .filter(|p| heldout.iter().all(|h| h.prompt != p.prompt))
        .collect();
        let gold: Vec<Case> = candidates
            .iter()
            .enumerate()
            .map(|(i, p)| Case::new(format!("anchor-{i}"), p, &p.solution))
            .collect();
        let totals = self.evaluator_totals(&gold)?;
        Ok(candidates
            .into_iter()
            .zip(totals)
            .filter(|(_, t)| *t >= 1.0)
            .map(|(p, _)| p)
            .take(self.config.anchor_problems)
            .collect())
    }

    /// The reference-based evaluator's totals (failed = 0).
    pub(super) fn evaluator_totals(&self, cases: &[Case]) -> Result<Vec<f64>> {
        let samples: Vec<verifine_runtime::Sample> = cases
            .iter()
            .map(|c| {
                verifine_runtime::Sample::new(&c.id, &c.prompt, &c.response)
                    .with_reference(&c.reference)
            })
            .collect();
        let scored = verifine_runtime::scorer_pool::score_all(
            &self.evaluator,
            &samples,
            64,
            self.config.threads,
            &|_| {},
        )?;
        Ok(scored.into_iter().map(|s| s.total.unwrap_or(0.0)).collect())
    }

    /// Sampled answers of the newest policy, `copies` per problem, drawn
    /// from the loop's seed.
    pub(super) fn newest_answers(
        &self,
        problems: &[Problem],
        copies: usize,
        stream: u64,
    ) -> Result<Vec<Vec<String>>> {
        self.newest_answers_from(problems, copies, self.config.loop_seed() ^ stream)
    }

    /// Sampled answers of the newest policy, `copies` per problem, drawn
    /// from `seed` (the frozen test set's are the data's, whatever the
    /// loop's seed).
    pub(super) fn newest_answers_from(
        &self,
        problems: &[Problem],
        copies: usize,
        seed: u64,
    ) -> Result<Vec<Vec<String>>> {
        let dir = self
            .state
            .newest_policy
            .clone()
            .unwrap_or_else(|| self.base_dir());
        let policy = Policy::load(&dir, &self.config.train.model)?;
        let g = &self.config.train.grpo;
        Ok(policy.answer(
            problems,
            Sampling::Temperature(g.temperature),
            copies,
            g.max_new_tokens,
            seed ^ ANSWER_STREAM,
        )?)
    }

    /// The newest policy's answers to the anchor set as cases, with the
    /// index of each case's problem.
    pub(super) fn anchor_cases(&self, tag: &str, stream: u64) -> Result<(Vec<Case>, Vec<usize>)> {
        let anchor = self.anchor()?;
        let answers = self.newest_answers(&anchor, self.config.anchor_samples, stream)?;
        let mut cases = Vec::new();
        let mut problem = Vec::new();
        for (i, (p, responses)) in anchor.iter().zip(answers).enumerate() {
            for (k, r) in responses.into_iter().enumerate() {
                cases.push(Case::new(format!("{tag}-a{i}-{k}"), p, r));
                problem.push(i);
            }
        }
        Ok((cases, problem))
    }

    /// Failure discovery on the anchor set with the newest policy, logged.
    fn discover_failures(&mut self, round: u32) -> Result<()> {
        let (cases, problem) = self.anchor_cases(&format!("f{round}"), u64::from(round) << 8)?;
        let scores = self.judge.score(&self.state.live, &cases)?;
        let cells = discover(&cases, &problem, &scores, PASS_MARK, 0.5);
        let path = self.dir.join("failures.jsonl");
        let mut lines: Vec<serde_json::Value> = read_jsonl_if_exists(&path)?;
        lines.retain(|l| l["round"] != round);
        lines.extend(cells.iter().map(|c| {
            let mut v = serde_json::to_value(c).unwrap_or_default();
            v["round"] = round.into();
            v["judge_revision"] = self.state.live.number.into();
            v
        }));
        Ok(write_jsonl(&path, &lines)?)
    }

    /// The newest policy's sampled answers to the pool (`pool_samples`
    /// each), the same for every use within a round.
    fn pool_answers(&self, items: &[PoolItem], round: u32) -> Result<Vec<Vec<String>>> {
        let problems: Vec<Problem> = items.iter().map(|i| i.problem.clone()).collect();
        self.newest_answers(
            &problems,
            self.config.pool_samples,
            (u64::from(round) << 8) | 1,
        )
    }

    /// The curriculum over the pool with the newest policy's `answers` and
    /// the live judge; decisions (and what changed since the last
    /// assessment) are logged.
    fn assess_pool(
        &mut self,
        items: &[PoolItem],
        answers: &[Vec<String>],
        round: u32,
    ) -> Result<Vec<PoolDecision>> {
        let decisions = assess(
            &self.judge,
            &self.state.live,
            items,
            answers,
            &self.curriculum,
            &self.config.curriculum.config_json(),
            round,
            &self.state.decisions,
        )?;
        let path = self.dir.join("curriculum.jsonl");
        let mut lines: Vec<serde_json::Value> = read_jsonl_if_exists(&path)?;
        lines.retain(|l| l["round"] != round);
        lines.extend(decisions.iter().zip(items).map(|(d, item)| {
            let mut v = serde_json::to_value(d).unwrap_or_default();
            v["round"] = round.into();
            v["judge_revision"] = self.state.live.number.into();
            v["noise"] = serde_json::to_value(item.noise).unwrap_or_default();
            v
        }));
        write_jsonl(&path, &lines)?;
        self.state.decisions = decisions
            .iter()
            .map(|d| (d.id.clone(), d.clone()))
            .collect();
        Ok(decisions)
    }

    /// A training host whose progress goes to the loop's callback.
    fn host(
        &self,
        reward: Box<dyn HookedReward>,
        prompts: Option<PromptPool>,
        evaluator: Option<Box<dyn RewardFunction>>,
        total: usize,
    ) -> Host {
        let progress = self.progress.clone();
        Host {
            reward,
            prompts,
            evaluator,
            curriculum: None,
            sft_targets: None,
            progress: Box::new(move |p| {
                if let Progress::Step { step, .. } = p {
                    (progress.borrow_mut())(EvolveProgress::Step { step, total });
                }
            }),
        }
    }
}

/// Trains into `dir`, or resumes the run there from its newest checkpoint
/// (a finished run too: that restores the hook's records, which the loop
/// reads, and writes the same outputs again).
fn train_or_resume(config: &TrainConfig, dir: &Path, host: Host) -> Result<()> {
    if verifine_train::checkpointed_config(dir).is_ok() {
        verifine_train::resume(dir, host)?;
    } else {
        let saved = toml::to_string(config)
            .map_err(|e| EvolveError::Invalid(format!("writing a round's config: {e}")))?;
        verifine_train::train(config, &saved, dir, host)?;
    }
    Ok(())
}

/// A finished row's held-out answers.
pub(super) fn heldout_answers(dir: &Path) -> Result<Vec<HeldoutAnswer>> {
    Ok(read_jsonl(&dir.join("heldout_answers.jsonl"))?)
}
