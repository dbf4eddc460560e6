//! The local judge against llama.cpp's `llama-server` on the same GGUF
//! file and machine: a HealthBench-style batch (three real samples, each
//! rubric item one YES/NO query, a sample's queries sharing their prefix up
//! to `# Rubric items`), answered
//! - in this process, with prefix reuse and without, and with prefix
//!   reuse but one query per call (so no two prompts share a pass: what
//!   the shared-prefix passes add), and with float weight products in
//!   place of integer ones (what the integer products add);
//! - by llama-server over HTTP at concurrency 1 and 4 (its prompt cache
//!   on, as by default; it is the anchor, measured in the same run).
//!
//! Prints queries/s and prompt tokens/s for each and the ratio of the
//! local judge to llama-server, best of `ROUNDS`. Run it with
//! `bench/llama-server/vs_local.sh MODEL.gguf`, which starts the server and
//! sets `VERIFINE_LLAMA_URL` and `VERIFINE_JUDGE_GGUF`.

use std::time::Instant;
use verifine_judge::{Judges, JudgesConfig};
use verifine_runtime::judge_models::{JudgeModels, ModelRequest};

const ROUNDS: usize = 2;
const SAMPLES: usize = 3;

fn queries() -> Vec<ModelRequest> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/data/healthbench/examples.jsonl"
    );
    let text = std::fs::read_to_string(path).expect("the shared HealthBench examples");
    let mut queries = Vec::new();
    for line in text.lines().take(SAMPLES) {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
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
             (the assistant's response) on how well it follows the rubric item.\n\n\
             # Conversation\n{conversation}assistant: Rest, drink water, and see a doctor if it \
             gets worse.\n\n# Rubric items\n"
        );
        for item in row["rubrics"].as_array().unwrap() {
            queries.push(ModelRequest {
                temperature: Some(0.0),
                choices: vec!["YES".into(), "NO".into()],
                ..ModelRequest::new(
                    format!(
                        "{prefix}1. {}\n\n# Instructions\nAnswer YES if the response meets the \
                         rubric item, NO if it does not.",
                        item["criterion"].as_str().unwrap()
                    ),
                    8,
                )
            });
        }
    }
    queries
}

/// Best queries/s and prompt tokens/s of `ROUNDS` runs of `queries`,
/// asked as one batch or (`one_by_one`) a query per call.
fn measure(name: &str, backend: &str, queries: &[ModelRequest], one_by_one: bool) -> (f64, f64) {
    let mut best = (0.0f64, 0.0f64);
    for _ in 0..ROUNDS {
        let config = format!("[judges.judge]\nbackend = {backend}\n");
        let judges = Judges::new(&JudgesConfig::parse(&config, "bench.toml").unwrap()).unwrap();
        let started = Instant::now();
        let answers = match one_by_one {
            true => queries
                .iter()
                .flat_map(|q| judges.ask("judge", std::slice::from_ref(q)))
                .collect(),
            false => judges.ask("judge", queries),
        };
        let seconds = started.elapsed().as_secs_f64();
        let failed = answers.iter().filter(|a| a.is_err()).count();
        assert_eq!(
            failed,
            0,
            "{name}: {:?}",
            answers.iter().find(|a| a.is_err())
        );
        let tokens = judges.ledgers()["judge"].usage.input as f64;
        best.0 = best.0.max(queries.len() as f64 / seconds);
        best.1 = best.1.max(tokens / seconds);
    }
    println!(
        "{name:<34} {:>7.2} queries/s {:>9.0} prompt tokens/s",
        best.0, best.1
    );
    best
}

fn main() {
    let (Ok(url), Ok(model)) = (
        std::env::var("VERIFINE_LLAMA_URL"),
        std::env::var("VERIFINE_JUDGE_GGUF"),
    ) else {
        println!(
            "set VERIFINE_LLAMA_URL and VERIFINE_JUDGE_GGUF (bench/llama-server/vs_local.sh does)"
        );
        return;
    };
    let queries = queries();
    println!(
        "{} YES/NO queries over {SAMPLES} HealthBench samples, {model}",
        queries.len()
    );
    let local_with = |keep: usize, products: &str| {
        format!(
            "{{ kind = \"local-gguf\", path = {model:?}, prefix_cache_prompts = {keep}, \
             weight_products = {products:?} }}"
        )
    };
    let local = |keep: usize| local_with(keep, "int8");
    let http = |c: usize| {
        format!(
            "{{ kind = \"openai-http\", base_url = {url:?}, model = \"m\", concurrency = {c} }}"
        )
    };
    let anchor1 = measure("llama-server, concurrency 1", &http(1), &queries, false);
    let anchor4 = measure("llama-server, concurrency 4", &http(4), &queries, false);
    let reuse = measure("local, prefix reuse", &local(8), &queries, false);
    let alone = measure(
        "local, prefix reuse, one per call",
        &local(8),
        &queries,
        true,
    );
    let plain = measure("local, no prefix reuse", &local(0), &queries, false);
    let float = measure(
        "local, prefix reuse, float products",
        &local_with(8, "float"),
        &queries,
        false,
    );
    println!(
        "ratio local (reuse) / llama-server: {:.2}x at concurrency 1, {:.2}x at 4; prefix reuse gains {:.2}x; shared-prefix passes {:.2}x; \
         integer products {:.2}x float",
        reuse.0 / anchor1.0,
        reuse.0 / anchor4.0,
        reuse.0 / plain.0,
        reuse.0 / alone.0,
        reuse.0 / float.0
    );
}
