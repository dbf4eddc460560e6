//! `verifine evolve`: the co-evolution loop (policy rounds from one SFT
//! base, a judge loop with labels and calibration) into a run directory;
//! or `--resume` one after the last finished task.

use anyhow::{Context as _, Result};
use clap::Args;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::PathBuf;
use verifine_evolve::config::DEFAULT_CONFIG;
use verifine_evolve::{EvolveConfig, EvolveProgress};

/// Co-evolve a policy and its reference-free judge.
#[derive(Debug, Args)]
pub struct EvolveArgs {
    /// TOML config (default: the embedded examples/evolve/evolve.toml).
    #[arg(long, value_parser = crate::commands::absolute_path)]
    pub config: Option<PathBuf>,
    /// Where outputs go (default: runs/evolve-<unix time>).
    #[arg(long, conflicts_with = "resume", value_parser = crate::commands::absolute_path)]
    pub run_dir: Option<PathBuf>,
    /// Continue the run in this directory after its last finished task.
    #[arg(long, value_name = "RUN_DIR", conflicts_with = "config", value_parser = crate::commands::absolute_path)]
    pub resume: Option<PathBuf>,
    /// Delete what an earlier evolve run left in --run-dir first (only a
    /// directory that holds one: with a state.json).
    #[arg(long, requires = "run_dir", conflicts_with = "resume")]
    pub overwrite: bool,
    /// Run the config once per loop seed listed (`0,1,2`; the config's
    /// top-level `seed`), each into `<run-dir>/seed-<N>`: the SFT base, the
    /// problems and the frozen judge test set stay those of `[train] seed`,
    /// only the loop's sampling, draws and label noise change. Write the
    /// report across them (`seeds.md`, `seeds.json`, `seeds.png`) into the
    /// run directory. A seed whose run finished is read, not run again; one
    /// that stopped is resumed.
    #[arg(long, value_delimiter = ',', conflicts_with = "resume")]
    pub seeds: Vec<u64>,
}

/// Runs (or resumes) the loop and prints the summary.
pub fn run(args: EvolveArgs) -> Result<()> {
    if !args.seeds.is_empty() {
        return run_seeds(args);
    }
    let started = std::time::Instant::now();
    let (summary, dir) = if let Some(dir) = args.resume {
        (verifine_evolve::resume(&dir, progress())?, dir)
    } else {
        let config = config(&args)?;
        let dir = args.run_dir.unwrap_or_else(|| super::new_run_dir("evolve"));
        if args.overwrite {
            super::clear_run_dir(&dir, "state.json")?;
        }
        (verifine_evolve::start(config, &dir, progress())?, dir)
    };
    println!("{}", serde_json::to_string_pretty(&summary)?);
    println!(
        "outputs in {} ({:.0} s)",
        dir.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The config `--config` names, or the embedded default.
fn config(args: &EvolveArgs) -> Result<EvolveConfig> {
    Ok(match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            EvolveConfig::parse(&text).with_context(|| format!("in {}", path.display()))?
        }
        None => EvolveConfig::parse(DEFAULT_CONFIG)
            .context("the embedded examples/evolve/evolve.toml")?,
    })
}

/// `--seeds`: one run per seed, then the report across them.
fn run_seeds(args: EvolveArgs) -> Result<()> {
    use verifine_evolve::seeds::{self, SeedStart};
    let config = config(&args)?;
    let dir = args
        .run_dir
        .clone()
        .unwrap_or_else(|| super::new_run_dir("evolve-seeds"));
    if args.overwrite {
        for seed in &args.seeds {
            super::clear_run_dir(&dir.join(format!("seed-{seed}")), "state.json")?;
        }
    }
    let announce = |seed, start| {
        let how = match start {
            SeedStart::Fresh => "running",
            SeedStart::Resumed => "resuming",
            SeedStart::Finished => "finished earlier, reading",
        };
        eprintln!(
            "seed {seed}: {how} {}",
            dir.join(format!("seed-{seed}")).display()
        );
    };
    let report = seeds::run(&config, &dir, &args.seeds, progress, announce)?;
    println!("{}", seeds::markdown(&report));
    println!("outputs in {}", dir.display());
    Ok(())
}

/// Bars for tasks, steps and calibration iterations on a terminal; nothing otherwise.
fn progress() -> Box<dyn FnMut(EvolveProgress)> {
    if !std::io::stderr().is_terminal() {
        return Box::new(|_| {});
    }
    let bars = MultiProgress::new();
    let style = |t: &str| ProgressStyle::with_template(t).expect("valid template");
    let tasks = bars.add(ProgressBar::new(0).with_style(style("{bar:30} task {pos}/{len} {msg}")));
    let steps =
        bars.add(ProgressBar::new(0).with_style(style("{bar:30} step {pos}/{len} eta {eta}")));
    let calibration =
        bars.add(ProgressBar::new(0).with_style(style("calibration: {pos} proposals, {msg}")));
    let mut accepted = 0;
    Box::new(move |p| match p {
        EvolveProgress::Task { name, index, total } => {
            tasks.set_length(total as u64);
            tasks.set_position(index as u64);
            tasks.set_message(name);
            steps.set_position(0);
        }
        EvolveProgress::Step { step, total } => {
            steps.set_length(total as u64);
            steps.set_position(step as u64);
        }
        EvolveProgress::Calibration {
            iteration,
            accepted: yes,
        } => {
            accepted += usize::from(yes);
            calibration.set_position(iteration as u64);
            calibration.set_message(format!("{accepted} accepted"));
        }
    })
}
