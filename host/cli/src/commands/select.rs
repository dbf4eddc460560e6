//! `verifine select RUN_DIR`: test-time selection with a finished evolve
//! run's judges (random, R1's, the final one, the reference-based
//! evaluator, the annotator as upper bound) at budgets 1..N.

use anyhow::{Context as _, Result};
use clap::Args;
use std::path::PathBuf;

/// Best-of-N selection by each judge of an evolve run.
#[derive(Debug, Args)]
pub struct SelectArgs {
    /// The (finished) evolve run directory.
    #[arg(value_parser = crate::commands::absolute_path)]
    pub run_dir: PathBuf,
    /// The row whose policy answers (base, random-initial, guided-initial, R1 …).
    #[arg(long, default_value = "R3")]
    pub row: String,
    /// Candidates per problem (the largest budget).
    #[arg(long, default_value_t = 6)]
    pub candidates: usize,
    /// Held-out problems to answer.
    #[arg(long, default_value_t = 100)]
    pub problems: usize,
}

/// Runs the comparison and prints where the outputs went.
pub fn run(args: SelectArgs) -> Result<()> {
    let run = verifine_evolve::open(&args.run_dir, Box::new(|_| {}))
        .with_context(|| format!("opening {}", args.run_dir.display()))?;
    let selection = run.select(&args.row, args.candidates, args.problems)?;
    println!("{}", serde_json::to_string_pretty(&selection)?);
    println!(
        "selection.md, selection.json and selection.png in {}",
        args.run_dir.display()
    );
    Ok(())
}
