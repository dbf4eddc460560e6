//! A local judge's vocabulary: the model's own tokenizer (read by
//! `verifine-models`, as training reads it: `tokenizer.json`, or a GGUF
//! file's SentencePiece or GPT-2 byte-level BPE vocabulary), with the ids
//! that begin a prompt and end an answer.

use verifine_models::TextTokenizer;
use verifine_models::spm::SpmTokenizer;

/// A local judge's tokenizer.
pub struct Vocabulary {
    tokenizer: TextTokenizer,
    /// Prepended to a prompt, only when the model's tokenizer adds one
    /// (`add_bos_token`): a chat template that writes its own begin token
    /// must not get a second.
    bos: Option<u32>,
    /// Any of these ends an answer.
    stops: Vec<u32>,
}

/// End-of-turn tokens of the chat formats in use; an answer ends at them
/// even when the model's metadata names only its end-of-text token.
const END_OF_TURN: [&str; 3] = ["<|im_end|>", "<end_of_turn>", "<|eot_id|>"];

impl Vocabulary {
    /// `tokenizer`, with `bos` prepended to prompts when `add_bos` and
    /// `eos` (plus the end-of-turn tokens it knows) ending answers.
    pub fn new(tokenizer: TextTokenizer, bos: Option<u32>, add_bos: bool, eos: &[u32]) -> Self {
        let mut stops = eos.to_vec();
        for token in END_OF_TURN {
            if let Some(id) = tokenizer.token_to_id(token)
                && !stops.contains(&id)
            {
                stops.push(id);
            }
        }
        Vocabulary {
            tokenizer,
            bos: bos.filter(|_| add_bos),
            stops,
        }
    }

    /// The tokenizer itself.
    pub fn tokenizer(&self) -> &TextTokenizer {
        &self.tokenizer
    }

    /// The SentencePiece tokenizer, when the vocabulary is one.
    pub fn spm(&self) -> Option<&SpmTokenizer> {
        self.tokenizer.spm()
    }

    /// Tokens in the vocabulary.
    pub fn len(&self) -> usize {
        self.tokenizer.vocab_size()
    }

    /// Whether it has no tokens.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `id` ends an answer.
    pub fn is_stop(&self, id: u32) -> bool {
        self.stops.contains(&id)
    }

    /// A prompt's ids: control tokens written in the text read as their
    /// ids, the begin token first when the model adds one. A text that
    /// cannot be encoded becomes no tokens, and the query then fails on its
    /// empty prompt rather than on a panic.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let body = self.tokenizer.encode(text).unwrap_or_default();
        let bos = self.bos.filter(|b| body.first() != Some(b));
        bos.into_iter().chain(body).collect()
    }

    /// Ids of text that continues a prompt (no begin token, no space
    /// prefixed by SentencePiece).
    pub fn encode_continuation(&self, text: &str) -> Vec<u32> {
        match self.tokenizer.spm() {
            Some(spm) => spm.encode_continuation(text),
            None => self.tokenizer.encode(text).unwrap_or_default(),
        }
    }

    /// The text of ids (invalid UTF-8 replaced).
    pub fn decode(&self, ids: &[u32]) -> String {
        self.tokenizer.decode(ids, false).unwrap_or_default()
    }
}
