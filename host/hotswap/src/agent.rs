//! Revisions written by an agent: any executable (an LLM agent, a script) is
//! handed a directory with the live plugin's source, the disputed cases and
//! instructions, and writes a revised source crate or a component. verifine
//! builds it when needed; the gate then decides, exactly as for a revision
//! handed in by a person.

use super::revision::{Origin, RevisionRecord};
use crate::error::{HotswapError, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use verifine_confined::{self as confined, plugin_crate};

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
    /// Where each revised crate gets the fresh target directory it is
    /// compiled in, removed after its build, and where the compiled
    /// dependencies it starts from are kept (default: the revision
    /// directory, and the seeds in the user's cache; see
    /// [`plugin_crate::build_confined`] and [`plugin_crate::seed`]).
    pub build_target_dir: Option<PathBuf>,
    /// Files and directories the agent may read besides the system's and
    /// its own directory (its program is readable already): a virtual
    /// environment, a model. Nothing else of the user's is.
    pub readable: Vec<PathBuf>,
    /// What is taken from the agent: `crate` (a `revised/` crate, built by
    /// verifine, or `revised.wasm`) or `component` (only `revised.wasm`: no
    /// agent-written `build.rs` or proc-macro ever runs here).
    pub accept: Accept,
}

/// What a revision agent may hand in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Accept {
    /// A source crate (built with cargo, confined) or a component.
    Crate,
    /// A component only.
    Component,
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
            readable: Vec::new(),
            accept: Accept::Crate,
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
version in Cargo.toml; keep the package name and the dependencies: it is
built offline against `source/Cargo.lock`) or `revised.wasm` (a built
component). verifine builds `revised/` for wasm32-wasip2, then gates the result: it must load, pass any
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
    /// The revised crate, when the agent wrote source.
    pub source: Option<PathBuf>,
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
        return Err(HotswapError::Agent(
            "no revision command configured".to_string(),
        ));
    };
    let write = |name: &str, bytes: &[u8]| {
        verifine_base::write_atomically(&dir.join(name), |w| w.write_all(bytes))
    };
    std::fs::create_dir_all(dir).map_err(|e| HotswapError::io("creating", dir, e))?;
    // Every path handed to a process that runs elsewhere is absolute.
    let dir = &std::fs::canonicalize(dir).map_err(|e| HotswapError::io("reading", dir, e))?;
    // One deadline for resolving the live crate's lock, the agent and the
    // build of what it wrote; all run confined (allow-listed environment, own
    // process group, bounded output).
    let deadline = Instant::now() + Duration::from_secs(config.timeout_seconds);
    let lock = match &config.source {
        Some(live_source) => prepare_source(live_source, dir, config.accept, deadline)?,
        None => None,
    };
    write(
        "live.json",
        &serde_json::to_vec_pretty(live).expect("revision records serialize"),
    )?;
    verifine_base::files::write_jsonl(&dir.join("disputed.jsonl"), disputed)?;
    write("INSTRUCTIONS.md", INSTRUCTIONS.as_bytes())?;

    let log_path = dir.join("agent.log");
    let mut command = Command::new(program);
    command.args(args).arg(dir).current_dir(dir);
    let sandbox = confined::Sandbox::new(dir)
        .running_command(&config.command)
        .reading(config.readable.iter().cloned())
        .with_network(confined::Network::Internet);
    let finished = confined::run(command, &sandbox, deadline).and_then(|finished| {
        confined::check_tree(dir).map_err(confined::ConfinedError::Output)?;
        Ok(finished)
    });
    let log = match &finished {
        Ok(f) => f.output.clone(),
        Err(_) => String::new(),
    };
    // Written by rename: a link the agent planted there is replaced, not
    // followed.
    verifine_base::write_atomically(&log_path, |w| w.write_all(log.as_bytes()))?;
    let finished = finished.map_err(|e| {
        HotswapError::Agent(format!(
            "the revision command {program} {e} (after at most {} s; log: {})",
            config.timeout_seconds,
            log_path.display()
        ))
    })?;
    if !finished.status.success() {
        return Err(HotswapError::Agent(format!(
            "the revision command failed with {} (log: {})",
            finished.status,
            log_path.display()
        )));
    }
    let origin = Origin::Agent {
        command: config.command.join(" "),
        step,
    };
    let seeds = plugin_crate::seed::default_root();
    collect(
        dir,
        config.accept,
        lock.as_deref(),
        Builds {
            root: config.build_target_dir.as_deref().unwrap_or(dir),
            seeds: config.build_target_dir.as_deref().unwrap_or(&seeds),
            trusted_source: config.source.as_deref(),
        },
        deadline,
        origin,
    )
}

