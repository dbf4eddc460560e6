//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};

pub mod http;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Checked-in fixtures under tests/fixtures.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

/// The shared data directory (`../shared/data` beside the clone, or
/// `$VERIFINE_SHARED_DATA`). Panics with the path when it is missing: the
/// real-data tests are part of the suite, not optional.
pub fn shared_data(relative: &str) -> PathBuf {
    let base = std::env::var_os("VERIFINE_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("..").join("shared").join("data"));
    let path = base.join(relative);
    assert!(
        path.exists(),
        "{} is missing: put the shared data beside the clone or set VERIFINE_SHARED_DATA",
        path.display()
    );
    path
}

/// `cargo metadata` of the workspace, with `extra` arguments.
///
/// Locked, not offline: without `--filter-platform` cargo reads the manifest
/// of every package in the lock file, including those no build on this
/// machine downloads (Windows-only ones such as `anstyle-wincon`), so a
/// fresh cargo cache fetches them from the registry. The lock file itself
/// is never changed.
pub fn cargo_metadata(extra: &[&str]) -> serde_json::Value {
    let output = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked"])
        .args(extra)
        .current_dir(repo_root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON")
}

/// A fresh, empty directory for one test (removed after a passing test,
/// kept after a failing one).
pub fn scratch_dir(test: &str) -> ScratchDir {
    verifine_test_support::scratch_dir(&format!("test-{test}"))
}

pub use verifine_test_support::ScratchDir;

/// Paths of the hostile plugins built by this crate's build script.
pub mod hostile {
    pub const INFINITE_LOOP: &str = env!("HOSTILE_INFINITE_LOOP");
    pub const ALLOC_BOMB: &str = env!("HOSTILE_ALLOC_BOMB");
    pub const PANICKER: &str = env!("HOSTILE_PANICKER");
    pub const FUTURE_API: &str = env!("HOSTILE_FUTURE_API");
    pub const WRONG_COUNT: &str = env!("HOSTILE_WRONG_COUNT");
    pub const GARBLED_PACKED: &str = env!("HOSTILE_GARBLED_PACKED");
    pub const SLEEPER: &str = env!("HOSTILE_SLEEPER");
    pub const TWO_FACED: &str = env!("HOSTILE_TWO_FACED");
    pub const CHATTERBOX: &str = env!("HOSTILE_CHATTERBOX");
    pub const CANARY_AWARE: &str = env!("HOSTILE_CANARY_AWARE");
    pub const HOARDER: &str = env!("HOSTILE_HOARDER");
    pub const HOARDER_IN_PLACE: &str = env!("HOSTILE_HOARDER_IN_PLACE");
}

/// Native (host-target) shared libraries built by this crate's build script.
pub mod native {
    /// `plugins/math-answer`, the same logic as the built-in component.
    pub const MATH_ANSWER: &str = env!("NATIVE_MATH_ANSWER");
    /// A rubric that panics on the response "panic".
    pub const PANICKER: &str = env!("NATIVE_HOSTILE_PANICKER");
    /// A rubric stamped with contract version 9.0.0.
    pub const FUTURE_API: &str = env!("NATIVE_HOSTILE_FUTURE_API");
}

/// A rubric built against contract 0.1 with wit-bindgen alone
/// (`tests/plugins/contract-0-1`), kept to prove later hosts load it.
pub const LEGACY_CONTRACT_0_1: &str = env!("LEGACY_CONTRACT_0_1");

/// A rubric built against contract 0.2 with wit-bindgen alone
/// (`tests/plugins/contract-0-2`): `judge` without the packed batch.
pub const LEGACY_CONTRACT_0_2: &str = env!("LEGACY_CONTRACT_0_2");

/// A 0.3 rubric that reads the response and context only and echoes what
/// it was sent (`tests/plugins/reads-echo`).
pub const READS_ECHO: &str = env!("READS_ECHO");

/// An example plugin with a config table (examples/concise-rubric), built for wasm32-wasip2.
pub const EXAMPLE_CONCISE: &str = env!("CONCISE");

/// The hot-swap walkthrough's loophole rubric (`examples/loophole-rubric`).
pub const EXAMPLE_LOOPHOLE: &str = env!("ANSWER_MENTIONED");

/// Reads a JSONL file written by `verifine score` (or any JSONL) into rows.
pub fn read_rows<T: serde::de::DeserializeOwned>(path: &Path) -> Vec<T> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// Writes rows as JSONL.
pub fn write_rows(path: &Path, rows: &[serde_json::Value]) {
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(path, text).unwrap();
}

/// A context at step 0 with an empty config table.
pub fn ctx() -> verifine_runtime::Context {
    verifine_runtime::Context::empty()
}

/// A sample to a question whose reference answer is 4.
pub fn sample(id: &str, response: &str) -> verifine_runtime::Sample {
    verifine_runtime::Sample::new(id, "q", response).with_reference("#### 4")
}
