//! A SentencePiece tokenizer read from a GGUF file's vocabulary
//! (`tokenizer.ggml.model = "llama"`), tokenizing as llama.cpp does: spaces
//! become `▁` (with one prefixed), the text is split into characters, and
//! adjacent pieces are merged best-score first (leftmost on a tie) while
//! the merge is a vocabulary entry; a character the vocabulary lacks falls
//! back to its UTF-8 byte tokens `<0xXX>`. Text is never parsed for special
//! tokens, so a prompt cannot smuggle in `</s>`.

use candle_core::quantized::gguf_file::{Content, Value};
use std::collections::{BinaryHeap, HashMap};

const SPACE: char = '\u{2581}';

/// The vocabulary and the special ids the prompt needs.
#[derive(Clone)]
pub struct SpmTokenizer {
    pieces: Vec<String>,
    scores: Vec<f32>,
    ids: HashMap<String, u32>,
    byte_ids: [Option<u32>; 256],
    /// Prepended to every prompt when the model asks for it.
    pub bos: Option<u32>,
    /// Ends an answer.
    pub eos: Option<u32>,
    add_space_prefix: bool,
}

/// A candidate merge of two adjacent pieces.
#[derive(PartialEq)]
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    len: usize,
}

impl Eq for Bigram {}

impl Ord for Bigram {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.score
            .total_cmp(&other.score)
            .then(other.left.cmp(&self.left))
    }
}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A piece of the text during merging: a byte range, linked to its
/// neighbours (`len == 0` once merged into its left neighbour).
#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

