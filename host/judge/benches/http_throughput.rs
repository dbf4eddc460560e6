//! Judge throughput through the HTTP backend: queries per second against an
//! OpenAI-compatible server at `VERIFINE_JUDGE_URL` (llama-server with the
//! tiny model: `bench/llama-server/throughput.sh`), with requests sent one
//! at a time (the anchor) and `concurrency` at once, in the same run.
//!
//!     VERIFINE_JUDGE_URL=http://127.0.0.1:8080/v1 cargo bench -p verifine-judge --bench http_throughput

use std::time::Instant;
use verifine_judge::{Judges, JudgesConfig};
use verifine_runtime::judge_models::{JudgeModels, ModelRequest};

const QUERIES: usize = 64;
const ROUNDS: usize = 3;

fn judges(url: &str, concurrency: usize) -> Judges {
    let text = format!(
        "[judges.judge]\nbackend = {{ kind = \"openai-http\", base_url = \"{url}\", model = \"tiny\", concurrency = {concurrency} }}\n"
    );
    Judges::new(&JudgesConfig::parse(&text, "bench").unwrap()).unwrap()
}

/// Queries per second of the best of `ROUNDS` batches.
fn throughput(judges: &Judges, round_offset: usize) -> f64 {
    (0..ROUNDS)
        .map(|round| {
            let requests: Vec<ModelRequest> = (0..QUERIES)
                .map(|i| ModelRequest {
                    temperature: Some(0.0),
                    ..ModelRequest::new(
                        format!(
                            "Criterion {i}/{}: does the response cite a source? Answer YES or NO.",
                            round + round_offset
                        ),
                        8,
                    )
                })
                .collect();
            let started = Instant::now();
            let answers = judges.ask("bench", &requests);
            let seconds = started.elapsed().as_secs_f64();
            assert!(
                answers.iter().all(Result::is_ok),
                "{:?}",
                answers.iter().find(|a| a.is_err())
            );
            QUERIES as f64 / seconds
        })
        .fold(0.0, f64::max)
}

fn main() {
    let Ok(url) = std::env::var("VERIFINE_JUDGE_URL") else {
        eprintln!(
            "http_throughput: VERIFINE_JUDGE_URL is not set; see bench/llama-server/throughput.sh"
        );
        return;
    };
    let sequential = throughput(&judges(&url, 1), 0);
    for concurrency in [2, 4] {
        let parallel = throughput(&judges(&url, concurrency), 100 * concurrency);
        println!(
            "http_throughput: {QUERIES} queries, 8 answer tokens: sequential {sequential:.1} q/s, \
             concurrency {concurrency} {parallel:.1} q/s, ratio {:.2}",
            parallel / sequential
        );
    }
}
