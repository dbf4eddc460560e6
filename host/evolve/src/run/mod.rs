//! The loop's lifecycle: an ordered list of tasks (the SFT base, the frozen
//! judge test set, the rounds, the judge loops between them, the report),
//! each recorded in `state.json` when it is finished. A task that was
//! interrupted runs again from its start, and each task is written so that
//! running it again repeats nothing: training rounds resume from their
//! checkpoints, a judge loop reuses its saved query batch and labels and
//! replays its calibration log.
//!
//! A run directory holds `config.toml`, `state.json`, `base/` and one
//! training run per row (`rows/<name>/`), `judge/` (revisions, query
//! batches, labels, the frozen test set, the calibration log, review
//! requests), `curriculum.jsonl`, `failures.jsonl`, `monitor.jsonl`, and at
//! the end `summary.json`, `report.md` and `plot.png`.
//!
//! The tasks are the children, each an `impl Evolve` block over this
//! module's state: `round` (the SFT base and a policy round), with
//! `membership` (the judge deciding SFT data) and `kept` (the policy
//! carried forward); `judge_loop` (the frozen test set and a judge
//! loop); `report`. `select` runs on a finished run.

mod judge_loop;
mod kept;
mod membership;
mod report;
mod round;
mod select;

use crate::config::EvolveConfig;
use crate::curriculum::PoolDecision;
use crate::error::{EvolveError, Result};
use crate::judge::{Judge, JudgeRevision};
use crate::summary::EvolveSummary;
use kept::KeptPolicy;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use verifine_base::{FileError, write_atomically};
use verifine_runtime::scoring::RewardPlugins;
use verifine_runtime::{Plugin, PluginKind, Runtime};

/// What the loop tells its caller as it goes (for a progress display).
#[derive(Debug, Clone, PartialEq)]
pub enum EvolveProgress {
    /// A task starts (`index` of `total`, 0-based).
    Task {
        /// Its name (`base`, `row guided-initial`, `judge loop 1` …).
        name: String,
        /// Its position.
        index: usize,
        /// How many tasks the run has.
        total: usize,
    },
    /// A training step of the current task.
    Step {
        /// Steps done.
        step: usize,
        /// Steps of the task.
        total: usize,
    },
    /// A calibration iteration finished.
    Calibration {
        /// 1-based proposal number.
        iteration: usize,
        /// Whether it was accepted.
        accepted: bool,
    },
}

/// One unit of the loop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "task", rename_all = "kebab-case")]
enum Task {
    /// SFT once: the base every round starts from.
    Base,
    /// The frozen judge test set, labelled by another annotator.
    TestSet,
    /// A policy round: `name` is its row in the table.
    Round {
        /// The row name.
        name: String,
        /// The co-evolution round (0 for the initial judge).
        round: u32,
        /// Whether the curriculum plugin chooses the prompts (else uniform).
        guided: bool,
    },
    /// The judge loop after round `round − 1`.
    JudgeLoop {
        /// The round whose judge it produces.
        round: u32,
    },
    /// summary.json, report.md, plot.png.
    Report,
}

impl Task {
    /// A short name for logs and progress.
    fn label(&self) -> String {
        match self {
            Task::Base => "SFT base".to_string(),
            Task::TestSet => "frozen judge test set".to_string(),
            Task::Round { name, .. } => format!("row {name}"),
            Task::JudgeLoop { round } => format!("judge loop {round}"),
            Task::Report => "report".to_string(),
        }
    }
}

/// The tasks of a run, in order: base, test set, a round with a random
/// curriculum and one with the guided curriculum (both with the initial
/// judge), then a judge loop and a round for each of `rounds`.
fn plan(config: &EvolveConfig) -> Vec<Task> {
    let mut tasks = vec![
        Task::Base,
        Task::TestSet,
        Task::Round {
            name: "random-initial".into(),
            round: 0,
            guided: false,
        },
        Task::Round {
            name: "guided-initial".into(),
            round: 0,
            guided: true,
        },
    ];
    for round in 1..=config.rounds {
        tasks.push(Task::JudgeLoop { round });
        tasks.push(Task::Round {
            name: format!("R{round}"),
            round,
            guided: true,
        });
    }
    tasks.push(Task::Report);
    tasks
}

/// What `state.json` holds between tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct EvolveState {
    /// Tasks finished, in order.
    done: Vec<Task>,
    /// The live judge revision.
    live: JudgeRevision,
    /// Every revision that was live, oldest first (the initial one first).
    revisions: Vec<JudgeRevision>,
    /// The simulated annotator's generator.
    annotator: u64,
    /// The newest guided curriculum decision per pool item.
    decisions: BTreeMap<String, PoolDecision>,
    /// Per finished round row: whether the trigger fired in it.
    fired: BTreeMap<String, bool>,
    /// Set when calibration asked for human review; the judge loop pauses
    /// until the file it names is removed.
    review: Option<PathBuf>,
    /// The newest policy (a finished run directory).
    newest_policy: Option<PathBuf>,
    /// Per finished round row: the judge revision that rewarded it.
    trained_with: BTreeMap<String, u32>,
    /// The policy judge-revised rounds continue (`round_start = "kept"`).
    #[serde(default)]
    kept: Option<KeptPolicy>,
    /// Per finished round row: the row (or `base`) its policy started from.
    #[serde(default)]
    started_from: BTreeMap<String, String>,
}

/// A run of the loop: what [`open`] gives for `verifine select` on a
/// finished run ([`Evolve::select`]).
pub struct Evolve {
    config: EvolveConfig,
    dir: PathBuf,
    state: EvolveState,
    judge: Judge,
    evaluator: RewardPlugins,
    curriculum: Arc<Plugin>,
    trigger: Arc<Plugin>,
    progress: Progress,
}

