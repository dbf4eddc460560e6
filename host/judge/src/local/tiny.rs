//! Random-weight llama GGUF files for tests and benchmarks of the local
//! backend: the model's verdicts mean nothing, but loading, tokenizing,
//! prefix reuse, constrained choices and cost are exercised with nothing
//! downloaded. (CI's cross-check against llama.cpp uses a file written by
//! the `gguf` Python package instead, so the format is not only checked
//! against this writer.)

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use std::path::Path;
use verifine_base::SplitMix64;

/// The shape of a tiny model.
#[derive(Debug, Clone, Copy)]
pub struct TinySpec {
    /// Hidden width.
    pub width: usize,
    /// JudgeDecoder blocks.
    pub layers: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (grouped-query attention when fewer than `heads`).
    pub kv_heads: usize,
    /// MLP width.
    pub ff: usize,
    /// Longest sequence.
    pub context: usize,
    /// Weights stored as Q8_0 (widths must be multiples of 32) instead of f32.
    pub q8: bool,
    /// Seeds the weights.
    pub seed: u64,
}

impl Default for TinySpec {
    fn default() -> Self {
        TinySpec {
            width: 64,
            layers: 2,
            heads: 4,
            kv_heads: 2,
            ff: 128,
            context: 2048,
            q8: false,
            seed: 0,
        }
    }
}

/// The vocabulary: `<unk>`, `<s>`, `</s>`, the 256 byte tokens, then word
/// pieces (with and without the `▁` space mark), scored so that earlier
/// pieces merge first.
pub fn vocabulary() -> (Vec<String>, Vec<f32>) {
    let mut pieces: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    pieces.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    let words = "YES NO yes no the a is it of and to in criteria met true false";
    let alphanumeric = ('a'..='z').chain('A'..='Z').chain('0'..='9');
    let mut extra: Vec<String> = words.split(' ').map(|w| format!("\u{2581}{w}")).collect();
    extra.extend(alphanumeric.clone().map(|c| format!("\u{2581}{c}")));
    extra.extend(alphanumeric.map(String::from));
    extra.extend(
        "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
            .chars()
            .map(String::from),
    );
    extra.push("\u{2581}".into());
    for piece in extra {
        if !pieces.contains(&piece) {
            pieces.push(piece);
        }
    }
    let scores = (0..pieces.len())
        .map(|i| if i < 259 { 0.0 } else { -((i - 259) as f32) })
        .collect();
    (pieces, scores)
}

