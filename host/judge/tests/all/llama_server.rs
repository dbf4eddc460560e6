//! The HTTP judge against a real server no one here wrote: llama.cpp's
//! `llama-server` serving a tiny random-weight GGUF model. Its answers are
//! meaningless; what is tested is the exchange — JSON-schema answers,
//! log-probabilities, usage, the disk cache, budgets, and retries across a
//! server that stops mid-run and comes back.
//!
//! Ignored in a plain `cargo test`: it needs `VERIFINE_LLAMA_ROOT` naming a
//! chroot made by `bench/llama-server/setup.sh`, and `python3` with `gguf`.
//! CI runs it with `--ignored`, and so does `bench/llama-server/test.sh`;
//! run so, a missing piece fails it.

use crate::common::llama::{Server, free_port, post, setup};
use std::path::Path;
use std::time::Duration;
use verifine_judge::{Judges, JudgesConfig};
use verifine_runtime::judge_models::{JudgeModels, ModelError, ModelRequest};

fn judges(port: u16, extra: &str, cache: Option<&Path>) -> Judges {
    let cache = cache.map_or(String::new(), |d| {
        format!("cache_dir = {:?}\n", d.display().to_string())
    });
    let text = format!(
        "{cache}[judges.judge]\nbackend = {{ kind = \"openai-http\", base_url = \"http://127.0.0.1:{port}/v1\", model = \"tiny\" {extra} }}\n"
    );
    Judges::new(&JudgesConfig::parse(&text, "llama.toml").unwrap()).unwrap()
}

#[test]
#[ignore = "needs llama-server: VERIFINE_LLAMA_ROOT from bench/llama-server/setup.sh (CI runs it)"]
fn the_http_judge_speaks_to_llama_server() {
    let root = setup().unwrap_or_else(|why| panic!("llama-server test: {why}"));
    let port = free_port();
    let server = Server::start(&root, port);
    let cache = verifine_test_support::scratch_path("llama-cache");
    let judge = judges(port, "", Some(&cache));

    // A JSON-schema answer with log-probabilities and usage.
    let schema = r#"{"type": "object", "properties": {"criteria_met": {"type": "boolean"}}, "required": ["criteria_met"]}"#;
    let request = ModelRequest {
        temperature: Some(0.0),
        json_schema: Some(schema.into()),
        top_logprobs: 2,
        system: Some("You grade one criterion.".into()),
        ..ModelRequest::new("Does the response mention water?", 24)
    };
    let answer = judge.ask("test", std::slice::from_ref(&request))[0]
        .clone()
        .unwrap();
    let parsed: serde_json::Value = serde_json::from_str(answer.text.trim())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", answer.text));
    assert!(parsed["criteria_met"].is_boolean(), "{parsed}");
    assert!(
        !answer.logprobs.is_empty() && answer.logprobs[0].top.len() == 2,
        "{answer:?}"
    );
    assert!(
        answer.usage.input > 0 && answer.usage.output > 0,
        "{answer:?}"
    );

    // Asked again: from the disk cache, no call.
    let again = judge.ask("test", std::slice::from_ref(&request))[0]
        .clone()
        .unwrap();
    assert!(again.cached && again.text == answer.text);
    let ledger = judge.ledgers()["judge"];
    assert_eq!((ledger.calls, ledger.cache_hits), (1, 1));

    // A budget of two calls: the third query is refused, not sent.
    let text = format!(
        "[judges.judge]\nbackend = {{ kind = \"openai-http\", base_url = \"http://127.0.0.1:{port}/v1\", model = \"tiny\" }}\nbudget = {{ max_calls = 2 }}\n"
    );
    let budgeted = Judges::new(&JudgesConfig::parse(&text, "b.toml").unwrap()).unwrap();
    let three: Vec<ModelRequest> = (0..3)
        .map(|i| ModelRequest::new(format!("q{i}"), 4))
        .collect();
    let answers = budgeted.ask("test", &three);
    assert!(answers[0].is_ok() && answers[1].is_ok(), "{answers:?}");
    assert!(matches!(&answers[2], Err(ModelError::OverBudget(m)) if m.contains("max_calls 2")));

    // The server stops mid-run and comes back on the same port: retries
    // with backoff carry the query over the gap.
    drop(server);
    let patient = judges(
        port,
        ", retries = 8, backoff_ms = 400, timeout_seconds = 10",
        None,
    );
    let restart = {
        let root = root.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1500));
            Server::start(&root, port)
        })
    };
    let answer = patient.ask("test", &[ModelRequest::new("still there?", 4)])[0].clone();
    let _server = restart.join().unwrap();
    assert!(answer.is_ok(), "{answer:?}");
    assert!(
        patient.ledgers()["judge"].calls >= 2,
        "the first attempts found no server"
    );
    std::fs::remove_dir_all(&cache).unwrap();
}

