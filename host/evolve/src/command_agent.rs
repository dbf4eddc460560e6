//! An external revision agent (an LLM agent, a script): any executable is
//! handed a directory with the live rules, the disputed cases with the
//! judge's diagnostics and the labels, the clarifications people wrote and
//! the rules already tried this round, and answers by writing
//! `revised-rules.json` (and, optionally, `rationale.txt`). It runs confined
//! as the hot-swap agents do (see `verifine_hotswap::confined`): it reads
//! the system and its request directory and writes only the latter, gets a
//! cleared environment, and is stopped with all it started at a deadline.
//! Its files are read only if they are regular files within a size cap.
//! Writing nothing means it has nothing more to propose.

use crate::agent::{Proposal, RevisionAgent, RevisionRequest};
use crate::error::{EvolveError, Result};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};
use verifine_base::{FileError, write_atomically, write_jsonl};
use verifine_hotswap::confined;
use verifine_hotswap::inbox::read_regular_file;

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
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            command: Vec::new(),
            timeout_seconds: 600,
            readable: Vec::new(),
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

/// The largest `revised-rules.json` read.
const MAX_RULES_BYTES: u64 = 1 << 20;
/// The largest `rationale.txt` read (it goes into the calibration log).
const MAX_RATIONALE_BYTES: u64 = 16 << 10;

/// The agent behind `[agent] command`.
#[derive(Debug, Clone)]
pub struct CommandAgent {
    config: AgentConfig,
    work: PathBuf,
    asked: usize,
}

impl CommandAgent {
    /// An agent whose request directories go under `work`.
    pub fn new(config: AgentConfig, work: PathBuf) -> Self {
        CommandAgent {
            config,
            work,
            asked: 0,
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
        let json = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
        write_atomically(&dir.join("INSTRUCTIONS.md"), |w| {
            w.write_all(INSTRUCTIONS.as_bytes())
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
        let dir = std::fs::canonicalize(&dir).map_err(|e| FileError::io("reading", &dir, e))?;
        let mut command = Command::new(program);
        command.args(args).arg(&dir).current_dir(&dir);
        let deadline = Instant::now() + Duration::from_secs(self.config.timeout_seconds);
        // It may write only its request directory: not the run's records
        // (labels, the calibration log), not the gold answers.
        let sandbox = confined::Sandbox::new(&dir)
            .running_command(&self.config.command)
            .reading(self.config.readable.iter().cloned());
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
        let revised = dir.join("revised-rules.json");
        if !revised.exists() {
            return Ok(None);
        }
        let read = |path: &std::path::Path, max: u64| {
            read_regular_file(path, max)
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .map_err(|e| failed(format!("revision agent output: {e}")))
        };
        let text = read(&revised, MAX_RULES_BYTES)?;
        let rules: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| EvolveError::Invalid(format!("{}: {e}", revised.display())))?;
        let rationale_path = dir.join("rationale.txt");
        let rationale = if rationale_path.exists() {
            read(&rationale_path, MAX_RATIONALE_BYTES)?
                .trim()
                .to_string()
        } else {
            format!("proposed by {}", self.name())
        };
        Ok(Some(Proposal { rules, rationale }))
    }
}
