//! `verifine judge train`: fine-tune a pretrained model (LoRA) into a
//! YES/NO verifier from labelled rows, and report how well it agrees with
//! the labels on questions it never saw, against the untrained model and
//! the base rate. The run directory's `hf/` is a checkpoint the local judge
//! backend loads like any other (`kind = "local"`, `path = ".../hf"`).

use super::labelled::{self, LabelFormat};
use anyhow::{Context, Result, bail};
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use verifine_base::PluginSpec;
use verifine_judge::config::{LocalConfig, PromptTemplate};
use verifine_judge::local::LocalBackend;
use verifine_train::config::{FreezeConfig, ModelSize};
use verifine_train::model::{LoraConfig, LoraModule};
use verifine_train::optim::OptimConfig;
use verifine_train::verifier::{
    ClassBalance, VerdictMetrics, VerifierConfig, VerifierReport, train_verifier,
};

/// `verifine judge train`.
#[derive(Args, Debug, Clone)]
pub struct TrainArgs {
    /// The pretrained model: a GGUF file or a checkpoint directory.
    #[arg(long, value_parser = crate::commands::absolute_path)]
    pub model: PathBuf,
    /// Labelled rows (repeat for several files).
    #[arg(long, required = true, value_parser = crate::commands::absolute_path)]
    pub labels: Vec<PathBuf>,
    /// Their layout.
    #[arg(long, value_enum, default_value_t = LabelFormat::Gsm8kSolutions)]
    pub format: LabelFormat,
    /// The rubric plugin whose YES/NO query the verifier learns to answer.
    #[arg(long, default_value = "healthbench")]
    pub rubric: PluginSpec,
    /// Put each row's reference answer in its rubric item (the verifier
    /// then compares instead of solving; reference-free by default).
    #[arg(long)]
    pub reference_guided: bool,
    /// Where the checkpoint and the report go.
    #[arg(long, value_parser = crate::commands::absolute_path)]
    pub run_dir: PathBuf,
    /// Replace a finished verifier run in `--run-dir`.
    #[arg(long)]
    pub overwrite: bool,
    /// Optimizer steps.
    #[arg(long, default_value_t = 100)]
    pub steps: usize,
    /// Examples per step.
    #[arg(long, default_value_t = 8)]
    pub batch_size: usize,
    /// AdamW's peak learning rate.
    #[arg(long, default_value_t = 2e-4)]
    pub learning_rate: f64,
    /// Steps over which the learning rate rises to its peak (default: a
    /// twentieth of `--steps`, at most 20, so that a run that `--max-seconds`
    /// ends long before `--steps` still trains at its peak).
    #[arg(long)]
    pub warmup_steps: Option<usize>,
    /// LoRA rank (alpha is twice it; every projection adapted).
    #[arg(long, default_value_t = 16)]
    pub lora_r: usize,
    /// Keep the first this many blocks fixed: adapters go on the blocks
    /// above, and the backward pass stops at them (a step costs less).
    #[arg(long, default_value_t = 0)]
    pub freeze_layers: usize,
    /// How the classes are evened out in the loss.
    #[arg(long, value_enum, default_value_t = Balance::Weighted)]
    pub balance: Balance,
    /// Share of questions held out for the report.
    #[arg(long, default_value_t = 0.25)]
    pub heldout_share: f64,
    /// Longest example in tokens (prompt and verdict).
    #[arg(long, default_value_t = 1024)]
    pub max_seq_len: usize,
    /// Stop training after this many seconds, even before `--steps`.
    #[arg(long)]
    pub max_seconds: Option<f64>,
    /// Use at most this many rows of each labels file (its first ones).
    #[arg(long)]
    pub max_rows: Option<usize>,
    /// Seeds the split, the batches and the adapters.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// How the classes are evened out ([`ClassBalance`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Balance {
    /// Loss weights n / (2 · n_class).
    Weighted,
    /// Batches half from each class.
    Sampled,
    /// As the data fall.
    None,
}

impl From<Balance> for ClassBalance {
    fn from(b: Balance) -> Self {
        match b {
            Balance::Weighted => ClassBalance::Weighted,
            Balance::Sampled => ClassBalance::Sampled,
            Balance::None => ClassBalance::None,
        }
    }
}

