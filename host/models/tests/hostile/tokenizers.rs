//! Tokenizers are downloaded with a model and are hostile input: each test
//! builds a small tokenizer that would cost gigabytes or grow text without
//! end (or, with many control tokens, tokenize in quadratic time), shows it
//! refused or contained quickly with an error naming the file and field,
//! then tokenizes with a good tokenizer in the same process.

use crate::support::assert_memory_bounded;
use candle_core::quantized::gguf_file::{Content, Value as GgufValue, VersionedMagic};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};
use verifine_models::{ModelError, TextTokenizer};

/// Generous: every refusal here takes milliseconds.
const QUICK: Duration = Duration::from_secs(10);

fn tokenizer_json(model: Value) -> Value {
    json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": null, "decoder": null, "model": model,
    })
}

fn word_level(vocab: Value) -> Value {
    tokenizer_json(json!({"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}))
}

fn good() -> Value {
    word_level(json!({"[UNK]": 0, "hello": 1, "world": 2, "aaaa": 3}))
}

fn write(dir: &Path, name: &str, json: &Value) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, json.to_string()).unwrap();
    path
}

/// A good tokenizer still reads and tokenizes in the process that refused.
fn still_tokenizes(dir: &Path) {
    let path = write(dir, "good.json", &good());
    let tokenizer = TextTokenizer::from_tokenizer_json_for(&path, 4).unwrap();
    assert_eq!(tokenizer.encode("hello world").unwrap(), vec![1, 2]);
    assert_eq!(tokenizer.decode(&[1, 2], false).unwrap(), "hello world");
}

/// Reads `json` for a 100-row model, expecting it refused within
/// [`QUICK`] with an error naming the file and `field`.
fn refused(dir: &Path, json: &Value, field: &str, words: &str) -> ModelError {
    let path = write(dir, "tokenizer.json", json);
    let start = Instant::now();
    let error = match TextTokenizer::from_tokenizer_json_for(&path, 100) {
        Err(error) => error,
        Ok(_) => panic!("{json} was read"),
    };
    assert!(start.elapsed() < QUICK, "{:?}", start.elapsed());
    let text = error.to_string();
    assert_memory_bounded();
    let origin = format!("{}: {field}", path.display());
    assert!(
        text.starts_with(&origin),
        "{text} does not start with {origin}"
    );
    assert!(text.contains(words), "{text} lacks {words}");
    still_tokenizes(dir);
    error
}

#[test]
fn the_largest_id_not_the_count_is_checked_before_parsing() {
    let dir = verifine_test_support::scratch_dir("models-hostile-ids");
    // Two tokens, one of them at id 4e9: about 1 KB of JSON.
    let huge = word_level(json!({"[UNK]": 0, "x": 4_000_000_000u64}));
    assert!(huge.to_string().len() < 1024);
    let error = refused(
        &dir,
        &huge,
        "model.vocab",
        "token id 4000000000 is past the 100 rows",
    );
    assert!(matches!(error, ModelError::Format { .. }), "{error:?}");
    // Read on its own, it is refused against MAX_TOKEN_ID.
    let path = write(&dir, "alone.json", &huge);
    let Err(error) = TextTokenizer::from_tokenizer_json(&path) else {
        panic!("read");
    };
    let error = error.to_string();
    assert!(error.contains("MAX_TOKEN_ID"), "{error}");

    let mut added = good();
    added["added_tokens"] = json!([{"id": 3_999_999_999u64, "content": "<x>", "single_word": false,
        "lstrip": false, "rstrip": false, "normalized": false, "special": true}]);
    refused(&dir, &added, "added_tokens", "token id 3999999999");

    let mut processed = good();
    processed["post_processor"] = json!({"type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [4_000_000_000u64], "tokens": ["<s>"]}}});
    refused(&dir, &processed, "post_processor", "token id 4000000000");

    let mut padded = good();
    padded["padding"] = json!({"strategy": "BatchLongest", "direction": "Right",
        "pad_to_multiple_of": null, "pad_id": 500, "pad_type_id": 0, "pad_token": "[PAD]"});
    refused(&dir, &padded, "padding.pad_id", "token id 500");
}

fn chain(list: &str, step: Value, n: usize) -> Value {
    json!({"type": "Sequence", list: vec![step; n]})
}

#[test]
fn text_steps_that_grow_text_geometrically_are_refused() {
    let dir = verifine_test_support::scratch_dir("models-hostile-growth");
    let doubling = json!({"type": "Replace", "pattern": {"String": "a"}, "content": "aa"});
    let mut replaced = good();
    replaced["normalizer"] = chain("normalizers", doubling.clone(), 40);
    refused(&dir, &replaced, "normalizer", "MAX_TEXT_GROWTH");

    let mut regex = good();
    let anywhere = json!({"type": "Replace", "pattern": {"Regex": "a*"}, "content": "b"});
    regex["normalizer"] = chain("normalizers", anywhere, 12);
    refused(&dir, &regex, "normalizer", "MAX_TEXT_GROWTH");

    let mut prepended = good();
    let prepend = json!({"type": "Prepend", "prepend": "▁▁"});
    prepended["normalizer"] = chain("normalizers", prepend, 8);
    refused(&dir, &prepended, "normalizer", "MAX_TEXT_GROWTH");

    let mut byte_level = good();
    let step = json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false});
    byte_level["pre_tokenizer"] = chain("pretokenizers", step, 20);
    refused(&dir, &byte_level, "pre_tokenizer", "MAX_TEXT_GROWTH");

    let mut decoded = good();
    decoded["decoder"] = chain("decoders", doubling.clone(), 40);
    refused(&dir, &decoded, "decoder", "MAX_TEXT_GROWTH");

    // Each within bounds, together past them.
    let mut both = good();
    both["normalizer"] = chain("normalizers", doubling.clone(), 6);
    both["pre_tokenizer"] = chain(
        "pretokenizers",
        json!({"type": "ByteLevel",
        "add_prefix_space": false, "trim_offsets": true, "use_regex": false}),
        6,
    );
    refused(&dir, &both, "normalizer", "with the pre_tokenizer");

    // The tokenizer's own padding and truncation, applied inside encode.
    let mut padded = good();
    padded["padding"] = json!({"strategy": {"Fixed": 4_000_000_000u64}, "direction": "Right",
        "pad_to_multiple_of": null, "pad_id": 0, "pad_type_id": 0, "pad_token": "[UNK]"});
    refused(&dir, &padded, "padding", "MAX_PADDED_LENGTH");
    let mut windows = good();
    windows["truncation"] = json!({"direction": "Right", "max_length": 100_000,
        "strategy": "LongestFirst", "stride": 99_999});
    refused(&dir, &windows, "truncation", "MAX_TEXT_GROWTH");

    // A charsmap whose header claims a 4 GB trie.
    let mut precompiled = good();
    precompiled["normalizer"] =
        json!({"type": "Precompiled", "precompiled_charsmap": "/////wAAAAA="});
    refused(
        &dir,
        &precompiled,
        "normalizer",
        "trie has 4294967295 bytes",
    );

    // Many added tokens that the normalizer grows as they are loaded.
    let mut added = good();
    added["normalizer"] = chain("normalizers", doubling.clone(), 8);
    added["added_tokens"] = (0..64)
        .map(|i| json!({"id": 4 + i, "content": format!("<{}>", "a".repeat(100_000)), "single_word": false,
            "lstrip": false, "rstrip": false, "normalized": true, "special": false}))
        .collect();
    refused(&dir, &added, "added_tokens", "MAX_NORMALIZED_BYTES");
}

#[test]
fn growth_within_bounds_is_checked_against_each_text() {
    let dir = verifine_test_support::scratch_dir("models-hostile-text");
    let doubling = json!({"type": "Replace", "pattern": {"String": "a"}, "content": "aa"});
    let mut json = good();
    json["normalizer"] = chain("normalizers", doubling.clone(), 8);
    json["decoder"] = chain("decoders", doubling, 8);
    let path = write(&dir, "tokenizer.json", &json);
    let tokenizer = TextTokenizer::from_tokenizer_json_for(&path, 100).unwrap();
    // 256-fold: a short text is tokenized, a 1 MB one refused unread.
    assert_eq!(tokenizer.encode("hello a").unwrap().len(), 2);
    let start = Instant::now();
    let error = tokenizer.encode(&"a".repeat(1 << 20)).unwrap_err();
    assert!(start.elapsed() < QUICK);
    assert!(matches!(error, ModelError::Limit { .. }), "{error:?}");
    let text = error.to_string();
    assert!(
        text.starts_with(&format!("{}: normalizer: ", path.display())),
        "{text}"
    );
    assert!(text.contains("MAX_NORMALIZED_BYTES"), "{text}");
    // Decoding a long answer of tokens the decoders grow, the same.
    let error = tokenizer
        .decode(&vec![3; 100_000], false)
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with(&format!("{}: decoder: ", path.display())),
        "{error}"
    );
    assert!(error.contains("MAX_NORMALIZED_BYTES"), "{error}");
    still_tokenizes(&dir);
}

