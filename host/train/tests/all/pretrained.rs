//! A pretrained policy (`[model] from`): a tiny llama checkpoint with a
//! byte-level BPE vocabulary and a ChatML template trains through LoRA
//! adapters, is written back as a checkpoint whose merged weights compute
//! what the adapters computed, resumes exactly, and refuses a base that
//! changed under it.

use candle_core::{Device, Tensor};
use candle_nn::VarMap;
use serde_json::json;
use std::path::Path;
use verifine_base::Provenance;
use verifine_models::Pretrained;
use verifine_train::config::FreezeConfig;
use verifine_train::hooks::{Answer, Fixed, Host, Reward, RewardFunction};
use verifine_train::model::{Decoder, KvCache, LoraConfig, LoraModule, load_matching_weights};
use verifine_train::tokenizer::ChatTokenizer;
use verifine_train::{TrainConfig, resume, train};

/// Rewards that differ within every group, so each step updates: the
/// answer's length modulo three.
struct LengthReward;

impl RewardFunction for LengthReward {
    fn score(&mut self, _step: usize, answers: &[Answer]) -> Vec<Reward> {
        answers
            .iter()
            .map(|a| Reward {
                total: Some((a.response.len() % 3) as f64 / 2.0),
                criteria: Vec::new(),
            })
            .collect()
    }

    fn provenance(&self) -> Vec<Provenance> {
        vec![Provenance {
            name: "length".into(),
            version: "1.0.0".into(),
            sha256: "rust".into(),
        }]
    }
}

fn host() -> Host {
    Host {
        reward: Box::new(Fixed(LengthReward)),
        prompts: None,
        evaluator: None,
        curriculum: None,
        sft_targets: None,
        progress: Box::new(|_| {}),
    }
}

/// A random tiny llama checkpoint directory.
fn write_base(dir: &Path, seed: f64) {
    verifine_train::test_support::write_tiny_checkpoint(dir, seed).unwrap();
}

fn config(base: &Path) -> TrainConfig {
    let mut config = crate::common::tiny();
    config.model.from = Some(base.to_path_buf());
    config.model.max_seq_len = 200;
    config.model.lora = Some(LoraConfig {
        r: 4,
        alpha: 8.0,
        dropout: 0.0,
        target_modules: vec![LoraModule::Query, LoraModule::Value, LoraModule::Down],
    });
    config.model.freeze = FreezeConfig {
        embeddings: true,
        layers: 0,
    };
    config.grpo.optim.learning_rate = 1e-2;
    config.sft.optim.learning_rate = 1e-2;
    config
}

fn logits(decoder: &Decoder) -> Tensor {
    let ids = Tensor::new(&[[3u32, 70, 71, 72, 256, 9]], &Device::Cpu).unwrap();
    decoder.forward(&ids, None).unwrap()
}

