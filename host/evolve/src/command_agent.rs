//! An external revision agent (an LLM agent, a script): any executable is
//! handed a directory with the live rules, the disputed cases with the
//! judge's diagnostics and the labels, the clarifications people wrote and
//! the rules already tried this round, and answers by writing
//! `revised-rules.json` (and, optionally, `rationale.txt`). It runs confined
//! as the hot-swap agents do (see `verifine_confined`): it reads
//! the system and its request directory and writes only the latter, gets a
//! cleared environment, and is stopped with all it started at a deadline.
//! Its files are read only if they are regular files within a size cap.
//! Writing nothing means it has nothing more to propose.
//!
//! With `[agent] code` set, it may revise the judge's code too: the live
//! judge's crate is in `source/` (the configured `[agent] source`, or the
//! crate of the code revision that is live), and it may write `revised/` (a
//! crate, built confined, offline and locked to the live crate's
//! dependencies, as hot-swap builds an agent's crate) or `revised.wasm`.

use crate::agent::{Proposal, RevisionAgent, RevisionRequest};
use crate::error::{EvolveError, Result};
use crate::judge::code::{CodeSubmission, source_path};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use verifine_base::{FileError, write_atomically, write_jsonl};
use verifine_confined as confined;
use verifine_confined::read_regular_file;
use verifine_hotswap::agent::{Accept, Builds, collect, prepare_source};
use verifine_hotswap::revision::Origin;

/// Which agent proposes revisions (`[agent]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentConfig {
    /// The executable and its first arguments; the request directory is
    /// appended. Empty: the built-in rule-search agent.
    pub command: Vec<String>,
    /// The agent is stopped after this long, per proposal.
    pub timeout_seconds: u64,
    /// Files and directories it may read besides the system's and its own
    /// request directory (its program is readable already): a virtual
    /// environment, a model. Nothing else of the user's or of the run is.
    pub readable: Vec<PathBuf>,
    /// Whether it may revise the judge's code, and as what: `crate` (a
    /// revised crate, built here, or a component) or `component` (only
    /// `revised.wasm`: no agent-written build script ever runs here).
    /// Absent: rules only.
    pub code: Option<Accept>,
    /// The configured judge's source crate, handed to the agent as
    /// `source/` (needed for `code = "crate"`).
    pub source: Option<PathBuf>,
    /// Where each revised crate gets the fresh target directory it is
    /// compiled in, removed after its build, and where the compiled
    /// dependencies it starts from are kept (default: the request
    /// directory, and the seeds in the user's cache).
    pub build_target_dir: Option<PathBuf>,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            command: Vec::new(),
            timeout_seconds: 600,
            readable: Vec::new(),
            code: None,
            source: None,
            build_target_dir: None,
        }
    }
}

const INSTRUCTIONS: &str = "\
# Propose a revision of the judge's rules

`live.json` holds the judge's live rules (its rubric's config table).
`disputed.jsonl` lists cases where the judge's total and the human label
disagree: the case (prompt, response), the judge's total, per-dimension
sub-scores and explanation, and the label (per-dimension scores, total,
note). `clarifications.jsonl` holds what people wrote about criteria;
`tried.jsonl` the rules already proposed this round (do not repeat them).

Write `revised-rules.json` (the complete new rules; the dimensions stay the
same) and optionally `rationale.txt`. verifine scores your rules against the
labels and accepts them only if agreement on the newest batch rises and no
earlier case gets worse by more than the margin. Write nothing when you have
nothing more to propose.
";

const CODE_INSTRUCTIONS: &str = "
## Revising the code

`source/` is the live judge's crate (on verifine-plugin-api). Besides or
instead of rules you may write `revised/` (a copy of `source/` with your
changes; bump the version in Cargo.toml; keep the package name and the
dependencies: it is built offline against `source/Cargo.lock`) or
`revised.wasm` (a built component). It must load as a rubric and pass the
snapshot cases it ships (`cases.jsonl` + `snapshots/`), then the accept rule
decides as for rules. Without `revised-rules.json` the live rules stay.
";

/// The largest `revised-rules.json` read.
const MAX_RULES_BYTES: u64 = 1 << 20;
/// The largest `rationale.txt` read (it goes into the calibration log).
const MAX_RATIONALE_BYTES: u64 = 16 << 10;

/// The agent behind `[agent] command`.
#[derive(Debug, Clone)]
pub struct CommandAgent {
    config: AgentConfig,
    work: PathBuf,
    judge_dir: PathBuf,
    round: u32,
    asked: usize,
}

impl CommandAgent {
    /// An agent for judge loop `round`, whose request directories go under
    /// `work`; code revisions' crates are kept under `judge_dir`.
    pub fn new(config: AgentConfig, work: PathBuf, judge_dir: &Path, round: u32) -> Self {
        CommandAgent {
            config,
            work,
            judge_dir: judge_dir.to_path_buf(),
            round,
            asked: 0,
        }
    }

    /// The live judge's crate: the live code revision's, else the configured one.
    fn live_source(&self, request: &RevisionRequest<'_>) -> Option<PathBuf> {
        match &request.live.code {
            Some(code) if code.source => Some(source_path(&self.judge_dir, &code.plugin.sha256)),
            Some(_) => None,
            None => self.config.source.clone(),
        }
    }
}

impl RevisionAgent for CommandAgent {
    fn name(&self) -> String {
        self.config.command.join(" ")
    }

