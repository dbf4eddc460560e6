//! Running code an agent controls (its command, and cargo building its
//! crate, whose `build.rs` and proc-macros run too) with as little of ours as
//! we can withhold, on Linux:
//!
//! - **files**: Landlock lets it read and run an allow-list of the
//!   system's files ([`system`]: programs and libraries, the few files of
//!   `/etc` they need, `/dev/null`) and what its [`Sandbox`] names, and
//!   write only its own directories; the run directory around it, the
//!   user's home and every key in it, `/etc/shadow` (also as root) stay out
//!   of reach;
//! - **other processes**: it may not signal or trace any process outside
//!   its sandbox (Landlock's scoping), and `/proc` is closed to it, so no
//!   process's environment (verifine's, the user's shell's) can be read;
//! - **environment**: cleared to an allow-list (no secrets), `HOME` and
//!   `TMPDIR` inside its own directory;
//! - **time**: one deadline, after which it and everything it started,
//!   however detached, is killed (see [`reaper`]); output kept to a bounded
//!   tail.
//!
//! - **sockets and privileged calls** ([`seccomp`]): no UNIX socket can be
//!   made (Landlock does not cover pathname sockets: a Docker or D-Bus
//!   socket would be an escape); a build ([`Network::None`]) makes no
//!   socket at all; module loading, mounts, keyrings, opening by handle and
//!   the like fail even for root.
//!
//! IP networking is not withheld from agents ([`Network::Internet`]: an LLM
//! agent needs its API).
//!
//! [`plugin_crate`] builds a crate someone else wrote (an agent's revision,
//! a plugin handed to `verifine plugin build`) through [`run`]; what a
//! confined process leaves is read by [`check_tree`] and
//! [`read_regular_file`]. Hot-swap's revision agents and co-evolution's
//! command agent run through this crate; it knows nothing of revisions.

#![warn(missing_docs)]

mod landlock;
mod output;
pub mod plugin_crate;
mod reaper;
mod seccomp;
mod system;

pub use output::{MAX_COMPONENT_BYTES, check_tree, read_regular_file};
pub use plugin_crate::PluginCrateError;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Environment variables a confined process keeps: what a shell and cargo
/// need to find their tools, nothing else. `HOME` and `TMPDIR` are set to
/// the sandbox's own directory instead.
pub const ENV_ALLOW_LIST: &[&str] = &[
    "PATH",
    "USER",
    "LANG",
    "LC_ALL",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
];

/// Bytes of a confined process's output (stdout and stderr together) kept.
pub const OUTPUT_TAIL_BYTES: usize = 64 * 1024;

/// Set to `1` to run agents where Landlock is missing, confined only by the
/// environment allow-list and the deadline.
pub const UNCONFINED_ENV: &str = "VERIFINE_UNCONFINED_AGENTS";

/// How long after the deadline verifine still waits for the supervisor to
/// report (it kills on its own at the deadline).
const SUPERVISOR_GRACE: Duration = Duration::from_secs(5);

/// Which sockets a confined process may make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Network {
    /// None at all: a build is `--offline`, and an agent's build has no
    /// business talking to anyone.
    #[default]
    None,
    /// IP sockets (an LLM agent calls its API); still no UNIX sockets.
    Internet,
}

/// What a confined process may touch besides the system's programs.
#[derive(Debug, Clone, Default)]
pub struct Sandbox {
    /// Its own directory: readable, writable, its `HOME`, with `TMPDIR`
    /// at `tmp/` inside it.
    pub home: PathBuf,
    /// Further directories it may write (a build's target directory).
    pub writable: Vec<PathBuf>,
    /// Files and directories it may read and run (the agent's program,
    /// a toolchain).
    pub readable: Vec<PathBuf>,
    /// Which sockets it may make.
    pub network: Network,
}

impl Sandbox {
    /// A sandbox whose only writable place is `home`.
    pub fn new(home: &Path) -> Sandbox {
        Sandbox {
            home: home.to_path_buf(),
            ..Sandbox::default()
        }
    }

