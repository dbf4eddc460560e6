//! What each CLI subcommand does, one file each: its clap `Args` and the
//! library functions behind it (so tests run the same code paths as users).

pub mod agree;
pub mod author;
pub mod config;
#[cfg(feature = "train")]
pub mod evolve;
#[cfg(feature = "local-judge")]
pub mod judge;
#[cfg(feature = "train")]
pub mod labels;
#[cfg(feature = "train")]
pub mod model;
pub mod plugin;
pub mod score;
pub mod sdk;
#[cfg(feature = "train")]
pub mod select;
pub mod serve;
#[cfg(feature = "train")]
pub mod train;
pub mod verifiers;

/// The run directory of a new `kind` run (`train`, `evolve`) when none is
/// given: `runs/<kind>-<unix seconds>`.
pub fn new_run_dir(kind: &str) -> std::path::PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    std::path::PathBuf::from("runs").join(format!("{kind}-{secs}"))
}

/// Deletes what an earlier run left in `dir` for `--overwrite`, but only
/// when `dir` holds a run (it has `marker`): a mistyped path is never
/// wiped.
pub fn clear_run_dir(dir: &std::path::Path, marker: &str) -> anyhow::Result<()> {
    use anyhow::Context as _;
    if !dir.exists() {
        return Ok(());
    }
    anyhow::ensure!(
        dir.join(marker).exists(),
        "--overwrite: {} does not hold a run (no {marker}); not deleting it",
        dir.display()
    );
    std::fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))
}
