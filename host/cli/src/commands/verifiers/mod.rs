//! `verifine verifiers screen`: which judge is good enough, and at what
//! cost ("A Cheap Verifier is Good Enough"). Every candidate and golden
//! verifier judges every (response, criterion) pair of a screening slice;
//! candidates are compared with each golden and with the goldens' 2-of-3
//! majority; the cost-reducing rule picks the cheapest candidate with
//! accuracy ≥ the threshold. Writes `report.md`, `summary.json` and
//! `pareto.png` (cost against agreement) into the run directory.

pub mod config;
pub mod plot;
pub mod report;
pub mod run;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use config::ScreenConfig;
use report::{ScreenSummary, VerifierRow};
use std::path::PathBuf;
use verifine_judge::screen::{self, Candidate};

/// `verifine verifiers …`.
#[derive(Args, Debug)]
pub struct VerifiersArgs {
    #[command(subcommand)]
    command: VerifiersCommand,
}

#[derive(Subcommand, Debug)]
enum VerifiersCommand {
    /// Judge a slice with every candidate and golden verifier; report
    /// agreement, cost, the picks and a cost-vs-agreement plot.
    Screen(ScreenArgs),
}

/// `verifine verifiers screen`.
#[derive(Args, Debug, Clone)]
pub struct ScreenArgs {
    /// The screen's TOML (slice, judges, candidates, goldens).
    #[arg(long, value_parser = crate::commands::absolute_path)]
    pub config: PathBuf,
    /// Where report.md, summary.json and pareto.png go.
    #[arg(long, value_parser = crate::commands::absolute_path)]
    pub run_dir: PathBuf,
}

/// Runs the subcommand.
pub fn run(args: VerifiersArgs) -> Result<()> {
    match args.command {
        VerifiersCommand::Screen(args) => {
            let summary = screen(&args)?;
            println!("{}", report::one_line(&summary));
            println!("report: {}", args.run_dir.join("report.md").display());
            Ok(())
        }
    }
}

/// Screens, writes the run directory and returns the summary.
pub fn screen(args: &ScreenArgs) -> Result<ScreenSummary> {
    let config = ScreenConfig::load(&args.config)?;
    let slice = run::Slice::load(&config.slice, config.slice_format, config.max_tasks)?;
    let (runtime, judges) =
        crate::sandbox::judged_runtime(Default::default(), config.judges.as_deref(), false)?;
    let mut runs = Vec::new();
    for verifier in config.goldens.iter().chain(&config.candidates) {
        eprintln!("screening {} …", verifier.name);
        let run = run::run(
            verifier,
            &slice,
            &config.rubric,
            &runtime,
            judges.as_deref(),
        )
        .with_context(|| format!("verifier {}", verifier.name))?;
        runs.push(run);
    }
    let (golden_runs, candidate_runs) = runs.split_at(config.goldens.len());
    let summary = summarize(&config, &slice, golden_runs, candidate_runs);
    std::fs::create_dir_all(&args.run_dir)
        .with_context(|| format!("creating {}", args.run_dir.display()))?;
    report::write(&summary, &args.run_dir)?;
    plot::draw(&summary, &args.run_dir.join("pareto.png"))?;
    Ok(summary)
}

/// Every pair's verdict, rows concatenated.
fn pairs(run: &run::VerifierRun) -> Vec<Option<bool>> {
    run.verdicts.iter().flatten().copied().collect()
}

/// The metrics and picks of a screen (pure: the tests feed it runs).
pub fn summarize(
    config: &ScreenConfig,
    slice: &run::Slice,
    goldens: &[run::VerifierRun],
    candidates: &[run::VerifierRun],
) -> ScreenSummary {
    let tasks = slice.tasks();
    let golden_pairs: Vec<Vec<Option<bool>>> = goldens.iter().map(pairs).collect();
    let golden_refs: Vec<&[Option<bool>]> = golden_pairs.iter().map(Vec::as_slice).collect();
    let majority = screen::majority(&golden_refs);
    let row = |verifier: &config::Verifier, run: &run::VerifierRun| {
        let mine = pairs(run);
        VerifierRow::new(
            verifier,
            run,
            tasks,
            screen::agreement(&mine, &majority),
            config
                .goldens
                .iter()
                .zip(&golden_pairs)
                .filter(|(g, _)| g.name != verifier.name)
                .map(|(g, theirs)| (g.name.clone(), screen::agreement(&mine, theirs)))
                .collect(),
            report::task_scores(&run.verdicts, &slice.points, &slice.hard),
        )
    };
    let golden_rows: Vec<VerifierRow> = config
        .goldens
        .iter()
        .zip(goldens)
        .map(|(v, r)| row(v, r))
        .collect();
    let mut candidate_rows: Vec<VerifierRow> = config
        .candidates
        .iter()
        .zip(candidates)
        .map(|(v, r)| row(v, r))
        .collect();
    let choices: Vec<Candidate> = candidate_rows
        .iter()
        .map(|c| Candidate {
            name: c.name.clone(),
            accuracy: c.versus_majority.accuracy,
            usd_per_1000_tasks: c.cost.usd_per_1000_tasks,
        })
        .collect();
    let cost_reducing = screen::cost_reducing(&choices, config.threshold).map(|c| c.name.clone());
    let golden_usd: f64 = golden_rows.iter().map(|g| g.cost.usd_per_1000_tasks).sum();
    if let Some(post) = &config.post_training {
        report::post_training(&mut candidate_rows, post, golden_usd);
    }
    ScreenSummary {
        slice: config.slice.display().to_string(),
        tasks,
        pairs: majority.len(),
        pairs_with_majority: majority.iter().filter(|m| m.is_some()).count(),
        threshold: config.threshold,
        candidates: candidate_rows,
        goldens: golden_rows,
        golden_protocol_usd_per_1000_tasks: golden_usd,
        picks: report::Picks {
            cost_reducing,
            balanced: config.balanced.clone(),
        },
        post_training_baseline: config.post_training.as_ref().map(|p| p.baseline),
        single_error: report::SingleError {
            largest_task_move: slice
                .points
                .iter()
                .filter_map(|p| screen::single_error_task(p))
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v)))),
            policy_move: screen::single_error_policy(&slice.points),
        },
    }
}
