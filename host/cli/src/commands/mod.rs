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
/// given: `runs/<kind>-<unix seconds>`, made absolute like every path
/// argument (see [`absolute_path`]).
pub fn new_run_dir(kind: &str) -> std::path::PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let relative = std::path::PathBuf::from("runs").join(format!("{kind}-{secs}"));
    std::path::absolute(&relative).unwrap_or(relative)
}

/// Every path argument's parser: the path made absolute against the
/// directory verifine started in, once, at start-up. Processes verifine
/// starts (agents, cargo) run in other directories, where a relative path
/// would name something else.
pub fn absolute_path(argument: &str) -> Result<std::path::PathBuf, String> {
    if argument.is_empty() {
        return Err("an empty path".to_string());
    }
    std::path::absolute(argument).map_err(|e| format!("resolving {argument:?}: {e}"))
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

#[cfg(all(test, feature = "train"))]
mod tests {
    use clap::Parser;

    /// `verifine train --run-dir runs/x` as a parser sees it.
    #[derive(Parser)]
    struct Train {
        #[command(flatten)]
        args: super::train::TrainArgs,
    }

    #[test]
    fn relative_path_arguments_are_resolved_once_at_start_up() {
        let cwd = std::env::current_dir().unwrap();
        let parsed = Train::parse_from(["train", "--run-dir", "runs/x", "--config", "../c.toml"]);
        assert_eq!(parsed.args.run_dir, Some(cwd.join("runs/x")));
        assert_eq!(parsed.args.config, Some(cwd.join("../c.toml")));
        assert!(super::new_run_dir("train").is_absolute());
        assert!(super::absolute_path("").is_err());
    }
}
