//! The policy's tokenizer and chat format: either byte-level BPE trained on
//! the task's own text (the embedded model), whose template is
//! `<|user|>prompt<|end|><|assistant|>response<|end|>` with single-id
//! special tokens, or a pretrained model's tokenizer and Jinja chat
//! template, where an answer ends on the model's end-of-turn token.

use crate::error::{Result, TrainError, ensure};
use std::path::Path;
use std::sync::Arc;
use tokenizers::models::TrainerWrapper;
use tokenizers::models::bpe::{BPE, BpeTrainerBuilder};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, Tokenizer};
use verifine_models::{ChatTemplate, Message, Pretrained, Role, TextTokenizer};

/// Padding (never attended to, never in a loss).
pub const PAD: &str = "<|pad|>";
/// Opens a user turn.
pub const USER: &str = "<|user|>";
/// Opens an assistant turn.
pub const ASSISTANT: &str = "<|assistant|>";
/// Closes a turn; generation stops on it.
pub const END: &str = "<|end|>";

/// How turns become ids.
enum ChatFormat {
    /// The embedded model's trained tokenizer and fixed template.
    Own {
        /// Boxed: a tokenizer is large beside the template variant.
        inner: Box<Tokenizer>,
        user: u32,
        assistant: u32,
    },
    /// A pretrained model's tokenizer and chat template.
    Template {
        tokenizer: Arc<PretrainedText>,
        /// The text around a user turn that follows an answer (answer's
        /// end token excluded), cut from the template's own rendering.
        follow_up: (String, String),
    },
}

/// A pretrained model's tokenizer and template, shared with the run.
pub struct PretrainedText {
    tokenizer: TextTokenizer,
    template: ChatTemplate,
}

