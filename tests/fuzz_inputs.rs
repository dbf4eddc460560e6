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
