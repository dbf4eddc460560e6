//! Running a test's body in a child process with its memory capped and a
//! deadline: for fuzzing loaders, where a bug is an allocation that eats
//! the machine or a loop that never ends, and the test must fail (naming
//! the input) instead of taking CI down with it.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Set in the child: the test body runs there.
const CHILD: &str = "VERIFINE_CAPPED_CHILD";

/// The caps a child runs under.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// Address space, in bytes (`RLIMIT_AS`): an allocation past it fails,
    /// which aborts the child.
    pub memory_bytes: u64,
    /// Wall-clock time before the child is killed.
    pub deadline: Duration,
}

/// In the parent: re-runs the test `test` (its full path, as the test
/// harness names it: `module::name`) of the current test binary in a child
/// under `caps`, waits for it, and panics with the tail of its output if it
/// failed, was killed, or ran past the deadline; returns `false`. In the
/// child: returns `true`, and the caller runs the body.
pub fn in_capped_child(test: &str, caps: Caps) -> bool {
    if std::env::var_os(CHILD).is_some() {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut command = Command::new(exe);
    command
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        // One thread pool thread and few malloc arenas: the cap then
        // measures what the code allocates, not per-thread reservations.
        .env("RAYON_NUM_THREADS", "1")
        .env("MALLOC_ARENA_MAX", "2")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    {
        let memory = caps.memory_bytes;
        // SAFETY: only `setrlimit` runs between fork and exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, move || {
                let limit = libc::rlimit {
                    rlim_cur: memory as libc::rlim_t,
                    rlim_max: memory as libc::rlim_t,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = command.spawn().expect("the capped child starts");
    let output = {
        let mut stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        let out = std::thread::spawn(move || read_all(&mut stdout));
        let err = std::thread::spawn(move || read_all(&mut stderr));
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("waiting for the child") {
                break Some(status);
            }
            if started.elapsed() > caps.deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let text = format!(
            "{}{}",
            out.join().unwrap_or_default(),
            err.join().unwrap_or_default()
        );
        (status, text)
    };
    let tail: String = {
        let chars: Vec<char> = output.1.chars().collect();
        chars[chars.len().saturating_sub(6000)..].iter().collect()
    };
    match output.0 {
        Some(status) if status.success() => {
            // Shown with `--nocapture`: what the child reported (counts).
            print!("{tail}");
            false
        }
        Some(status) => panic!(
            "{test} failed in its capped child ({status}; memory cap {} MiB):\n{tail}",
            caps.memory_bytes >> 20
        ),
        None => panic!(
            "{test} ran past its deadline of {:?} and was killed:\n{tail}",
            caps.deadline
        ),
    }
}

fn read_all(stream: &mut impl std::io::Read) -> String {
    let mut bytes = Vec::new();
    let _ = stream.read_to_end(&mut bytes);
    String::from_utf8_lossy(&bytes).into_owned()
}
