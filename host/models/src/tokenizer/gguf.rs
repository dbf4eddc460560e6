//! A GGUF byte-level BPE vocabulary rebuilt as a `tokenizer.json`, with
//! the pre-tokenizer llama.cpp names in `tokenizer.ggml.pre`.

use crate::error::{ModelError, Result};
use candle_core::quantized::gguf_file::Content;
use serde_json::{Value, json};
use std::path::Path;

pub(super) fn string(content: &Content, key: &str) -> Option<String> {
    content
        .metadata
        .get(key)
        .and_then(|v| v.to_string().ok())
        .cloned()
}

pub(super) fn strings(content: &Content, key: &str, path: &Path) -> Result<Vec<String>> {
    let list = content
        .metadata
        .get(key)
        .ok_or_else(|| ModelError::format(path, format!("{key} is missing")))?
        .to_vec()
        .map_err(|e| ModelError::format(path, format!("{key}: {e}")))?;
    list.iter()
        .map(|v| {
            v.to_string()
                .cloned()
                .map_err(|e| ModelError::format(path, format!("{key}: {e}")))
        })
        .collect()
}

/// Llama 3's and Qwen2's splitting (Qwen2 takes digits one at a time).
const LLAMA3_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const QWEN2_PATTERN: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The pre-tokenizer llama.cpp applies for `tokenizer.ggml.pre`, as the
/// `tokenizer.json` of the original model writes it.
fn pre_tokenizer(pre: &str, path: &Path) -> Result<Value> {
    let byte_level = |use_regex: bool| json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": use_regex});
    let split = |pattern: &str| json!({"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": false});
    Ok(match pre {
        "default" | "gpt-2" | "gpt2" | "olmo" | "mpt" => byte_level(true),
        // Digits one by one, then GPT-2's splitting (llama.cpp's SMOLLM,
        // STARCODER, REFACT … share it).
        "smollm" | "starcoder" | "refact" | "codeshell" => json!({
            "type": "Sequence",
            "pretokenizers": [{"type": "Digits", "individual_digits": true}, byte_level(true)],
        }),
        "llama-bpe" | "llama3" | "smaug-bpe" => json!({
            "type": "Sequence",
            "pretokenizers": [split(LLAMA3_PATTERN), byte_level(false)],
        }),
        "qwen2" => json!({
            "type": "Sequence",
            "pretokenizers": [split(QWEN2_PATTERN), byte_level(false)],
        }),
        other => {
            return Err(ModelError::unsupported(
                path,
                "tokenizer.ggml.pre",
                format!("{other:?}"),
                "supported: default/gpt-2, smollm, starcoder, llama-bpe, qwen2",
            ));
        }
    })
}

/// The `tokenizer.json` of a GGUF's byte-level BPE vocabulary.
pub(super) fn gpt2_tokenizer_json(
    tokens: &[String],
    merges: &[String],
    specials: &[(String, u32, bool)],
    pre: &str,
    path: &Path,
) -> Result<Value> {
    let vocab: serde_json::Map<String, Value> = tokens
        .iter()
        .enumerate()
        .map(|(id, t)| (t.clone(), json!(id)))
        .collect();
    let added: Vec<Value> = specials
        .iter()
        .map(|(content, id, special)| {
            json!({"id": id, "content": content, "single_word": false, "lstrip": false,
                   "rstrip": false, "normalized": !special, "special": special})
        })
        .collect();
    Ok(json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": pre_tokenizer(pre, path)?,
        "post_processor": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": {
            "type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
            "vocab": vocab, "merges": merges,
        },
    }))
}
