//! A short, seeded mutation-fuzzing pass over what the host parses from
//! outside: score input rows, run configs and plugin metadata. Any input may
//! be refused; none may panic the host. (Deterministic, so CI runs the same
//! pass every time; `VERIFINE_FUZZ_ROUNDS=100000` runs a longer one.)

use verifine::run::RunConfig;
use verifine_base::SplitMix64;
use verifine_runtime::metadata::read_metadata;
use verifine_runtime::rows::{read_labelled, read_samples};
use verifine_tests::{fixture, scratch_dir};

/// Inputs per format: 1 500, or `$VERIFINE_FUZZ_ROUNDS`.
fn rounds() -> usize {
    std::env::var("VERIFINE_FUZZ_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1500)
}

/// Characters that matter to the formats under test.
const SPICE: &[&str] = &[
    "\"", "{", "}", "[", "]", ":", ",", "\\", "\n", "\r", "\0", "\u{1b}", "é", "\u{202e}", "=",
    "#", "'", "1e400", "-0", "NaN", "null", "true", "[[", "]]", "\"\"\"", "\u{feff}",
];

/// One random edit of `input`: a byte flip, a cut, a splice, a duplicated
/// piece or an inserted token.
fn mutate(input: &[u8], rng: &mut SplitMix64) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = if out.is_empty() {
            0
        } else {
            rng.below(out.len() + 1)
        };
        match rng.below(5) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 => out.truncate(at),
            2 => {
                let token = SPICE[rng.below(SPICE.len())].as_bytes();
                out.splice(at..at, token.iter().copied());
            }
            3 if !out.is_empty() => {
                let start = rng.below(out.len());
                let end = (start + 1 + rng.below(64)).min(out.len());
                let piece = out[start..end].to_vec();
                out.splice(at..at, piece);
            }
            _ => {
                let len = rng.below(16);
                let noise: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                out.splice(at..at, noise);
            }
        }
    }
    out
}

#[test]
fn mutated_rows_are_refused_or_read_never_a_panic() {
    let dir = scratch_dir("fuzz-rows");
    let seed = std::fs::read(fixture("math-answer.jsonl")).unwrap();
    let mut rng = SplitMix64::new(1);
    let path = dir.join("rows.jsonl");
    for _ in 0..rounds() {
        std::fs::write(&path, mutate(&seed, &mut rng)).unwrap();
        let _ = read_samples(&path);
        let _ = read_labelled(&path, 0.5);
    }
}

#[test]
fn mutated_run_configs_are_refused_or_read_never_a_panic() {
    let seed = verifine::run::DEFAULT_CONFIG.as_bytes();
    let mut rng = SplitMix64::new(2);
    for _ in 0..rounds() {
        let text = String::from_utf8_lossy(&mutate(seed, &mut rng)).into_owned();
        if let Ok(config) = RunConfig::from_toml(&text, "fuzz.toml") {
            // What was accepted also writes back out.
            config.to_toml().unwrap();
        }
    }
}

#[test]
fn mutated_components_are_refused_or_read_never_a_panic() {
    let (seed, _) = verifine_runtime::spec_bytes("weighted-sum").unwrap();
    let mut rng = SplitMix64::new(3);
    for _ in 0..rounds() {
        let _ = read_metadata(&mutate(&seed, &mut rng));
        // Small inputs reach the parser's early paths.
        let small: Vec<u8> = (0..rng.below(24)).map(|_| rng.next_u64() as u8).collect();
        let _ = read_metadata(&[b"\0asm".as_slice(), &small].concat());
    }
}

/// Valid bodies of the reward server's three doors, to mutate.
const SERVE_SEEDS: [(&str, &str); 3] = [
    (
        "/get_reward",
        r#"{"query": ["<|im_start|>user\nQ<|im_end|>\nA: 4<|im_end|>"], "prompts": ["<|im_start|>user\nQ<|im_end|>\n"], "labels": ["4"]}"#,
    ),
    (
        "/slime",
        r#"{"prompt": [{"role": "user", "content": "2+2?"}], "response": "A: 4", "label": "4"}"#,
    ),
    (
        "/v1/score",
        r#"{"rows": [{"id": 1, "prompt": "2+2?", "response": "A: 4", "reference": "4", "context": {"k": [1]}, "metadata": {"a": "b"}}]}"#,
    ),
];

#[test]
fn mutated_reward_server_bodies_are_refused_or_read_never_a_panic() {
    use verifine_serve::protocol::{parse_openrlhf, parse_score, parse_slime};
    let mut rng = SplitMix64::new(4);
    for _ in 0..rounds() {
        for (path, seed) in SERVE_SEEDS {
            let body = mutate(seed.as_bytes(), &mut rng);
            let _ = match path {
                "/get_reward" => parse_openrlhf(&body).map(|_| ()),
                "/slime" => parse_slime(&body).map(|_| ()),
                _ => parse_score(&body).map(|_| ()),
            };
        }
    }
}

#[test]
fn mutated_requests_to_a_running_server_get_an_answer_never_a_dead_server() {
    use verifine_serve::{RequestLimits, ServeOptions, Server, SwapOptions};
    let dir = scratch_dir("fuzz-serve");
    let options = ServeOptions {
        rubric: verifine_runtime::PluginSetting::new("math-answer"),
        aggregator: None,
        dir: dir.to_path_buf(),
        address: "127.0.0.1:0".parse().unwrap(),
        token: None,
        limits: RequestLimits::default(),
        workers: 1,
        io_threads: 1,
        batch_size: 64,
        on_failure: Default::default(),
        swap: SwapOptions {
            keep_revisions: 1,
            gate: Default::default(),
            canary: Vec::new(),
            watch_dir: None,
            interval: std::time::Duration::from_secs(1),
        },
    };
    let runtime = verifine_runtime::Runtime::new(Default::default()).unwrap();
    let server = Server::bind(options, runtime).unwrap().spawn();
    let client = verifine_tests::http::Client::new();
    let mut rng = SplitMix64::new(5);
    // Bounded: each request crosses the network stack.
    for _ in 0..rounds().min(300) {
        let (path, seed) = SERVE_SEEDS[rng.below(SERVE_SEEDS.len())];
        let body = mutate(seed.as_bytes(), &mut rng);
        let response = client
            .post(format!("{}{path}", server.url()))
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .unwrap();
        let status = response.status().as_u16();
        assert!(
            [200, 400].contains(&status),
            "{path} answered {status} to {:?}",
            String::from_utf8_lossy(&body)
        );
    }
    let health = client
        .get(format!("{}/health", server.url()))
        .send()
        .unwrap();
    assert_eq!(health.status().as_u16(), 200);
    server.stop().unwrap();
}