/// A SentencePiece GGUF vocabulary: bytes, a few pieces, and `controls`
/// control tokens `<ctrl…>`.
fn spm_gguf(controls: usize) -> Content {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    tokens.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    let pieces = ["▁a", "▁ab", "ab", "b", "a", "▁", "c", "bc", "<c", "ctrl"];
    tokens.extend(pieces.iter().map(|p| p.to_string()));
    let mut types = vec![2, 3, 3];
    types.extend(vec![6; 256]);
    types.extend(vec![1; pieces.len()]);
    for i in 0..controls {
        tokens.push(format!("<ctrl{i}>"));
        types.push(3);
    }
    // Overlapping specials: the longest wins where several start.
    tokens.extend(["<c>".to_string(), "<ctrl1>x".to_string()]);
    types.extend([4, 3]);
    let scores: Vec<GgufValue> = (0..tokens.len())
        .map(|i| GgufValue::F32(-(i as f32)))
        .collect();
    Content {
        magic: VersionedMagic::GgufV3,
        metadata: HashMap::from([
            (
                "tokenizer.ggml.model".to_string(),
                GgufValue::String("llama".into()),
            ),
            (
                "tokenizer.ggml.tokens".to_string(),
                GgufValue::Array(tokens.into_iter().map(GgufValue::String).collect()),
            ),
            (
                "tokenizer.ggml.scores".to_string(),
                GgufValue::Array(scores),
            ),
            (
                "tokenizer.ggml.token_type".to_string(),
                GgufValue::Array(types.into_iter().map(GgufValue::I32).collect()),
            ),
        ]),
        tensor_infos: HashMap::new(),
        tensor_data_offset: 0,
    }
}