/// Random weights of shape `spec`, named as llama.cpp's GGUF names them.
pub fn random_weights(spec: &TinySpec) -> Result<Vec<(String, Tensor)>, String> {
    let e = |err: candle_core::Error| err.to_string();
    let vocab = vocabulary().0.len();
    let head_dim = spec.width / spec.heads;
    let kv = spec.kv_heads * head_dim;
    let mut rng = SplitMix64::new(spec.seed);
    let mut random = |rows: usize, cols: usize, scale: f32| -> Result<Tensor, String> {
        let values: Vec<f32> = (0..rows * cols)
            .map(|_| {
                // Sum of three uniforms: roughly normal, mean 0.
                let u: f32 = (0..3)
                    .map(|_| (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32)
                    .sum();
                (u - 1.5) * 2.0 * scale
            })
            .collect();
        Tensor::from_vec(values, (rows, cols), &Device::Cpu).map_err(e)
    };
    let ones = |n: usize| Tensor::ones(n, candle_core::DType::F32, &Device::Cpu).map_err(e);
    let mut tensors = vec![(
        "token_embd.weight".to_string(),
        random(vocab, spec.width, 0.5)?,
    )];
    for i in 0..spec.layers {
        let p = format!("blk.{i}");
        tensors.push((format!("{p}.attn_norm.weight"), ones(spec.width)?));
        tensors.push((
            format!("{p}.attn_q.weight"),
            random(spec.width, spec.width, 0.05)?,
        ));
        tensors.push((format!("{p}.attn_k.weight"), random(kv, spec.width, 0.05)?));
        tensors.push((format!("{p}.attn_v.weight"), random(kv, spec.width, 0.05)?));
        tensors.push((
            format!("{p}.attn_output.weight"),
            random(spec.width, spec.width, 0.05)?,
        ));
        tensors.push((format!("{p}.ffn_norm.weight"), ones(spec.width)?));
        tensors.push((
            format!("{p}.ffn_gate.weight"),
            random(spec.ff, spec.width, 0.05)?,
        ));
        tensors.push((
            format!("{p}.ffn_up.weight"),
            random(spec.ff, spec.width, 0.05)?,
        ));
        tensors.push((
            format!("{p}.ffn_down.weight"),
            random(spec.width, spec.ff, 0.05)?,
        ));
    }
    tensors.push(("output_norm.weight".into(), ones(spec.width)?));
    tensors.push(("output.weight".into(), random(vocab, spec.width, 0.5)?));
    Ok(tensors)
}

/// Writes a random llama model of shape `spec` to `path`.
pub fn write_tiny_llama(path: &Path, spec: TinySpec) -> Result<(), String> {
    write_llama_gguf(path, &spec, &random_weights(&spec)?)
}

/// Writes `tensors` (GGUF names, [`vocabulary`]'s size) as a llama GGUF of
/// shape `spec`: block matrices as Q8_0 when `spec.q8`, the rest f32.
pub fn write_llama_gguf(
    path: &Path,
    spec: &TinySpec,
    tensors: &[(String, Tensor)],
) -> Result<(), String> {
    let e = |err: candle_core::Error| err.to_string();
    let (pieces, scores) = vocabulary();
    let head_dim = spec.width / spec.heads;
    let tensors: Vec<(String, QTensor)> = tensors
        .iter()
        .map(|(name, t)| {
            let block_matrix = name.starts_with("blk.") && t.dims().len() == 2;
            let dtype = if spec.q8 && block_matrix {
                GgmlDType::Q8_0
            } else {
                GgmlDType::F32
            };
            QTensor::quantize(t, dtype)
                .map(|q| (name.clone(), q))
                .map_err(e)
        })
        .collect::<Result<_, _>>()?;
    let u32v = |v: usize| Value::U32(v as u32);
    let metadata: Vec<(&str, Value)> = vec![
        ("general.architecture", Value::String("llama".into())),
        ("llama.context_length", u32v(spec.context)),
        ("llama.embedding_length", u32v(spec.width)),
        ("llama.block_count", u32v(spec.layers)),
        ("llama.feed_forward_length", u32v(spec.ff)),
        ("llama.attention.head_count", u32v(spec.heads)),
        ("llama.attention.head_count_kv", u32v(spec.kv_heads)),
        ("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5)),
        ("llama.rope.dimension_count", u32v(head_dim)),
        ("tokenizer.ggml.model", Value::String("llama".into())),
        (
            "tokenizer.ggml.tokens",
            Value::Array(pieces.into_iter().map(Value::String).collect()),
        ),
        (
            "tokenizer.ggml.scores",
            Value::Array(scores.into_iter().map(Value::F32).collect()),
        ),
        ("tokenizer.ggml.unknown_token_id", Value::U32(0)),
        ("tokenizer.ggml.bos_token_id", Value::U32(1)),
        ("tokenizer.ggml.eos_token_id", Value::U32(2)),
        ("tokenizer.ggml.add_bos_token", Value::Bool(true)),
    ];
    let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    verifine_base::write_atomically(path, |w| {
        let mut buffer = std::io::Cursor::new(Vec::new());
        gguf_file::write(&mut buffer, &metadata, &tensors).map_err(std::io::Error::other)?;
        w.write_all(buffer.get_ref())
    })
    .map_err(|err| err.to_string())
}