impl SpmTokenizer {
    /// Reads the vocabulary of a GGUF file; refuses a non-SentencePiece one.
    pub fn from_gguf(content: &Content) -> Result<Self, String> {
        let meta = |key: &str| content.metadata.get(key);
        let model = meta("tokenizer.ggml.model")
            .and_then(|v| v.to_string().ok())
            .map(String::as_str)
            .unwrap_or("(none)");
        if model != "llama" {
            return Err(format!(
                "tokenizer.ggml.model is {model:?}; only SentencePiece (\"llama\") vocabularies are supported"
            ));
        }
        let list = |key: &str| -> Result<&Vec<Value>, String> {
            meta(key)
                .ok_or_else(|| format!("{key} is missing"))?
                .to_vec()
                .map_err(|e| format!("{key}: {e}"))
        };
        let pieces: Vec<String> = list("tokenizer.ggml.tokens")?
            .iter()
            .map(|v| v.to_string().cloned().map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        let scores: Vec<f32> = match meta("tokenizer.ggml.scores") {
            Some(_) => list("tokenizer.ggml.scores")?
                .iter()
                .map(|v| v.to_f32().map_err(|e| e.to_string()))
                .collect::<Result<_, _>>()?,
            None => vec![0.0; pieces.len()],
        };
        if scores.len() != pieces.len() {
            return Err(format!(
                "{} token scores for {} tokens",
                scores.len(),
                pieces.len()
            ));
        }
        let id = |key: &str| meta(key).and_then(|v| v.to_u32().ok());
        let flag =
            |key: &str, default: bool| meta(key).and_then(|v| v.to_bool().ok()).unwrap_or(default);
        Ok(Self::new(
            pieces,
            scores,
            id("tokenizer.ggml.bos_token_id")
                .filter(|_| flag("tokenizer.ggml.add_bos_token", true)),
            id("tokenizer.ggml.eos_token_id"),
            flag("tokenizer.ggml.add_space_prefix", true),
        ))
    }

    /// A tokenizer over `pieces` (index = id) and their merge scores.
    pub fn new(
        pieces: Vec<String>,
        scores: Vec<f32>,
        bos: Option<u32>,
        eos: Option<u32>,
        add_space_prefix: bool,
    ) -> Self {
        let mut ids = HashMap::new();
        let mut byte_ids = [None; 256];
        for (id, piece) in pieces.iter().enumerate() {
            ids.entry(piece.clone()).or_insert(id as u32);
            if let Some(byte) = byte_piece(piece) {
                byte_ids[byte as usize] = Some(id as u32);
            }
        }
        SpmTokenizer {
            pieces,
            scores,
            ids,
            byte_ids,
            bos,
            eos,
            add_space_prefix,
        }
    }

    /// The id of a piece, if the vocabulary has it.
    pub fn id_of(&self, piece: &str) -> Option<u32> {
        self.ids.get(piece).copied()
    }

    /// The piece of an id.
    pub fn piece(&self, id: u32) -> Option<&str> {
        self.pieces.get(id as usize).map(String::as_str)
    }

    /// Vocabulary size.
    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    /// Whether the vocabulary is empty.
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// Token ids of `text`, with BOS first when the model wants one.
    pub fn encode(&self, text: &str, with_bos: bool) -> Vec<u32> {
        let mut out = Vec::new();
        if with_bos {
            out.extend(self.bos);
        }
        if text.is_empty() {
            return out;
        }
        let mut normalized = String::with_capacity(text.len() + 3);
        if self.add_space_prefix {
            normalized.push(SPACE);
        }
        normalized.extend(text.chars().map(|c| if c == ' ' { SPACE } else { c }));
        self.merge(&normalized, &mut out);
        out
    }

    /// Token ids of `text` continuing a prompt: no BOS, no space prefixed.
    pub fn encode_continuation(&self, text: &str) -> Vec<u32> {
        let normalized: String = text
            .chars()
            .map(|c| if c == ' ' { SPACE } else { c })
            .collect();
        let mut out = Vec::new();
        self.merge(&normalized, &mut out);
        out
    }

    fn merge(&self, text: &str, out: &mut Vec<u32>) {
        let mut symbols: Vec<Symbol> = text
            .char_indices()
            .map(|(start, c)| Symbol {
                start,
                len: c.len_utf8(),
                prev: None,
                next: None,
            })
            .collect();
        let n = symbols.len();
        for (i, s) in symbols.iter_mut().enumerate() {
            s.prev = i.checked_sub(1);
            s.next = (i + 1 < n).then_some(i + 1);
        }
        let mut queue = BinaryHeap::new();
        for i in 1..n {
            self.push_bigram(text, &symbols, i - 1, i, &mut queue);
        }
        while let Some(bigram) = queue.pop() {
            let (left, right) = (symbols[bigram.left], symbols[bigram.right]);
            // Stale: one side was merged away since this bigram was queued.
            if left.len == 0 || right.len == 0 || left.len + right.len != bigram.len {
                continue;
            }
            symbols[bigram.left].len += right.len;
            symbols[bigram.left].next = right.next;
            symbols[bigram.right].len = 0;
            if let Some(next) = right.next {
                symbols[next].prev = Some(bigram.left);
            }
            if let Some(prev) = left.prev {
                self.push_bigram(text, &symbols, prev, bigram.left, &mut queue);
            }
            if let Some(next) = right.next {
                self.push_bigram(text, &symbols, bigram.left, next, &mut queue);
            }
        }
        let mut at = (n > 0).then_some(0);
        while let Some(i) = at {
            let s = symbols[i];
            let piece = &text[s.start..s.start + s.len];
            match self.ids.get(piece) {
                Some(&id) => out.push(id),
                None => out.extend(piece.bytes().filter_map(|b| self.byte_ids[b as usize])),
            }
            at = s.next;
        }
    }

    fn push_bigram(
        &self,
        text: &str,
        symbols: &[Symbol],
        left: usize,
        right: usize,
        queue: &mut BinaryHeap<Bigram>,
    ) {
        let (l, r) = (symbols[left], symbols[right]);
        let piece = &text[l.start..r.start + r.len];
        if let Some(&id) = self.ids.get(piece) {
            queue.push(Bigram {
                score: self.scores[id as usize],
                left,
                right,
                len: piece.len(),
            });
        }
    }

    /// The bytes a token stands for (`▁` as a space, `<0xXX>` as its byte).
    pub fn token_bytes(&self, id: u32) -> Vec<u8> {
        let Some(piece) = self.pieces.get(id as usize) else {
            return Vec::new();
        };
        match byte_piece(piece) {
            Some(byte) => vec![byte],
            None => piece.replace(SPACE, " ").into_bytes(),
        }
    }

    /// The text of an answer's tokens (invalid UTF-8 replaced).
    pub fn decode(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids.iter().flat_map(|&id| self.token_bytes(id)).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

fn byte_piece(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    (hex.len() == 2).then(|| u8::from_str_radix(hex, 16).ok())?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokenizer() -> SpmTokenizer {
        let mut pieces: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
        pieces.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
        let words = ["▁a", "▁ab", "ab", "b", "a", "▁", "c", "bc"];
        pieces.extend(words.iter().map(|w| w.to_string()));
        let mut scores = vec![0.0; 259];
        // Higher scores merge first: "bc" (-1) beats "ab" (-2).
        scores.extend([-4.0, -3.0, -2.0, -5.0, -6.0, -7.0, -8.0, -1.0]);
        SpmTokenizer::new(pieces, scores, Some(1), Some(2), true)
    }

    fn id(t: &SpmTokenizer, piece: &str) -> u32 {
        t.ids[piece]
    }

    #[test]
    fn merges_best_score_first_and_falls_back_to_bytes() {
        let t = tokenizer();
        // "▁abc": "bc" merges before "ab", then "▁a" + "bc" is no entry.
        assert_eq!(t.encode("abc", true), vec![1, id(&t, "▁a"), id(&t, "bc")]);
        // "é" is not in the vocabulary: its two UTF-8 bytes.
        assert_eq!(
            t.encode("é", false),
            vec![id(&t, "▁"), id(&t, "<0xC3>"), id(&t, "<0xA9>")]
        );
        assert_eq!(t.decode(&t.encode("ab é", false)), " ab é");
    }

    #[test]
    fn special_token_text_is_only_text() {
        let t = tokenizer();
        assert!(!t.encode("</s>", false).contains(&2));
    }
}