/// Copies the live crate `live_source` to `dir/source` so it builds on its
/// own there; when crates are accepted, resolves the lock a revision of it
/// is built against (see [`plugin_crate::pin_lock`]).
pub fn prepare_source(
    live_source: &Path,
    dir: &Path,
    accept: Accept,
    deadline: Instant,
) -> Result<Option<String>> {
    let source = dir.join("source");
    plugin_crate::copy_standalone(live_source, &source)?;
    match accept {
        Accept::Crate => Ok(Some(plugin_crate::resolve_lock(&source, deadline)?)),
        Accept::Component => Ok(None),
    }
}

/// Where an agent's crate is built.
#[derive(Debug, Clone, Copy)]
pub struct Builds<'a> {
    /// Each build gets a fresh directory here, removed after it.
    pub root: &'a Path,
    /// Where the seeds (see [`plugin_crate::seed`]) are kept.
    pub seeds: &'a Path,
    /// The user's own crate the seed is built from (never a revision); no
    /// seed without it.
    pub trusted_source: Option<&'a Path>,
}

/// What an agent left in `dir`: `revised.wasm`, or a `revised/` crate built
/// confined against `lock` (from [`prepare_source`]) in a fresh directory
/// under `builds.root`; `Ok(None)` when it left neither.
pub fn collect(
    dir: &Path,
    accept: Accept,
    lock: Option<&str>,
    builds: Builds<'_>,
    deadline: Instant,
    origin: Origin,
) -> Result<Option<Answer>> {
    let wasm = dir.join("revised.wasm");
    if wasm.exists() {
        let bytes = confined::read_regular_file(&wasm, confined::MAX_COMPONENT_BYTES)
            .map_err(HotswapError::Agent)?;
        return Ok(Some(Answer {
            bytes,
            cases: None,
            source: None,
            origin,
        }));
    }
    let revised = dir.join("revised");
    if !revised.join("Cargo.toml").exists() {
        return Ok(None);
    }
    if accept == Accept::Component {
        return Err(HotswapError::Agent(format!(
            "the agent wrote a crate ({}), but accept = \"component\" takes only revised.wasm",
            revised.display()
        )));
    }
    let Some(lock) = lock else {
        return Err(HotswapError::Agent(format!(
            "the agent wrote a crate ({}), but without the live crate's source there is no \
             lock to build it against; hand in revised.wasm",
            revised.display()
        )));
    };
    let source = dir.join("source");
    plugin_crate::pin_lock(&revised, &source, lock)?;
    let sources = plugin_crate::local_source_trees(&source)?;
    let seed = match builds.trusted_source {
        Some(trusted) => plugin_crate::seed::ensure(trusted, lock, builds.seeds, deadline)?,
        None => None,
    };
    let bytes =
        plugin_crate::build_confined(&revised, builds.root, &sources, seed.as_deref(), deadline)?;
    let cases = revised.join("cases.jsonl");
    Ok(Some(Answer {
        bytes,
        cases: cases.exists().then(|| (cases, revised.join("snapshots"))),
        source: Some(revised),
        origin,
    }))
}
