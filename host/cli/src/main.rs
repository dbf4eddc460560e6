//! The `verifine` command line: one `Args` struct and one file per command
//! (`commands/`), so what a flag means is written once.

use clap::{Parser, Subcommand};
use std::process::ExitCode;
use verifine::commands::{agree, plugin, score, serve};

#[derive(Parser)]
#[command(
    name = "verifine",
    version = verifine::version_text(),
    about = "RL post-training with sandboxed, versioned verification plugins"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Judge a JSONL dataset with a rubric plugin.
    Score(score::ScoreArgs),
    /// Agreement of predictions with gold labels, with 95% bootstrap intervals.
    Agree(agree::AgreeArgs),
    /// Post-train a policy (the embedded small decoder, or a pretrained
    /// model: `[model] from`): SFT, then GRPO with plugin rewards.
    #[cfg(feature = "train")]
    Train(verifine::commands::train::TrainArgs),
    /// Co-evolve a policy and its reference-free judge: rounds from one SFT
    /// base, a judge loop with human labels and coactive calibration.
    #[cfg(feature = "train")]
    Evolve(verifine::commands::evolve::EvolveArgs),
    /// Inspect a pretrained model as training reads it (shape, chat
    /// template, tokens, logits).
    #[cfg(feature = "train")]
    Model(verifine::commands::model::ModelArgs),
    /// Export or import the label queue of an evolve run.
    #[cfg(feature = "train")]
    Labels(verifine::commands::labels::LabelsArgs),
    /// Test-time selection: best of N by each judge of an evolve run.
    #[cfg(feature = "train")]
    Select(verifine::commands::select::SelectArgs),
    /// Serve rewards over HTTP to distributed trainers (OpenRLHF, slime),
    /// hot-swappable while serving.
    Serve(serve::ServeArgs),
    /// Inspect, check, write, test and promote plugins.
    Plugin(plugin::PluginArgs),
    /// Tools for judge models (a stand-in GGUF for trying pipelines).
    #[cfg(feature = "local-judge")]
    Judge(verifine::commands::judge::JudgeArgs),
    /// Screen verifiers: agreement with golden judges, cost, the cheapest
    /// good-enough pick.
    Verifiers(verifine::commands::verifiers::VerifiersArgs),
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match Cli::parse().command {
        Command::Score(args) => score::run(args),
        Command::Agree(args) => agree::run(args),
        #[cfg(feature = "train")]
        Command::Train(args) => verifine::commands::train::run(args),
        #[cfg(feature = "train")]
        Command::Evolve(args) => verifine::commands::evolve::run(args),
        #[cfg(feature = "train")]
        Command::Model(args) => verifine::commands::model::run(args),
        #[cfg(feature = "train")]
        Command::Labels(args) => verifine::commands::labels::run(args),
        #[cfg(feature = "train")]
        Command::Select(args) => verifine::commands::select::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Plugin(args) => plugin::run(args),
        #[cfg(feature = "local-judge")]
        Command::Judge(args) => verifine::commands::judge::run(args),
        Command::Verifiers(args) => verifine::commands::verifiers::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
