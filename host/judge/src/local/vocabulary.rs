//! The two vocabularies a local judge may come with: a GGUF file's
//! SentencePiece pieces ([`SpmTokenizer`]) or a Hugging Face
//! `tokenizer.json` (any model the `tokenizers` crate reads: BPE, byte-level
//! BPE, unigram …).

use super::spm::SpmTokenizer;
use std::path::Path;

/// A local judge's tokenizer.
pub enum Vocabulary {
    /// From a GGUF file.
    Spm(Box<SpmTokenizer>),
    /// From `tokenizer.json`, with the model's own begin/end ids.
    Hf {
        /// The tokenizer.
        tokenizer: Box<tokenizers::Tokenizer>,
        /// Prepended to a prompt, when the model has one.
        bos: Option<u32>,
        /// Ends an answer.
        eos: Option<u32>,
    },
}

impl Vocabulary {
    /// Reads `dir/tokenizer.json`.
    pub fn from_tokenizer_json(
        dir: &Path,
        bos: Option<u32>,
        eos: Option<u32>,
    ) -> Result<Self, String> {
        let path = dir.join("tokenizer.json");
        let tokenizer = tokenizers::Tokenizer::from_file(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Vocabulary::Hf {
            tokenizer: Box::new(tokenizer),
            bos,
            eos,
        })
    }

    /// The SentencePiece tokenizer, when the vocabulary is one.
    pub fn spm(&self) -> Option<&SpmTokenizer> {
        match self {
            Vocabulary::Spm(t) => Some(t.as_ref()),
            Vocabulary::Hf { .. } => None,
        }
    }

    /// Tokens in the vocabulary.
    pub fn len(&self) -> usize {
        match self {
            Vocabulary::Spm(t) => t.len(),
            Vocabulary::Hf { tokenizer, .. } => tokenizer.get_vocab_size(true),
        }
    }

    /// Whether it has no tokens.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The end-of-sequence id.
    pub fn eos(&self) -> Option<u32> {
        match self {
            Vocabulary::Spm(t) => t.eos,
            Vocabulary::Hf { eos, .. } => *eos,
        }
    }

    /// A prompt's ids, with BOS first when the model has one.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        match self {
            Vocabulary::Spm(t) => t.encode(text, true),
            Vocabulary::Hf { tokenizer, bos, .. } => {
                let mut ids: Vec<u32> = bos.iter().copied().collect();
                ids.extend(self.hf_ids(tokenizer, text));
                ids
            }
        }
    }

    /// Ids of text that continues a prompt (no BOS, no space prefixed).
    pub fn encode_continuation(&self, text: &str) -> Vec<u32> {
        match self {
            Vocabulary::Spm(t) => t.encode_continuation(text),
            Vocabulary::Hf { tokenizer, .. } => self.hf_ids(tokenizer, text),
        }
    }

    fn hf_ids(&self, tokenizer: &tokenizers::Tokenizer, text: &str) -> Vec<u32> {
        // Special tokens are not added here (BOS is the caller's); a text
        // that cannot be encoded becomes no tokens, and the query then
        // fails on its empty prompt rather than on a panic.
        tokenizer
            .encode(text, false)
            .map(|e| e.get_ids().to_vec())
            .unwrap_or_default()
    }

    /// The text of ids (invalid UTF-8 replaced).
    pub fn decode(&self, ids: &[u32]) -> String {
        match self {
            Vocabulary::Spm(t) => t.decode(ids),
            Vocabulary::Hf { tokenizer, .. } => tokenizer.decode(ids, false).unwrap_or_default(),
        }
    }
}
