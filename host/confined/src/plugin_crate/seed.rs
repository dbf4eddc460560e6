//! Compiled dependencies a confined build starts from, so that a fresh
//! target directory per build costs a copy, not a build from scratch.
//!
//! A seed is the target directory of a build of the **user's own** plugin
//! crate (the one configured as the live source, never a revision): the
//! code `verifine plugin build` would run, with the same trust (and built
//! confined all the same). No process running an agent's code writes it: each confined build gets a copy in
//! its fresh directory, so what a hostile `build.rs` does to its copy dies
//! with it. A seed is keyed by the crate's manifest and lock (the
//! dependencies a revision is locked to); a revision's own crate is then
//! the only thing compiled.

use super::{PluginCrateError, Result};
use super::{absolute, cargo_build_confined, copy_standalone, local_source_trees};
use std::path::{Path, PathBuf};

/// Where seeds are kept unless a run says otherwise: beside the user's
/// compiled-code cache (`agent-seeds`), so that every run of the same
/// crate and lock shares one; else under the system's temporary directory.
pub fn default_root() -> PathBuf {
    verifine_base::default_cache_dir()
        .and_then(|code| code.parent().map(|p| p.join("agent-seeds")))
        .unwrap_or_else(|| std::env::temp_dir().join("verifine-agent-seeds"))
}

/// The seed for the trusted crate `source` built against `lock`, under
/// `root`: made now unless a finished one is there. `Ok(None)` when its
/// build fails (the confined build then starts from nothing, and says why
/// if it fails too).
pub fn ensure(
    source: &Path,
    lock: &str,
    root: &Path,
    deadline: std::time::Instant,
) -> Result<Option<PathBuf>> {
    let root = absolute(root)?;
    let manifest = source.join("Cargo.toml");
    let manifest_text =
        std::fs::read(&manifest).map_err(|e| PluginCrateError::io("reading", &manifest, e))?;
    let mut keyed = manifest_text;
    keyed.extend_from_slice(lock.as_bytes());
    let key = &verifine_base::sha256_hex(&keyed)[..16];
    let seed = root.join(format!("seed-{key}"));
    if seed.join(FINISHED).is_file() {
        return Ok(Some(seed.join("target")));
    }
    // Unique to this call: two threads (or processes) may make the same
    // seed at once; the first to finish is kept.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let partial = root.join(format!("seed-{key}.partial-{}-{call}", std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    let crate_dir = partial.join("crate");
    copy_standalone(source, &crate_dir)?;
    let lock_path = crate_dir.join("Cargo.lock");
    std::fs::write(&lock_path, lock).map_err(|e| PluginCrateError::io("writing", &lock_path, e))?;
    // Built confined too, as its copies will be, so that the environment
    // and the flags are the same by construction.
    let target = partial.join("target");
    std::fs::create_dir(&target).map_err(|e| PluginCrateError::io("creating", &target, e))?;
    let sources = local_source_trees(&crate_dir)?;
    let built = cargo_build_confined(&crate_dir, &target, &sources, deadline);
    if let Err(e) = built {
        tracing::warn!(
            "building the seed of {} failed; agent builds start from scratch: {e}",
            source.display()
        );
        let _ = std::fs::remove_dir_all(&partial);
        return Ok(None);
    }
    let finished = partial.join(FINISHED);
    std::fs::write(&finished, b"").map_err(|e| PluginCrateError::io("writing", &finished, e))?;
    match std::fs::rename(&partial, &seed) {
        Ok(()) => {}
        // Another process finished the same seed first: use theirs.
        Err(_) if seed.join(FINISHED).is_file() => {
            let _ = std::fs::remove_dir_all(&partial);
        }
        Err(e) => return Err(PluginCrateError::io("renaming", &partial, e)),
    }
    Ok(Some(seed.join("target")))
}

/// Marks a seed whose build finished.
const FINISHED: &str = "finished";

/// Copies the seed `from` into the fresh directory `to`, modification
/// times kept (see [`super::standalone::copy_tree`]).
pub fn copy_into(from: &Path, to: &Path) -> Result<()> {
    super::standalone::copy_tree(from, to, None)
}