/// How specials were found before: rescanning the text for every special.
fn reference_encode(content: &Content, text: &str) -> Vec<u32> {
    let spm = verifine_models::spm::SpmTokenizer::from_gguf(content).unwrap();
    let GgufValue::Array(tokens) = &content.metadata["tokenizer.ggml.tokens"] else {
        panic!()
    };
    let GgufValue::Array(types) = &content.metadata["tokenizer.ggml.token_type"] else {
        panic!()
    };
    let mut specials: Vec<(String, u32)> = tokens
        .iter()
        .zip(types)
        .enumerate()
        .filter(|(_, (_, t))| matches!(t.to_i32().unwrap(), 3 | 4))
        .map(|(id, (token, _))| (token.to_string().unwrap().clone(), id as u32))
        .collect();
    specials.sort_by_key(|(text, _)| std::cmp::Reverse(text.len()));
    let (mut ids, mut rest, mut first) = (Vec::new(), text, true);
    while !rest.is_empty() {
        let next = specials
            .iter()
            .filter_map(|(s, id)| rest.find(s.as_str()).map(|at| (at, s, *id)))
            .min_by_key(|(at, s, _)| (*at, std::cmp::Reverse(s.len())));
        let plain = next.map_or(rest, |(at, _, _)| &rest[..at]);
        if !plain.is_empty() {
            ids.extend(if first {
                spm.encode(plain, false)
            } else {
                spm.encode_continuation(plain)
            });
        }
        first = false;
        match next {
            Some((at, s, id)) => {
                ids.push(id);
                rest = &rest[at + s.len()..];
            }
            None => break,
        }
    }
    ids
}

