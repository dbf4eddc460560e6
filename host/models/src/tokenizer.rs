//! A pretrained model's tokenizer, from `tokenizer.json` (anything the
//! `tokenizers` crate reads) or from a GGUF file's vocabulary as llama.cpp
//! reads it: GPT-2 byte-level BPE (`tokenizer.ggml.model = "gpt2"`, with
//! the pre-tokenizer `tokenizer.ggml.pre` names) rebuilt as a
//! `tokenizer.json`, or SentencePiece (`"llama"`, [`crate::spm`]).
//!
//! [`TextTokenizer::encode`] reads control tokens written in the text
//! (`<|im_start|>` …) as their ids, as transformers does for a rendered
//! chat template; plain text never gains a begin token here (a chat
//! template writes its own).

use crate::error::{ModelError, Result};
use crate::spm::SpmTokenizer;
use candle_core::quantized::gguf_file::{Content, Value as GgufValue};
use serde_json::{Value, json};
use std::path::Path;

/// llama.cpp's token types (`tokenizer.ggml.token_type`).
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;

#[derive(Clone)]
enum Inner {
    Hf(Box<tokenizers::Tokenizer>),
    Spm {
        tokenizer: Box<SpmTokenizer>,
        /// Control and user-defined tokens, longest first, read whole in text.
        specials: Vec<(String, u32)>,
    },
}

/// A pretrained tokenizer.
#[derive(Clone)]
pub struct TextTokenizer {
    inner: Inner,
}

impl TextTokenizer {
    /// Reads a `tokenizer.json`.
    pub fn from_tokenizer_json(path: &Path) -> Result<Self> {
        let tokenizer = tokenizers::Tokenizer::from_file(path)
            .map_err(|e| ModelError::format(path, e.to_string()))?;
        Ok(TextTokenizer {
            inner: Inner::Hf(Box::new(tokenizer)),
        })
    }

    /// Builds the tokenizer a GGUF file's metadata describes (`path` for
    /// messages).
    pub fn from_gguf(content: &Content, path: &Path) -> Result<Self> {
        let model = string(content, "tokenizer.ggml.model").unwrap_or_default();
        let tokens = strings(content, "tokenizer.ggml.tokens", path)?;
        let types: Vec<i32> = match content.metadata.get("tokenizer.ggml.token_type") {
            Some(GgufValue::Array(values)) => {
                values.iter().map(|v| v.to_i32().unwrap_or(1)).collect()
            }
            _ => vec![1; tokens.len()],
        };
        let specials: Vec<(String, u32, bool)> = tokens
            .iter()
            .zip(&types)
            .enumerate()
            .filter(|(_, (_, t))| **t == CONTROL || **t == USER_DEFINED)
            .map(|(id, (token, t))| (token.clone(), id as u32, *t == CONTROL))
            .collect();
        match model.as_str() {
            "gpt2" => {
                let merges = strings(content, "tokenizer.ggml.merges", path)?;
                let pre = string(content, "tokenizer.ggml.pre").unwrap_or_else(|| "default".into());
                let json = gpt2_tokenizer_json(&tokens, &merges, &specials, &pre, path)?;
                let tokenizer: tokenizers::Tokenizer = json.to_string().parse().map_err(|e| {
                    ModelError::format(path, format!("rebuilding the BPE tokenizer: {e}"))
                })?;
                Ok(TextTokenizer {
                    inner: Inner::Hf(Box::new(tokenizer)),
                })
            }
            "llama" => {
                let tokenizer =
                    SpmTokenizer::from_gguf(content).map_err(|e| ModelError::format(path, e))?;
                let mut specials: Vec<(String, u32)> =
                    specials.into_iter().map(|(t, id, _)| (t, id)).collect();
                specials.sort_by_key(|(text, _)| std::cmp::Reverse(text.len()));
                Ok(TextTokenizer {
                    inner: Inner::Spm {
                        tokenizer: Box::new(tokenizer),
                        specials,
                    },
                })
            }
            other => Err(ModelError::unsupported(
                path,
                "tokenizer.ggml.model",
                format!("{other:?}"),
                "supported: gpt2 (byte-level BPE), llama (SentencePiece)",
            )),
        }
    }

