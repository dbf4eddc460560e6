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
//!
//! A tokenizer comes with a downloaded model and is hostile input: its
//! largest id ([`MAX_TOKEN_ID`], or the embedding table's rows) and how
//! much its normalizers, pre-tokenizers and decoders can grow a text
//! ([`MAX_TEXT_GROWTH`]) are checked on the JSON before the `tokenizers`
//! crate reads it, every text is checked against that growth
//! ([`MAX_NORMALIZED_BYTES`]), and control tokens are found in one pass.

mod gguf;
mod limits;
mod specials;

pub use limits::{MAX_NORMALIZED_BYTES, MAX_TEXT_GROWTH, MAX_TOKEN_ID, MAX_TOKENIZER_JSON_BYTES};
pub use specials::MAX_SPECIAL_TOKEN_BYTES;

use crate::error::{ModelError, Result};
use crate::spm::SpmTokenizer;
use candle_core::quantized::gguf_file::{Content, Value as GgufValue};
use limits::{Growth, Shape};
use specials::{Piece, Specials};
use std::path::Path;

/// llama.cpp's token types (`tokenizer.ggml.token_type`).
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;

#[derive(Clone)]
enum Inner {
    Hf(Box<tokenizers::Tokenizer>),
    Spm {
        tokenizer: Box<SpmTokenizer>,
        /// Control and user-defined tokens, read whole in text.
        specials: Box<Specials>,
    },
}

/// A pretrained tokenizer.
#[derive(Clone)]
pub struct TextTokenizer {
    inner: Inner,
    /// The file it was read from, for errors.
    source: String,
    shape: Shape,
}

impl TextTokenizer {
    /// Reads a `tokenizer.json` whose ids must stay below [`MAX_TOKEN_ID`]
    /// (prefer [`TextTokenizer::from_tokenizer_json_for`] when the model's
    /// embedding table is known).
    pub fn from_tokenizer_json(path: &Path) -> Result<Self> {
        Self::read_tokenizer_json(path, MAX_TOKEN_ID, "MAX_TOKEN_ID")
    }

    /// Reads a `tokenizer.json` for a model whose embedding table has
    /// `rows` rows: a token id past them is refused before the file is
    /// parsed as a tokenizer.
    pub fn from_tokenizer_json_for(path: &Path, rows: usize) -> Result<Self> {
        Self::read_tokenizer_json(path, rows as u64, "the embedding table")
    }

    fn read_tokenizer_json(path: &Path, rows: u64, rows_named: &str) -> Result<Self> {
        let (text, shape) = limits::read_checked(path, rows, rows_named)?;
        let tokenizer: tokenizers::Tokenizer = text
            .parse()
            .map_err(|e| ModelError::format(path, format!("{e}")))?;
        Ok(TextTokenizer {
            inner: Inner::Hf(Box::new(tokenizer)),
            source: path.display().to_string(),
            shape,
        })
    }

    /// Builds the tokenizer a GGUF file's metadata describes (`path` for
    /// messages), of at most [`MAX_TOKEN_ID`] tokens.
    pub fn from_gguf(content: &Content, path: &Path) -> Result<Self> {
        Self::read_gguf(content, path, MAX_TOKEN_ID, "MAX_TOKEN_ID")
    }

    /// Builds the tokenizer of a GGUF file whose embedding table has
    /// `rows` rows, refusing a vocabulary larger than that before building
    /// anything from it.
    pub fn from_gguf_for(content: &Content, path: &Path, rows: usize) -> Result<Self> {
        Self::read_gguf(content, path, rows as u64, "the embedding table")
    }

