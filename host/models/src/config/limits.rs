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
