//! A bounded, seeded fuzzing pass over the local judge's loader: a good
//! tiny GGUF judge, mutated (counts, shapes, offsets, lengths overwritten
//! with the edges of every width, cut, spliced), loaded and, when it loads,
//! asked one question. Every file may be refused; none may panic, abort,
//! hang or run the process out of memory: the pass runs in a child whose
//! address space is capped and which is killed at a deadline
//! (`verifine_test_support::in_capped_child`). `VERIFINE_FUZZ_SECONDS`
//! lengthens it, `VERIFINE_FUZZ_SEED` changes the stream.
#![cfg(feature = "local")]

use std::time::{Duration, Instant};
use verifine_base::SplitMix64;
use verifine_judge::local::LocalBackend;
use verifine_judge::local::tiny::{TinySpec, write_tiny_llama};
use verifine_judge::{LocalConfig, PromptTemplate};
use verifine_runtime::judge_models::ModelRequest;
use verifine_test_support::{Caps, in_capped_child, mutate_bytes};

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

#[test]
fn a_mutated_judge_model_is_refused_or_answers_never_crashes() {
    let budget = Duration::from_secs(env_number("VERIFINE_FUZZ_SECONDS", 15));
    let caps = Caps {
        memory_bytes: 3 << 30,
        deadline: budget + Duration::from_secs(180),
    };
    if !in_capped_child(
        "fuzz_models::a_mutated_judge_model_is_refused_or_answers_never_crashes",
        caps,
    ) {
        return;
    }
    let dir = verifine_test_support::scratch_dir("judge-fuzz");
    println!("inputs are written to {}", dir.display());
    let good = dir.join("good.gguf");
    let spec = TinySpec {
        width: 32,
        layers: 2,
        heads: 4,
        kv_heads: 2,
        ff: 64,
        context: 64,
        q8: true,
        seed: 7,
    };
    write_tiny_llama(&good, spec).unwrap();
    let seed = std::fs::read(&good).unwrap();
    let tried = dir.join("last.gguf");
    let config = |path: &std::path::Path| LocalConfig {
        path: path.to_path_buf(),
        template: PromptTemplate::Plain,
        cuda: false,
        prefix_cache_prompts: 0,
        weight_products: Default::default(),
    };
    let request = ModelRequest {
        choices: vec!["YES".into(), "NO".into()],
        ..ModelRequest::new("is it YES or NO", 4)
    };
    let mut rng = SplitMix64::new(env_number("VERIFINE_FUZZ_SEED", 38));
    let started = Instant::now();
    let (mut tried_count, mut loaded) = (0, 0);
    while started.elapsed() < budget {
        let input = mutate_bytes(&seed, &mut |n| rng.below(n));
        std::fs::write(&tried, &input).unwrap();
        let one = Instant::now();
        if let Ok(backend) = LocalBackend::new(&config(&tried)) {
            let _ = backend.exchange_all(&[&request]);
            loaded += 1;
        }
        assert!(
            one.elapsed() < Duration::from_secs(10),
            "one input took {:?} (kept in {})",
            one.elapsed(),
            tried.display()
        );
        tried_count += 1;
    }
    println!("judge gguf: {tried_count} inputs, {loaded} loaded");
    // The good model still loads and answers in the same process.
    let backend = LocalBackend::new(&config(&good)).unwrap();
    let answer = backend.exchange_all(&[&request]).remove(0).answer.unwrap();
    assert!(answer.text == "YES" || answer.text == "NO", "{answer:?}");
}
