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
        #[arg(value_parser = crate::commands::absolute_path)]
        run_dir: PathBuf,
        /// Where to write (default: RUN_DIR/judge/to-label.jsonl).
        #[arg(long, value_parser = crate::commands::absolute_path)]
        out: Option<PathBuf>,
        /// Whose labels count as done.
        #[arg(long, default_value = verifine_evolve::labels::HUMAN)]
        annotator: String,
    },
    /// Read a filled-in queue file back into the run's labels.
    Import {
        /// The evolve run directory.
        #[arg(value_parser = crate::commands::absolute_path)]
        run_dir: PathBuf,
        /// The filled-in file.
        #[arg(value_parser = crate::commands::absolute_path)]
        file: PathBuf,
        /// The name the labels are recorded under.
        #[arg(long, default_value = verifine_evolve::labels::HUMAN)]
        annotator: String,
    },
    /// Serve the label queue as a page in the browser (on 127.0.0.1);
    /// every save goes straight to the queue file that `import` reads.
    Serve {
        /// The evolve run directory.
        #[arg(value_parser = crate::commands::absolute_path)]
        run_dir: PathBuf,
        /// The queue file (default: RUN_DIR/judge/to-label.jsonl, exported
        /// first when missing).
        #[arg(long, value_parser = crate::commands::absolute_path)]
        file: Option<PathBuf>,
        /// Port on 127.0.0.1 (0: any free port).
        #[arg(long, default_value_t = 8700)]
        port: u16,
        /// Whose labels the checks count earlier labels of (for `revise`).
        #[arg(long, default_value = verifine_evolve::labels::HUMAN)]
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
        LabelsCommand::Serve {
            run_dir,
            file,
            port,
            annotator,
        } => {
            let (queue, _) = label_queue(&run_dir, file, &annotator)?;
            let listener = std::net::TcpListener::bind(("127.0.0.1", port))
                .with_context(|| format!("binding 127.0.0.1:{port}"))?;
            let address = listener.local_addr()?;
            let access = verifine_serve::labels::PageAccess::new(address)?;
            // The address carries this start's token: the page answers no one
            // without it.
            println!(
                "label queue of {} on {}",
                run_dir.display(),
                access.url(address)
            );
            let router = verifine_serve::labels::router(
                std::sync::Arc::new(queue),
                std::sync::Arc::new(access),
            );
            verifine_serve::labels::serve_blocking(router, listener, async {
                let _ = tokio::signal::ctrl_c().await;
            })?;
        }
    }
    Ok(())
}

/// The label queue of `run_dir` (exported first when the file is
/// missing), checked as the judge loop checks labels, and its path.
pub fn label_queue(
    run_dir: &std::path::Path,
    file: Option<PathBuf>,
    annotator: &str,
) -> Result<(verifine_serve::labels::LabelQueue, PathBuf)> {
    use verifine_evolve::labels::{LabelStore, QueueItem, check_item};
    let file = file.unwrap_or_else(|| run_dir.join("judge").join("to-label.jsonl"));
    if !file.exists() {
        verifine_evolve::queue::export(run_dir, annotator, &file)
            .with_context(|| format!("exporting the label queue of {}", run_dir.display()))?;
    }
    let labels = run_dir.join("judge").join("labels.jsonl");
    let annotator = annotator.to_string();
    // The labels are read at every check: an import while the page is open
    // makes `revise` possible at once.
    let check = Box::new(move |item: &serde_json::Value| {
        let item: QueueItem = serde_json::from_value(item.clone()).map_err(|e| e.to_string())?;
        let store = LabelStore::load(&labels).map_err(|e| e.to_string())?;
        check_item(&item, &annotator, &store)
    });
    let queue = verifine_serve::labels::LabelQueue::open(&file, check)?;
    Ok((queue, file))
}
