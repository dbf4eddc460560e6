//! A GGUF file's counts, each bounded by `verifine_models`' limits and
//! checked against the tensors the file holds before any tensor is read
//! or anything (rotary tables, layer lists) is sized from it. A file that
//! claims a billion blocks, zero heads or 2^21-wide heads is refused here,
//! naming the metadata key.

use super::super::model::{DecoderError, Result};
use candle_core::quantized::gguf_file::{Content, Value};
use verifine_models::config::limits;

/// The counts the judge decoder is built from.
pub(super) struct Counts {
    pub(super) heads: usize,
    pub(super) kv_heads: usize,
    pub(super) blocks: usize,
    pub(super) width: usize,
    /// Width of one head (`attention.key_length` in gemma3).
    pub(super) head_dim: usize,
    /// Positions the rotary tables cover (at most 32 768).
    pub(super) context_length: usize,
    /// Gemma 3's local attention window.
    pub(super) sliding_window: Option<usize>,
}

fn refuse(why: String) -> DecoderError {
    DecoderError::Weights(why)
}

/// Reads and checks the counts of an `arch` model.
pub(super) fn counts(content: &Content, arch: &str, gemma: bool) -> Result<Counts> {
    let full = |k: &str| format!("{arch}.{k}");
    let count = |k: &str, max: usize| -> Result<Option<usize>> {
        let Some(value) = content.metadata.get(&full(k)) else {
            return Ok(None);
        };
        let n = match value {
            Value::Bool(_) => None,
            v => v.to_u64().ok(),
        };
        match n.filter(|&n| n > 0 && n <= max as u64) {
            Some(n) => Ok(Some(n as usize)),
            None => Err(refuse(format!(
                "{} = {value:?} must be an integer between 1 and {max}",
                full(k)
            ))),
        }
    };
    let required = |k: &str, max: usize| -> Result<usize> {
        count(k, max)?.ok_or_else(|| refuse(format!("{} is missing", full(k))))
    };
    let dims = |name: &str| content.tensor_infos.get(name).map(|t| t.shape.dims());
    let heads = required("attention.head_count", limits::MAX_HEADS)?;
    let kv_heads = count("attention.head_count_kv", limits::MAX_HEADS)?.unwrap_or(heads);
    if !heads.is_multiple_of(kv_heads) {
        return Err(refuse(format!(
            "{} = {kv_heads} must divide attention.head_count {heads}",
            full("attention.head_count_kv")
        )));
    }
    let blocks = required("block_count", limits::MAX_LAYERS)?;
    let held = content.tensor_infos.len();
    let last = format!("blk.{}.attn_q.weight", blocks - 1);
    if blocks > held / 9 || dims(&last).is_none() {
        return Err(refuse(format!(
            "{} = {blocks} but the file holds {held} tensors and no {last}",
            full("block_count")
        )));
    }
    let width = required("embedding_length", limits::MAX_HIDDEN)?;
    let embedding =
        dims("token_embd.weight").ok_or_else(|| refuse("no tensor token_embd.weight".into()))?;
    if embedding.len() != 2 || embedding[1] != width {
        return Err(refuse(format!(
            "{} = {width} but token_embd.weight is {embedding:?}",
            full("embedding_length")
        )));
    }
    let vocab = embedding[0];
    let key_length = count("attention.key_length", limits::MAX_HEAD_DIM)?;
    let head_dim = match key_length {
        Some(k) if gemma => k,
        _ if !width.is_multiple_of(heads) => {
            return Err(refuse(format!(
                "{} = {heads} must divide embedding_length {width}",
                full("attention.head_count")
            )));
        }
        _ => width / heads,
    };
    if !head_dim.is_multiple_of(2) || head_dim > limits::MAX_HEAD_DIM {
        return Err(refuse(format!(
            "heads of width {head_dim} ({}, {}): rotation needs an even width of at most {}",
            full("embedding_length"),
            full("attention.head_count"),
            limits::MAX_HEAD_DIM
        )));
    }
    let ff = match dims("blk.0.ffn_gate.weight") {
        Some([rows, _]) => *rows,
        _ => {
            return Err(refuse(
                "no 2-dimensional tensor blk.0.ffn_gate.weight".into(),
            ));
        }
    };
    if let Some(n) = count("feed_forward_length", limits::MAX_INTERMEDIATE)?
        && n != ff
    {
        return Err(refuse(format!(
            "{} = {n} but blk.0.ffn_gate.weight has {ff} rows",
            full("feed_forward_length")
        )));
    }
    let (q, kv) = (heads * head_dim, kv_heads * head_dim);
    let mut expected: Vec<(String, Vec<usize>)> = vec![
        ("output_norm.weight".into(), vec![width]),
        ("output.weight".into(), vec![vocab, width]),
    ];
    for i in 0..blocks {
        let b = |leaf: &str| format!("blk.{i}.{leaf}");
        expected.extend([
            (b("attn_norm.weight"), vec![width]),
            (b("attn_q.weight"), vec![q, width]),
            (b("attn_k.weight"), vec![kv, width]),
            (b("attn_v.weight"), vec![kv, width]),
            (b("attn_q.bias"), vec![q]),
            (b("attn_k.bias"), vec![kv]),
            (b("attn_v.bias"), vec![kv]),
            (b("attn_output.weight"), vec![width, q]),
            (b("ffn_norm.weight"), vec![width]),
            (b("ffn_gate.weight"), vec![ff, width]),
            (b("ffn_up.weight"), vec![ff, width]),
            (b("ffn_down.weight"), vec![width, ff]),
            (b("attn_q_norm.weight"), vec![head_dim]),
            (b("attn_k_norm.weight"), vec![head_dim]),
            (b("post_attention_norm.weight"), vec![width]),
            (b("post_ffw_norm.weight"), vec![width]),
        ]);
    }
    // The counts the shapes follow from, to name them when one is off.
    let mut sources = vec![
        full("embedding_length"),
        full("attention.head_count"),
        full("attention.head_count_kv"),
    ];
    if gemma && key_length.is_some() {
        sources.push(full("attention.key_length"));
    }
    sources.push(full("feed_forward_length"));
    let sources = sources.join(", ");
    // Missing tensors are named by the loader; present ones must fit.
    for (name, shape) in &expected {
        if let Some(found) = dims(name)
            && found != shape.as_slice()
        {
            return Err(refuse(format!(
                "tensor {name} is {found:?} but {sources} say {shape:?}"
            )));
        }
    }
    for k in [
        "attention.key_length",
        "attention.value_length",
        "rope.dimension_count",
    ] {
        if let Some(n) = count(k, limits::MAX_HEAD_DIM)?
            && n != head_dim
        {
            return Err(refuse(format!(
                "{} = {n} is not supported: heads are {head_dim} wide, rotated and attended whole",
                full(k)
            )));
        }
    }
    let context_length = required("context_length", limits::MAX_CONTEXT)?.min(32_768);
    let sliding_window = match gemma {
        true => Some(required("attention.sliding_window", limits::MAX_CONTEXT)?),
        false => None,
    };
    Ok(Counts {
        heads,
        kv_heads,
        blocks,
        width,
        head_dim,
        context_length,
        sliding_window,
    })
}
