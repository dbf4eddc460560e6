//! A bounded, seeded fuzzing pass over what a downloaded model brings: the
//! GGUF reader, the checkpoint directory (`config.json`, safetensors), the
//! tokenizer loader and chat template rendering. Every input may be
//! refused; none may panic, abort, hang or run the process out of memory.
//!
//! The pass runs in a child process whose address space is capped
//! ([`MEMORY_CAP`]) and which is killed at a deadline, so a runaway
//! allocation or an endless loop fails this test instead of the machine.
//! The input being tried is written to a file first, named in the output,
//! and kept when the pass fails. Deterministic (seeded), so CI runs the same
//! pass each time; `VERIFINE_FUZZ_SECONDS=600` runs a longer one per target,
//! `VERIFINE_FUZZ_SEED` another stream.

use super::{random_weights, spec, vocabulary, write_gguf};
use candle_core::Device;
use serde_json::Value as Json;
use std::path::Path;
use std::time::{Duration, Instant};
use verifine_base::SplitMix64;
use verifine_models::{ChatTemplate, Message, Pretrained, Role, TextTokenizer};
use verifine_test_support::{Caps, EXTREMES, in_capped_child};

/// The child's address space: a few times what the largest legitimate
/// input here needs, far below what the amplification bugs reached.
const MEMORY_CAP: u64 = 3 << 30;

/// One input may take this long; more is a hang.
const PER_INPUT: Duration = Duration::from_secs(10);

