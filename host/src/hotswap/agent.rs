//! Revisions written by an agent: any executable (an LLM agent, a script) is
//! handed a directory with the live plugin's source, the disputed cases and
//! instructions, and writes a revised source crate or a component. verifine
//! builds it when needed; the gate then decides, exactly as for a revision
//! handed in by a person.

use super::plugin_crate;
use super::revision::{Origin, RevisionRecord};
use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// When and how the agent is asked (`[hot_swap.agent]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentConfig {
    /// The executable and its first arguments; the revision directory is
    /// appended as the last argument. Empty: no agent.
    pub command: Vec<String>,
    /// The live rubric's source crate, copied into the revision directory.
    pub source: Option<PathBuf>,
    /// Ask every this many GRPO steps (at step boundaries).
    pub every: usize,
    /// Ask only when at least this many canary cases are disputed.
    pub min_disputed: usize,
    /// The agent is stopped after this long.
    pub timeout_seconds: u64,
    /// Where revised crates are compiled (default: see
    /// [`plugin_crate::target_dir`]).
    pub build_target_dir: Option<PathBuf>,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            command: Vec::new(),
            source: None,
            every: 20,
            min_disputed: 1,
            timeout_seconds: 600,
            build_target_dir: None,
        }
    }
}

const INSTRUCTIONS: &str = "\
# Revise the rubric

`source/` is the live rubric plugin (a Rust crate on verifine-plugin-api);
`live.json` names the revision. `disputed.jsonl` lists canary cases where its
reward disagrees with the label (`label`: true = should be rewarded), with the
reward (`total`), the verdicts and the explanation it gave.

Write either `revised/` (a copy of `source/` with your changes; bump the
version in Cargo.toml) or `revised.wasm` (a built component). verifine builds
`revised/` for wasm32-wasip2, then gates the result: it must load, pass any
snapshot cases it ships (`revised/cases.jsonl` + `revised/snapshots/`), and
agree with the canary labels at least as well as the live revision. Only then
does it go live, at a step boundary.
";

/// What the agent produced.
pub struct Answer {
    /// The component, built if the agent wrote source.
    pub bytes: Vec<u8>,
    /// Shipped snapshot cases, when the revised crate has them.
    pub cases: Option<(PathBuf, PathBuf)>,
    /// Where it came from.
    pub origin: Origin,
}

/// Prepares `dir`, runs the agent and collects its revision; `Ok(None)` when
/// it wrote nothing.
pub fn ask(
    config: &AgentConfig,
    dir: &Path,
    step: usize,
    live: &RevisionRecord,
    disputed: &[serde_json::Value],
) -> Result<Option<Answer>> {
    let Some((program, args)) = config.command.split_first() else {
        bail!("no revision command configured");
    };
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    if let Some(source) = &config.source {
        plugin_crate::copy_standalone(source, &dir.join("source"))
            .with_context(|| format!("copying the live source {}", source.display()))?;
    }
    std::fs::write(dir.join("live.json"), serde_json::to_vec_pretty(live)?)?;
    crate::data::write_jsonl(&dir.join("disputed.jsonl"), disputed)?;
    std::fs::write(dir.join("INSTRUCTIONS.md"), INSTRUCTIONS)?;

    let log = std::fs::File::create(dir.join("agent.log"))?;
    let mut child = Command::new(program)
        .args(args)
        .arg(std::fs::canonicalize(dir)?)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("starting the revision command {program}"))?;
    let deadline = Instant::now() + Duration::from_secs(config.timeout_seconds);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "the revision command ran past {} s and was stopped (log: {})",
                config.timeout_seconds,
                dir.join("agent.log").display()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if !status.success() {
        bail!(
            "the revision command failed with {status} (log: {})",
            dir.join("agent.log").display()
        );
    }
    let origin = Origin::Agent {
        command: config.command.join(" "),
        step,
    };
    let wasm = dir.join("revised.wasm");
    if wasm.exists() {
        return Ok(Some(Answer {
            bytes: std::fs::read(&wasm)?,
            cases: None,
            origin,
        }));
    }
    let revised = dir.join("revised");
    if revised.join("Cargo.toml").exists() {
        let target = config
            .build_target_dir
            .clone()
            .unwrap_or_else(plugin_crate::target_dir);
        let (bytes, _) = plugin_crate::build(&revised, &target)
            .with_context(|| format!("building the agent's revision {}", revised.display()))?;
        let cases = revised.join("cases.jsonl");
        return Ok(Some(Answer {
            bytes,
            cases: cases.exists().then(|| (cases, revised.join("snapshots"))),
            origin,
        }));
    }
    Ok(None)
}
