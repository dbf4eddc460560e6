//! The two formats a pretrained model comes in read to one model: a GGUF
//! file (llama.cpp's interleaved q/k rows, its BPE vocabulary, its chat
//! template) and the checkpoint directory holding the same weights; and
//! what cannot be trained is refused naming the field.

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use serde_json::json;
use std::path::Path;
use verifine_models::weights::{expected_shapes, save_safetensors};
use verifine_models::{DecoderSpec, Message, ModelError, Pretrained, Role, Weights};

mod fuzz;

const CHATML: &str = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

fn scratch(name: &str) -> verifine_test_support::ScratchDir {
    verifine_test_support::scratch_dir(&format!("models-{name}"))
}

/// Byte-level alphabet, two merges and two control tokens.
fn vocabulary() -> (Vec<String>, Vec<String>, Vec<i32>) {
    let mut tokens: Vec<String> = tokenizers::pre_tokenizers::byte_level::ByteLevel::alphabet()
        .into_iter()
        .map(String::from)
        .collect();
    tokens.sort();
    tokens.extend(["he", "ll", "<|im_start|>", "<|im_end|>"].map(String::from));
    let mut types = vec![1; tokens.len()];
    let n = types.len();
    types[n - 2..].fill(3);
    (tokens, vec!["h e".into(), "l l".into()], types)
}

fn spec(vocab: usize) -> DecoderSpec {
    let config = json!({
        "model_type": "llama", "vocab_size": vocab, "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 64,
        "max_position_embeddings": 128, "rope_theta": 10000.0, "rms_norm_eps": 1e-5,
        "tie_word_embeddings": true, "bos_token_id": null, "eos_token_id": vocab - 1,
    });
    DecoderSpec::from_json(&config, Path::new("config.json")).unwrap()
}

fn random_weights(spec: &DecoderSpec) -> Weights {
    expected_shapes(spec)
        .into_iter()
        .map(|(name, shape)| (name, Tensor::randn(0f32, 1.0, shape, &Device::Cpu).unwrap()))
        .collect()
}

/// llama.cpp's converter: each head's rows interleaved for adjacent-pair
/// rotation.
fn interleave(t: &Tensor, heads: usize) -> Tensor {
    let (rows, cols) = t.dims2().unwrap();
    let d = rows / heads;
    t.reshape((heads, 2, d / 2, cols))
        .unwrap()
        .transpose(1, 2)
        .unwrap()
        .contiguous()
        .unwrap()
        .reshape((rows, cols))
        .unwrap()
}