    fn read_gguf(content: &Content, path: &Path, rows: u64, rows_named: &str) -> Result<Self> {
        let count = match content.metadata.get("tokenizer.ggml.tokens") {
            Some(GgufValue::Array(tokens)) => tokens.len() as u64,
            _ => 0,
        };
        if count > rows {
            return Err(ModelError::format(
                path,
                format!(
                    "tokenizer.ggml.tokens: token id {} is past the {rows} rows of {rows_named}",
                    count - 1
                ),
            ));
        }
        let model = gguf::string(content, "tokenizer.ggml.model").unwrap_or_default();
        let tokens = gguf::strings(content, "tokenizer.ggml.tokens", path)?;
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
        let longest_token = tokens.iter().map(String::len).max().unwrap_or(0) as u64;
        let source = path.display().to_string();
        match model.as_str() {
            "gpt2" => {
                let merges = gguf::strings(content, "tokenizer.ggml.merges", path)?;
                let pre =
                    gguf::string(content, "tokenizer.ggml.pre").unwrap_or_else(|| "default".into());
                let json = gguf::gpt2_tokenizer_json(&tokens, &merges, &specials, &pre, path)?;
                let tokenizer: tokenizers::Tokenizer = json.to_string().parse().map_err(|e| {
                    ModelError::format(path, format!("rebuilding the BPE tokenizer: {e}"))
                })?;
                Ok(TextTokenizer {
                    inner: Inner::Hf(Box::new(tokenizer)),
                    source,
                    // Byte-level: each byte becomes a character of up to two.
                    shape: Shape {
                        encode: Growth { times: 2, plus: 0 },
                        decode: Growth::NONE,
                        longest_token,
                        encode_field: "tokenizer.ggml.tokens",
                        decode_field: "tokenizer.ggml.tokens",
                    },
                })
            }
            "llama" => {
                let tokenizer =
                    SpmTokenizer::from_gguf(content).map_err(|e| ModelError::format(path, e))?;
                let specials = Specials::new(specials.into_iter().map(|(t, id, _)| (t, id)));
                Ok(TextTokenizer {
                    inner: Inner::Spm {
                        tokenizer: Box::new(tokenizer),
                        specials: Box::new(specials),
                    },
                    source,
                    // Each space becomes `▁` (3 bytes), one more in front.
                    shape: Shape {
                        encode: Growth { times: 3, plus: 3 },
                        decode: Growth::NONE,
                        longest_token,
                        encode_field: "tokenizer.ggml.tokens",
                        decode_field: "tokenizer.ggml.tokens",
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

    /// Refuses a text the tokenizer's steps could grow past
    /// [`MAX_NORMALIZED_BYTES`].
    fn check_growth(&self, field: &str, growth: Growth, len: u64) -> Result<()> {
        let most = growth.of(len);
        if most > MAX_NORMALIZED_BYTES {
            return Err(ModelError::Limit {
                origin: format!("{}: {field}", self.source),
                message: format!(
                    "a text of {len} bytes may grow to {most}, more than {MAX_NORMALIZED_BYTES} (MAX_NORMALIZED_BYTES)"
                ),
            });
        }
        Ok(())
    }

    /// Ids of `text`, control tokens written in it read as their ids; no
    /// begin token added.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        self.check_growth(
            self.shape.encode_field,
            self.shape.encode,
            text.len() as u64,
        )?;
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
                for (i, piece) in specials.split(text).into_iter().enumerate() {
                    match piece {
                        Piece::Special(id) => ids.push(id),
                        // Only text at the very start gains the space prefix.
                        Piece::Text(plain) if i == 0 => ids.extend(tokenizer.encode(plain, false)),
                        Piece::Text(plain) => ids.extend(tokenizer.encode_continuation(plain)),
                    }
                }
                Ok(ids)
            }
        }
    }

    /// Text of `ids`; control tokens dropped when `skip_special`.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String> {
        // The tokens' texts, at most, before the decoders grow them.
        let most = (ids.len() as u64).saturating_mul(self.shape.longest_token.max(1));
        if self.shape.decode.of(most) > MAX_NORMALIZED_BYTES {
            let pieces = ids
                .iter()
                .filter_map(|&id| self.id_to_token(id))
                .map(|t| t.len() as u64)
                .fold(0, u64::saturating_add);
            self.check_growth(self.shape.decode_field, self.shape.decode, pieces)?;
        }
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
                    .filter(|&id| !skip_special || !specials.contains(id))
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
            } => specials.id(token).or_else(|| tokenizer.id_of(token)),
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
