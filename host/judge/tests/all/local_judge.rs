//! The local candle backend on random-weight GGUF models written here:
//! what is tested is the machinery — prefix reuse changes nothing but the
//! work done, constrained choices, stop strings, cost, and clear refusals
//! of files that are not models it can run.
#![cfg(feature = "local")]

use std::path::PathBuf;
use verifine_judge::local::LocalBackend;
use verifine_judge::local::tiny::{TinySpec, write_tiny_llama};
use verifine_judge::{Judges, JudgesConfig, LocalConfig, PromptTemplate};
use verifine_runtime::judge_models::{JudgeModels, ModelRequest};

fn scratch(name: &str) -> verifine_test_support::ScratchDir {
    verifine_test_support::scratch_dir(&format!("local-{name}"))
}

fn tiny_model(dir: &std::path::Path) -> PathBuf {
    let path = dir.join("tiny.gguf");
    write_tiny_llama(&path, TinySpec::default()).unwrap();
    path
}

fn backend(path: &std::path::Path, keep: usize) -> LocalBackend {
    LocalBackend::new(&LocalConfig {
        path: path.to_path_buf(),
        template: PromptTemplate::Chatml,
        cuda: false,
        prefix_cache_prompts: keep,
        weight_products: Default::default(),
    })
    .unwrap()
}

/// Three criterion batches of one sample: the same introduction and
/// conversation, different rubric items.
fn criterion_prompts() -> Vec<ModelRequest> {
    let prefix = "You are grading a conversation.\n\n# Conversation\nuser: my head hurts, what should I do?\nassistant: rest, drink water, and see a doctor if it lasts.\n\n# Rubric items\n";
    ["advises rest", "mentions water", "suggests seeing a doctor"]
        .iter()
        .map(|item| ModelRequest {
            top_logprobs: 3,
            ..ModelRequest::new(format!("{prefix}- {item}\nAnswer YES or NO."), 6)
        })
        .collect()
}

