//! The control and user-defined tokens of a GGUF SentencePiece vocabulary,
//! found in text in one left-to-right pass: a byte trie walked from each
//! position, so tokenizing costs the text's length times the longest
//! special, however many specials there are (rescanning the text once per
//! special made 50 000 of them quadratic: 4.6 s for 1 000 characters).

use std::collections::{HashMap, HashSet};

/// A special longer than this is left to the ordinary tokenizer: real ones
/// (`<|start_header_id|>`, `<|reserved_special_token_250|>`) are under 40
/// bytes, and the trie walk from each position costs up to this much.
pub const MAX_SPECIAL_TOKEN_BYTES: usize = 256;

#[derive(Clone, Default)]
struct Node {
    /// Children by next byte, sorted.
    next: Vec<(u8, u32)>,
    /// The special that ends here.
    id: Option<u32>,
}

/// The specials of a vocabulary.
#[derive(Clone)]
pub(crate) struct Specials {
    nodes: Vec<Node>,
    by_text: HashMap<String, u32>,
    ids: HashSet<u32>,
}

impl Specials {
    /// From `(text, id)` pairs; of two specials with the same text the
    /// first is kept.
    pub fn new(specials: impl IntoIterator<Item = (String, u32)>) -> Self {
        let mut this = Specials {
            nodes: vec![Node::default()],
            by_text: HashMap::new(),
            ids: HashSet::new(),
        };
        for (text, id) in specials {
            this.ids.insert(id);
            if this.by_text.contains_key(&text) {
                continue;
            }
            this.by_text.insert(text.clone(), id);
            if text.is_empty() || text.len() > MAX_SPECIAL_TOKEN_BYTES {
                continue;
            }
            let mut at = 0usize;
            for &byte in text.as_bytes() {
                at = match this.nodes[at].next.binary_search_by_key(&byte, |(b, _)| *b) {
                    Ok(i) => this.nodes[at].next[i].1 as usize,
                    Err(i) => {
                        this.nodes.push(Node::default());
                        let child = (this.nodes.len() - 1) as u32;
                        this.nodes[at].next.insert(i, (byte, child));
                        child as usize
                    }
                };
            }
            this.nodes[at].id = Some(id);
        }
        this
    }

    /// The longest special starting at the beginning of `text`, as (its
    /// length in bytes, its id).
    fn longest_at(&self, text: &[u8]) -> Option<(usize, u32)> {
        let mut at = 0usize;
        let mut found = None;
        for (i, byte) in text.iter().enumerate() {
            let node = &self.nodes[at];
            match node.next.binary_search_by_key(byte, |(b, _)| *b) {
                Ok(k) => at = node.next[k].1 as usize,
                Err(_) => break,
            }
            if let Some(id) = self.nodes[at].id {
                found = Some((i + 1, id));
            }
        }
        found
    }

    /// `text` cut at its specials: plain pieces and specials in order,
    /// leftmost first and, where several start at one place, the longest.
    pub fn split<'t>(&self, text: &'t str) -> Vec<Piece<'t>> {
        let mut pieces = Vec::new();
        let mut plain = 0;
        let mut at = 0;
        while at < text.len() {
            match self.longest_at(&text.as_bytes()[at..]) {
                Some((len, id)) => {
                    if plain < at {
                        pieces.push(Piece::Text(&text[plain..at]));
                    }
                    pieces.push(Piece::Special(id));
                    at += len;
                    plain = at;
                }
                None => {
                    at += text[at..].chars().next().map_or(1, char::len_utf8);
                }
            }
        }
        if plain < text.len() {
            pieces.push(Piece::Text(&text[plain..]));
        }
        pieces
    }

    /// Whether `id` is a special (for decoding without them).
    pub fn contains(&self, id: u32) -> bool {
        self.ids.contains(&id)
    }

    /// The id of a special written out.
    pub fn id(&self, text: &str) -> Option<u32> {
        self.by_text.get(text).copied()
    }
}

/// A piece of text cut at specials.
pub(crate) enum Piece<'t> {
    Text(&'t str),
    Special(u32),
}
