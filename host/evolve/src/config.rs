//! What `verifine evolve` is told to do: one TOML file. `[train]` is a
//! training config (task, model, SFT, GRPO) used once for the SFT base and
//! then, with SFT off, for every round; the other tables name the judge, the
//! fixed evaluator, the curriculum and trigger plugins, and the judge loop's
//! knobs.

use crate::annotator::AnnotatorConfig;
use crate::calibration::CalibrationConfig;
use crate::command_agent::AgentConfig;
use crate::error::{EvolveError, Result};
use crate::queries::QueryConfig;
use crate::verifier::RetrainConfig;
use serde::{Deserialize, Serialize};
use verifine_base::PluginSetting;
use verifine_runtime::Limits;
use verifine_train::TrainConfig;

/// How a round optimises the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoundMode {
    /// GRPO with the judge's total as the reward.
    Grpo,
    /// SFT from the base in which the judge only decides which candidates
    /// are trained on (VeriFine's navigation setting; `[membership]`).
    SftMembership,
}

/// Where a judge-revised round's policy starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RoundStart {
    /// From the SFT base, every round: each row is what one judge revision
    /// makes of the base in `round_steps`.
    Base,
    /// From the kept policy: the round the fixed evaluator rates best so far
    /// on the validation set (the base before any). The initial-judge rows
    /// then train `rounds × round_steps` from the base, the budget of the
    /// whole chain.
    Kept,
}

/// Who labels the judge loop's queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Labeller {
    /// The simulated annotator of `[annotator]`.
    Simulated,
    /// A person: the loop exports the queue and stops until
    /// `verifine labels import` and `verifine evolve --resume`.
    Human,
}

/// `[membership]`: how the judge decides what an SFT round trains on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MembershipConfig {
    /// A candidate is kept when the live judge's total is at least this.
    pub min_score: f64,
    /// Whether the newest policy's sampled answers to the pool problems
    /// (`pool_samples` each) are candidates besides the pool's targets.
    pub policy_answers: bool,
}

impl Default for MembershipConfig {
    fn default() -> Self {
        MembershipConfig {
            min_score: 0.9,
            policy_answers: true,
        }
    }
}

/// The loop's schedule and sizes.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EvolveConfig {
    /// The loop's own seed: the policy's sampled answers (failure discovery,
    /// curriculum assessment, queries, selection), the rounds' prompt draws
    /// and rollouts, and the simulated annotator's noise. The SFT base, the
    /// problems and the frozen judge test set stay those of `[train] seed`,
    /// so runs at several loop seeds differ only in the loop
    /// (`verifine evolve --seeds`). `None`: `[train] seed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Judge-revised rounds after the initial-judge round (R1, R2 …).
    pub rounds: u32,
    /// Steps of every judge-revised round: GRPO steps, or SFT steps in
    /// `sft-membership` mode (the initial-judge rows train as long as the
    /// whole chain of rounds when `round_start = "kept"`).
    pub round_steps: usize,
    /// Monitoring (held-out evaluation + trigger) every this many round steps.
    pub check_every: usize,
    /// How rounds optimise.
    pub mode: RoundMode,
    /// Where judge-revised rounds start.
    pub round_start: RoundStart,
    /// Problems in the validation set that decides which policy is kept
    /// (`round_start = "kept"`): apart from the held-out set the report
    /// measures on and from the pool rounds train on.
    pub validation_problems: usize,
    /// Problems in the fixed anchor set P (failure discovery, queries).
    pub anchor_problems: usize,
    /// Sampled answers per anchor problem.
    pub anchor_samples: usize,
    /// Problems in the candidate pool the curriculum chooses from.
    pub pool_problems: usize,
    /// Sampled answers per pool problem when the curriculum assesses it.
    pub pool_samples: usize,
    /// Share of pool targets that are unreliable (an arithmetic slip or a
    /// misread operand), as real pools hold.
    pub pool_noisy_share: f64,
    /// Cases in the frozen judge test set (labelled by another annotator,
    /// never used to decide anything).
    pub test_cases: usize,
    /// Bootstrap resamples for the report's intervals.
    pub bootstrap: usize,
    /// Worker threads for judge scoring.
    pub threads: usize,
    /// Who labels.
    pub labeller: Labeller,
    /// The training config of the base and the rounds.
    pub train: TrainConfig,
    /// The reference-free judge and its initial rules (`config` = revision 0).
    pub judge: PluginSetting,
    /// The fixed reference-based evaluator (RB): the progress measure.
    pub evaluator: PluginSetting,
    /// The curriculum plugin.
    pub curriculum: PluginSetting,
    /// The trigger plugin (reads the monitor history).
    pub trigger: PluginSetting,
    /// The query set's sizes.
    pub queries: QueryConfig,
    /// The simulated annotator.
    pub annotator: AnnotatorConfig,
    /// How the judge decides SFT membership (`sft-membership` mode).
    pub membership: MembershipConfig,
    /// The accept rule and calibration limits.
    pub calibration: CalibrationConfig,
    /// The revision agent (default: the built-in rule search).
    pub agent: AgentConfig,
    /// A judges file (as `verifine score --judges`): the models that answer
    /// the loop's plugins' `ask-judges` queries — a model-backed judge
    /// (`worked-steps`' `ask`). None: every query fails with "no judge
    /// model configured".
    pub judges: Option<std::path::PathBuf>,
    /// What every case carries as its context when the judge sees it (in
    /// the judge loop and as the rounds' reward): the rubric item a YES/NO
    /// verifier is asked about, for `healthbench` (`{"rubrics": [{"criterion":
    /// …, "points": 1}]}`). None: no context.
    pub judge_context: Option<serde_json::Value>,
    /// Judge revisions retrain the judge's model on the labels instead of
    /// proposing rules; needs `judges`, and no `[agent] command`.
    pub verifier: Option<RetrainConfig>,
    /// Sandbox limits of every plugin the loop loads.
    pub limits: Limits,
}

