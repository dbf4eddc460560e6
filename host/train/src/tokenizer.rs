//! Byte-level BPE trained on the task's own text, with a chat template.
//!
//! The template is `<|user|>prompt<|end|><|assistant|>response<|end|>`; the
//! special tokens are single ids, so the trainer can mask turns exactly.

use crate::error::{Result, TrainError, ensure};
use std::path::Path;
use tokenizers::models::TrainerWrapper;
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, Tokenizer};

/// Padding (never attended to, never in a loss).
pub const PAD: &str = "<|pad|>";
/// Opens a user turn.
pub const USER: &str = "<|user|>";
/// Opens an assistant turn.
pub const ASSISTANT: &str = "<|assistant|>";
/// Closes a turn; generation stops on it.
pub const END: &str = "<|end|>";

/// A trained tokenizer and the ids of its special tokens.
pub struct ChatTokenizer {
    inner: Tokenizer,
    /// Id of [`PAD`].
    pub pad: u32,
    /// Id of [`USER`].
    pub user: u32,
    /// Id of [`ASSISTANT`].
    pub assistant: u32,
    /// Id of [`END`].
    pub end: u32,
}

impl ChatTokenizer {
    /// Trains byte-level BPE with at most `vocab_size` tokens on `texts`.
    pub fn train<S: AsRef<str> + Sync>(texts: &[S], vocab_size: usize) -> Result<Self> {
        let specials = [PAD, USER, ASSISTANT, END]
            .iter()
            .map(|t| AddedToken::from(*t, true))
            .collect();
        let mut trainer: TrainerWrapper = BpeTrainerBuilder::new()
            .show_progress(false)
            .vocab_size(vocab_size)
            .min_frequency(2)
            .special_tokens(specials)
            .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
            .build()
            .into();
        let mut inner = Tokenizer::new(BPE::default());
        inner.with_pre_tokenizer(Some(ByteLevel::default().add_prefix_space(false)));
        inner.with_decoder(Some(ByteLevel::default()));
        inner
            .train(&mut trainer, texts.iter().map(|t| t.as_ref()))
            .map_err(|e| TrainError::Tokenizer(format!("training: {e}")))?;
        Self::from_inner(inner)
    }

    /// Loads a `tokenizer.json` (ours, or any with the four special tokens).
    pub fn load(path: &Path) -> Result<Self> {
        let inner = Tokenizer::from_file(path).map_err(|e| TrainError::unreadable(path, e))?;
        Self::from_inner(inner).map_err(|e| TrainError::unreadable(path, e))
    }

    fn from_inner(inner: Tokenizer) -> Result<Self> {
        let id = |token: &str| {
            inner.token_to_id(token).ok_or_else(|| {
                TrainError::Tokenizer(format!("the vocabulary lacks the special token {token}"))
            })
        };
        Ok(ChatTokenizer {
            pad: id(PAD)?,
            user: id(USER)?,
            assistant: id(ASSISTANT)?,
            end: id(END)?,
            inner,
        })
    }

    /// Writes `tokenizer.json` through a temporary file and a rename.
    pub fn save(&self, path: &Path) -> Result<()> {
        let tmp = verifine_base::temporary_sibling(path);
        self.inner
            .save(&tmp, false)
            .map_err(|e| TrainError::unreadable(&tmp, format!("writing: {e}")))?;
        std::fs::rename(&tmp, path).map_err(|e| TrainError::io("renaming into", &path, e))
    }

    /// Tokens in the vocabulary, special tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// Ids of plain text (no special tokens added).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let encoding = self
            .inner
            .encode(text, false)
            .map_err(|e| TrainError::Tokenizer(format!("encoding: {e}")))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Text of `ids`, special tokens dropped.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner
            .decode(ids, true)
            .map_err(|e| TrainError::Tokenizer(format!("decoding: {e}")))
    }

    /// `<|user|>prompt<|end|><|assistant|>`: what the policy continues.
    pub fn prompt_ids(&self, prompt: &str) -> Result<Vec<u32>> {
        let mut ids = vec![self.user];
        ids.extend(self.encode(prompt)?);
        ids.extend([self.end, self.assistant]);
        Ok(ids)
    }

    /// An assistant turn's ids: `response<|end|>`.
    pub fn response_ids(&self, response: &str) -> Result<Vec<u32>> {
        let mut ids = self.encode(response)?;
        ids.push(self.end);
        ensure!(
            ids.len() > 1 || response.is_empty(),
            "response encoded to nothing"
        );
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{TaskConfig, generate};

    fn trained() -> ChatTokenizer {
        let texts: Vec<String> = generate(1, 300, &TaskConfig::default())
            .into_iter()
            .flat_map(|p| [p.prompt, p.solution])
            .collect();
        ChatTokenizer::train(&texts, 300).unwrap()
    }

    #[test]
    fn round_trips_text_and_keeps_special_tokens_whole() {
        let tok = trained();
        assert!(tok.vocab_size() <= 300);
        let text = "Ann has 12 apples.\n12 + 7 = 19\n#### 19";
        assert_eq!(tok.decode(&tok.encode(text).unwrap()).unwrap(), text);
        let prompt = tok.prompt_ids("What is 2 + 2?").unwrap();
        assert_eq!(prompt[0], tok.user);
        assert_eq!(&prompt[prompt.len() - 2..], &[tok.end, tok.assistant]);
        // Merges make it shorter than bytes.
        assert!(tok.encode(text).unwrap().len() < text.len());
    }

    #[test]
    fn saves_and_loads_the_same_tokenizer() {
        let tok = trained();
        let dir = std::env::temp_dir().join(format!("verifine-tok-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokenizer.json");
        tok.save(&path).unwrap();
        let loaded = ChatTokenizer::load(&path).unwrap();
        let text = "Start with 5, then add 3. What is the result?";
        assert_eq!(loaded.encode(text).unwrap(), tok.encode(text).unwrap());
        assert_eq!((loaded.end, loaded.pad), (tok.end, tok.pad));
        let err = ChatTokenizer::load(&dir.join("missing.json"))
            .err()
            .unwrap();
        assert!(err.to_string().contains("missing.json"), "{err}");
    }
}