    fn propose(&mut self, request: &RevisionRequest<'_>) -> Result<Option<Proposal>> {
        self.asked += 1;
        let dir = self.work.join(format!("request-{:03}", self.asked));
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| FileError::io("clearing", &dir, e))?;
        }
        std::fs::create_dir_all(&dir).map_err(|e| FileError::io("creating", &dir, e))?;
        // Every path handed to a process that runs elsewhere is absolute.
        let dir = std::fs::canonicalize(&dir).map_err(|e| FileError::io("reading", &dir, e))?;
        let json = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
        let instructions = match self.config.code {
            Some(_) => format!("{INSTRUCTIONS}{CODE_INSTRUCTIONS}"),
            None => INSTRUCTIONS.to_string(),
        };
        write_atomically(&dir.join("INSTRUCTIONS.md"), |w| {
            w.write_all(instructions.as_bytes())
        })?;
        let live = json(&request.live.rules);
        write_atomically(&dir.join("live.json"), |w| w.write_all(live.as_bytes()))?;
        let disputed: Vec<serde_json::Value> = request
            .disputed
            .iter()
            .map(|d| serde_json::json!({"case": d.case_without_reference(), "judge": d.judge, "label": d.human}))
            .collect();
        write_jsonl(&dir.join("disputed.jsonl"), &disputed)?;
        write_jsonl(&dir.join("clarifications.jsonl"), request.clarifications)?;
        write_jsonl(&dir.join("tried.jsonl"), request.tried)?;

        let (program, args) = self
            .config
            .command
            .split_first()
            .ok_or_else(|| EvolveError::Invalid("[agent] command is empty".into()))?;
        // One deadline for the live crate's lock, the agent and the build.
        let deadline = Instant::now() + Duration::from_secs(self.config.timeout_seconds);
        let lock = match (self.config.code, self.live_source(request)) {
            (Some(accept), Some(source)) => prepare_source(&source, &dir, accept, deadline)?,
            _ => None,
        };
        let mut command = Command::new(program);
        command.args(args).arg(&dir).current_dir(&dir);
        // It may write only its request directory: not the run's records
        // (labels, the calibration log), not the gold answers.
        let sandbox = confined::Sandbox::new(&dir)
            .running_command(&self.config.command)
            .reading(self.config.readable.iter().cloned())
            .with_network(confined::Network::Internet);
        let failed = |message: String| EvolveError::Plugin {
            plugin: self.name(),
            message,
        };
        let finished = confined::run(command, &sandbox, deadline)
            .and_then(|finished| {
                confined::check_tree(&dir).map_err(confined::ConfinedError::Output)?;
                Ok(finished)
            })
            .map_err(|e| failed(format!("revision agent {e}")))?;
        if !finished.status.success() {
            return Err(failed(format!(
                "revision agent failed ({}): {}",
                finished.status, finished.output
            )));
        }
        let code = self.collect_code(&dir, lock.as_deref(), deadline)?;
        let revised = dir.join("revised-rules.json");
        if !revised.exists() && code.is_none() {
            return Ok(None);
        }
        let read = |path: &std::path::Path, max: u64| {
            read_regular_file(path, max)
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .map_err(|e| failed(format!("revision agent output: {e}")))
        };
        let rules = if revised.exists() {
            let text = read(&revised, MAX_RULES_BYTES)?;
            serde_json::from_str(&text)
                .map_err(|e| EvolveError::Invalid(format!("{}: {e}", revised.display())))?
        } else {
            request.live.rules.clone()
        };
        let rationale_path = dir.join("rationale.txt");
        let rationale = if rationale_path.exists() {
            read(&rationale_path, MAX_RATIONALE_BYTES)?
                .trim()
                .to_string()
        } else {
            format!("proposed by {}", self.name())
        };
        Ok(Some(Proposal {
            rules,
            rationale,
            code,
            verifier: None,
        }))
    }
}

impl CommandAgent {
    /// The code the agent left in `dir`, built when it is a crate; a build
    /// or read failure refuses the proposal (with the reason), it does not
    /// stop the run.
    fn collect_code(
        &self,
        dir: &Path,
        lock: Option<&str>,
        deadline: Instant,
    ) -> Result<Option<std::result::Result<CodeSubmission, String>>> {
        let wrote_code = dir.join("revised.wasm").exists() || dir.join("revised").exists();
        let Some(accept) = self.config.code else {
            if wrote_code {
                return Ok(Some(Err(
                    "the agent wrote code, but [agent] code is not set: this loop takes rules only"
                        .to_string(),
                )));
            }
            return Ok(None);
        };
        let seeds = verifine_confined::plugin_crate::seed::default_root();
        let builds = Builds {
            root: self.config.build_target_dir.as_deref().unwrap_or(dir),
            seeds: self.config.build_target_dir.as_deref().unwrap_or(&seeds),
            trusted_source: self.config.source.as_deref(),
        };
        let origin = Origin::Agent {
            command: self.name(),
            step: self.round as usize,
        };
        Ok(match collect(dir, accept, lock, builds, deadline, origin) {
            Ok(None) => None,
            Ok(Some(answer)) => Some(Ok(CodeSubmission {
                bytes: answer.bytes,
                cases: answer.cases,
                source: answer.source,
            })),
            Err(e) => Some(Err(e.to_string())),
        })
    }
}