impl Default for EvolveConfig {
    fn default() -> Self {
        EvolveConfig {
            seed: None,
            rounds: 3,
            round_steps: 150,
            check_every: 150,
            mode: RoundMode::Grpo,
            round_start: RoundStart::Base,
            validation_problems: 200,
            anchor_problems: 60,
            anchor_samples: 4,
            pool_problems: 600,
            pool_samples: 2,
            pool_noisy_share: 0.15,
            test_cases: 120,
            bootstrap: 1000,
            threads: 2,
            labeller: Labeller::Simulated,
            train: TrainConfig::default(),
            judge: PluginSetting::new("worked-steps"),
            evaluator: PluginSetting::new("math-answer"),
            curriculum: PluginSetting::new("weakness-curriculum"),
            trigger: PluginSetting::new("plateau-trigger"),
            queries: QueryConfig::default(),
            annotator: AnnotatorConfig::default(),
            membership: MembershipConfig::default(),
            calibration: CalibrationConfig::default(),
            agent: AgentConfig::default(),
            judges: None,
            judge_context: None,
            verifier: None,
            limits: Limits::default(),
        }
    }
}

/// The default run's config, embedded (`examples/evolve/evolve.toml`).
pub const DEFAULT_CONFIG: &str = include_str!("../../../examples/evolve/evolve.toml");

impl EvolveConfig {
    /// The loop's seed: `seed`, else `[train] seed`.
    pub fn loop_seed(&self) -> u64 {
        self.seed.unwrap_or(self.train.seed)
    }

    /// Parses and validates a config file's text.
    pub fn parse(text: &str) -> Result<Self> {
        let config: EvolveConfig = toml::from_str(text)
            .map_err(|e| EvolveError::Invalid(format!("evolve config: {e}")))?;
        config.validate()?;
        Ok(config)
    }

    /// Refuses settings the loop cannot run with.
    pub fn validate(&self) -> Result<()> {
        let fail = |m: String| Err(EvolveError::Invalid(format!("evolve config: {m}")));
        if !(0.0..=1.0).contains(&self.membership.min_score) {
            return fail(format!(
                "membership.min_score {} is outside [0, 1] (judge totals are)",
                self.membership.min_score
            ));
        }
        if self.round_steps == 0 || self.check_every == 0 {
            return fail("round_steps and check_every must be at least 1".into());
        }
        if self.anchor_problems == 0
            || self.anchor_samples == 0
            || self.pool_problems == 0
            || self.pool_samples == 0
        {
            return fail("anchor_problems, anchor_samples, pool_problems and pool_samples must be at least 1".into());
        }
        if !(0.0..=1.0).contains(&self.pool_noisy_share) {
            return fail(format!(
                "pool_noisy_share {} is outside [0, 1]",
                self.pool_noisy_share
            ));
        }
        if self.round_start == RoundStart::Kept && self.validation_problems == 0 {
            return fail("round_start = \"kept\" needs validation_problems of at least 1".into());
        }
        if let Some(verifier) = &self.verifier {
            if self.judges.is_none() {
                return fail(format!(
                    "[verifier] retrains the judges file's {:?}: set judges = FILE",
                    verifier.judge
                ));
            }
            if !self.agent.command.is_empty() {
                return fail(
                    "[verifier] and [agent] command both propose judge revisions: choose one"
                        .into(),
                );
            }
            if verifier.steps == 0 || verifier.batch_size == 0 {
                return fail("[verifier] steps and batch_size must be at least 1".into());
            }
            if !(verifier.heldout_share > 0.0 && verifier.heldout_share < 1.0) {
                return fail(format!(
                    "[verifier] heldout_share {} must be inside (0, 1): the retrained model is \
                     compared with the live one on questions it never trained on",
                    verifier.heldout_share
                ));
            }
            if !(verifier.met_at > 0.0 && verifier.met_at <= 1.0) {
                return fail(format!(
                    "[verifier] met_at {} must be in (0, 1]: labels score in [0, 1], and at 0 \
                     every case is met",
                    verifier.met_at
                ));
            }
        }
        if self.train.init_from.is_some() {
            return fail(
                "[train] init_from is set by the loop (rounds start from the base or the kept policy)"
                    .into(),
            );
        }
        self.train
            .validate()
            .map_err(|e| EvolveError::Invalid(format!("evolve config [train]: {}", e.0)))
    }

    /// The config as TOML (saved in the run directory).
    pub fn to_toml(&self) -> Result<String> {
        toml::to_string(self)
            .map_err(|e| EvolveError::Invalid(format!("writing the evolve config: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verifier_that_cannot_retrain_is_refused() {
        let parse = |extra: &str| EvolveConfig::parse(&format!("{extra}\n[verifier]\nsteps = 5\n"));
        let err = parse("").unwrap_err();
        assert!(err.to_string().contains("judges = FILE"), "{err}");
        let err = parse("judges = \"j.toml\"\n[agent]\ncommand = [\"agent.sh\"]").unwrap_err();
        assert!(err.to_string().contains("choose one"), "{err}");
        let err = EvolveConfig::parse("judges = \"j.toml\"\n[verifier]\nheldout_share = 0.0\n")
            .unwrap_err();
        assert!(err.to_string().contains("heldout_share"), "{err}");
        let err =
            EvolveConfig::parse("judges = \"j.toml\"\n[verifier]\nmet_at = 0.0\n").unwrap_err();
        assert!(err.to_string().contains("met_at"), "{err}");
        assert!(EvolveConfig::parse("judges = \"j.toml\"\n[verifier]\nsteps = 5\n").is_ok());
    }
}
