//! What a `tokenizer.json` may cost, checked on its JSON before the
//! `tokenizers` crate sees it. A downloaded tokenizer is hostile input: a
//! 1 KB file whose largest token id is 4e9 makes `tokenizers` walk and
//! record four billion holes when it is written back (15.6 GB), and a chain
//! of `Replace` normalizers doubles text at every step. So the largest id
//! (not the count) is checked against the embedding table, and the most the
//! normalizers, pre-tokenizers and decoders can multiply a text's length by
//! is worked out from their settings, refused past a bound at load and
//! checked against each text's length when it is tokenized or decoded.

use crate::error::{ModelError, Result};
use serde_json::Value;
use std::path::Path;

/// The largest `tokenizer.json` read: the largest real ones (Gemma 3's
/// 262 k-token vocabulary) are about 35 MB, and its JSON tree takes about
/// ten times the file in memory.
pub const MAX_TOKENIZER_JSON_BYTES: u64 = 64 << 20;

/// The largest token id accepted when the embedding table's size is not
/// known (a tokenizer read on its own): four times the largest real
/// vocabulary (262 144), and an id this large costs `tokenizers` 16 MB at
/// worst when it writes the vocabulary back.
pub const MAX_TOKEN_ID: u64 = 1 << 20;

/// The most a tokenizer's normalizers and pre-tokenizers (or, apart, its
/// decoders) may multiply a text's length by, worked out from their
/// settings for the worst input. Real pipelines stay under about a hundred
/// (BERT's: decomposition × lowercasing × spaces around CJK); a chain of
/// doubling `Replace`s passes it at its eleventh link.
pub const MAX_TEXT_GROWTH: u64 = 1024;

/// The longest text a tokenizer may normalize or decode to: 16 MiB is
/// about four million tokens, past any context, and `tokenizers` keeps
/// about 17 bytes per byte of normalized text.
pub const MAX_NORMALIZED_BYTES: u64 = 16 << 20;

/// The longest a tokenizer's own padding may make an encoding (`padding`'s
/// `Fixed` length or `pad_to_multiple_of`): `tokenizers` pads inside
/// `encode`, so a 1 KB file asking for 4e9 would make billions of pad
/// tokens for every text. A million tokens is past any context.
pub const MAX_PADDED_LENGTH: u64 = 1 << 20;

/// A bound `out ≤ times · in + plus` on the bytes a text step makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Growth {
    pub times: u64,
    pub plus: u64,
}

impl Growth {
    pub const NONE: Growth = Growth { times: 1, plus: 0 };

    const fn by(times: u64) -> Growth {
        Growth { times, plus: 0 }
    }

    /// This step, then `next`.
    pub fn then(self, next: Growth) -> Growth {
        Growth {
            times: self.times.saturating_mul(next.times),
            plus: next
                .times
                .saturating_mul(self.plus)
                .saturating_add(next.plus),
        }
    }

    /// The most a text of `len` bytes can grow to.
    pub fn of(self, len: u64) -> u64 {
        self.times.saturating_mul(len).saturating_add(self.plus)
    }
}

/// How a checked tokenizer may grow text, and the ends of its vocabulary.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    /// Normalizers, then pre-tokenizers.
    pub encode: Growth,
    /// Decoders.
    pub decode: Growth,
    /// The longest token's text, in bytes.
    pub longest_token: u64,
    /// The settings `encode` comes from, as errors name them.
    pub encode_field: &'static str,
    /// The settings `decode` comes from.
    pub decode_field: &'static str,
}

