//! The workers' pipeline writes what one thread writes, whatever the
//! chunk, batch and thread counts (chunks of one row keep the read window
//! full, so workers wait on it), and a failure anywhere stops the run with
//! its line.

use super::*;
use crate::scoring::RewardPlugins;
use crate::{Limits, Runtime};

fn pool() -> ScorerPool {
    let runtime = Runtime::new(Limits::default()).unwrap();
    let none = serde_json::json!({});
    ScorerPool::new(RewardPlugins::load(&runtime, "math-answer", &none, None, &none).unwrap())
}

fn rows(n: usize) -> String {
    (0..n)
        .map(|i| {
            let row = serde_json::json!({
                "id": format!("r{i}"), "prompt": "q",
                "response": format!("{i} apples\nA: {}", i % 5), "reference": "3",
            });
            format!("{row}\n")
        })
        .collect()
}

fn stream(pool: &ScorerPool, text: &str, settings: StreamSettings) -> Result<(Vec<u8>, usize)> {
    let mut out = Vec::new();
    let (totals, _) = score_stream(
        pool,
        std::io::Cursor::new(text.as_bytes()),
        Path::new("in.jsonl"),
        (&mut out, Path::new("out.jsonl")),
        settings,
        &|_| {},
    )?;
    Ok((out, totals.rows))
}

fn settings(threads: usize, batch_size: usize, chunk_rows: usize) -> StreamSettings {
    StreamSettings {
        batch_size,
        threads,
        ids_in_memory: 1 << 20,
        chunk_rows,
    }
}

#[test]
fn every_split_of_the_work_writes_what_one_thread_writes() {
    let pool = pool();
    let text = rows(700);
    let (expected, n) = stream(&pool, &text, settings(1, 64, DEFAULT_CHUNK_ROWS)).unwrap();
    assert_eq!(n, 700);
    assert_eq!(expected.iter().filter(|&&b| b == b'\n').count(), 700);
    for (threads, batch_size, chunk_rows) in
        [(2, 1, 1), (3, 2, 1), (4, 5, 3), (2, 64, 100), (3, 7, 50)]
    {
        let (out, n) = stream(&pool, &text, settings(threads, batch_size, chunk_rows)).unwrap();
        assert_eq!(n, 700);
        assert!(
            out == expected,
            "{threads} threads, batches of {batch_size}, chunks of {chunk_rows}"
        );
    }
}

#[test]
fn a_failure_in_any_chunk_stops_every_worker_with_its_line() {
    let pool = pool();
    let good = rows(300);
    let late_bad_row = format!("{good}{{\"id\": \"x\", \"prompt\": 3}}\n");
    let early_bad_row = format!("{}{{\"id\": 5}}\n{good}", rows(1));
    let repeated_id = format!("{good}{}", rows(1));
    for (text, expected) in [
        (late_bad_row, "in.jsonl:301:"),
        (early_bad_row, "in.jsonl:2:"),
        (repeated_id, "in.jsonl:301: duplicate id"),
    ] {
        for (threads, chunk_rows) in [(1, 1), (2, 1), (3, 4), (2, DEFAULT_CHUNK_ROWS)] {
            let error = stream(&pool, &text, settings(threads, 2, chunk_rows)).unwrap_err();
            assert!(
                error.to_string().contains(expected),
                "{threads} threads: {error}"
            );
        }
    }
}
