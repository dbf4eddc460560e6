//! A judge's model file is downloaded and hostile: every count it states
//! (blocks, heads, KV heads, head widths, window, context) is checked
//! against the tensors it holds and against sane bounds before anything
//! is sized from it. Each hostile file differs from a good one, which
//! loads and answers in the same process, in one field only; it is
//! refused quickly, naming the file and the field.
#![cfg(feature = "local")]

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use std::path::Path;
use std::time::{Duration, Instant};
use verifine_judge::local::LocalBackend;
use verifine_judge::local::tiny::{TinySpec, random_weights, vocabulary};
use verifine_judge::{LocalConfig, PromptTemplate};
use verifine_runtime::judge_models::ModelRequest;

const SPEC: TinySpec = TinySpec {
    width: 32,
    layers: 2,
    heads: 4,
    kv_heads: 2,
    ff: 64,
    context: 256,
    q8: false,
    seed: 3,
};

fn scratch(name: &str) -> verifine_test_support::ScratchDir {
    verifine_test_support::scratch_dir(&format!("hostile-judge-{name}"))
}

fn config(path: &Path) -> LocalConfig {
    LocalConfig {
        path: path.to_path_buf(),
        template: PromptTemplate::Plain,
        cuda: false,
        prefix_cache_prompts: 0,
        weight_products: Default::default(),
    }
}

/// The metadata of a good `arch` model of shape [`SPEC`].
fn metadata(arch: &str) -> Vec<(String, Value)> {
    let (pieces, scores) = vocabulary();
    let u = |v: usize| Value::U32(v as u32);
    let head_dim = SPEC.width / SPEC.heads;
    let mut entries = vec![
        ("general.architecture".into(), Value::String(arch.into())),
        (format!("{arch}.context_length"), u(SPEC.context)),
        (format!("{arch}.embedding_length"), u(SPEC.width)),
        (format!("{arch}.block_count"), u(SPEC.layers)),
        (format!("{arch}.feed_forward_length"), u(SPEC.ff)),
        (format!("{arch}.attention.head_count"), u(SPEC.heads)),
        (format!("{arch}.attention.head_count_kv"), u(SPEC.kv_heads)),
        (
            format!("{arch}.attention.layer_norm_rms_epsilon"),
            Value::F32(1e-6),
        ),
        (format!("{arch}.rope.dimension_count"), u(head_dim)),
        ("tokenizer.ggml.model".into(), Value::String("llama".into())),
        (
            "tokenizer.ggml.tokens".into(),
            Value::Array(pieces.into_iter().map(Value::String).collect()),
        ),
        (
            "tokenizer.ggml.scores".into(),
            Value::Array(scores.into_iter().map(Value::F32).collect()),
        ),
        ("tokenizer.ggml.bos_token_id".into(), Value::U32(1)),
        ("tokenizer.ggml.eos_token_id".into(), Value::U32(2)),
    ];
    if arch == "gemma3" {
        entries.extend([
            (format!("{arch}.attention.key_length"), u(head_dim)),
            (format!("{arch}.attention.value_length"), u(head_dim)),
            (format!("{arch}.attention.sliding_window"), u(16)),
        ]);
    }
    entries
}

/// Writes a model of shape [`SPEC`] with `metadata`; gemma3 files get
/// their extra norms.
fn write(path: &Path, metadata: &[(String, Value)]) {
    let mut tensors = random_weights(&SPEC).unwrap();
    let gemma = metadata
        .iter()
        .any(|(_, v)| matches!(v, Value::String(s) if s == "gemma3"));
    if gemma {
        let ones = |n: usize| Tensor::ones(n, candle_core::DType::F32, &Device::Cpu).unwrap();
        for i in 0..SPEC.layers {
            let head_dim = SPEC.width / SPEC.heads;
            tensors.extend([
                (format!("blk.{i}.attn_q_norm.weight"), ones(head_dim)),
                (format!("blk.{i}.attn_k_norm.weight"), ones(head_dim)),
                (
                    format!("blk.{i}.post_attention_norm.weight"),
                    ones(SPEC.width),
                ),
                (format!("blk.{i}.post_ffw_norm.weight"), ones(SPEC.width)),
            ]);
        }
    }
    let tensors: Vec<(String, QTensor)> = tensors
        .into_iter()
        .map(|(n, t)| (n, QTensor::quantize(&t, GgmlDType::F32).unwrap()))
        .collect();
    let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut file = std::fs::File::create(path).unwrap();
    gguf_file::write(&mut file, &metadata, &tensors).unwrap();
}

/// `metadata` with `key` set to `value`.
fn with(metadata: &[(String, Value)], key: &str, value: Value) -> Vec<(String, Value)> {
    let mut edited: Vec<(String, Value)> =
        metadata.iter().filter(|(k, _)| k != key).cloned().collect();
    edited.push((key.into(), value));
    edited
}

/// Loading `path` must fail fast with an error naming it and `field`.
fn refused(load: impl FnOnce() -> Option<String>, path: &Path, field: &str) {
    let start = Instant::now();
    let error = load().expect("refused");
    let took = start.elapsed();
    let file = path.file_name().unwrap().to_string_lossy();
    assert!(
        error.contains(&*file) && error.contains(field),
        "{file}: expected {field}: {error}"
    );
    assert!(took < Duration::from_secs(10), "{file}: took {took:?}");
}