fn write_gguf(path: &Path, spec: &DecoderSpec, weights: &Weights) {
    let (tokens, merges, types) = vocabulary();
    let mut tensors = vec![(
        "token_embd.weight".to_string(),
        weights["model.embed_tokens.weight"].clone(),
    )];
    tensors.push((
        "output_norm.weight".into(),
        weights["model.norm.weight"].clone(),
    ));
    for layer in 0..spec.num_layers {
        let hf = |leaf: &str| weights[&format!("model.layers.{layer}.{leaf}")].clone();
        let b = |leaf: &str| format!("blk.{layer}.{leaf}");
        tensors.extend([
            (b("attn_norm.weight"), hf("input_layernorm.weight")),
            (
                b("attn_q.weight"),
                interleave(&hf("self_attn.q_proj.weight"), spec.num_heads),
            ),
            (
                b("attn_k.weight"),
                interleave(&hf("self_attn.k_proj.weight"), spec.num_kv_heads),
            ),
            (b("attn_v.weight"), hf("self_attn.v_proj.weight")),
            (b("attn_output.weight"), hf("self_attn.o_proj.weight")),
            (b("ffn_norm.weight"), hf("post_attention_layernorm.weight")),
            (b("ffn_gate.weight"), hf("mlp.gate_proj.weight")),
            (b("ffn_up.weight"), hf("mlp.up_proj.weight")),
            (b("ffn_down.weight"), hf("mlp.down_proj.weight")),
        ]);
    }
    let tensors: Vec<(String, QTensor)> = tensors
        .into_iter()
        .map(|(n, t)| (n, QTensor::quantize(&t, GgmlDType::F32).unwrap()))
        .collect();
    let u = |v: usize| Value::U32(v as u32);
    let strings = |v: Vec<String>| Value::Array(v.into_iter().map(Value::String).collect());
    let metadata = vec![
        ("general.architecture", Value::String("llama".into())),
        ("llama.context_length", u(spec.max_position_embeddings)),
        ("llama.embedding_length", u(spec.hidden_size)),
        ("llama.block_count", u(spec.num_layers)),
        ("llama.feed_forward_length", u(spec.intermediate_size)),
        ("llama.attention.head_count", u(spec.num_heads)),
        ("llama.attention.head_count_kv", u(spec.num_kv_heads)),
        ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
        ("llama.rope.freq_base", Value::F32(10000.0)),
        ("tokenizer.ggml.model", Value::String("gpt2".into())),
        ("tokenizer.ggml.pre", Value::String("smollm".into())),
        ("tokenizer.ggml.tokens", strings(tokens.clone())),
        ("tokenizer.ggml.merges", strings(merges)),
        (
            "tokenizer.ggml.token_type",
            Value::Array(types.into_iter().map(Value::I32).collect()),
        ),
        ("tokenizer.ggml.eos_token_id", u(tokens.len() - 1)),
        ("tokenizer.chat_template", Value::String(CHATML.into())),
    ];
    let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut file = std::fs::File::create(path).unwrap();
    gguf_file::write(&mut file, &metadata, &tensors).unwrap();
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

#[test]
fn a_gguf_and_the_checkpoint_it_came_from_read_to_the_same_model() {
    let dir = scratch("same");
    let vocab = vocabulary().0.len();
    let spec = spec(vocab);
    let weights = random_weights(&spec);
    let gguf = dir.join("model.gguf");
    write_gguf(&gguf, &spec, &weights);
    let from_gguf = Pretrained::load(&gguf, &Device::Cpu).unwrap();
    assert_eq!(from_gguf.spec.num_kv_heads, 2);
    for (name, tensor) in &weights {
        assert!(
            gap(tensor, &from_gguf.weights[name]) == 0.0,
            "{name} differs after reading the GGUF"
        );
    }
    // Written back as a checkpoint directory, it reads the same again.
    let checkpoint = dir.join("hf");
    verifine_models::export::write_checkpoint(&checkpoint, &from_gguf, &from_gguf.weights).unwrap();
    let from_dir = Pretrained::load(&checkpoint, &Device::Cpu).unwrap();
    assert_eq!(from_dir.spec, from_gguf.spec);
    for (name, tensor) in &weights {
        assert!(
            gap(tensor, &from_dir.weights[name]) == 0.0,
            "{name} differs after the round trip"
        );
    }
    // The tokenizer: merges, control tokens read whole, digits one by one.
    for model in [&from_gguf, &from_dir] {
        let ids = model.tokenizer.encode("hello<|im_end|>").unwrap();
        let he = model.tokenizer.token_to_id("he").unwrap();
        let ll = model.tokenizer.token_to_id("ll").unwrap();
        let end = model.tokenizer.token_to_id("<|im_end|>").unwrap();
        assert_eq!(ids.len(), 4, "{ids:?}");
        assert_eq!((ids[0], ids[1], ids[3]), (he, ll, end));
        assert_eq!(model.tokenizer.encode("12").unwrap().len(), 2);
        assert_eq!(model.tokenizer.decode(&ids, true).unwrap(), "hello");
        let rendered = model
            .chat_template
            .as_ref()
            .unwrap()
            .render(&[Message::new(Role::User, "hi")], true)
            .unwrap();
        assert_eq!(
            rendered,
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
        );
        assert_eq!(model.stop_ids(), vec![end]);
    }
    // Nothing half-written is left beside the export.
    assert!(!dir.join("hf.partial").exists());
}

#[test]
fn shards_are_read_and_a_missing_tensor_is_named() {
    let dir = scratch("shards");
    let spec = spec(300);
    let weights = random_weights(&spec);
    let (first, second): (Weights, Weights) = weights
        .into_iter()
        .partition(|(n, _)| n.contains("layers.0"));
    save_safetensors(&first, &dir.join("a.safetensors")).unwrap();
    save_safetensors(&second, &dir.join("b.safetensors")).unwrap();
    let map: serde_json::Map<String, serde_json::Value> = first
        .keys()
        .map(|k| (k.clone(), json!("a.safetensors")))
        .chain(second.keys().map(|k| (k.clone(), json!("b.safetensors"))))
        .collect();
    std::fs::write(
        dir.join("model.safetensors.index.json"),
        json!({"weight_map": map}).to_string(),
    )
    .unwrap();
    let mut config = spec.to_config_json();
    config["vocab_size"] = json!(300);
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    let mut read = verifine_models::weights::load_safetensors_dir(&dir, &Device::Cpu).unwrap();
    verifine_models::weights::check_shapes(&spec, &mut read, &dir).unwrap();
    read.remove("model.layers.1.mlp.up_proj.weight");
    let error = verifine_models::weights::check_shapes(&spec, &mut read, &dir)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("model.layers.1.mlp.up_proj.weight"),
        "{error}"
    );
    // A shard name that leaves the directory is refused.
    std::fs::write(
        dir.join("model.safetensors.index.json"),
        json!({"weight_map": {"x": "../x.safetensors"}}).to_string(),
    )
    .unwrap();
    let error = verifine_models::weights::weight_files(&dir)
        .unwrap_err()
        .to_string();
    assert!(error.contains("not a file in the directory"), "{error}");
}

