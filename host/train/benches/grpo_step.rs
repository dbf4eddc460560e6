//! One GRPO step of the candle trainer — rollout (KV-cached sampling), then
//! update (forward, clipped surrogate, backward, AdamW) — on a fixed batch in
//! f32, on the CPU or a CUDA device, printed as one JSON line in the shape of
//! `bench/grpo_step_torch.py`'s, so `bench/grpo_step.sh` (CPU) and
//! `bench/gpu/device.sh` (GPU) can put the two side by side.
//!
//! `cargo bench -p verifine-train --bench grpo_step -- [--device cpu|cuda]
//!  [--model default|wide|gpu|smollm2] [--layers N] [--dtype f32|bf16]
//!  [--iters N] [--warmup N] [--batch N]
//!  [--from MODEL [--lora R]] [--prompt N] [--completion N]
//!  [--backward fastest|autograd]`
//!
//! `--from` times a pretrained model (checkpoint directory or GGUF), fully
//! trained or, with `--lora R`, through rank-R adapters on every
//! projection (`bench/smollm2/step.sh` puts it beside TRL's GRPOTrainer).
//! (`--features cuda` for the CUDA device; `bench/gpu/build.sh` builds it so).
//!
//! On a GPU both phases end with a device synchronize, so each timing covers
//! the kernels it queued, not only their launch.

use candle_core::{Device, Tensor};
use candle_nn::VarMap;
use std::time::Instant;
use verifine_base::SplitMix64;
use verifine_train::grpo::{GrpoConfig, LossInputs, loss};
use verifine_train::model::{ComputeDType, Decoder, ModelConfig, sorted_vars};
use verifine_train::optim::{AdamW, OptimConfig};
use verifine_train::rollout::{GenerateOptions, Sampling, generate};
use verifine_train::sequences::{Backward, Sequence, batch, policy_log_probs};

/// Default prompt and completion lengths in tokens.
const PROMPT: usize = 40;
const COMPLETION: usize = 48;