fn answers(backend: &LocalBackend) {
    let request = ModelRequest {
        choices: vec!["YES".into(), "NO".into()],
        ..ModelRequest::new("is it YES or NO", 4)
    };
    let answer = backend.exchange_all(&[&request]).remove(0).answer.unwrap();
    assert!(answer.text == "YES" || answer.text == "NO", "{answer:?}");
}

#[test]
fn gguf_counts_are_checked_before_anything_is_sized_from_them() {
    let dir = scratch("gguf");
    for arch in ["llama", "gemma3"] {
        let good = metadata(arch);
        let key = |k: &str| format!("{arch}.{k}");
        let mut cases = vec![
            (key("attention.head_count"), Value::U32(0)),
            (key("attention.head_count"), Value::U32(3)),
            (key("attention.head_count"), Value::U32(1 << 31)),
            (key("attention.head_count_kv"), Value::U32(0)),
            (key("attention.head_count_kv"), Value::U32(3)),
            (key("block_count"), Value::U32(1_000_000_000)),
            (key("block_count"), Value::U32(3)),
            (key("embedding_length"), Value::U32(1 << 30)),
            (key("embedding_length"), Value::U32(64)),
            (key("feed_forward_length"), Value::U32(65)),
            (key("context_length"), Value::U32(0)),
            (key("context_length"), Value::U64(1 << 60)),
            // 2^21-wide heads: 137 GB of rotary tables, were they built.
            (key("attention.key_length"), Value::U32(1 << 21)),
            (key("attention.key_length"), Value::U32(16)),
            (key("attention.value_length"), Value::U32(16)),
            (key("rope.dimension_count"), Value::U32(u32::MAX)),
            (key("rope.freq_base"), Value::F32(f32::NAN)),
            ("general.alignment".into(), Value::U32(0)),
        ];
        if arch == "gemma3" {
            cases.push((key("attention.sliding_window"), Value::U32(0)));
        }
        for (i, (field, value)) in cases.into_iter().enumerate() {
            let path = dir.join(format!("{arch}-{i}.gguf"));
            write(&path, &with(&good, &field, value));
            let load = || {
                LocalBackend::new(&config(&path))
                    .err()
                    .map(|e| e.to_string())
            };
            refused(load, &path, &field);
        }
        let path = dir.join(format!("{arch}-good.gguf"));
        write(&path, &good);
        answers(&LocalBackend::new(&config(&path)).unwrap());
    }
}

#[test]
fn checkpoint_counts_are_checked_against_the_weights() {
    let dir = scratch("checkpoint");
    let checkpoint = dir.join("checkpoint-dir");
    std::fs::create_dir_all(&checkpoint).unwrap();
    let hf: std::collections::HashMap<String, Tensor> = random_weights(&SPEC)
        .unwrap()
        .into_iter()
        .map(|(name, t)| (hf_name(&name), t))
        .collect();
    candle_core::safetensors::save(&hf, checkpoint.join("model.safetensors")).unwrap();
    crate::common::write_word_level_tokenizer(&checkpoint);
    let good = serde_json::json!({
        "model_type": "llama", "hidden_size": SPEC.width, "num_hidden_layers": SPEC.layers,
        "num_attention_heads": SPEC.heads, "num_key_value_heads": SPEC.kv_heads,
        "rms_norm_eps": 1e-5, "max_position_embeddings": SPEC.context, "bos_token_id": 1,
        "eos_token_id": 2, "vocab_size": vocabulary().0.len(), "intermediate_size": SPEC.ff,
    });
    let load = || {
        LocalBackend::from_safetensors(&config(&checkpoint))
            .err()
            .map(|e| e.to_string())
    };
    for (field, value) in [
        ("num_hidden_layers", serde_json::json!(1_000_000_000u64)),
        ("num_hidden_layers", serde_json::json!(3)),
        ("num_attention_heads", serde_json::json!(0)),
        ("num_key_value_heads", serde_json::json!(3)),
        ("hidden_size", serde_json::json!(1u64 << 40)),
        ("max_position_embeddings", serde_json::json!(1u64 << 60)),
    ] {
        let mut edited = good.clone();
        edited[field] = value;
        std::fs::write(checkpoint.join("config.json"), edited.to_string()).unwrap();
        refused(load, &checkpoint, field);
    }
    std::fs::write(checkpoint.join("config.json"), good.to_string()).unwrap();
    answers(&LocalBackend::from_safetensors(&config(&checkpoint)).unwrap());
}

/// The Hugging Face name of a GGUF tensor (layouts do not matter here).
fn hf_name(gguf: &str) -> String {
    match gguf {
        "token_embd.weight" => "model.embed_tokens.weight".into(),
        "output_norm.weight" => "model.norm.weight".into(),
        "output.weight" => "lm_head.weight".into(),
        other => {
            let (block, leaf) = other.strip_prefix("blk.").unwrap().split_once('.').unwrap();
            let leaf = match leaf {
                "attn_norm.weight" => "input_layernorm.weight",
                "attn_q.weight" => "self_attn.q_proj.weight",
                "attn_k.weight" => "self_attn.k_proj.weight",
                "attn_v.weight" => "self_attn.v_proj.weight",
                "attn_output.weight" => "self_attn.o_proj.weight",
                "ffn_norm.weight" => "post_attention_layernorm.weight",
                "ffn_gate.weight" => "mlp.gate_proj.weight",
                "ffn_up.weight" => "mlp.up_proj.weight",
                "ffn_down.weight" => "mlp.down_proj.weight",
                other => panic!("unexpected tensor {other}"),
            };
            format!("model.layers.{block}.{leaf}")
        }
    }
}
