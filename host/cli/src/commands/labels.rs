//! `verifine labels export|import RUN_DIR`: the judge loop's label queue for
//! people. Export writes every queried case not yet labelled, with the
//! judge's diagnostics; a person fills in each item's `label` (confirm,
//! change one dimension, score, clarify, revise); import reads it back.

use anyhow::{Context as _, Result};
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// Export or import the label queue of an evolve run.
#[derive(Debug, Args)]
pub struct LabelsArgs {
    #[command(subcommand)]
    command: LabelsCommand,
}

#[derive(Debug, Subcommand)]
enum LabelsCommand {
    /// Write the cases waiting for labels to a JSONL file.
    Export {
        /// The evolve run directory.
        run_dir: PathBuf,
        /// Where to write (default: RUN_DIR/judge/to-label.jsonl).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Whose labels count as done.
        #[arg(long, default_value = verifine_evolve::judge_loop::HUMAN)]
        annotator: String,
    },
    /// Read a filled-in queue file back into the run's labels.
    Import {
        /// The evolve run directory.
        run_dir: PathBuf,
        /// The filled-in file.
        file: PathBuf,
        /// The name the labels are recorded under.
        #[arg(long, default_value = verifine_evolve::judge_loop::HUMAN)]
        annotator: String,
    },
}

/// Runs the subcommand.
pub fn run(args: LabelsArgs) -> Result<()> {
    match args.command {
        LabelsCommand::Export {
            run_dir,
            out,
            annotator,
        } => {
            let out = out.unwrap_or_else(|| run_dir.join("judge").join("to-label.jsonl"));
            let n = verifine_evolve::queue::export(&run_dir, &annotator, &out)
                .with_context(|| format!("exporting the label queue of {}", run_dir.display()))?;
            println!("{n} cases to label in {}", out.display());
        }
        LabelsCommand::Import {
            run_dir,
            file,
            annotator,
        } => {
            let summary = verifine_evolve::queue::import(&run_dir, &file, &annotator)
                .with_context(|| {
                    format!("importing {} into {}", file.display(), run_dir.display())
                })?;
            println!("{}", serde_json::to_string_pretty(&summary)?);
        }
    }
    Ok(())
}
