//! What the SIGKILL tests share: the binary, a scratch directory, counting
//! complete checkpoints, and killing a run once it reaches a point.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The `verifine` binary under test.
pub fn verifine() -> Command {
    Command::new(env!("CARGO_BIN_EXE_verifine"))
}

/// An empty directory of this test process.
pub fn scratch(name: &str) -> verifine_test_support::ScratchDir {
    verifine_test_support::scratch_dir(&format!("kill-{name}"))
}

/// Checkpoints of the run in `run` that were written whole.
pub fn complete_checkpoints(run: &Path) -> usize {
    std::fs::read_dir(run.join("checkpoints"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                // A checkpoint being written is a dot-named directory that
                // already holds state.json until its rename: not complete.
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .filter(|e| e.path().join("state.json").exists())
                .count()
        })
        .unwrap_or(0)
}

/// Starts `verifine ARGS RUN` and kills it (SIGKILL) once `ready(RUN)`
/// holds; returns whether it was killed before it finished.
pub fn kill_when(args: &[&str], run: &Path, ready: impl Fn(&Path) -> bool) -> bool {
    let mut child = verifine()
        .args(args)
        .arg(run)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        if ready(run) {
            child.kill().unwrap();
            child.wait().unwrap();
            return true;
        }
        assert!(
            Instant::now() < deadline,
            "the run never reached the kill point"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}
