//! The `verifine` command line.

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use verifine::commands::{agree, author, plugin, score};
use verifine::runtime::{Limits, PluginKind, Runtime};

#[derive(Parser)]
#[command(
    name = "verifine",
    version,
    about = "RL post-training with sandboxed, versioned verification plugins"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Judge a JSONL dataset with a rubric plugin.
    Score {
        /// Built-in name, path to a .wasm component, or native:PATH (needs --allow-native).
        #[arg(long)]
        rubric: Option<String>,
        /// Aggregator (built-in name, path or native:PATH); default: the rubric's own total,
        /// else weighted-sum.
        #[arg(long)]
        aggregator: Option<String>,
        /// TOML config with [rubric], [aggregator], [limits] and [scoring] tables.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Rows {"id","prompt","response","reference"?,"context"?}.
        #[arg(long)]
        input: PathBuf,
        /// Written atomically (temporary file, then rename).
        #[arg(long)]
        output: PathBuf,
        #[arg(long)]
        batch_size: Option<usize>,
        /// Worker threads (default: one per core).
        #[arg(long)]
        threads: Option<usize>,
        /// Also write the summary as JSON here.
        #[arg(long)]
        summary: Option<PathBuf>,
        /// Allow native:PATH plugins. They are NOT sandboxed: they run inside this process
        /// with its privileges and no time or memory limit. Only for code you trust.
        #[arg(long)]
        allow_native: bool,
    },
    /// Agreement of predictions with gold labels, with 95% bootstrap intervals.
    Agree {
        #[arg(long)]
        pred: PathBuf,
        #[arg(long)]
        gold: PathBuf,
        #[arg(long, default_value = "total")]
        pred_field: String,
        #[arg(long, default_value = "label")]
        gold_field: String,
        /// Numbers ≥ threshold are positive labels.
        #[arg(long)]
        threshold: Option<f64>,
        #[arg(long, default_value_t = 1000)]
        resamples: usize,
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Train a small decoder: SFT warm-up, then GRPO with plugin rewards.
    Train {
        /// TOML config (default: the embedded examples/arithmetic/train.toml).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Where outputs go (default: runs/train-<unix time>).
        #[arg(long, conflicts_with = "resume")]
        run_dir: Option<PathBuf>,
        /// Continue the run in this directory from its newest checkpoint
        /// (its own config is used).
        #[arg(long, value_name = "RUN_DIR", conflicts_with = "config")]
        resume: Option<PathBuf>,
        /// Delete what an earlier run left in --run-dir first (only a
        /// directory that holds a run: one with a config.toml).
        #[arg(long, requires = "run_dir", conflicts_with = "resume")]
        overwrite: bool,
    },
    /// Inspect and check plugins.
    Plugin {
        #[command(subcommand)]
        command: PluginCommand,
    },
}