#[test]
fn shapes_the_decoder_cannot_compute_are_refused_naming_the_field() {
    let base = spec(300).to_config_json();
    let cases = [
        ("model_type", json!("gemma3"), "model_type"),
        ("hidden_act", json!("gelu"), "hidden_act"),
        (
            "rope_scaling",
            json!({"rope_type": "yarn", "factor": 4.0}),
            "rope_scaling.rope_type",
        ),
        ("head_dim", json!(16), "head_dim"),
        ("num_key_value_heads", json!(3), "num_key_value_heads"),
        ("mlp_bias", json!(true), "mlp_bias"),
    ];
    for (key, value, field) in cases {
        let mut config = base.clone();
        config[key] = value;
        let error = DecoderSpec::from_json(&config, Path::new("m/config.json")).unwrap_err();
        assert!(
            matches!(&error, ModelError::Unsupported { field: f, .. } if f == field),
            "{key}: {error}"
        );
        assert!(error.to_string().starts_with("m/config.json: "), "{error}");
    }
}

#[test]
fn transformers_5_rope_parameters_are_read() {
    let mut config = spec(300).to_config_json();
    config.as_object_mut().unwrap().remove("rope_theta");
    config["rope_parameters"] = json!({"rope_theta": 100000.0, "rope_type": "default"});
    let read = DecoderSpec::from_json(&config, Path::new("config.json")).unwrap();
    assert_eq!((read.rope_theta, read.rope_scaling), (100000.0, None));
    config["rope_parameters"] = json!({"rope_theta": 500000.0, "rope_type": "llama3", "factor": 8.0,
        "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192});
    let read = DecoderSpec::from_json(&config, Path::new("config.json")).unwrap();
    let scaled = read.inverse_frequencies();
    // High frequencies are kept, the lowest divided by the factor.
    assert_eq!(scaled[0], 1.0);
    let plain = verifine_models::config::inverse_frequencies(500000.0, read.head_dim(), None);
    assert!((scaled.last().unwrap() * 8.0 - plain.last().unwrap()).abs() < 1e-12);
}

#[test]
fn templates_render_as_transformers_does() {
    let template = verifine_models::ChatTemplate::new(
        "{%- for m in messages %}{{ m.role | upper }}: {{ m.content.strip() }}\n{%- if m.role == 'user' %} {{ {'n': 1, 'k': [1, 'a']} | tojson }}{% endif %}\n{% endfor %}",
        "<s>",
        "</s>",
    )
    .unwrap();
    let out = template
        .render(&[Message::new(Role::User, "  hi  ")], false)
        .unwrap();
    assert_eq!(out, "USER: hi {\"n\": 1, \"k\": [1, \"a\"]}");
    let failing =
        verifine_models::ChatTemplate::new("{{ raise_exception('no system role') }}", "", "")
            .unwrap();
    let error = failing.render(&[], true).unwrap_err().to_string();
    assert!(error.contains("no system role"), "{error}");
}