/// The caller's progress callback, shared with the training runs' hosts.
type Progress = Rc<RefCell<Box<dyn FnMut(EvolveProgress)>>>;

/// Starts a new run in `dir` (which must not hold one).
pub fn start(
    config: EvolveConfig,
    dir: &Path,
    progress: Box<dyn FnMut(EvolveProgress)>,
) -> Result<EvolveSummary> {
    config.validate()?;
    if dir.join("state.json").exists() {
        return Err(EvolveError::Invalid(format!(
            "{} already holds an evolve run; continue it with `verifine evolve --resume {}` or choose another --run-dir",
            dir.display(),
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir.join("judge"))
        .map_err(|e| FileError::io("creating", &dir.join("judge"), e))?;
    let text = config.to_toml()?;
    write_atomically(&dir.join("config.toml"), |w| w.write_all(text.as_bytes()))?;
    let initial = JudgeRevision::initial(config.judge.config_json());
    let state = EvolveState {
        done: Vec::new(),
        live: initial.clone(),
        revisions: vec![initial],
        annotator: crate::annotator::Annotator::new(
            "annotator",
            config.annotator.under_loop_seed(config.seed),
        )
        .state(),
        decisions: BTreeMap::new(),
        fired: BTreeMap::new(),
        review: None,
        newest_policy: None,
        trained_with: BTreeMap::new(),
        kept: None,
        started_from: BTreeMap::new(),
    };
    let mut run = Evolve::assemble(config, dir, state, progress)?;
    run.save_state()?;
    run.execute()
}

/// Continues the run in `dir` after the last finished task.
pub fn resume(dir: &Path, progress: Box<dyn FnMut(EvolveProgress)>) -> Result<EvolveSummary> {
    open(dir, progress)?.execute()
}

/// An existing run, as `state.json` leaves it (for resuming, or for
/// `verifine select` on a finished run).
pub fn open(dir: &Path, progress: Box<dyn FnMut(EvolveProgress)>) -> Result<Evolve> {
    let text = std::fs::read_to_string(dir.join("config.toml"))
        .map_err(|e| FileError::io("reading", &dir.join("config.toml"), e))?;
    let config = EvolveConfig::parse(&text)?;
    let path = dir.join("state.json");
    let state_text =
        std::fs::read_to_string(&path).map_err(|e| FileError::io("reading", &path, e))?;
    let state: EvolveState = serde_json::from_str(&state_text)
        .map_err(|e| EvolveError::Invalid(format!("{}: {e}", path.display())))?;
    Evolve::assemble(config, dir, state, progress)
}

impl Evolve {
    fn assemble(
        config: EvolveConfig,
        dir: &Path,
        state: EvolveState,
        progress: Box<dyn FnMut(EvolveProgress)>,
    ) -> Result<Self> {
        let mut runtime = Runtime::new(config.limits)?;
        let judges_config = match &config.judges {
            Some(path) => Some(verifine_judge::JudgesConfig::load(path)?),
            None => None,
        };
        if let Some(judges) = &judges_config {
            let judges = verifine_judge::Judges::new(judges)?;
            runtime = runtime.with_judges(std::sync::Arc::new(judges));
        }
        let evaluator = RewardPlugins::from_settings(&runtime, &config.evaluator, None)?;
        let curriculum =
            runtime.load_kind(config.curriculum.plugin.clone(), PluginKind::Curriculum)?;
        let trigger = runtime.load_kind(config.trigger.plugin.clone(), PluginKind::Trigger)?;
        let mut judge = Judge::load(
            runtime,
            &config.judge.plugin,
            config.threads,
            &dir.join("judge"),
        )?
        .with_context(config.judge_context.as_ref());
        if let (Some(retrain), Some(judges)) = (&config.verifier, judges_config) {
            judge = judge.retraining(judges, &retrain.judge)?;
        }
        let progress = Rc::new(RefCell::new(progress));
        Ok(Evolve {
            config,
            dir: dir.to_path_buf(),
            state,
            judge,
            evaluator,
            curriculum,
            trigger,
            progress,
        })
    }

    fn execute(&mut self) -> Result<EvolveSummary> {
        let tasks = plan(&self.config);
        for (index, task) in tasks.iter().enumerate() {
            if let Some(done) = self.state.done.get(index) {
                if done != task {
                    return Err(EvolveError::Invalid(format!(
                        "state.json records {done:?} as task {index}, the config plans {task:?}"
                    )));
                }
                continue;
            }
            (self.progress.borrow_mut())(EvolveProgress::Task {
                name: task.label(),
                index,
                total: tasks.len(),
            });
            tracing::info!(task = %task.label(), "evolve");
            match task {
                Task::Base => self.base()?,
                Task::TestSet => self.test_set()?,
                Task::Round {
                    name,
                    round,
                    guided,
                } => self.round(name, *round, *guided)?,
                Task::JudgeLoop { round } => self.judge_loop(*round)?,
                Task::Report => report::write(self)?,
            }
            self.state.done.push(task.clone());
            self.save_state()?;
        }
        crate::summary::read(&self.dir)
    }

    fn save_state(&self) -> Result<()> {
        let text = serde_json::to_string_pretty(&self.state)
            .map_err(|e| EvolveError::Invalid(format!("writing state: {e}")))?;
        Ok(write_atomically(&self.dir.join("state.json"), |w| {
            w.write_all(text.as_bytes())
        })?)
    }

    /// The directory of a row's training run.
    fn row_dir(&self, name: &str) -> PathBuf {
        self.dir.join("rows").join(name)
    }

    /// The SFT base's run directory.
    fn base_dir(&self) -> PathBuf {
        self.dir.join("base")
    }
}