/// The local candle backend and llama.cpp, given the same GGUF file and
/// the same prompts, agree: the same tokenization, the same greedy tokens,
/// and log-probabilities (of the chosen and the top-5 tokens) within
/// `TOLERANCE` nats. llama.cpp keeps its KV cache in f16 and sums in other
/// orders, so exact equality is not expected.
#[cfg(feature = "local")]
#[test]
#[ignore = "needs llama-server: VERIFINE_LLAMA_ROOT from bench/llama-server/setup.sh (CI runs it)"]
fn the_local_backend_matches_llama_cpp() {
    use verifine_judge::local::{LocalBackend, top_k};
    const TOLERANCE: f64 = 2e-3;
    let root = setup().unwrap_or_else(|why| panic!("candle-vs-llama.cpp cross-check: {why}"));
    let port = free_port();
    let _server = Server::start(&root, port);
    let config = verifine_judge::LocalConfig {
        path: root.join("models/tiny.gguf"),
        template: verifine_judge::PromptTemplate::Plain,
        cuda: false,
        prefix_cache_prompts: 0,
        weight_products: Default::default(),
    };
    let local = LocalBackend::new(&config).expect("the GGUF loads in candle");
    let texts = [
        "Does the response mention water? Answer YES or NO.",
        "  two  spaces, tabs\tand\nnew lines",
        // No special-token text here: llama-server's /tokenize reads "<s>"
        // as BOS, the local tokenizer (on purpose) as text.
        "Unicode: é, ß, 漢字, emoji 🙂 as text",
        "the a is it of and to in YES NO yes no 0123456789",
    ];
    let mut compared = 0;
    let mut worst: f64 = 0.0;
    for text in texts {
        let theirs = post(port, "/tokenize", &serde_json::json!({"content": text}));
        let theirs: Vec<u32> = serde_json::from_value(theirs["tokens"].clone()).unwrap();
        assert_eq!(
            local.vocabulary().spm().unwrap().encode(text, false),
            theirs,
            "tokens of {text:?}"
        );

        // One token per request: llama-server leaves out the probabilities
        // of a token that ends inside a UTF-8 character, which would
        // misalign a longer completion's list with its tokens.
        let mut context = local.vocabulary().encode(text);
        let mut state = verifine_judge::local::model::KvCache::default();
        let mut next = local
            .model()
            .forward(&context, &mut state, 1)
            .unwrap()
            .remove(0);
        for _ in 0..8 {
            let answer = post(
                port,
                "/completion",
                &serde_json::json!({"prompt": context, "n_predict": 1, "temperature": 0,
                    "n_probs": 5, "cache_prompt": false, "return_tokens": true}),
            );
            let id = answer["tokens"][0].as_u64().unwrap() as u32;
            let ours = top_k(&next, 5);
            // A near-tie may break either way; past it the texts diverge.
            if ours[0].1 - ours[1].1 < TOLERANCE {
                break;
            }
            assert_eq!(
                ours[0].0, id,
                "greedy token after {context:?}: ours {ours:?}"
            );
            if let Some(step) = answer["completion_probabilities"].get(0) {
                let tops = step["top_logprobs"].as_array().unwrap();
                for (mine, theirs) in ours.iter().zip(tops) {
                    let their_lp = theirs["logprob"].as_f64().unwrap();
                    let diff = (mine.1 - their_lp).abs();
                    worst = worst.max(diff);
                    assert_eq!(mine.0 as u64, theirs["id"].as_u64().unwrap(), "top-5 order");
                    assert!(diff < TOLERANCE, "logprob {} vs {their_lp}", mine.1);
                }
                compared += 1;
            }
            context.push(id);
            next = local
                .model()
                .forward(&[id], &mut state, 1)
                .unwrap()
                .remove(0);
        }
    }
    eprintln!("{compared} greedy steps compared, worst log-probability difference {worst:.2e}");
    assert!(compared >= 16, "too few steps compared: {compared}");
}

/// HealthBench's shared examples scored end to end through llama-server:
/// `healthbench` asks one item per query with the answer constrained to
/// YES/NO (sent as a JSON-schema enum, which llama-server enforces by
/// grammar), every query of a sample sharing its prefix. The tiny model's
/// verdicts mean nothing; the exchange, the parsing and the cost are what
/// is checked. The first six examples keep it to seconds.
#[test]
#[ignore = "needs llama-server: VERIFINE_LLAMA_ROOT from bench/llama-server/setup.sh (CI runs it)"]
fn healthbench_examples_score_through_llama_server() {
    let root = setup().unwrap_or_else(|why| panic!("HealthBench-through-llama-server test: {why}"));
    let port = free_port();
    let _server = Server::start(&root, port);
    let judges = std::sync::Arc::new(judges(port, ", concurrency = 1", None));
    let runtime = verifine_runtime::Runtime::with_cache(Default::default(), None)
        .unwrap()
        .with_judges(judges.clone());
    let plugins = verifine_runtime::scoring::RewardPlugins::load(
        &runtime,
        "healthbench",
        &serde_json::json!({"answer": "yes-no"}),
        None,
        &serde_json::json!({}),
    )
    .unwrap();
    let (samples, items) = crate::common::healthbench_samples(6, "See a doctor if it gets worse.");
    let scored =
        verifine_runtime::scorer_pool::score_all(&plugins, &samples, 2, 1, &|_| {}).unwrap();
    for s in &scored {
        assert!(s.error.is_none(), "{:?}", s.error);
        for v in &s.judgment.as_ref().unwrap().verdicts {
            assert!(v.met.is_some(), "{v:?}");
            // A confidence, when the server's log-probabilities cover
            // both choices (the random model's rarely do), is the chosen
            // one's renormalized probability.
            if let Some(confidence) = v.confidence {
                assert!((0.5..=1.0).contains(&confidence), "{v:?}");
            }
        }
    }
    let ledger = judges.ledgers()["judge"];
    assert_eq!(ledger.calls, items as u64);
    assert!(ledger.usage.input > 0 && ledger.usage.output > 0);
    eprintln!(
        "{items} items: {} prompt tokens ({} served from llama-server's prompt cache), {:.1} s",
        ledger.usage.input, ledger.usage.cached_input, ledger.seconds
    );
}