#[derive(Subcommand)]
enum PluginCommand {
    /// The built-in plugins.
    List,
    /// Metadata, compatibility and (for rubrics) criteria of a plugin.
    Inspect { plugin: String },
    /// Load the plugin and make one harmless call; exit 1 on any problem.
    Check { plugin: String },
    /// Scaffold a plugin crate that builds for wasm32-wasip2 as it is.
    New {
        /// rubric | aggregator | curriculum | trigger
        kind: String,
        /// The plugin's name (lowercase, digits, '-').
        name: String,
        /// Where to create it (default: ./NAME).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Build a plugin crate to a component and print its metadata.
    Build {
        /// The crate's directory.
        dir: PathBuf,
        /// Where to compile (default: a shared directory in the user cache).
        #[arg(long)]
        target_dir: Option<PathBuf>,
    },
    /// Run a rubric's cases and compare with stored snapshots (insta format).
    Test {
        /// A built-in name or a .wasm file.
        plugin: String,
        /// Cases: score input rows (JSONL).
        #[arg(long)]
        cases: PathBuf,
        /// Snapshot directory (default: snapshots/ beside the cases).
        #[arg(long)]
        snapshots: Option<PathBuf>,
        /// Store new and changed snapshots.
        #[arg(long)]
        accept: bool,
    },
    /// Score samples with two rubric revisions and list what changes.
    Diff {
        /// The old revision (built-in name or .wasm).
        old: String,
        /// The new revision.
        new: String,
        /// Samples: score input rows (JSONL).
        #[arg(long)]
        input: PathBuf,
        /// Labels: rows with `id` and `label` (boolean, or a number cut at --threshold).
        #[arg(long)]
        gold: Option<PathBuf>,
        /// A reward at or above this accepts a response.
        #[arg(long, default_value_t = 0.5)]
        threshold: f64,
    },
    /// Hand a revision to a run: it goes live at the next step boundary if it passes the gate.
    Promote {
        /// The run directory.
        run_dir: PathBuf,
        /// rubric | aggregator
        slot: String,
        /// The component.
        file: PathBuf,
        /// Snapshot cases the revision ships (snapshots/ beside them).
        #[arg(long)]
        cases: Option<PathBuf>,
    },
    /// Restore a slot's previous revision in a run.
    Rollback {
        /// The run directory.
        run_dir: PathBuf,
        /// rubric | aggregator
        slot: String,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Score {
            rubric,
            aggregator,
            config,
            input,
            output,
            batch_size,
            threads,
            summary,
            allow_native,
        } => {
            let args = score::ScoreArgs {
                rubric,
                aggregator,
                config,
                input,
                output,
                batch_size,
                threads,
                progress: std::io::stderr().is_terminal(),
                allow_native,
            };
            let result = score::score(&args)?;
            println!("{result}");
            if let Some(path) = summary {
                verifine::data::write_atomically(&path, |w| {
                    serde_json::to_writer_pretty(&mut *w, &result)?;
                    Ok(())
                })?;
            }
        }
        Command::Agree {
            pred,
            gold,
            pred_field,
            gold_field,
            threshold,
            resamples,
            seed,
            json,
        } => {
            let args = agree::AgreeArgs {
                pred_field,
                gold_field,
                threshold,
                resamples,
                seed,
                ..agree::AgreeArgs::new(pred, gold)
            };
            let report = agree::agree(&args)?;
            if json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{report}");
            }
        }
        Command::Train {
            config,
            run_dir,
            resume: Some(resume_dir),
            ..
        } => {
            debug_assert!(config.is_none() && run_dir.is_none());
            let summary = verifine::training::trainer::resume(&resume_dir)?;
            println!("{}", serde_json::to_string_pretty(&summary)?);
            println!("outputs in {}", resume_dir.display());
        }
        Command::Train {
            config,
            run_dir,
            resume: None,
            overwrite,
        } => {
            use verifine::training::trainer::{
                DEFAULT_CONFIG, TrainConfig, default_run_dir, train,
            };
            let config = match &config {
                Some(path) => {
                    let text = std::fs::read_to_string(path)
                        .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
                    TrainConfig::from_toml(&text, &path.display().to_string())?
                }
                None => TrainConfig::from_toml(DEFAULT_CONFIG, "examples/arithmetic/train.toml")?,
            };
            let run_dir = run_dir.unwrap_or_else(default_run_dir);
            if overwrite && run_dir.exists() {
                anyhow::ensure!(
                    run_dir.join("config.toml").exists(),
                    "--overwrite: {} does not hold a run (no config.toml); not deleting it",
                    run_dir.display()
                );
                std::fs::remove_dir_all(&run_dir)
                    .map_err(|e| anyhow::anyhow!("clearing {}: {e}", run_dir.display()))?;
            }
            let summary = train(&config, &run_dir)?;
            println!("{}", serde_json::to_string_pretty(&summary)?);
            println!("outputs in {}", run_dir.display());
        }
        Command::Plugin { command } => {
            let runtime = Runtime::new(Limits::default())?;
            match command {
                PluginCommand::List => {
                    for p in plugin::list(&runtime)? {
                        println!(
                            "{:<22} {:<11} {:<8} {}",
                            p.name,
                            p.kind.to_string(),
                            p.version,
                            &p.sha256[..16]
                        );
                    }
                }
                PluginCommand::Inspect { plugin: spec } => {
                    let inspection = plugin::inspect(&runtime, &spec)?;
                    println!("{}", serde_json::to_string_pretty(&inspection)?);
                }
                PluginCommand::Check { plugin: spec } => {
                    println!("{}", plugin::check(&runtime, &spec)?)
                }
                PluginCommand::New { kind, name, dir } => {
                    let kind = PluginKind::parse(&kind).ok_or_else(|| {
                        anyhow::anyhow!(
                            "unknown kind {kind:?}; one of rubric, aggregator, curriculum, trigger"
                        )
                    })?;
                    let dir = author::new(kind, &name, dir.as_deref())?;
                    println!(
                        "created {}; build it with `verifine plugin build {}`",
                        dir.display(),
                        dir.display()
                    );
                }
                PluginCommand::Build { dir, target_dir } => {
                    let built = author::build(&runtime, &dir, target_dir.as_deref())?;
                    println!("{}", serde_json::to_string_pretty(&built)?);
                }
                PluginCommand::Test {
                    plugin: spec,
                    cases,
                    snapshots,
                    accept,
                } => {
                    let results =
                        author::test(&runtime, &spec, &cases, snapshots.as_deref(), accept)?;
                    let (text, passed) = author::report_cases(&results, accept);
                    print!("{text}");
                    if !passed {
                        anyhow::bail!(
                            "snapshot cases are new or differ from their snapshots (see above)"
                        );
                    }
                }
                PluginCommand::Diff {
                    old,
                    new,
                    input,
                    gold,
                    threshold,
                } => {
                    let diff =
                        author::diff(&runtime, &old, &new, &input, gold.as_deref(), threshold)?;
                    println!("{}", serde_json::to_string_pretty(&diff)?);
                }
                PluginCommand::Promote {
                    run_dir,
                    slot,
                    file,
                    cases,
                } => {
                    let request =
                        author::promote(&runtime, &run_dir, &slot, &file, cases.as_deref())?;
                    println!(
                        "queued {}; the run decides it at its next step boundary (see {})",
                        request.display(),
                        run_dir.join("events.jsonl").display()
                    );
                }
                PluginCommand::Rollback { run_dir, slot } => {
                    let request = author::rollback(&run_dir, &slot)?;
                    println!(
                        "queued {}; the run rolls back at its next step boundary (see {})",
                        request.display(),
                        run_dir.join("events.jsonl").display()
                    );
                }
            }
        }
    }
    Ok(())
}
