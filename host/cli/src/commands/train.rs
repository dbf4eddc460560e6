//! `verifine train`: SFT warm-up, then GRPO with plugin rewards, into a run
//! directory; or `--resume` a run from its newest checkpoint.

use crate::run::{self, RunConfig};
use anyhow::Result;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use verifine_train::hooks::Progress;

/// Post-train a policy (the embedded small decoder, or a pretrained model:
/// `[model] from`): SFT, then GRPO with plugin rewards.
#[derive(Debug, Args)]
pub struct TrainArgs {
    /// TOML config (default: the embedded examples/arithmetic/train.toml).
    #[arg(long, value_parser = crate::commands::absolute_path)]
    pub config: Option<PathBuf>,
    /// Where outputs go (default: runs/train-<unix time>).
    #[arg(long, conflicts_with = "resume", value_parser = crate::commands::absolute_path)]
    pub run_dir: Option<PathBuf>,
    /// Continue the run in this directory from its newest checkpoint
    /// (its own config is used).
    #[arg(long, value_name = "RUN_DIR", conflicts_with = "config", value_parser = crate::commands::absolute_path)]
    pub resume: Option<PathBuf>,
    /// Delete what an earlier run left in --run-dir first (only a
    /// directory that holds a run: one with a config.toml).
    #[arg(long, requires = "run_dir", conflicts_with = "resume")]
    pub overwrite: bool,
}

/// Runs (or resumes) training and prints the summary.
pub fn run(args: TrainArgs) -> Result<()> {
    let (summary, run_dir) = if let Some(run_dir) = args.resume {
        (
            run::resume_with_progress(&run_dir, progress_bar())?,
            run_dir,
        )
    } else {
        let config = match &args.config {
            Some(path) => RunConfig::load(path)?,
            None => RunConfig::from_toml(run::DEFAULT_CONFIG, "examples/arithmetic/train.toml")?,
        };
        let run_dir = args.run_dir.unwrap_or_else(|| super::new_run_dir("train"));
        if args.overwrite {
            super::clear_run_dir(&run_dir, "config.toml")?;
        }
        (
            run::train_with_progress(&config, &run_dir, progress_bar())?,
            run_dir,
        )
    };
    println!("{}", serde_json::to_string_pretty(&summary)?);
    println!("outputs in {}", run_dir.display());
    Ok(())
}

/// A bar on a terminal; nothing otherwise (tests, CI, redirected output).
fn progress_bar() -> Box<dyn FnMut(Progress)> {
    if !std::io::stderr().is_terminal() {
        return Box::new(|_| {});
    }
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} step {pos}/{len} {msg} eta {eta}")
            .expect("valid template"),
    );
    Box::new(move |progress| match progress {
        Progress::Started { total, done } => {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
        Progress::Step { step, message } => {
            bar.set_message(message);
            bar.set_position(step as u64);
        }
        Progress::Finished => bar.finish_and_clear(),
    })
}