/// Reads `path` and checks it (ids below `rows`, growth within
/// [`MAX_TEXT_GROWTH`]) before anything parses it as a tokenizer.
pub(crate) fn read_checked(path: &Path, rows: u64, rows_named: &str) -> Result<(String, Shape)> {
    let limit = |field: &str, message: String| ModelError::Limit {
        origin: format!("{}: {field}", path.display()),
        message,
    };
    let size = std::fs::metadata(path)
        .map_err(|e| verifine_base::FileError::io("reading", path, e))?
        .len();
    if size > MAX_TOKENIZER_JSON_BYTES {
        return Err(limit(
            "tokenizer.json",
            format!(
                "{size} bytes is more than {MAX_TOKENIZER_JSON_BYTES} (MAX_TOKENIZER_JSON_BYTES)"
            ),
        ));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| verifine_base::FileError::io("reading", path, e))?;
    let json: Value =
        serde_json::from_str(&text).map_err(|e| ModelError::format(path, e.to_string()))?;

    let (field, id) = largest_id(&json);
    if let Some(id) = id.filter(|&id| id >= rows) {
        return Err(ModelError::format(
            path,
            format!("{field}: token id {id} is past the {rows} rows of {rows_named}"),
        ));
    }

    bpe_merges(&json["model"])
        .map_err(|message| ModelError::format(path, format!("model.merges: {message}")))?;

    let padding = &json["padding"];
    let padded = [
        &padding["strategy"]["Fixed"],
        &padding["pad_to_multiple_of"],
    ]
    .into_iter()
    .filter_map(Value::as_u64)
    .max();
    if let Some(length) = padded.filter(|&n| n > MAX_PADDED_LENGTH) {
        return Err(limit(
            "padding",
            format!("pads to {length} tokens, more than {MAX_PADDED_LENGTH} (MAX_PADDED_LENGTH)"),
        ));
    }
    // Truncation keeps every overflowing window: `max_length / (max_length
    // - stride)` times the tokens.
    let truncation = &json["truncation"];
    if let Some(max_length) = truncation["max_length"].as_u64() {
        let stride = truncation["stride"].as_u64().unwrap_or(0);
        let windows = max_length
            .checked_sub(stride)
            .filter(|&step| step > 0)
            .map_or(u64::MAX, |step| max_length.div_ceil(step));
        if windows > MAX_TEXT_GROWTH {
            return Err(limit(
                "truncation",
                format!(
                    "max_length {max_length} with stride {stride} repeats each token up to {windows} times, more than {MAX_TEXT_GROWTH} (MAX_TEXT_GROWTH)"
                ),
            ));
        }
    }

    let growth = |field: &str, of: fn(&Value) -> std::result::Result<Growth, String>| {
        let growth = of(&json[field]).map_err(|message| limit(field, message))?;
        if growth.times > MAX_TEXT_GROWTH {
            return Err(limit(
                field,
                format!(
                    "can multiply a text's length by {}, more than {MAX_TEXT_GROWTH} (MAX_TEXT_GROWTH)",
                    growth.times
                ),
            ));
        }
        Ok(growth)
    };
    let normalizer = growth("normalizer", normalizer)?;
    let pre_tokenizer = growth("pre_tokenizer", pre_tokenizer)?;
    let decode = growth("decoder", decoder)?;
    let encode = normalizer.then(pre_tokenizer);
    if encode.times > MAX_TEXT_GROWTH {
        return Err(limit(
            "normalizer",
            format!(
                "with the pre_tokenizer, can multiply a text's length by {}, more than {MAX_TEXT_GROWTH} (MAX_TEXT_GROWTH)",
                encode.times
            ),
        ));
    }

    // `tokenizers` normalizes every added token marked `normalized` when it
    // loads them.
    let added = json["added_tokens"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let normalized: u64 = added
        .iter()
        .filter(|t| {
            t["normalized"]
                .as_bool()
                .unwrap_or(!t["special"].as_bool().unwrap_or(false))
        })
        .filter_map(|t| t["content"].as_str())
        .map(|content| normalizer.of(content.len() as u64))
        .fold(0, u64::saturating_add);
    if normalized > MAX_NORMALIZED_BYTES {
        return Err(limit(
            "added_tokens",
            format!(
                "normalizing them would make {normalized} bytes, more than {MAX_NORMALIZED_BYTES} (MAX_NORMALIZED_BYTES)"
            ),
        ));
    }
    let vocab_keys = json["model"]["vocab"]
        .as_object()
        .into_iter()
        .flat_map(|v| v.keys());
    let unigram = json["model"]["vocab"].as_array().into_iter().flatten();
    let longest_token = vocab_keys
        .map(String::len)
        .chain(unigram.filter_map(|entry| entry[0].as_str()).map(str::len))
        .chain(
            added
                .iter()
                .filter_map(|t| t["content"].as_str())
                .map(str::len),
        )
        .max()
        .unwrap_or(0) as u64;
    Ok((
        text,
        Shape {
            encode,
            decode,
            longest_token,
            encode_field: "normalizer",
            decode_field: "decoder",
        },
    ))
}

/// The largest token id `json` names, and the field that names it: the
/// model's vocabulary (and `unk_id`), the added tokens, the ids the
/// post-processor inserts, and the padding id.
fn largest_id(json: &Value) -> (&'static str, Option<u64>) {
    let model = &json["model"];
    let vocab = match &model["vocab"] {
        Value::Object(map) => map.values().filter_map(Value::as_u64).max(),
        // Unigram: ids are positions.
        Value::Array(list) => list.len().checked_sub(1).map(|n| n as u64),
        _ => None,
    };
    let mut processor = Vec::new();
    post_processor_ids(&json["post_processor"], &mut processor);
    [
        ("model.vocab", vocab),
        ("model.unk_id", model["unk_id"].as_u64()),
        (
            "added_tokens",
            json["added_tokens"]
                .as_array()
                .and_then(|a| a.iter().filter_map(|t| t["id"].as_u64()).max()),
        ),
        ("post_processor", processor.into_iter().max()),
        ("padding.pad_id", json["padding"]["pad_id"].as_u64()),
    ]
    .into_iter()
    .max_by_key(|(_, id)| *id)
    .unwrap_or(("model.vocab", None))
}

/// Refuses a BPE merge that `tokenizers` would panic on (or, with a
/// prefix that splits a character, read as invalid UTF-8) when it builds
/// the merged token: both parts in the vocabulary, but the right one
/// shorter than `continuing_subword_prefix` or the two together longer
/// than any token.
fn bpe_merges(model: &Value) -> std::result::Result<(), String> {
    let (Some(merges), Some(vocab)) = (model["merges"].as_array(), model["vocab"].as_object())
    else {
        return Ok(());
    };
    let longest = vocab.keys().map(String::len).max().unwrap_or(0);
    let prefix = model["continuing_subword_prefix"]
        .as_str()
        .unwrap_or_default()
        .len();
    let pairs = merges.iter().filter_map(|merge| match merge {
        Value::String(line) if !line.starts_with("#version") => line.split_once(' '),
        Value::Array(pair) => pair.first()?.as_str().zip(pair.get(1)?.as_str()),
        _ => None,
    });
    for (rank, (a, b)) in pairs.enumerate() {
        if !(vocab.contains_key(a) && vocab.contains_key(b)) {
            continue; // `tokenizers` refuses these itself.
        }
        if b.len() < prefix || !b.is_char_boundary(prefix) || a.len() + b.len() - prefix > longest {
            return Err(format!(
                "merge {rank} ({a:?} {b:?}) cannot make a token of the vocabulary"
            ));
        }
    }
    Ok(())
}

/// Ids a post-processor inserts: `TemplateProcessing`'s special tokens'
/// `ids`, BERT's and RoBERTa's `sep` and `cls`, through `Sequence`s.
fn post_processor_ids(value: &Value, ids: &mut Vec<u64>) {
    match value {
        Value::Object(map) => {
            for (key, item) in map {
                match key.as_str() {
                    "ids" => ids.extend(
                        item.as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(Value::as_u64),
                    ),
                    "sep" | "cls" => ids.extend(item[1].as_u64()),
                    _ => post_processor_ids(item, ids),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| post_processor_ids(item, ids)),
        _ => {}
    }
}

fn text(value: &Value, key: &str) -> u64 {
    value[key].as_str().map_or(0, |s| s.len() as u64)
}

fn sequence(
    list: &Value,
    step: fn(&Value) -> std::result::Result<Growth, String>,
) -> std::result::Result<Growth, String> {
    list.as_array()
        .into_iter()
        .flatten()
        .try_fold(Growth::NONE, |growth, item| Ok(growth.then(step(item)?)))
}

/// `Replace` (a normalizer or a decoder): a string pattern's matches grow
/// by `content / pattern`; an empty or regex pattern may match around
/// every byte.
fn replace(value: &Value) -> Growth {
    let content = text(value, "content");
    match value["pattern"]["String"].as_str() {
        Some(pattern) if !pattern.is_empty() => {
            Growth::by(content.div_ceil(pattern.len() as u64).max(1))
        }
        _ => Growth {
            times: 1 + content,
            plus: content,
        },
    }
}

fn normalizer(value: &Value) -> std::result::Result<Growth, String> {
    Ok(match value["type"].as_str().unwrap_or_default() {
        "Sequence" => return sequence(&value["normalizers"], normalizer),
        "Replace" => replace(value),
        // Once per piece between added tokens, so at worst per byte.
        "Prepend" => Growth::by(1 + text(value, "prepend")),
        // A code point decomposes to at most 18 (U+FDFA).
        "NFC" | "NFD" | "NFKC" | "NFKD" => Growth::by(18),
        // `İ` (2 bytes) lowercases to 3.
        "Lowercase" => Growth::by(3),
        // Decomposition, lowercasing, spaces around CJK.
        "BertNormalizer" => Growth::by(18 * 3 * 2),
        "ByteLevel" => Growth::by(2),
        "Precompiled" => Growth::by(precompiled(value)?),
        _ => Growth::NONE,
    })
}

fn pre_tokenizer(value: &Value) -> std::result::Result<Growth, String> {
    Ok(match value["type"].as_str().unwrap_or_default() {
        "Sequence" => return sequence(&value["pretokenizers"], pre_tokenizer),
        "ByteLevel" => Growth::by(2),
        // A space becomes the replacement (up to 4 bytes), and a piece may
        // gain one in front.
        "Metaspace" => Growth { times: 8, plus: 4 },
        _ => Growth::NONE,
    })
}

fn decoder(value: &Value) -> std::result::Result<Growth, String> {
    Ok(match value["type"].as_str().unwrap_or_default() {
        "Sequence" => return sequence(&value["decoders"], decoder),
        "Replace" => replace(value),
        // A space added per token (Metaspace, WordPiece), or around every
        // byte when BPE's suffix is empty.
        "Metaspace" | "WordPiece" | "BPEDecoder" => Growth::by(2),
        _ => Growth::NONE,
    })
}

/// A SentencePiece `precompiled_charsmap` maps a character to at most its
/// longest normalized string. Its header (the trie's length) is checked
/// too: `spm_precompiled` reserves that much before reading it.
fn precompiled(value: &Value) -> std::result::Result<u64, String> {
    let blob = base64(value["precompiled_charsmap"].as_str().unwrap_or_default())
        .ok_or("precompiled_charsmap is not base64")?;
    let trie = blob
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .unwrap_or(0);
    let Some(pool) = blob.get(4 + trie..) else {
        return Err(format!(
            "precompiled_charsmap says its trie has {trie} bytes but has {}",
            blob.len().saturating_sub(4)
        ));
    };
    let longest = pool.split(|&b| b == 0).map(<[u8]>::len).max();
    Ok(longest.unwrap_or(0).max(1) as u64)
}

/// Standard base64, padding optional.
fn base64(text: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let digits = text.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= digit(c)? << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}
