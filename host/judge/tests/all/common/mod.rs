//! Helpers shared by the judge's integration tests.
#![allow(
    dead_code,
    reason = "each test binary that includes these helpers uses only some of them"
)]

pub mod llama;

#[cfg(feature = "local")]
use std::path::Path;
use std::path::PathBuf;

/// Writes `dir/tokenizer.json`: whitespace-separated words of the tiny
/// judge's vocabulary (`verifine_judge::local::tiny::vocabulary`), one id
/// each, for checkpoint directories built in the tests.
#[cfg(feature = "local")]
pub fn write_word_level_tokenizer(dir: &Path) {
    let vocab: serde_json::Map<String, serde_json::Value> =
        verifine_judge::local::tiny::vocabulary()
            .0
            .into_iter()
            .enumerate()
            .map(|(id, piece)| (piece, serde_json::json!(id)))
            .collect();
    let tokenizer = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null,
        "decoder": null, "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"}
    });
    std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).unwrap();
}

/// The shared data directory (`VERIFINE_SHARED_DATA`, else `../shared/data`).
pub fn shared_data() -> PathBuf {
    std::env::var_os("VERIFINE_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| llama::repo().join("../shared/data"))
}

/// The first `rows` HealthBench examples as samples graded on their own
/// rubric items (conversation as "role: content" lines, `response` as the
/// answer), with the number of items among them.
pub fn healthbench_samples(rows: usize, response: &str) -> (Vec<verifine_runtime::Sample>, usize) {
    let text = std::fs::read_to_string(shared_data().join("healthbench/examples.jsonl")).unwrap();
    let mut items = 0;
    let samples = text
        .lines()
        .take(rows)
        .map(|line| {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            let conversation: Vec<String> = row["prompt"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| {
                    format!(
                        "{}: {}",
                        t["role"].as_str().unwrap(),
                        t["content"].as_str().unwrap()
                    )
                })
                .collect();
            items += row["rubrics"].as_array().unwrap().len();
            let mut sample = verifine_runtime::Sample::new(
                row["prompt_id"].as_str().unwrap(),
                conversation.join("\n"),
                response,
            );
            sample.context = serde_json::json!({"rubrics": row["rubrics"]}).to_string();
            sample
        })
        .collect();
    (samples, items)
}