/// Seconds per target: 15, or `$VERIFINE_FUZZ_SECONDS`.
fn budget() -> Duration {
    let seconds = std::env::var("VERIFINE_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(15);
    Duration::from_secs(seconds)
}

fn seed() -> u64 {
    std::env::var("VERIFINE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(38)
}

fn extreme(rng: &mut SplitMix64) -> u64 {
    EXTREMES[rng.below(EXTREMES.len())]
}

fn mutate_bytes(seed: &[u8], rng: &mut SplitMix64) -> Vec<u8> {
    verifine_test_support::mutate_bytes(seed, &mut |n| rng.below(n))
}

/// Runs `attempt` on inputs made by `make` until the budget is spent.
fn pass(
    target: &str,
    dir: &Path,
    rng: &mut SplitMix64,
    mut make: impl FnMut(&mut SplitMix64) -> Vec<u8>,
    mut attempt: impl FnMut(&[u8]),
) -> usize {
    let started = Instant::now();
    let last = dir.join(format!("last-{target}.input"));
    let mut tried = 0;
    while started.elapsed() < budget() {
        let input = make(rng);
        std::fs::write(&last, &input).unwrap();
        let one = Instant::now();
        attempt(&input);
        assert!(
            one.elapsed() < PER_INPUT,
            "{target}: one input took {:?} (kept in {})",
            one.elapsed(),
            last.display()
        );
        tried += 1;
    }
    println!("{target}: {tried} inputs");
    tried
}

/// A JSON document with random leaves replaced by extreme values.
fn mutate_json(seed: &Json, rng: &mut SplitMix64) -> Vec<u8> {
    let mut value = seed.clone();
    for _ in 0..1 + rng.below(3) {
        replace_leaf(&mut value, rng);
    }
    let text = serde_json::to_vec(&value).unwrap();
    if rng.below(4) == 0 {
        mutate_bytes(&text, rng)
    } else {
        text
    }
}

fn replace_leaf(value: &mut Json, rng: &mut SplitMix64) {
    match value {
        Json::Object(map) if !map.is_empty() => {
            let key = map.keys().nth(rng.below(map.len())).unwrap().clone();
            replace_leaf(map.get_mut(&key).unwrap(), rng);
        }
        Json::Array(items) if !items.is_empty() => {
            let i = rng.below(items.len());
            if rng.below(8) == 0 {
                let copy = items[i].clone();
                items.extend(std::iter::repeat_n(copy, 1 + rng.below(50)));
            } else {
                replace_leaf(&mut items[i], rng);
            }
        }
        leaf => {
            *leaf = match rng.below(6) {
                0 => Json::from(extreme(rng)),
                1 => Json::from((extreme(rng) as i64).wrapping_neg()),
                2 => Json::from(1e300),
                3 => Json::Null,
                4 => Json::from("x".repeat(rng.below(100))),
                _ => Json::Array(vec![Json::from(extreme(rng))]),
            };
        }
    }
}

/// Jinja fragments that amplify: loops, repetition, widths, recursion.
fn template(rng: &mut SplitMix64) -> String {
    let n = |rng: &mut SplitMix64| -> String {
        match rng.below(4) {
            0 => format!("-{}", extreme(rng)),
            _ => extreme(rng).to_string(),
        }
    };
    let mut body = String::new();
    for _ in 0..1 + rng.below(3) {
        let piece = match rng.below(16) {
            0 => format!("{{% for i in range({}) %}}x{{% endfor %}}", n(rng)),
            1 => format!("{{{{ 'ab' * {} }}}}", n(rng)),
            2 => format!("{{{{ [1, 2] * {} }}}}", n(rng)),
            3 => format!("{{{{ 'x' | indent({}) }}}}", n(rng)),
            4 => format!("{{{{ 'x'.center({}) }}}}", n(rng)),
            5 => format!("{{{{ messages | tojson(indent={}) }}}}", n(rng)),
            6 => "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}".to_string(),
            7 => format!("{{{{ ('%{}d') | format(1) }}}}", n(rng)),
            8 => format!("{{{{ 'a'.ljust({}) }}}}", n(rng)),
            9 => format!("{{{{ range({}) | join(',') }}}}", n(rng)),
            10 => format!(
                "{{% set ns = namespace(s='ab') %}}{{% for i in range({}) %}}{{% set ns.s = ns.s ~ ns.s %}}{{% endfor %}}{{{{ ns.s }}}}",
                n(rng)
            ),
            11 => format!("{{{{ 'a'.replace('a', 'aaaaaaaa') * {} }}}}", n(rng)),
            12 => format!("{{{{ 'a' | truncate({}) }}}}", n(rng)),
            13 => format!("{{{{ 'a' | wordwrap({}) }}}}", n(rng)),
            14 => "{{ raise_exception('no') }}".to_string(),
            _ => "{% for m in messages %}{{ m['role'] }}: {{ m.content }}{% endfor %}".to_string(),
        };
        // Sometimes nested in a loop of its own.
        body = if rng.below(3) == 0 {
            format!(
                "{{% for j in range({}) %}}{body}{piece}{{% endfor %}}",
                n(rng)
            )
        } else {
            format!("{body}{piece}")
        };
    }
    body
}

#[test]
fn model_loaders_never_panic_hang_or_run_away_on_mutated_files() {
    let caps = Caps {
        memory_bytes: MEMORY_CAP,
        deadline: budget() * 4 + Duration::from_secs(300),
    };
    if !in_capped_child(
        "fuzz::model_loaders_never_panic_hang_or_run_away_on_mutated_files",
        caps,
    ) {
        return;
    }
    let dir = verifine_test_support::scratch_dir("models-fuzz");
    println!("inputs are written to {}", dir.display());
    let mut rng = SplitMix64::new(seed());

    // A good GGUF and the checkpoint directory written from it.
    let vocab = vocabulary().0.len();
    let spec = spec(vocab);
    let gguf_path = dir.join("good.gguf");
    write_gguf(&gguf_path, &spec, &random_weights(&spec));
    let good = Pretrained::load(&gguf_path, &Device::Cpu).unwrap();
    let checkpoint = dir.join("good-checkpoint");
    verifine_models::export::write_checkpoint(&checkpoint, &good, &good.weights).unwrap();
    let gguf = std::fs::read(&gguf_path).unwrap();

    let tried = dir.join("tried.gguf");
    pass(
        "gguf",
        &dir,
        &mut rng,
        |r| mutate_bytes(&gguf, r),
        |input| {
            std::fs::write(&tried, input).unwrap();
            if let Ok(model) = Pretrained::load(&tried, &Device::Cpu) {
                let _ = model.tokenizer.encode("hello <|im_end|> 12");
            }
        },
    );

    let config: Json =
        serde_json::from_slice(&std::fs::read(checkpoint.join("config.json")).unwrap()).unwrap();
    let tensors = std::fs::read(checkpoint.join("model.safetensors")).unwrap();
    let copy = dir.join("tried-checkpoint");
    copy_dir(&checkpoint, &copy);
    pass(
        "checkpoint",
        &dir,
        &mut rng,
        |r| {
            // A leading byte says which file the rest replaces.
            let (which, bytes) = if r.below(2) == 0 {
                (0u8, mutate_json(&config, r))
            } else {
                (1u8, mutate_bytes(&tensors, r))
            };
            std::iter::once(which).chain(bytes).collect()
        },
        |input| {
            copy_dir(&checkpoint, &copy);
            let file = ["config.json", "model.safetensors"][usize::from(input[0])];
            std::fs::write(copy.join(file), &input[1..]).unwrap();
            let _ = Pretrained::load(&copy, &Device::Cpu);
        },
    );

    let tokenizer: Json =
        serde_json::from_slice(&std::fs::read(checkpoint.join("tokenizer.json")).unwrap()).unwrap();
    let tried = dir.join("tokenizer.json");
    pass(
        "tokenizer",
        &dir,
        &mut rng,
        |r| mutate_json(&tokenizer, r),
        |input| {
            std::fs::write(&tried, input).unwrap();
            if let Ok(tokenizer) = TextTokenizer::from_tokenizer_json(&tried)
                && let Ok(ids) = tokenizer.encode(&"hello world 12 <|im_end|> ".repeat(20))
            {
                let _ = tokenizer.decode(&ids, false);
            }
        },
    );

    let messages = [
        Message::new(Role::System, "be brief"),
        Message::new(Role::User, "hi"),
    ];
    pass(
        "template",
        &dir,
        &mut rng,
        |r| template(r).into_bytes(),
        |input| {
            let source = String::from_utf8_lossy(input);
            if let Ok(template) = ChatTemplate::new(&source, "<s>", "</s>") {
                let _ = template.render(&messages, true);
            }
        },
    );

    // The good model still loads in the same process.
    Pretrained::load(&gguf_path, &Device::Cpu).unwrap();
    Pretrained::load(&checkpoint, &Device::Cpu).unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}