/// A tokenizer, its chat format and the ids training needs.
pub struct ChatTokenizer {
    format: ChatFormat,
    /// Fills padding (never attended to, never in a loss).
    pub pad: u32,
    /// Ends an answer turn (what the chat template writes after one).
    pub end: u32,
    /// Every token generation stops on: `end` first, then a model's other
    /// end-of-sequence ids.
    pub stops: Vec<u32>,
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
            end: id(END)?,
            stops: vec![id(END)?],
            format: ChatFormat::Own {
                user: id(USER)?,
                assistant: id(ASSISTANT)?,
                inner: Box::new(inner),
            },
        })
    }

    /// The tokenizer and chat template of a pretrained model; refused when
    /// the model has no chat template.
    pub fn pretrained(model: &Pretrained) -> Result<Self> {
        let source = model.source.display().to_string();
        let template = model.chat_template.clone().ok_or_else(|| {
            TrainError::Tokenizer(format!(
                "{source} has no chat template; a policy is prompted through one"
            ))
        })?;
        let tokenizer = model.tokenizer.clone();
        // The turn's end is the end id the template writes after an answer
        // (Llama 3 lists <|end_of_text|> before <|eot_id|>); the others
        // still stop generation.
        let mut stops = model.stop_ids();
        let mut first_refusal = None;
        let chosen = stops.iter().enumerate().find_map(|(at, &id)| {
            let text = tokenizer.decode(&[id], false).map_err(model_error);
            match text.and_then(|text| follow_up_template(&template, &text)) {
                Ok(follow_up) => Some((at, follow_up)),
                Err(refusal) => {
                    first_refusal.get_or_insert(refusal);
                    None
                }
            }
        });
        let Some((at, follow_up)) = chosen else {
            return Err(first_refusal.unwrap_or_else(|| {
                TrainError::Tokenizer(format!("{source} names no end-of-sequence token"))
            }));
        };
        let end = stops.remove(at);
        stops.insert(0, end);
        let pad = model.pad_id();
        Ok(ChatTokenizer {
            format: ChatFormat::Template {
                tokenizer: Arc::new(PretrainedText {
                    tokenizer,
                    template,
                }),
                follow_up,
            },
            pad,
            end,
            stops,
        })
    }

    /// Writes `tokenizer.json` through a temporary file and a rename.
    pub fn save(&self, path: &Path) -> Result<()> {
        let ChatFormat::Own { inner, .. } = &self.format else {
            let json = self
                .pretrained_text()?
                .tokenizer
                .to_tokenizer_json()
                .map_err(model_error)?;
            return verifine_base::write_atomically(path, |w| w.write_all(json.as_bytes()))
                .map_err(Into::into);
        };
        let tmp = verifine_base::temporary_sibling(path);
        inner
            .save(&tmp, false)
            .map_err(|e| TrainError::unreadable(&tmp, format!("writing: {e}")))?;
        std::fs::rename(&tmp, path).map_err(|e| TrainError::io("renaming into", path, e))
    }

    fn pretrained_text(&self) -> Result<&PretrainedText> {
        match &self.format {
            ChatFormat::Template { tokenizer, .. } => Ok(tokenizer),
            ChatFormat::Own { .. } => {
                Err(TrainError::Tokenizer("not a pretrained tokenizer".into()))
            }
        }
    }

    /// Tokens in the vocabulary, special tokens included.
    pub fn vocab_size(&self) -> usize {
        match &self.format {
            ChatFormat::Own { inner, .. } => inner.get_vocab_size(true),
            ChatFormat::Template { tokenizer, .. } => tokenizer.tokenizer.vocab_size(),
        }
    }

    /// Ids of text (no begin token added; a pretrained tokenizer reads
    /// control tokens written in it).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        match &self.format {
            ChatFormat::Own { inner, .. } => {
                let encoding = inner
                    .encode(text, false)
                    .map_err(|e| TrainError::Tokenizer(format!("encoding: {e}")))?;
                Ok(encoding.get_ids().to_vec())
            }
            ChatFormat::Template { tokenizer, .. } => {
                tokenizer.tokenizer.encode(text).map_err(model_error)
            }
        }
    }

    /// Text of `ids`, special tokens dropped.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        match &self.format {
            ChatFormat::Own { inner, .. } => inner
                .decode(ids, true)
                .map_err(|e| TrainError::Tokenizer(format!("decoding: {e}"))),
            ChatFormat::Template { tokenizer, .. } => {
                tokenizer.tokenizer.decode(ids, true).map_err(model_error)
            }
        }
    }

    /// What the policy continues: `<|user|>prompt<|end|><|assistant|>`, or
    /// the chat template's rendering of one user turn with the generation
    /// prompt.
    pub fn prompt_ids(&self, prompt: &str) -> Result<Vec<u32>> {
        match &self.format {
            ChatFormat::Own {
                user, assistant, ..
            } => {
                let mut ids = vec![*user];
                ids.extend(self.encode(prompt)?);
                ids.extend([self.end, *assistant]);
                Ok(ids)
            }
            ChatFormat::Template { tokenizer, .. } => {
                let text = tokenizer
                    .template
                    .render(&[Message::new(Role::User, prompt)], true)
                    .map_err(model_error)?;
                self.encode(&text)
            }
        }
    }

    /// A user turn that follows an answer (which ended on [`Self::end`]),
    /// up to where the next answer begins: self-verification's questions.
    pub fn follow_up_ids(&self, prompt: &str) -> Result<Vec<u32>> {
        match &self.format {
            ChatFormat::Own { .. } => self.prompt_ids(prompt),
            ChatFormat::Template {
                follow_up: (before, after),
                ..
            } => self.encode(&format!("{before}{prompt}{after}")),
        }
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

fn model_error(error: verifine_models::ModelError) -> TrainError {
    TrainError::Tokenizer(error.to_string())
}

/// The text before and after the user's words in a user turn that follows
/// an answer, found by rendering a conversation with marked placeholders.
fn follow_up_template(template: &ChatTemplate, end_text: &str) -> Result<(String, String)> {
    const ANSWER: &str = "\u{1}answer\u{1}";
    const QUESTION: &str = "\u{1}question\u{1}";
    let turns = [
        Message::new(Role::User, "\u{1}first\u{1}"),
        Message::new(Role::Assistant, ANSWER),
        Message::new(Role::User, QUESTION),
    ];
    let text = template.render(&turns, true).map_err(model_error)?;
    let after_answer = text
        .find(ANSWER)
        .map(|at| at + ANSWER.len())
        .filter(|&at| text[at..].starts_with(end_text))
        .map(|at| at + end_text.len());
    let (Some(start), Some(question)) = (after_answer, text.find(QUESTION)) else {
        return Err(TrainError::Tokenizer(format!(
            "the chat template does not end an answer with {end_text:?} before the next user turn"
        )));
    };
    Ok((
        text[start..question].to_string(),
        text[question + QUESTION.len()..].to_string(),
    ))
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
        let ChatFormat::Own {
            user, assistant, ..
        } = &tok.format
        else {
            panic!("own tokenizer")
        };
        assert_eq!(prompt[0], *user);
        assert_eq!(&prompt[prompt.len() - 2..], &[tok.end, *assistant]);
        // Merges make it shorter than bytes.
        assert!(tok.encode(text).unwrap().len() < text.len());
    }

    #[test]
    fn saves_and_loads_the_same_tokenizer() {
        let tok = trained();
        let dir = verifine_test_support::scratch_dir("tok");
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
