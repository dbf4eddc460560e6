//! Bounds on a decoder's counts, far above any released model (noted for
//! each) and far below what would exhaust memory: a count past one is a
//! broken or hostile file, refused naming the field before anything is
//! sized from it (tensor lists, rotary tables, caches). Counts within them
//! are still checked against the tensors the file holds.

/// Decoder blocks (Llama 3.1 405B: 126).
pub const MAX_LAYERS: usize = 1 << 12;
/// Residual width (largest released: 25 600).
pub const MAX_HIDDEN: usize = 1 << 17;
/// MLP width (Llama 3.1 405B: 53 248).
pub const MAX_INTERMEDIATE: usize = 1 << 20;
/// Query or key/value heads (largest released: 128).
pub const MAX_HEADS: usize = 1 << 12;
/// Width of one head (Gemma: 256); rotary tables grow with it.
pub const MAX_HEAD_DIM: usize = 1 << 10;
/// Vocabulary (Gemma 3: 262 144).
pub const MAX_VOCAB: usize = 1 << 24;
/// Context length (Llama 4 Scout: 10 485 760).
pub const MAX_CONTEXT: usize = 1 << 24;
/// Bytes of a `config.json` (released ones are a few KiB; label maps
/// of classifiers reach hundreds). Read whole, so bounded.
pub const MAX_CONFIG_JSON_BYTES: u64 = 4 << 20;

/// A count a decoder states, with its bound and its name in each format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Count {
    Vocab,
    Hidden,
    Layers,
    Heads,
    KvHeads,
    Intermediate,
    Context,
}

impl Count {
    /// The largest value accepted (the smallest is 1).
    pub(crate) fn max(self) -> usize {
        match self {
            Count::Vocab => MAX_VOCAB,
            Count::Hidden => MAX_HIDDEN,
            Count::Layers => MAX_LAYERS,
            Count::Heads | Count::KvHeads => MAX_HEADS,
            Count::Intermediate => MAX_INTERMEDIATE,
            Count::Context => MAX_CONTEXT,
        }
    }

    /// Its key in a `config.json`.
    pub(crate) fn config_field(self) -> &'static str {
        match self {
            Count::Vocab => "vocab_size",
            Count::Hidden => "hidden_size",
            Count::Layers => "num_hidden_layers",
            Count::Heads => "num_attention_heads",
            Count::KvHeads => "num_key_value_heads",
            Count::Intermediate => "intermediate_size",
            Count::Context => "max_position_embeddings",
        }
    }

    /// Its metadata key in a GGUF file of architecture `arch` (the
    /// vocabulary is the length of the token list).
    pub(crate) fn gguf_key(self, arch: &str) -> String {
        let key = match self {
            Count::Vocab => return "tokenizer.ggml.tokens".to_string(),
            Count::Hidden => "embedding_length",
            Count::Layers => "block_count",
            Count::Heads => "attention.head_count",
            Count::KvHeads => "attention.head_count_kv",
            Count::Intermediate => "feed_forward_length",
            Count::Context => "context_length",
        };
        format!("{arch}.{key}")
    }
}