    /// Also lets it read (and run) `paths`.
    pub fn reading(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Sandbox {
        self.readable.extend(paths);
        self
    }

    /// Lets it make the sockets `network` allows.
    pub fn with_network(mut self, network: Network) -> Sandbox {
        self.network = network;
        self
    }

    /// Also lets it write `dir`.
    pub fn writing(mut self, dir: PathBuf) -> Sandbox {
        self.writable.push(dir);
        self
    }

    /// Also lets it read and run `program` as [`Command::new`] would find it
    /// (a path, or a name looked up in `PATH`).
    pub fn running(self, program: &str) -> Sandbox {
        let found = if program.contains('/') {
            std::fs::canonicalize(program).ok()
        } else {
            std::env::var_os("PATH").and_then(|path| {
                std::env::split_paths(&path)
                    .map(|dir| dir.join(program))
                    .find(|candidate| candidate.is_file())
            })
        };
        self.reading(found)
    }

    /// Also lets it read and run what `command` (program and arguments)
    /// needs of the user's files: the program, and each argument that names
    /// an existing file (`python3 agent.py`). Directories named there are
    /// not opened to it.
    pub fn running_command(self, command: &[String]) -> Sandbox {
        let Some((program, args)) = command.split_first() else {
            return self;
        };
        let files: Vec<PathBuf> = args
            .iter()
            .map(Path::new)
            .filter(|path| path.is_file())
            .filter_map(|path| std::fs::canonicalize(path).ok())
            .collect();
        self.running(program).reading(files)
    }

    /// Lets cargo build offline in `dir`: it may read what an offline build
    /// needs of cargo's home and rustup's (see [`system::toolchain_paths`]:
    /// not `credentials.toml`), and the configuration files cargo and
    /// rustup look for in `dir` and above it, as they would unconfined.
    pub fn with_rust_toolchain(self, dir: &Path) -> Sandbox {
        let (cargo, rustup) = toolchain_homes();
        let toolchain = system::toolchain_paths(&cargo, &rustup);
        let configuration = dir.ancestors().flat_map(|above| {
            [
                above.join(".cargo/config.toml"),
                above.join(".cargo/config"),
                above.join("rust-toolchain.toml"),
                above.join("rust-toolchain"),
            ]
        });
        let found: Vec<PathBuf> = configuration.filter(|path| path.is_file()).collect();
        self.reading(toolchain).reading(found)
    }
}

/// Where cargo and rustup keep their files, as they would find them.
fn toolchain_homes() -> (PathBuf, PathBuf) {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let cargo = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".cargo"));
    let rustup = std::env::var_os("RUSTUP_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".rustup"));
    (cargo, rustup)
}

/// Why a confined process did not finish.
#[derive(Debug, thiserror::Error)]
pub enum ConfinedError {
    /// It could not be started (or its sandbox not built).
    #[error("could not start: {0}")]
    Start(String),
    /// The deadline passed; it was killed with everything it started.
    #[error("ran past its time limit and was stopped, with every process it started")]
    Deadline,
    /// What it left behind may not be read (see [`check_tree`]).
    #[error("left output that is not read: {0}")]
    Output(String),
    /// Waiting for it failed.
    #[error("waiting for it failed: {0}")]
    Wait(std::io::Error),
}

/// How a confined process ended.
pub struct Finished {
    /// Its exit status.
    pub status: ExitStatus,
    /// The last [`OUTPUT_TAIL_BYTES`] of what it printed.
    pub output: String,
}

/// Runs `command` in `sandbox` until it exits or `deadline` passes; either
/// way every process it started is gone when this returns.
pub fn run(
    mut command: Command,
    sandbox: &Sandbox,
    deadline: Instant,
) -> Result<Finished, ConfinedError> {
    let tmp = sandbox.home.join("tmp");
    std::fs::create_dir_all(&tmp)
        .map_err(|e| ConfinedError::Start(format!("creating {}: {e}", tmp.display())))?;
    command.env_clear();
    for name in ENV_ALLOW_LIST {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    let (cargo_home, rustup_home) = toolchain_homes();
    command
        .env("CARGO_HOME", cargo_home)
        .env("RUSTUP_HOME", rustup_home)
        .env("HOME", &sandbox.home)
        .env("TMPDIR", &tmp);
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    #[cfg(target_os = "linux")]
    let _ruleset = supervised(&mut command, sandbox, deadline)?;
    #[cfg(not(target_os = "linux"))]
    if !unconfined_allowed() {
        return Err(unconfinable("confinement needs Linux's Landlock"));
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| ConfinedError::Start(e.to_string()))?;
    let (sender, output) = mpsc::channel();
    let streams = [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    ];
    for (order, stream) in streams.into_iter().enumerate() {
        if let Some(stream) = stream {
            tail_reader(stream, order, sender.clone());
        }
    }
    drop(sender);
    let ended = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if Instant::now() >= deadline + SUPERVISOR_GRACE => {
                kill_group(child.id());
                let _ = child.kill();
                let _ = child.wait();
                break Err(ConfinedError::Deadline);
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                kill_group(child.id());
                let _ = child.kill();
                let _ = child.wait();
                break Err(ConfinedError::Wait(e));
            }
        }
    };
    // Where there is no supervisor, the process group is all we can reach.
    #[cfg(not(target_os = "linux"))]
    kill_group(child.id());
    let status = ended?;
    let _ = std::fs::remove_dir_all(&tmp);
    if timed_out(status, deadline) {
        return Err(ConfinedError::Deadline);
    }
    // Every writer is dead, so the readers end at once; they are not
    // waited for past a bound all the same.
    let mut tails: Vec<(usize, String)> = Vec::new();
    let until = Instant::now() + Duration::from_secs(2);
    while tails.len() < 2 {
        match output.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(tail) => tails.push(tail),
            Err(_) => break,
        }
    }
    tails.sort_by_key(|(order, _)| *order);
    let output = tails
        .into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join("");
    Ok(Finished { status, output })
}