fn gap(a: &Tensor, b: &Tensor) -> f32 {
    (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar()
        .unwrap()
}

/// What rollouts sample from (adapters folded in, weights transposed, keys
/// and values written into a preallocated cache) predicts every next token
/// as the trained model's full forward pass does.
fn assert_sampling_copy_computes_the_same(trained: &Decoder) {
    let full = logits(trained);
    let sampling = trained.for_sampling().unwrap();
    let ids = Tensor::new(&[[3u32, 70, 71, 72, 256, 9]], &Device::Cpu).unwrap();
    let mut cache = KvCache::with_capacity(8);
    for (start, len) in [(0, 3), (3, 1), (4, 2)] {
        let next = sampling
            .next_token_logits(&ids.narrow(1, start, len).unwrap(), None, &mut cache)
            .unwrap();
        let expected = full.get(0).unwrap().get(start + len - 1).unwrap();
        assert!(
            gap(&next.squeeze(0).unwrap(), &expected) < 1e-4,
            "position {}",
            start + len
        );
    }
}

#[test]
fn the_turn_ends_on_the_end_id_the_template_writes_and_every_end_id_stops() {
    let dir = scratch("end-ids");
    write_base(&dir, 0.0);
    // The first listed end id is one the template never writes after an
    // answer (as Llama 3 lists <|end_of_text|> before <|eot_id|>).
    let path = dir.join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let im_end = config["eos_token_id"].as_u64().unwrap() as u32;
    let im_start = im_end - 1;
    config["eos_token_id"] = json!([im_start, im_end]);
    std::fs::write(&path, config.to_string()).unwrap();
    let model = Pretrained::load(&dir, &Device::Cpu).unwrap();
    let tokenizer = ChatTokenizer::pretrained(&model).unwrap();
    assert_eq!(tokenizer.end, im_end);
    assert_eq!(tokenizer.stops, vec![im_end, im_start]);
}

fn scratch(name: &str) -> verifine_test_support::ScratchDir {
    crate::common::scratch("pretrained", name)
}

#[test]
fn a_lora_run_exports_a_checkpoint_that_computes_what_it_trained() {
    let dir = scratch("export");
    let base = dir.join("base");
    write_base(&base, 0.0);
    let run = dir.join("run");
    let config = config(&base);
    train(&config, "", &run, host()).unwrap();

    // The run's adapters, unmerged, over the base.
    let original = Pretrained::load(&base, &Device::Cpu).unwrap();
    let varmap = VarMap::new();
    let plan = config.model.trainable_plan();
    let trained = Decoder::from_pretrained(
        &original.spec,
        &original.weights,
        64,
        &plan,
        &varmap,
        config.seed,
    )
    .unwrap();
    load_matching_weights(&varmap, &run.join("model.safetensors"), &Device::Cpu).unwrap();
    // The exported checkpoint, merged, read back as any checkpoint is.
    let exported = Pretrained::load(&run.join("hf"), &Device::Cpu).unwrap();
    assert_eq!(exported.spec, original.spec);
    let frozen = verifine_train::model::TrainablePlan {
        freeze_embeddings: true,
        freeze_layers: 2,
        lora: None,
    };
    let merged = Decoder::from_pretrained(
        &exported.spec,
        &exported.weights,
        64,
        &frozen,
        &VarMap::new(),
        0,
    )
    .unwrap();
    let base_only = Decoder::from_pretrained(
        &original.spec,
        &original.weights,
        64,
        &frozen,
        &VarMap::new(),
        0,
    )
    .unwrap();
    assert!(gap(&logits(&trained), &logits(&merged)) < 1e-4);
    assert_sampling_copy_computes_the_same(&trained);
    assert!(
        gap(&logits(&trained), &logits(&base_only)) > 1e-3,
        "training changed nothing"
    );
    // Projections LoRA did not target keep the base's weights exactly.
    let name = "model.layers.1.self_attn.k_proj.weight";
    assert_eq!(gap(&exported.weights[name], &original.weights[name]), 0.0);
    let adapter: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(run.join("adapter/adapter_config.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(adapter["r"], 4);
    assert_eq!(
        adapter["target_modules"],
        json!(["q_proj", "v_proj", "down_proj"])
    );
    let tensors =
        candle_core::safetensors::load(run.join("adapter/adapter_model.safetensors"), &Device::Cpu)
            .unwrap();
    assert_eq!(tensors.len(), 2 * 3 * 2);
    assert_eq!(
        tensors["base_model.model.model.layers.0.mlp.down_proj.lora_A.weight"].dims(),
        &[4, 64]
    );
    // The tokenizer and template travel with the checkpoint.
    let template = exported.chat_template.expect("chat template exported");
    assert!(template.source().contains("im_start"));
}

#[test]
fn a_pretrained_run_resumes_exactly_and_refuses_a_changed_base() {
    let dir = scratch("resume");
    let base = dir.join("base");
    write_base(&base, 0.0);
    let whole = dir.join("whole");
    let config = config(&base);
    train(&config, "", &whole, host()).unwrap();

    // The same run, stopped after its second step.
    let stopped = dir.join("stopped");
    crate::common::stopped_copy(&whole, &stopped, 2);
    resume(&stopped, host()).unwrap();
    assert_eq!(
        std::fs::read(whole.join("model.safetensors")).unwrap(),
        std::fs::read(stopped.join("model.safetensors")).unwrap(),
        "a resumed run ends with other weights"
    );

    // Another base under the same path is refused, naming both fingerprints.
    write_base(&base, 0.5);
    let error = resume(&stopped, host()).unwrap_err().to_string();
    assert!(
        error.contains("the pretrained model changed since the checkpoint"),
        "{error}"
    );
}

/// What the co-evolution loop does with a pretrained policy: a finished
/// run is read back as a policy from the checkpoint it exported (its
/// merged weights, the model's own tokenizer), greedy answers as its final
/// evaluation answered, and a later run continues from that checkpoint.
#[test]
fn a_pretrained_run_is_a_policy_from_its_export_and_a_start_for_the_next() {
    let dir = scratch("policy");
    let base = dir.join("base");
    write_base(&base, 0.0);
    let run = dir.join("run");
    let config = config(&base);
    train(&config, "", &run, host()).unwrap();
    let policy = verifine_train::Policy::load(&run, &config.model).unwrap();
    let answers: Vec<verifine_train::HeldoutAnswer> =
        verifine_base::read_jsonl(&run.join("heldout_answers.jsonl")).unwrap();
    let (_, heldout) = verifine_train::task::splits(
        config.seed,
        config.train_problems,
        config.heldout_problems,
        &config.task,
    );
    let greedy = policy
        .answer(
            &heldout,
            verifine_train::rollout::Sampling::Greedy,
            1,
            config.grpo.max_new_tokens,
            0,
        )
        .unwrap();
    assert_eq!(greedy.len(), answers.len());
    let same = greedy
        .iter()
        .zip(&answers)
        .filter(|(g, a)| g[0] == a.response)
        .count();
    // Merged weights compute what the adapters did up to rounding.
    assert!(
        same * 10 >= answers.len() * 9,
        "{same} of {}",
        answers.len()
    );

    let next = TrainConfig {
        model: verifine_train::config::ModelSize {
            from: Some(run.join("hf")),
            ..config.model.clone()
        },
        ..config.clone()
    };
    train(&next, "", &dir.join("next"), host()).unwrap();
    assert!(dir.join("next/hf/model.safetensors").is_file());

    // A run that never exported is named.
    std::fs::remove_dir_all(run.join("hf")).unwrap();
    let err = verifine_train::Policy::load(&run, &config.model).unwrap_err();
    assert!(err.to_string().contains("hf/"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