#[test]
fn prefix_reuse_changes_the_work_not_the_answers() {
    let dir = scratch("prefix");
    let model = tiny_model(&dir);
    let prompts = criterion_prompts();
    let asked: Vec<&ModelRequest> = prompts.iter().collect();
    let reuser = backend(&model, 8);
    let reusing = reuser.exchange_all(&asked);
    let fresh = backend(&model, 0).exchange_all(&asked);
    for (r, f) in reusing.iter().zip(&fresh) {
        let (r, f) = (r.answer.as_ref().unwrap(), f.answer.as_ref().unwrap());
        assert_eq!(r.text, f.text);
        for (a, b) in r.logprobs.iter().zip(&f.logprobs) {
            assert_eq!(a.token, b.token);
            assert!((a.logprob - b.logprob).abs() < 1e-4, "{a:?} vs {b:?}");
        }
        assert_eq!(r.usage.input, f.usage.input);
        assert_eq!(f.usage.cached_input, 0);
    }
    let first = reusing[0].answer.as_ref().unwrap().usage;
    assert_eq!(first.cached_input, 0, "nothing to reuse for the first");
    // Everything the prompts share (introduction, conversation, the
    // marker) is encoded once.
    let tokens = |r: &ModelRequest| reuser.vocabulary().encode(&reuser.render(r));
    for (later, request) in reusing.iter().zip(&prompts).skip(1) {
        let usage = later.answer.as_ref().unwrap().usage;
        let shared = tokens(&prompts[0])
            .iter()
            .zip(tokens(request))
            .take_while(|(a, b)| **a == *b)
            .count();
        assert!(shared > 100);
        assert_eq!(usage.cached_input, shared as u64, "{usage:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn choices_constrain_the_answer_and_give_a_confidence() {
    let dir = scratch("choices");
    let model = tiny_model(&dir);
    let local = backend(&model, 4);
    let request = ModelRequest {
        choices: vec!["YES".into(), "NO".into()],
        ..criterion_prompts()[1].clone()
    };
    let answer = local.exchange_all(&[&request]).remove(0).answer.unwrap();
    assert!(answer.text == "YES" || answer.text == "NO", "{answer:?}");
    let top = &answer.logprobs[0].top;
    assert_eq!(top.len(), 2);
    assert_eq!(top[0].0, answer.text);
    let total: f64 = top.iter().map(|(_, lp)| lp.exp()).sum();
    assert!(
        (total - 1.0).abs() < 1e-9,
        "renormalized over the choices: {total}"
    );
    assert!(top[0].1 >= top[1].1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn answers_stop_at_stop_strings_and_max_tokens_and_sampling_is_repeatable() {
    let dir = scratch("stop");
    let model = tiny_model(&dir);
    let local = backend(&model, 0);
    let long = ModelRequest::new("Say anything.", 12);
    let free = local.exchange_all(&[&long]).remove(0).answer.unwrap();
    assert!(free.usage.output <= 12);
    if let Some(cut) = free.text.chars().nth(2).map(String::from) {
        let stopped = ModelRequest {
            stop: vec![cut.clone()],
            ..long.clone()
        };
        let answer = local.exchange_all(&[&stopped]).remove(0).answer.unwrap();
        assert!(
            !answer.text.contains(&cut),
            "{:?} holds the stop {cut:?}",
            answer.text
        );
        assert!(free.text.starts_with(&answer.text));
    }
    let warm = ModelRequest {
        temperature: Some(1.0),
        ..long
    };
    let a = local.exchange_all(&[&warm]).remove(0).answer.unwrap();
    let b = local.exchange_all(&[&warm]).remove(0).answer.unwrap();
    assert_eq!(a.text, b.text, "a prompt seeds its own sampling");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_local_judge_counts_tokens_and_device_seconds() {
    let dir = scratch("ledger");
    let model = tiny_model(&dir);
    let text = format!(
        "[judges.judge]\nbackend = {{ kind = \"local-gguf\", path = {:?} }}\nprice = {{ input = 1.0, output = 2.0 }}\n",
        model.display().to_string()
    );
    let judges = Judges::new(&JudgesConfig::parse(&text, "local.toml").unwrap()).unwrap();
    let answers = judges.ask("test", &criterion_prompts());
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
    let ledger = judges.ledgers()["judge"];
    assert_eq!(ledger.calls, 3);
    assert!(ledger.device_seconds > 0.0 && ledger.usage.cached_input > 0);
    let fresh = ledger.usage.input - ledger.usage.cached_input;
    let expected = (fresh as f64 * 1.0 + ledger.usage.output as f64 * 2.0) / 1e6;
    assert!((ledger.usd - expected).abs() < 1e-12);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn files_it_cannot_run_are_refused_with_their_path() {
    let dir = scratch("hostile");
    let refuse = |path: &std::path::Path| {
        LocalBackend::new(&LocalConfig {
            path: path.to_path_buf(),
            template: PromptTemplate::Plain,
            cuda: false,
            prefix_cache_prompts: 0,
            weight_products: Default::default(),
        })
        .err()
        .expect("refused")
        .to_string()
    };
    let missing = dir.join("missing.gguf");
    assert!(refuse(&missing).contains("missing.gguf"));
    let text = dir.join("text.gguf");
    std::fs::write(&text, "not a model").unwrap();
    let error = refuse(&text);
    assert!(
        error.contains("text.gguf") && error.contains("GGUF"),
        "{error}"
    );
    let model = tiny_model(&dir);
    let bytes = std::fs::read(&model).unwrap();
    let cut = dir.join("cut.gguf");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    assert!(refuse(&cut).contains("cut.gguf"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// GGUF stores llama's q/k rows permuted for adjacent-pair rotation;
/// Hugging Face checkpoints keep them in rotate-half order. Undoing
/// llama.cpp's permutation per head gives the checkpoint layout.
fn to_hf_layout(w: &candle_core::Tensor, heads: usize) -> candle_core::Tensor {
    let (rows, cols) = w.dims2().unwrap();
    w.reshape((heads, rows / heads / 2, 2, cols))
        .unwrap()
        .transpose(1, 2)
        .unwrap()
        .contiguous()
        .unwrap()
        .reshape((rows, cols))
        .unwrap()
}

/// The same random weights written as a GGUF file and as a Hugging Face
/// checkpoint (safetensors, config.json, tokenizer.json) give the same
/// next-token log-probabilities: the two loaders and the two rotary
/// layouts agree.
#[test]
fn a_safetensors_checkpoint_runs_like_the_same_weights_in_gguf() {
    use verifine_judge::local::tiny::{random_weights, vocabulary, write_llama_gguf};
    let dir = scratch("safetensors");
    let spec = TinySpec {
        width: 32,
        layers: 2,
        heads: 4,
        kv_heads: 2,
        ff: 64,
        context: 512,
        q8: false,
        seed: 5,
    };
    let weights = random_weights(&spec).unwrap();
    write_llama_gguf(&dir.join("same.gguf"), &spec, &weights).unwrap();
    let checkpoint = dir.join("checkpoint");
    std::fs::create_dir_all(&checkpoint).unwrap();
    let mut hf = std::collections::HashMap::new();
    for (name, tensor) in &weights {
        let (hf_name, tensor) = match name.as_str() {
            "token_embd.weight" => ("model.embed_tokens.weight".to_string(), tensor.clone()),
            "output_norm.weight" => ("model.norm.weight".to_string(), tensor.clone()),
            "output.weight" => ("lm_head.weight".to_string(), tensor.clone()),
            other => {
                let (block, part) = other.strip_prefix("blk.").unwrap().split_once('.').unwrap();
                let p = format!("model.layers.{block}");
                match part {
                    "attn_norm.weight" => (format!("{p}.input_layernorm.weight"), tensor.clone()),
                    "attn_q.weight" => (
                        format!("{p}.self_attn.q_proj.weight"),
                        to_hf_layout(tensor, spec.heads),
                    ),
                    "attn_k.weight" => (
                        format!("{p}.self_attn.k_proj.weight"),
                        to_hf_layout(tensor, spec.kv_heads),
                    ),
                    "attn_v.weight" => (format!("{p}.self_attn.v_proj.weight"), tensor.clone()),
                    "attn_output.weight" => {
                        (format!("{p}.self_attn.o_proj.weight"), tensor.clone())
                    }
                    "ffn_norm.weight" => (
                        format!("{p}.post_attention_layernorm.weight"),
                        tensor.clone(),
                    ),
                    "ffn_gate.weight" => (format!("{p}.mlp.gate_proj.weight"), tensor.clone()),
                    "ffn_up.weight" => (format!("{p}.mlp.up_proj.weight"), tensor.clone()),
                    "ffn_down.weight" => (format!("{p}.mlp.down_proj.weight"), tensor.clone()),
                    other => panic!("unexpected tensor {other}"),
                }
            }
        };
        hf.insert(hf_name, tensor);
    }
    candle_core::safetensors::save(&hf, checkpoint.join("model.safetensors")).unwrap();
    let config_json = serde_json::json!({
        "model_type": "llama", "hidden_size": 32, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-5,
        "max_position_embeddings": 512, "bos_token_id": 1, "eos_token_id": 2,
        "vocab_size": vocabulary().0.len(), "intermediate_size": 64,
    });
    std::fs::write(checkpoint.join("config.json"), config_json.to_string()).unwrap();
    crate::common::write_word_level_tokenizer(&checkpoint);
    std::fs::write(
        checkpoint.join("tokenizer_config.json"),
        r#"{"add_bos_token": true}"#,
    )
    .unwrap();

    let config = |path: PathBuf| LocalConfig {
        path,
        template: PromptTemplate::Plain,
        cuda: false,
        prefix_cache_prompts: 0,
        weight_products: Default::default(),
    };
    let gguf = LocalBackend::new(&config(dir.join("same.gguf"))).unwrap();
    let safetensors = LocalBackend::from_safetensors(&config(checkpoint.clone())).unwrap();
    let ids = [1u32, 300, 301, 5, 77, 290, 12];
    let logprobs = |backend: &LocalBackend| -> Vec<Vec<f32>> {
        let mut state = verifine_judge::local::model::KvCache::default();
        backend
            .model()
            .forward(&ids, &mut state, ids.len())
            .unwrap()
    };
    let (a, b) = (logprobs(&gguf), logprobs(&safetensors));
    let worst = a
        .iter()
        .flatten()
        .zip(b.iter().flatten())
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    assert!(worst < 1e-4, "largest log-probability difference {worst}");
    // The checkpoint's own tokenizer: whitespace words of its vocabulary
    // (BOS from config.json first, as tokenizer_config.json asks).
    let pieces = vocabulary().0;
    let id = |p: &str| pieces.iter().position(|x| x == p).unwrap() as u32;
    assert_eq!(
        safetensors.vocabulary().encode("a 7"),
        vec![1, id("a"), id("7")]
    );
    // Without `add_bos_token` no begin token is added (a chat template
    // writes its own; a second one changes every answer).
    std::fs::remove_file(checkpoint.join("tokenizer_config.json")).unwrap();
    let no_bos = LocalBackend::from_safetensors(&config(checkpoint.clone())).unwrap();
    assert_eq!(no_bos.vocabulary().encode("a 7"), vec![id("a"), id("7")]);
    let request = ModelRequest {
        choices: vec!["YES".into(), "NO".into()],
        ..ModelRequest::new("is it YES or NO", 4)
    };
    let answer = safetensors
        .exchange_all(&[&request])
        .remove(0)
        .answer
        .unwrap();
    assert!(answer.text == "YES" || answer.text == "NO");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Free-text answers of a batch decode together, one token per answer per
/// step; each comes out as it would alone (different prompts, lengths,
/// limits, stop strings, a sampled one among greedy ones).
#[test]
fn a_batch_decodes_together_as_each_would_alone() {
    let dir = scratch("batch");
    let model = tiny_model(&dir);
    let local = backend(&model, 0);
    let requests = [
        ModelRequest {
            top_logprobs: 2,
            ..ModelRequest::new("Is the sky blue?", 12)
        },
        ModelRequest::new(
            "A much longer question about whether the response cites a source.",
            5,
        ),
        ModelRequest {
            temperature: Some(0.8),
            ..ModelRequest::new("Say something.", 9)
        },
        ModelRequest {
            choices: vec!["YES".into(), "NO".into()],
            ..ModelRequest::new("Is it met?", 4)
        },
        ModelRequest {
            stop: vec!["e".into()],
            ..ModelRequest::new("Stop at the first e.", 16)
        },
    ];
    let asked: Vec<&ModelRequest> = requests.iter().collect();
    let together = local.exchange_all(&asked);
    for (request, batched) in requests.iter().zip(&together) {
        let alone = local.exchange_all(&[request]).remove(0).answer.unwrap();
        let batched = batched.answer.as_ref().unwrap();
        assert_eq!(batched.text, alone.text, "{request:?}");
        assert_eq!(batched.usage, alone.usage);
        for (a, b) in batched.logprobs.iter().zip(&alone.logprobs) {
            assert_eq!(a.token, b.token);
            assert!((a.logprob - b.logprob).abs() < 1e-4, "{a:?} vs {b:?}");
        }
        assert!(batched.usage.output <= u64::from(request.max_tokens));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn prompts_sharing_a_prefix_run_together_as_each_would_alone() {
    use verifine_judge::local::model::KvCache;
    let dir = scratch("shared-prefix");
    let local = backend(&tiny_model(&dir), 0);
    let model = local.model();
    let prefix: Vec<u32> = (0..40).map(|i| 3 + (i * 7) % 90).collect();
    let suffixes: [&[u32]; 3] = [&[5, 6, 7], &[9], &[11, 12, 13, 14, 15, 16]];
    let mut shared = KvCache::default();
    model.forward(&prefix, &mut shared, 1).unwrap();
    let together = model.forward_suffixes(&shared, &suffixes).unwrap();
    for (suffix, (next, mut cache)) in suffixes.iter().zip(together) {
        let mut alone = KvCache::default();
        let prompt = [&prefix[..], suffix].concat();
        let expected = model.forward(&prompt, &mut alone, 1).unwrap().remove(0);
        let worst = |a: &[f32], b: &[f32]| {
            a.iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max)
        };
        assert!(
            worst(&next, &expected) < 1e-4,
            "{}",
            worst(&next, &expected)
        );
        // The cache it returns goes on as the prompt's own would.
        assert_eq!(cache.len(), prompt.len());
        let after = model.forward(&[42], &mut cache, 1).unwrap().remove(0);
        let expected = model.forward(&[42], &mut alone, 1).unwrap().remove(0);
        assert!(worst(&after, &expected) < 1e-4);
    }
    // An empty suffix or one past the context is refused, not run.
    assert!(model.forward_suffixes(&shared, &[&[5], &[]]).is_err());
    let long = vec![5u32; model.context_length];
    assert!(model.forward_suffixes(&shared, &[&long]).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}
