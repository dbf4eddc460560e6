//! Running code an agent controls (its command, and cargo building its
//! crate, whose `build.rs` and proc-macros run too) with as little of ours as
//! we can withhold: an environment cleared to an allow-list (no secrets), its
//! own process group (a timeout kills every process it started), output kept
//! to a bounded tail, and one deadline for all of it.

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Environment variables a confined process keeps: what a shell and cargo
/// need to find their tools, nothing else.
pub const ENV_ALLOW_LIST: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
];

/// Bytes of a confined process's output (stdout and stderr together) kept.
pub const OUTPUT_TAIL_BYTES: usize = 64 * 1024;

/// How a confined process ended.
pub struct Finished {
    /// Its exit status.
    pub status: ExitStatus,
    /// The last [`OUTPUT_TAIL_BYTES`] of what it printed.
    pub output: String,
}

/// Clears `command`'s environment to [`ENV_ALLOW_LIST`] and gives it a
/// process group of its own.
pub fn confine(command: &mut Command) {
    command.env_clear();
    for name in ENV_ALLOW_LIST {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(command, 0);
}

/// Runs a confined `command` until it exits or `deadline` passes; on the
/// deadline the whole process group is killed. `Err` says why it did not
/// finish (could not start, ran out of time).
pub fn run(mut command: Command, deadline: Instant) -> Result<Finished, String> {
    confine(&mut command);
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("could not start: {e}"))?;
    let readers = [
        child.stdout.take().map(|s| tail_reader(Box::new(s))),
        child.stderr.take().map(|s| tail_reader(Box::new(s))),
    ];
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if Instant::now() >= deadline => {
                kill_group(&mut child);
                break Err(
                    "ran past its time limit and was stopped, with every process it started"
                        .to_string(),
                );
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                kill_group(&mut child);
                break Err(format!("waiting for it failed: {e}"));
            }
        }
    };
    // Anything it left running (a process group member holding the pipes)
    // goes too, so the readers finish.
    kill_group(&mut child);
    let output: String = readers
        .into_iter()
        .flatten()
        .filter_map(|reader| reader.join().ok())
        .collect::<Vec<_>>()
        .join("");
    status.map(|status| Finished { status, output })
}

/// Kills the process group led by `child` (and `child` itself).
fn kill_group(child: &mut Child) {
    #[cfg(unix)]
    {
        let _ = Command::new("kill")
            .args(["-s", "KILL", "--", &format!("-{}", child.id())])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Reads a stream to its end on a thread, keeping only the last
/// [`OUTPUT_TAIL_BYTES`] bytes.
fn tail_reader(mut stream: Box<dyn Read + Send>) -> std::thread::JoinHandle<String> {
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
        String::from_utf8_lossy(&tail).into_owned()
    })
}