/// Builds the sandbox's Landlock ruleset and makes the spawned child the
/// [`reaper`] supervisor of the program; the ruleset must live until the
/// child is spawned.
#[cfg(target_os = "linux")]
fn supervised(
    command: &mut Command,
    sandbox: &Sandbox,
    deadline: Instant,
) -> Result<Option<landlock::Ruleset>, ConfinedError> {
    use landlock::Access;
    let system = system::rules();
    let mut rules: Vec<(&Path, Access)> = system
        .iter()
        .map(|(path, access)| (path.as_path(), *access))
        .collect();
    rules.push((&sandbox.home, Access::Full));
    rules.extend(sandbox.writable.iter().map(|d| (d.as_path(), Access::Full)));
    rules.extend(
        sandbox
            .readable
            .iter()
            .map(|p| (p.as_path(), Access::ReadAndRun)),
    );
    let ruleset = match landlock::Ruleset::new(&rules) {
        Ok(ruleset) => Some(ruleset),
        Err(why) if unconfined_allowed() => {
            tracing::warn!("{why}: running without a file-system sandbox ({UNCONFINED_ENV}=1)");
            None
        }
        Err(why) => return Err(unconfinable(&why)),
    };
    let filter = match seccomp::Filter::new(sandbox.network) {
        Some(filter) => Some(filter),
        None if unconfined_allowed() => None,
        None => return Err(unconfinable("no seccomp filter for this architecture")),
    };
    let fd = ruleset.as_ref().map(landlock::Ruleset::raw_fd);
    let left = deadline.saturating_duration_since(Instant::now());
    let deadline_nanos = reaper::monotonic_nanos() + left.as_nanos() as i128;
    // SAFETY: `getpid` only reads.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs between fork and exec and only makes system
    // calls (see `reaper`).
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(command, move || {
            reaper::split(deadline_nanos, parent, || {
                fd.map_or(Ok(()), landlock::enforce)?;
                filter.as_ref().map_or(Ok(()), seccomp::Filter::install)
            })
        });
    }
    Ok(ruleset)
}

/// Whether the user chose to run agents without a file-system sandbox.
fn unconfined_allowed() -> bool {
    std::env::var_os(UNCONFINED_ENV).is_some_and(|v| v == "1")
}

/// The refusal to run an agent without its sandbox.
fn unconfinable(why: &str) -> ConfinedError {
    ConfinedError::Start(format!(
        "{why}; without it an agent could read and write the user's files \
         (set {UNCONFINED_ENV}=1 to run it confined only by environment and deadline)"
    ))
}

/// Whether the supervisor reported stopping the program at the deadline.
fn timed_out(status: ExitStatus, deadline: Instant) -> bool {
    cfg!(target_os = "linux")
        && status.code() == Some(reaper::KILLED_AT_DEADLINE)
        && Instant::now() >= deadline
}

/// Kills the process group `leader` leads.
fn kill_group(leader: u32) {
    #[cfg(unix)]
    if let Ok(leader) = i32::try_from(leader) {
        // SAFETY: signals a process group we created.
        unsafe { libc::kill(-leader, libc::SIGKILL) };
    }
}

/// Reads a stream to its end on a thread, keeping only the last
/// [`OUTPUT_TAIL_BYTES`] bytes, and sends them with `order` when it ends.
fn tail_reader(
    mut stream: Box<dyn Read + Send>,
    order: usize,
    done: mpsc::Sender<(usize, String)>,
) {
    std::thread::spawn(move || {
        let mut tail: Vec<u8> = Vec::new();
        let mut buffer = [0u8; 8192];
        while let Ok(n) = stream.read(&mut buffer) {
            if n == 0 {
                break;
            }
            tail.extend_from_slice(&buffer[..n]);
            if tail.len() > 2 * OUTPUT_TAIL_BYTES {
                tail.drain(..tail.len() - OUTPUT_TAIL_BYTES);
            }
        }
        if tail.len() > OUTPUT_TAIL_BYTES {
            tail.drain(..tail.len() - OUTPUT_TAIL_BYTES);
        }
        let _ = done.send((order, String::from_utf8_lossy(&tail).into_owned()));
    });
}
