//! `verifine judge …`: tools for judge models themselves (the backends are
//! configured in a judges file, not here): a stand-in GGUF, and distilling
//! a student judge from a teacher's verdicts.

pub mod distill;
#[cfg(feature = "train")]
pub mod labelled;
#[cfg(feature = "train")]
pub mod train;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use verifine_judge::local::tiny::{TinySpec, write_tiny_llama};

/// `verifine judge …`.
#[derive(Args, Debug)]
pub struct JudgeArgs {
    #[command(subcommand)]
    command: JudgeCommand,
}

#[derive(Subcommand, Debug)]
enum JudgeCommand {
    /// Write a random-weight llama GGUF (SentencePiece vocabulary with byte
    /// tokens): a stand-in judge for trying pipelines, screens and costs
    /// with nothing downloaded. Its verdicts mean nothing.
    TinyGguf(TinyGgufArgs),
    /// Distil a compact student judge from a teacher's per-criterion
    /// verdicts (a `verifine score` output); report its agreement and
    /// latency; use it as `kind = "student"` in a judges file.
    Distill(distill::DistillArgs),
    /// Fine-tune a pretrained model (LoRA) into a YES/NO verifier from
    /// labelled rows; its `hf/` checkpoint is then a local judge.
    #[cfg(feature = "train")]
    Train(train::TrainArgs),
}

/// `verifine judge tiny-gguf`.
#[derive(Args, Debug)]
pub struct TinyGgufArgs {
    /// The file to write.
    #[arg(long, value_parser = crate::commands::absolute_path)]
    pub out: PathBuf,
    /// Hidden width (a multiple of 32 with `--q8`).
    #[arg(long, default_value_t = 64)]
    pub width: usize,
    /// JudgeDecoder blocks.
    #[arg(long, default_value_t = 2)]
    pub layers: usize,
    /// Query heads (key/value heads are half as many).
    #[arg(long, default_value_t = 4)]
    pub heads: usize,
    /// Longest prompt + answer in tokens.
    #[arg(long, default_value_t = 4096)]
    pub context: usize,
    /// Store matrices as Q8_0.
    #[arg(long)]
    pub q8: bool,
    /// Seeds the weights.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Runs the subcommand.
pub fn run(args: JudgeArgs) -> Result<()> {
    match args.command {
        JudgeCommand::Distill(a) => {
            let summary = distill::distill(&a)?;
            println!("{}", distill::one_line(&summary));
            println!("report: {}", a.run_dir.join("report.md").display());
            Ok(())
        }
        #[cfg(feature = "train")]
        JudgeCommand::Train(a) => {
            let report = train::train(&a)?;
            println!("{}", train::one_line(&report));
            println!("report: {}", a.run_dir.join("report.md").display());
            println!(
                "checkpoint (a local judge): {}",
                a.run_dir.join("hf").display()
            );
            Ok(())
        }
        JudgeCommand::TinyGguf(a) => {
            anyhow::ensure!(
                a.heads >= 2 && a.width % a.heads == 0 && (a.width / a.heads) % 2 == 0,
                "--width {} must split into {} heads of an even size",
                a.width,
                a.heads
            );
            let spec = TinySpec {
                width: a.width,
                layers: a.layers,
                heads: a.heads,
                kv_heads: a.heads / 2,
                ff: a.width * 2,
                context: a.context,
                q8: a.q8,
                seed: a.seed,
            };
            write_tiny_llama(&a.out, spec)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("writing {}", a.out.display()))?;
            println!("wrote {} (random weights: {spec:?})", a.out.display());
            Ok(())
        }
    }
}
