//! The decoder's math, written once: RMSNorm, rotary position embeddings,
//! the gated MLP's activations (SwiGLU, GELU-tanh) and softmax, each as a
//! function over `f32` slices (a row, a head) with its backward pass where
//! training needs one, and as a candle op over tensors.
//!
//! Three decoders compute with these: training's candle path (autograd:
//! the reference the other two are tested against), training's
//! hand-written pass (`verifine-train`'s `model::manual`, which calls the
//! slice functions over its token rows on its own thread pool), and the
//! local judge (`verifine-judge`'s `local`, which calls the tensor ops).
//! The tensor ops run the slice functions on the CPU in f32 (computing in
//! f32 whatever the tensors' dtype) and fall back to the same maths
//! composed from candle ops on other devices. Each tensor op has a backward
//! pass (candle's own fused norm and rope kernels have none and drop
//! gradients silently: candle issue 2168), which a weight that is not a
//! variable does not get: a frozen norm costs no gradient.
//!
//! Attention's inner loop is here too, as a slice function only
//! ([`attention::attend_query`]: one query's scores, softmax and weighted
//! values over keys transposed once per key/value head): the judge runs
//! it over its KV cache with a sliding window, training's hand-written
//! pass over a batch row with padding masked, keeping the probabilities
//! for its backward pass (which is training's own). Off the CPU, and on
//! training's candle path, attention is candle's products and softmax.
//!
//! What is not here: projections. The judge multiplies quantized weights
//! with its own integer kernels (`verifine-judge`'s `local/int8`), training
//! multiplies dense f32 weights with LoRA adapters; they share no loop.
//!
//! Adding a layer type (an activation, a norm):
//! 1. write the slice function and, when it trains, its backward here,
//!    with the formula in a comment;
//! 2. give it a tensor op (a candle `CustomOp` whose `cpu_fwd` calls the
//!    slice function, `bwd` the backward, and a composed fallback off the
//!    CPU);
//! 3. test it in `tests.rs` against the definition in f64 and the backward
//!    against finite differences;
//! 4. use it from the judge (`local/model.rs`) and from both training
//!    paths (the candle path in `model/mod.rs`, the hand-written pass in
//!    `model/manual/layer.rs`); their parity tests compare the paths.

pub mod activation;
pub mod attention;
mod cpu;
pub mod norm;
pub mod rope;
pub mod softmax;
#[cfg(test)]
mod tests;

pub use activation::{Activation, gated};
pub use attention::{TransposedKeys, attend_query};
pub use cpu::{contiguous_data, row_len};
pub use norm::rms_norm;
pub use rope::{RopeStyle, rope, rotary_tables};
pub use softmax::{exp, softmax_in_place};
