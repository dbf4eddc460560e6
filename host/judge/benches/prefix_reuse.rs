//! Prefix reuse and batched decoding on the local backend.
//!
//! Prefix reuse: one HealthBench sample (its real
//! conversation from `../shared/data`, a response) judged on three rubric
//! items, one query each, all sharing the introduction + conversation
//! prefix up to `# Rubric items`. With reuse the prefix is encoded once;
//! without (the anchor, same run, same model) every query encodes all of
//! it. Prints tokens encoded and milliseconds per sample, best of `ROUNDS`.
//!
//! Batched decoding: eight free-text answers of 24 tokens each, decoded
//! one request at a time (the anchor) and as one batch, best of `ROUNDS`.
//!
//!     cargo bench -p verifine-judge --features local --bench prefix_reuse

use std::time::Instant;
use verifine_judge::local::LocalBackend;
use verifine_judge::local::tiny::{TinySpec, write_tiny_llama};
use verifine_judge::{LocalConfig, PromptTemplate};
use verifine_runtime::judge_models::ModelRequest;

const ROUNDS: usize = 5;

fn sample_queries() -> Vec<ModelRequest> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/data/healthbench/examples.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("the shared HealthBench examples");
    let row: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let conversation: String = row["prompt"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}: {}\n",
                m["role"].as_str().unwrap(),
                m["content"].as_str().unwrap()
            )
        })
        .collect();
    let prefix = format!(
        "Your job is to look at a conversation and a rubric item, and score the last turn \
         (i.e., the last assistant response) on how well it follows the rubric item.\n\n\
         # Conversation\n{conversation}assistant: Start with a visit to your OB-GYN or \
         primary care provider, then book weekly talk therapy.\n\n# Rubric items\n"
    );
    row["rubrics"].as_array().unwrap()[..3]
        .iter()
        .map(|item| ModelRequest {
            choices: vec!["YES".into(), "NO".into()],
            ..ModelRequest::new(
                format!(
                    "{prefix}- {}\n\nIs the rubric item met? Answer YES or NO.",
                    item["criterion"].as_str().unwrap()
                ),
                1,
            )
        })
        .collect()
}

/// (tokens encoded, best milliseconds) for one sample's three queries.
fn measure(local_keep: usize, model: &std::path::Path, queries: &[ModelRequest]) -> (u64, f64) {
    let backend = LocalBackend::new(&LocalConfig {
        path: model.to_path_buf(),
        template: PromptTemplate::Chatml,
        cuda: false,
        prefix_cache_prompts: local_keep,
        weight_products: Default::default(),
    })
    .unwrap();
    let asked: Vec<&ModelRequest> = queries.iter().collect();
    let mut best = f64::INFINITY;
    let mut encoded = 0;
    for round in 0..ROUNDS {
        // A new sample each round: nothing kept from the last one applies
        // (a distinct first byte changes every prompt's first tokens).
        let fresh: Vec<ModelRequest> = asked
            .iter()
            .map(|q| ModelRequest {
                prompt: format!("[{round}] {}", q.prompt),
                ..(*q).clone()
            })
            .collect();
        let fresh: Vec<&ModelRequest> = fresh.iter().collect();
        let started = Instant::now();
        let exchanges = backend.exchange_all(&fresh);
        best = best.min(started.elapsed().as_secs_f64() * 1e3);
        encoded = exchanges
            .iter()
            .map(|e| {
                let usage = e.answer.as_ref().unwrap().usage;
                usage.input - usage.cached_input
            })
            .sum();
    }
    (encoded, best)
}

fn main() {
    let dir = verifine_test_support::scratch_dir("prefix-bench");
    let model = dir.join("judge.gguf");
    let spec = TinySpec {
        width: 256,
        layers: 4,
        heads: 8,
        kv_heads: 4,
        ff: 768,
        context: 4096,
        q8: true,
        seed: 1,
    };
    write_tiny_llama(&model, spec).unwrap();
    let queries = sample_queries();
    let (anchor_tokens, anchor_ms) = measure(0, &model, &queries);
    let (tokens, ms) = measure(8, &model, &queries);
    println!(
        "model: random llama GGUF, width 256, 4 layers, 8 heads (4 KV), Q8_0, byte-level vocabulary"
    );
    println!("no reuse (anchor): {anchor_tokens} tokens encoded, {anchor_ms:.1} ms per sample");
    println!("prefix reuse:      {tokens} tokens encoded, {ms:.1} ms per sample");
    println!(
        "ratio: {:.2}x fewer tokens, {:.2}x faster",
        anchor_tokens as f64 / tokens as f64,
        anchor_ms / ms
    );
    let (alone, together) = decode_both_ways(&model);
    println!("decode 8 answers x 24 tokens, one request at a time (anchor): {alone:.1} ms");
    println!(
        "decode 8 answers x 24 tokens, as one batch:                   {together:.1} ms ({:.2}x)",
        alone / together
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Best milliseconds to answer eight free-text requests one by one and
/// as one batch (no prefix reuse, so only decoding differs).
fn decode_both_ways(model: &std::path::Path) -> (f64, f64) {
    let backend = LocalBackend::new(&LocalConfig {
        path: model.to_path_buf(),
        template: PromptTemplate::Chatml,
        cuda: false,
        prefix_cache_prompts: 0,
        weight_products: Default::default(),
    })
    .unwrap();
    let requests: Vec<ModelRequest> = (0..8)
        .map(|i| ModelRequest::new(format!("Explain point {i} of the rubric."), 24))
        .collect();
    let asked: Vec<&ModelRequest> = requests.iter().collect();
    let best = |f: &dyn Fn()| {
        (0..ROUNDS)
            .map(|_| {
                let started = Instant::now();
                f();
                started.elapsed().as_secs_f64() * 1e3
            })
            .fold(f64::INFINITY, f64::min)
    };
    let alone = best(&|| {
        for r in &asked {
            backend.exchange_all(&[*r]);
        }
    });
    let together = best(&|| {
        backend.exchange_all(&asked);
    });
    (alone, together)
}