    /// Ids of `text`, control tokens written in it read as their ids; no
    /// begin token added.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        match &self.inner {
            Inner::Hf(tokenizer) => tokenizer
                .encode(text, false)
                .map(|e| e.get_ids().to_vec())
                .map_err(|e| ModelError::Tokenizer(e.to_string())),
            Inner::Spm {
                tokenizer,
                specials,
            } => {
                let mut ids = Vec::new();
                let mut rest = text;
                let mut first = true;
                while !rest.is_empty() {
                    let next = specials
                        .iter()
                        .filter_map(|(s, id)| rest.find(s.as_str()).map(|at| (at, s, *id)))
                        .min_by_key(|(at, s, _)| (*at, std::cmp::Reverse(s.len())));
                    let (plain, special) = match next {
                        Some((at, s, id)) => (&rest[..at], Some((s.len(), id, at))),
                        None => (rest, None),
                    };
                    if !plain.is_empty() {
                        ids.extend(if first {
                            tokenizer.encode(plain, false)
                        } else {
                            tokenizer.encode_continuation(plain)
                        });
                    }
                    first = false;
                    match special {
                        Some((len, id, at)) => {
                            ids.push(id);
                            rest = &rest[at + len..];
                        }
                        None => break,
                    }
                }
                Ok(ids)
            }
        }
    }

    /// Text of `ids`; control tokens dropped when `skip_special`.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String> {
        match &self.inner {
            Inner::Hf(tokenizer) => tokenizer
                .decode(ids, skip_special)
                .map_err(|e| ModelError::Tokenizer(e.to_string())),
            Inner::Spm {
                tokenizer,
                specials,
            } => {
                let keep: Vec<u32> = ids
                    .iter()
                    .copied()
                    .filter(|id| !skip_special || !specials.iter().any(|(_, s)| s == id))
                    .collect();
                Ok(tokenizer.decode(&keep))
            }
        }
    }

    /// The id of a token written out (`<|im_end|>`), if the vocabulary has it.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        match &self.inner {
            Inner::Hf(tokenizer) => tokenizer.token_to_id(token),
            Inner::Spm {
                tokenizer,
                specials,
            } => specials
                .iter()
                .find(|(s, _)| s == token)
                .map(|(_, id)| *id)
                .or_else(|| tokenizer.id_of(token)),
        }
    }

    /// The text of one token id, as the vocabulary spells it.
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        match &self.inner {
            Inner::Hf(tokenizer) => tokenizer.id_to_token(id),
            Inner::Spm { tokenizer, .. } => tokenizer.piece(id).map(str::to_string),
        }
    }

    /// Tokens in the vocabulary, added tokens included.
    pub fn vocab_size(&self) -> usize {
        match &self.inner {
            Inner::Hf(tokenizer) => tokenizer.get_vocab_size(true),
            Inner::Spm { tokenizer, .. } => tokenizer.len(),
        }
    }

    /// The SentencePiece tokenizer, when it is one.
    pub fn spm(&self) -> Option<&SpmTokenizer> {
        match &self.inner {
            Inner::Spm { tokenizer, .. } => Some(tokenizer),
            Inner::Hf(_) => None,
        }
    }

    /// `tokenizer.json` for an exported checkpoint. A SentencePiece
    /// vocabulary read from GGUF has no `tokenizer.json` form here yet.
    pub fn to_tokenizer_json(&self) -> Result<String> {
        match &self.inner {
            Inner::Hf(tokenizer) => tokenizer
                .to_string(true)
                .map_err(|e| ModelError::Tokenizer(e.to_string())),
            Inner::Spm { .. } => Err(ModelError::Tokenizer(
                "a SentencePiece vocabulary read from GGUF cannot be written as tokenizer.json yet; \
                 start from a Hugging Face checkpoint directory to export one"
                    .into(),
            )),
        }
    }
}

fn string(content: &Content, key: &str) -> Option<String> {
    content
        .metadata
        .get(key)
        .and_then(|v| v.to_string().ok())
        .cloned()
}

fn strings(content: &Content, key: &str, path: &Path) -> Result<Vec<String>> {
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
fn gpt2_tokenizer_json(
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