/// `default` is the shipped run's model, `wide` a CPU-sized bigger one, `gpu`
/// one big enough to keep an H200 busy (about 90M parameters), `smollm2`
/// SmolLM2-135M's shapes with random weights (the same presets in
/// bench/gpu/grpo_step_torch_cuda.py). `layers` overrides the preset's.
fn model_config(preset: &str, layers: Option<usize>) -> ModelConfig {
    let (vocab, hidden, preset_layers, heads, kv, mlp) = match preset {
        "default" => (400, 64, 2, 4, 2, 128),
        "wide" => (400, 256, 4, 8, 2, 704),
        "gpu" => (400, 1024, 8, 16, 4, 2816),
        "smollm2" => (49_152, 576, 30, 9, 3, 1536),
        other => panic!("unknown model preset {other} (default | wide | gpu | smollm2)"),
    };
    ModelConfig {
        vocab_size: vocab,
        hidden_size: hidden,
        num_layers: layers.unwrap_or(preset_layers),
        num_heads: heads,
        num_kv_heads: kv,
        intermediate_size: mlp,
        max_seq_len: 160,
        rope_theta: 10_000.0,
        rms_eps: 1e-6,
        tie_word_embeddings: true,
        attention_bias: false,
        rope_scaling: None,
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let number = |flag: &str, default: usize| {
        value(flag).map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{flag} takes a number, not {v}"))
        })
    };
    let preset = value("--model").unwrap_or_else(|| "default".to_string());
    let iters = number("--iters", 5).max(1);
    let warmup = number("--warmup", 2);
    let batch_size = number("--batch", 64);
    let device_name = value("--device").unwrap_or_else(|| {
        if cfg!(feature = "cuda") {
            "cuda"
        } else {
            "cpu"
        }
        .to_string()
    });
    let device = match device_name.as_str() {
        "cpu" => Device::Cpu,
        "cuda" => Device::new_cuda(0)?,
        other => panic!("unknown device {other} (cpu | cuda)"),
    };
    let layers = value("--layers").map(|_| number("--layers", 0));
    let dtype = match value("--dtype").as_deref() {
        None | Some("f32") => ComputeDType::F32,
        Some("bf16") => ComputeDType::Bf16,
        Some(other) => panic!("unknown dtype {other} (f32 | bf16)"),
    };
    let backward = match value("--backward").as_deref() {
        None | Some("fastest") => Backward::Fastest,
        Some("autograd") => Backward::Autograd,
        Some(other) => panic!("unknown backward {other} (fastest | autograd)"),
    };
    let prompt_len = number("--prompt", PROMPT);
    let completion_len = number("--completion", COMPLETION);
    let varmap = VarMap::new();
    let (model, preset) = match value("--from") {
        None => {
            let model = Decoder::new(model_config(&preset, layers), &varmap, &device)?;
            model.reseed(&varmap, 0)?;
            let name = match layers {
                Some(n) => format!("{preset} ({n} layers)"),
                None => preset,
            };
            (model, name)
        }
        Some(from) => {
            let pretrained =
                verifine_models::Pretrained::load(std::path::Path::new(&from), &device)?;
            let lora = value("--lora").map(|r| verifine_train::model::LoraConfig {
                r: r.parse().expect("--lora takes a rank"),
                alpha: 2.0 * r.parse::<f64>().expect("--lora takes a rank"),
                dropout: 0.0,
                target_modules: serde_json::from_str(
                    r#"["q_proj","k_proj","v_proj","o_proj","gate_proj","up_proj","down_proj"]"#,
                )
                .expect("module names"),
            });
            let name = match &lora {
                Some(l) => format!("{from} lora r={}", l.r),
                None => format!("{from} full"),
            };
            let plan = verifine_train::model::TrainablePlan {
                lora,
                ..Default::default()
            };
            let max = prompt_len + completion_len;
            (
                Decoder::from_pretrained(
                    &pretrained.spec,
                    &pretrained.weights,
                    max,
                    &plan,
                    &varmap,
                    0,
                )?,
                name,
            )
        }
    };
    let config = model.config().clone();
    let params: usize = sorted_vars(&varmap)
        .iter()
        .map(|(_, v)| v.elem_count())
        .sum();
    let mut optimizer = AdamW::new(
        sorted_vars(&varmap),
        OptimConfig {
            learning_rate: 5e-4,
            warmup_steps: 0,
            ..OptimConfig::default()
        },
    )?;
    let mut rng = SplitMix64::new(0);
    let prompts: Vec<Vec<u32>> = (0..batch_size)
        .map(|_| {
            (0..prompt_len)
                .map(|_| rng.below(config.vocab_size) as u32)
                .collect()
        })
        .collect();
    let advantages: Vec<f32> = (0..batch_size)
        .map(|_| (rng.below(2001) as f32 - 1000.0) / 1000.0)
        .collect();
    let options = GenerateOptions {
        pad: 0,
        // Rows never stop early, as in the PyTorch reference.
        stops: &[],
        max_new_tokens: completion_len,
        sampling: Sampling::Temperature(1.0),
    };
    let objective = GrpoConfig::default();

    let (mut rollout_times, mut update_times) = (Vec::new(), Vec::new());
    let mut last_loss = f32::NAN;
    for i in 0..iters + warmup {
        let started = Instant::now();
        // As the trainer does: each pass works on a copy in the compute
        // precision, whose gradients reach the f32 variables through the cast.
        let compute = model.cast(dtype)?;
        let completions = generate(&compute, &prompts, options, &mut rng, &device)?;
        device.synchronize()?;
        let rollout = started.elapsed().as_secs_f64();
        assert!(completions.iter().all(|c| c.ids.len() == completion_len));

        let started = Instant::now();
        let sequences: Vec<Sequence> = prompts
            .iter()
            .zip(&completions)
            .map(|(p, c)| Sequence::prompt_response(p, &c.ids))
            .collect();
        let b = batch(&sequences, 0, &device)?;
        let pass = policy_log_probs(&compute, &b, backward)?;
        let current = pass.values.clone();
        let old = current.detach();
        let adv = Tensor::new(advantages.as_slice(), &device)?;
        let inputs = LossInputs {
            log_probs: &current,
            old_log_probs: &old,
            ref_log_probs: None,
            mask: &b.loss_mask,
            advantages: &adv,
        };
        let (l, _) = loss(&inputs, &objective)?;
        optimizer.step(&pass.backward(&l)?)?;
        // The trainer reads the loss back too (as the PyTorch reference does).
        last_loss = l.flatten_all()?.to_vec1::<f32>()?[0];
        device.synchronize()?;
        let update = started.elapsed().as_secs_f64();
        if i >= warmup {
            rollout_times.push(rollout);
            update_times.push(update);
        }
    }
    let (rollout, update) = (median(rollout_times), median(update_times));
    let generated = (batch_size * completion_len) as f64;
    println!(
        "{}",
        serde_json::json!({
            "impl": "candle",
            "device": device_name,
            "dtype": match dtype { ComputeDType::F32 => "f32", ComputeDType::Bf16 => "bf16" },
            "model": preset,
            "params": params,
            "threads": rayon::current_num_threads(),
            "rollout_seconds": rollout,
            "update_seconds": update,
            "rollout_tokens_per_second": generated / rollout,
            "update_tokens_per_second": (batch_size * (prompt_len + completion_len)) as f64 / update,
            "step_tokens_per_second": generated / (rollout + update),
            "iters": iters,
            "batch": batch_size,
            "prompt_len": prompt_len,
            "completion_len": completion_len,
            "last_loss": last_loss,
        })
    );
    Ok(())
}