#[test]
fn many_control_tokens_are_matched_in_one_pass() {
    let path = Path::new("model.gguf");
    // Same ids as before on text full of overlapping specials.
    let small = spm_gguf(20);
    let tokenizer = TextTokenizer::from_gguf(&small, path).unwrap();
    for text in [
        "",
        "<s>",
        "abc <s>ab</s> bc",
        "<ctrl1>x<ctrl1><ctrl12><c><ctrl1>xy é <ctrl19></s>",
        "a<c<c>><ctrl1>x</s><s>c",
        "  <ctrl3> ab ",
    ] {
        assert_eq!(
            tokenizer.encode(text).unwrap(),
            reference_encode(&small, text),
            "{text:?}"
        );
    }
    let ids = tokenizer.encode("ab<ctrl1>c").unwrap();
    let kept = tokenizer.decode(&ids, true).unwrap();
    assert_eq!(kept, " abc");

    // 50 000 control tokens: 2 000 characters took 12.5 s rescanning.
    let large = spm_gguf(50_000);
    let tokenizer = TextTokenizer::from_gguf(&large, path).unwrap();
    let text = "ab <ctrl49999> c<ctrl7>b <s> ".repeat(70);
    assert!(text.len() >= 2000);
    let start = Instant::now();
    let ids = tokenizer.encode(&text).unwrap();
    let decoded = tokenizer.decode(&ids, true).unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(
        ids.iter()
            .filter(|&&id| id == 3 + 256 + 10 + 49_999)
            .count(),
        70
    );
    assert!(!decoded.contains("ctrl"), "{decoded}");
    let dir = verifine_test_support::scratch_dir("models-hostile-specials");
    still_tokenizes(&dir);
}

#[test]
fn merges_the_tokenizers_crate_would_panic_on_are_refused() {
    let dir = verifine_test_support::scratch_dir("models-hostile-merges");
    let bpe = |merges: Value, prefix: Value| {
        tokenizer_json(json!({"type": "BPE", "dropout": null, "unk_token": null,
            "continuing_subword_prefix": prefix, "end_of_word_suffix": null, "fuse_unk": false,
            "byte_fallback": false, "ignore_merges": false,
            "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": merges}))
    };
    // Together longer than any token: `tokenizers` indexes past its buffer.
    let long = bpe(json!([["ab", "ab"]]), Value::Null);
    refused(&dir, &long, "model.merges", "merge 0 (\"ab\" \"ab\")");
    // A right part shorter than the prefix it drops: an overflow.
    let short = bpe(json!(["a b"]), json!("##"));
    refused(&dir, &short, "model.merges", "cannot make a token");
    // The same vocabulary with a sound merge reads and merges.
    let path = write(&dir, "bpe.json", &bpe(json!([["a", "b"]]), Value::Null));
    let tokenizer = TextTokenizer::from_tokenizer_json_for(&path, 3).unwrap();
    assert_eq!(tokenizer.encode("ab").unwrap(), vec![2]);
}