/// Trains the verifier and writes `report.md` beside `report.json`.
pub fn train(args: &TrainArgs) -> Result<VerifierReport> {
    let report_path = args.run_dir.join("report.json");
    if report_path.exists() && !args.overwrite {
        bail!(
            "{} already holds a verifier run; choose another --run-dir or pass --overwrite",
            args.run_dir.display()
        );
    }
    let mut rows = Vec::new();
    for path in &args.labels {
        let mut read = labelled::read(path, args.format)?;
        read.truncate(args.max_rows.unwrap_or(usize::MAX));
        rows.extend(read);
    }
    eprintln!(
        "{} labelled rows; rendering them through {}",
        rows.len(),
        args.rubric
    );
    let queries = labelled::queries(&rows, &args.rubric, args.reference_guided)?;
    let judge_config = LocalConfig {
        path: args.model.clone(),
        template: PromptTemplate::Model,
        cuda: false,
        prefix_cache_prompts: 0,
        weight_products: Default::default(),
    };
    let backend = match args.model.is_dir() {
        true => LocalBackend::from_safetensors(&judge_config),
        false => LocalBackend::new(&judge_config),
    }
    .with_context(|| format!("loading {} as a judge", args.model.display()))?;
    let examples = labelled::examples(rows, &queries, &backend)?;
    drop(backend);
    let config = VerifierConfig {
        seed: args.seed,
        model: ModelSize {
            from: Some(args.model.clone()),
            max_seq_len: args.max_seq_len,
            lora: Some(LoraConfig {
                r: args.lora_r,
                alpha: 2.0 * args.lora_r as f64,
                dropout: 0.0,
                target_modules: LoraModule::ALL.to_vec(),
            }),
            freeze: FreezeConfig {
                embeddings: true,
                layers: args.freeze_layers,
            },
            ..ModelSize::default()
        },
        steps: args.steps,
        batch_size: args.batch_size,
        optim: OptimConfig {
            learning_rate: args.learning_rate,
            warmup_steps: args.warmup_steps.unwrap_or((args.steps / 20).clamp(1, 20)),
            ..OptimConfig::default()
        },
        heldout_share: args.heldout_share,
        balance: args.balance.into(),
        max_seconds: args.max_seconds,
    };
    std::fs::create_dir_all(&args.run_dir)
        .with_context(|| format!("creating {}", args.run_dir.display()))?;
    let report = train_verifier(&config, examples, &args.run_dir, &mut |m| eprintln!("{m}"))?;
    let markdown = report_markdown(args, &report);
    verifine_base::write_atomically(&args.run_dir.join("report.md"), |w| {
        w.write_all(markdown.as_bytes())
    })?;
    Ok(report)
}

/// One line for the terminal.
pub fn one_line(report: &VerifierReport) -> String {
    match (&report.before, &report.after) {
        (Some(before), Some(after)) => format!(
            "held-out accuracy {:.3} (untrained {:.3}, base rate {:.3}), balanced {:.3}, \
             ECE {:.3}, AUC {}; {} steps in {:.0} s",
            after.accuracy,
            before.accuracy,
            after.base_rate,
            after.balanced_accuracy,
            after.ece,
            fmt(after.auc),
            report.steps,
            report.train_seconds
        ),
        _ => format!(
            "{} steps in {:.0} s; nothing held out",
            report.steps, report.train_seconds
        ),
    }
}

fn report_markdown(args: &TrainArgs, report: &VerifierReport) -> String {
    let labels: Vec<String> = args
        .labels
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let mut text = format!(
        "# Verifier: {}\n\nLabels: {} ({:?}); rubric `{}`, {}. {} repeated rows dropped; \
         {} training examples ({} met), {} held out by question. \
         Classes: {:?}. {} steps in {:.0} s; loss {} → {}.\n\n",
        report.from,
        labels.join(", "),
        args.format,
        args.rubric,
        if args.reference_guided {
            "reference-guided"
        } else {
            "reference-free"
        },
        report.repeats,
        report.train_examples,
        report.train_met,
        report.heldout_examples,
        report.balance,
        report.steps,
        report.train_seconds,
        fmt(report.loss_first),
        fmt(report.loss_last),
    );
    let examples = report.after.as_ref().map_or(0, |m| m.examples);
    text += &format!("| held out ({examples} examples) | untrained | trained |\n|---|---|---|\n");
    let rows: [(&str, Measure); 9] = [
        ("base rate (share met)", |m| Some(m.base_rate)),
        ("accuracy", |m| Some(m.accuracy)),
        ("balanced accuracy", |m| Some(m.balanced_accuracy)),
        ("YES precision", |m| m.yes.precision),
        ("YES recall", |m| m.yes.recall),
        ("NO precision", |m| m.no.precision),
        ("NO recall", |m| m.no.recall),
        ("ECE", |m| Some(m.ece)),
        ("ROC AUC of P(YES)", |m| m.auc),
    ];
    for (name, value) in rows {
        let cell = |m: &Option<VerdictMetrics>| fmt(m.as_ref().and_then(value));
        text += &format!(
            "| {name} | {} | {} |\n",
            cell(&report.before),
            cell(&report.after)
        );
    }
    text
}

/// One figure of a verifier's metrics, where defined.
type Measure = fn(&VerdictMetrics) -> Option<f64>;

fn fmt(value: Option<f64>) -> String {
    value.map_or("—".into(), |v| format!("{v:.3}"))
}
