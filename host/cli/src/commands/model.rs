//! `verifine model`: look at a pretrained model the way training reads it
//! (its chat template's rendering, its tokens, its logits), so it can be
//! checked against other tools (the transformers parity tests do).

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};
use verifine_models::{Message, Pretrained};
use verifine_train::model::{Decoder, TrainablePlan};

/// Inspect a pretrained model (a checkpoint directory or a GGUF file).
#[derive(Debug, Args)]
pub struct ModelArgs {
    #[command(subcommand)]
    command: ModelCommand,
}

#[derive(Debug, Subcommand)]
enum ModelCommand {
    /// Print the shape verifine reads (config.json fields) as JSON.
    Inspect {
        /// Checkpoint directory or .gguf file.
        #[arg(long, value_parser = crate::commands::absolute_path)]
        from: PathBuf,
    },
    /// Render a conversation (a JSON list of {role, content}) with the
    /// model's chat template, ending with the generation prompt.
    Render {
        /// Checkpoint directory or .gguf file.
        #[arg(long, value_parser = crate::commands::absolute_path)]
        from: PathBuf,
        /// The conversation, as a JSON file.
        #[arg(long, value_parser = crate::commands::absolute_path)]
        messages: PathBuf,
        /// Leave out the assistant's generation prompt at the end.
        #[arg(long)]
        no_generation_prompt: bool,
    },
    /// Token ids of each line of a JSONL file of strings (one JSON array of
    /// ids per line on stdout); control tokens in the text are read whole.
    Tokenize {
        /// Checkpoint directory or .gguf file.
        #[arg(long, value_parser = crate::commands::absolute_path)]
        from: PathBuf,
        /// JSONL, one JSON string per line.
        #[arg(long, value_parser = crate::commands::absolute_path)]
        input: PathBuf,
    },
    /// Next-token logits at every position of a text, written as
    /// safetensors (`ids`: `[seq]` u32, `logits`: `[seq, vocab]` f32).
    Logits {
        /// Checkpoint directory or .gguf file.
        #[arg(long, required_unless_present = "run", conflicts_with = "run", value_parser = crate::commands::absolute_path)]
        from: Option<PathBuf>,
        /// A finished run with a pretrained policy: its base with the
        /// run's trained weights (LoRA adapters kept apart, as in training).
        #[arg(long, value_parser = crate::commands::absolute_path)]
        run: Option<PathBuf>,
        /// The text (rendered as one user turn first with --chat).
        #[arg(long)]
        text: String,
        /// Render the text as a user turn with the chat template.
        #[arg(long)]
        chat: bool,
        /// Where the safetensors file goes.
        #[arg(long, value_parser = crate::commands::absolute_path)]
        output: PathBuf,
    },
}

fn load(from: &Path) -> Result<Pretrained> {
    Pretrained::load(from, &candle_core::Device::Cpu)
        .with_context(|| format!("loading {}", from.display()))
}

/// Runs the subcommand.
pub fn run(args: ModelArgs) -> Result<()> {
    match args.command {
        ModelCommand::Inspect { from } => {
            let model = load(&from)?;
            println!(
                "{}",
                serde_json::to_string_pretty(&model.spec.to_config_json())?
            );
        }
        ModelCommand::Render {
            from,
            messages,
            no_generation_prompt,
        } => {
            let model = load(&from)?;
            let text = std::fs::read_to_string(&messages)
                .with_context(|| format!("reading {}", messages.display()))?;
            let turns: Vec<Message> =
                serde_json::from_str(&text).with_context(|| format!("{}", messages.display()))?;
            let template = model
                .chat_template
                .as_ref()
                .with_context(|| format!("{} has no chat template", from.display()))?;
            print!("{}", template.render(&turns, !no_generation_prompt)?);
        }
        ModelCommand::Tokenize { from, input } => {
            let model = load(&from)?;
            let texts: Vec<String> = verifine_base::read_jsonl(&input)?;
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            for text in texts {
                use std::io::Write as _;
                writeln!(
                    out,
                    "{}",
                    serde_json::to_string(&model.tokenizer.encode(&text)?)?
                )?;
            }
        }
        ModelCommand::Logits {
            from,
            run,
            text,
            chat,
            output,
        } => {
            let (from, plan, trained) = match (from, run) {
                (Some(from), _) => (from, None, None),
                (None, Some(run)) => {
                    let config = verifine_train::checkpointed_config(&run)?;
                    let from = config.model.from.clone().with_context(|| {
                        format!("{} did not train a pretrained policy", run.display())
                    })?;
                    (
                        from,
                        Some((config.model.trainable_plan(), config.seed)),
                        Some(run.join("model.safetensors")),
                    )
                }
                (None, None) => unreachable!("clap requires --from or --run"),
            };
            let model = load(&from)?;
            let text = match chat {
                false => text,
                true => {
                    let template = model
                        .chat_template
                        .as_ref()
                        .with_context(|| format!("{} has no chat template", from.display()))?;
                    template.render(&[Message::new(verifine_models::Role::User, text)], true)?
                }
            };
            let ids = model.tokenizer.encode(&text)?;
            anyhow::ensure!(!ids.is_empty(), "the text encodes to no tokens");
            let frozen = TrainablePlan {
                lora: None,
                freeze_embeddings: true,
                freeze_layers: model.spec.num_layers,
            };
            let (plan, seed) = plan.unwrap_or((frozen, 0));
            let varmap = candle_nn::VarMap::new();
            let decoder = Decoder::from_pretrained(
                &model.spec,
                &model.weights,
                ids.len(),
                &plan,
                &varmap,
                seed,
            )?;
            let device = candle_core::Device::Cpu;
            if let Some(trained) = trained {
                verifine_train::model::load_matching_weights(&varmap, &trained, &device)?;
            }
            let input = candle_core::Tensor::new(ids.as_slice(), &device)?.unsqueeze(0)?;
            let logits = decoder.forward(&input, None)?.squeeze(0)?;
            let mut weights = verifine_models::Weights::new();
            weights.insert(
                "ids".into(),
                candle_core::Tensor::new(ids.as_slice(), &device)?,
            );
            weights.insert("logits".into(), logits);
            save_raw(&weights, &output)?;
            println!("{} tokens -> {}", ids.len(), output.display());
        }
    }
    Ok(())
}

/// Writes tensors of any dtype (ids stay u32).
fn save_raw(tensors: &verifine_models::Weights, path: &Path) -> Result<()> {
    candle_core::safetensors::save(
        &tensors
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        path,
    )
    .with_context(|| format!("writing {}", path.display()))
}
