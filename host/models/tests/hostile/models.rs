//! Model files are downloaded and hostile: every count, length, offset and
//! size they state is checked before anything is allocated from it, and
//! what nothing reads is stepped over. Each test builds the hostile file,
//! shows it refused (naming the file and the field) or contained, in
//! bounded time and memory, then loads a good model in the same process.

use crate::support::*;
use candle_core::Device;
use serde_json::json;
use std::path::Path;
use std::time::Duration;
use verifine_models::Pretrained;
use verifine_models::gguf::read_content;

/// Loose bounds: a refusal reads a header, not the file's claims.
const SECONDS: Duration = Duration::from_secs(10);
const MIB: usize = 1 << 20;

fn scratch(name: &str) -> verifine_test_support::ScratchDir {
    verifine_test_support::scratch_dir(&format!("hostile-{name}"))
}

/// Loads `path`, which must be refused within the bounds with an error
/// naming the file and `field`.
fn refused(path: &Path, field: &str) {
    let file = path.file_name().unwrap().to_string_lossy();
    refused_naming(path, &file, field);
}

/// Loads `path`, which must be refused within the bounds with an error
/// naming `file` and `field`.
fn refused_naming(path: &Path, file: &str, field: &str) {
    let (result, peak, took) = measured(|| Pretrained::load(path, &Device::Cpu));
    let error = result.expect_err("refused").to_string();
    assert!(
        error.contains(file) && error.contains(field),
        "{file}: expected {field}: {error}"
    );
    assert!(took < SECONDS, "{file}: took {took:?}");
    assert!(peak < 64 * MIB, "{file}: held {} MiB", peak / MIB);
}

fn good_model_loads(dir: &Path) {
    let path = dir.join("good.gguf");
    std::fs::write(&path, good().bytes()).unwrap();
    let model = Pretrained::load(&path, &Device::Cpu).unwrap();
    assert_eq!(model.spec.num_layers, SHAPE.1);
    assert!(!model.tokenizer.encode("a").unwrap().is_empty());
}

#[test]
fn metadata_arrays_nothing_reads_are_stepped_over_in_bounded_memory_and_time() {
    let dir = scratch("unread");
    let mut file = good();
    // 50 MB of bytes, 2 M strings and nested arrays, none read by anyone.
    file.set("hostile.bytes", array(U8, 50_000_000, &vec![7; 50_000_000]));
    let words: Vec<u8> = (0..2_000_000)
        .flat_map(|i| string(&format!("w{}", i % 1000)))
        .collect();
    file.set("hostile.strings", array(STRING, 2_000_000, &words));
    // Nested elements carry no type code of their own.
    let inner = array(U32, 1_000, &[0; 4_000])[4..].to_vec();
    file.set(
        "hostile.nested",
        array(ARRAY, 1_000, &inner.repeat(1_000)[..]),
    );
    file.set("hostile.text", strv(&"x".repeat(10 << 20)));
    let path = dir.join("unread.gguf");
    std::fs::write(&path, file.bytes()).unwrap();
    drop(file);
    let (read, peak, took) = measured(|| read_content(&path).unwrap());
    let (content, _) = read;
    assert!(took < SECONDS, "{took:?}");
    // candle's reader held 32 bytes per byte of such arrays (1.6 GB here).
    assert!(peak < 8 * MIB, "held {} MiB", peak / MIB);
    for unread in [
        "hostile.bytes",
        "hostile.strings",
        "hostile.nested",
        "hostile.text",
    ] {
        assert!(!content.metadata.contains_key(unread), "{unread} was kept");
    }
    assert!(content.metadata.contains_key("tokenizer.ggml.tokens"));
    // What is read still reads: the same file loads as a model.
    let (model, _, took) = measured(|| Pretrained::load(&path, &Device::Cpu).unwrap());
    assert_eq!(model.spec.num_layers, SHAPE.1);
    assert!(took < SECONDS, "{took:?}");
    good_model_loads(&dir);
}

#[test]
fn an_array_that_is_read_is_refused_past_the_memory_bound_before_it_is_allocated() {
    let dir = scratch("budget");
    let mut file = good();
    // 9 M scores: 36 MB on disk, 288 MiB as candle values.
    let n = 9_000_000u64;
    file.set(
        "tokenizer.ggml.scores",
        array(F32, n, &vec![0; 4 * n as usize]),
    );
    let path = dir.join("budget.gguf");
    std::fs::write(&path, file.bytes()).unwrap();
    drop(file);
    refused(&path, "tokenizer.ggml.scores");
    let (error, peak, _) = measured(|| read_content(&path).err().unwrap().to_string());
    assert!(error.contains("MAX_METADATA_BYTES"), "{error}");
    assert!(peak < 8 * MIB, "held {} MiB", peak / MIB);
    good_model_loads(&dir);
}

#[test]
fn malformed_headers_are_refused_naming_the_file_and_field() {
    let dir = scratch("headers");
    type Edit = fn(&mut Gguf);
    let cases: Vec<(&str, &str, Edit)> = vec![
        ("version", "version", |g| g.version = 7),
        ("tensors", "tensor_count", |g| {
            g.tensor_count = Some(1 << 40)
        }),
        ("keys", "metadata_kv_count", |g| g.kv_count = Some(1 << 40)),
        ("more_keys", "metadata_kv_count", |g| {
            g.kv_count = Some(60_000)
        }),
        ("align0", "general.alignment", |g| {
            g.set("general.alignment", u32v(0));
        }),
        ("align3", "general.alignment", |g| {
            g.set("general.alignment", u32v(3));
        }),
        ("align_text", "general.alignment", |g| {
            g.set("general.alignment", strv("32"));
        }),
        ("long_string", "general.name", |g| {
            g.set("general.name", value(STRING, &u64::MAX.to_le_bytes()));
        }),
        ("long_key", "metadata key #0", |g| {
            g.kvs.insert(0, ("k".repeat(70_000), u32v(1)));
        }),
        ("long_array", "general.tags", |g| {
            g.set("general.tags", array(U8, 1 << 62, &[]));
        }),
        ("long_kept_array", "tokenizer.ggml.tokens", |g| {
            g.set("tokenizer.ggml.tokens", array(STRING, 1 << 62, &[]));
        }),
        ("value_type", "general.odd", |g| {
            g.set("general.odd", value(77, &[0; 8]));
        }),
        ("bool", "general.flag", |g| {
            g.set("general.flag", value(BOOL, &[2]));
        }),
        ("nested", "general.deep", |g| {
            let mut deep = array(U8, 0, &[]);
            for _ in 0..8 {
                let payload = deep[4..].to_vec();
                deep = array(ARRAY, 1, &payload);
            }
            g.set("general.deep", deep);
        }),
        ("duplicate_key", "general.architecture", |g| {
            g.kvs.push(("general.architecture".into(), strv("llama")));
        }),
        ("dims5", "tensor token_embd.weight", |g| {
            g.tensor("token_embd.weight").dims = vec![1; 5];
        }),
        ("dims0", "tensor token_embd.weight", |g| {
            g.tensor("token_embd.weight").dims = vec![];
        }),
        ("empty_dim", "tensor token_embd.weight", |g| {
            g.tensor("token_embd.weight").dims = vec![32, 0];
        }),
        ("overflow", "tensor token_embd.weight", |g| {
            g.tensor("token_embd.weight").dims = vec![1 << 40, 1 << 40];
        }),
        ("dtype", "tensor token_embd.weight", |g| {
            g.tensor("token_embd.weight").dtype = 99;
        }),
        ("partial_block", "tensor token_embd.weight", |g| {
            g.tensor("token_embd.weight").dtype = 8; // Q8_0: blocks of 32
            g.tensor("token_embd.weight").dims[0] = 33;
        }),
        ("past_end", "tensor output_norm.weight", |g| {
            g.tensor("output_norm.weight").offset = Some(1 << 40);
        }),
        ("wraps", "tensor output_norm.weight", |g| {
            g.tensor("output_norm.weight").offset = Some(!31);
        }),
        ("unaligned", "tensor output_norm.weight", |g| {
            g.tensor("output_norm.weight").offset = Some(4);
        }),
        ("duplicate_tensor", "tensor blk.0.attn_q.weight", |g| {
            g.tensor("blk.0.attn_k.weight").name = "blk.0.attn_q.weight".into();
        }),
        ("shared_bytes", "tensor hostile.", |g| {
            // A thousand 16 KiB tensors over the same bytes claim 16 MiB.
            for i in 0..1000 {
                g.tensors.push(TensorEntry {
                    name: format!("hostile.{i}"),
                    dims: vec![1 << 12],
                    dtype: 0,
                    offset: Some(0),
                    data: Vec::new(),
                });
            }
        }),
    ];
    for (name, field, edit) in cases {
        let mut file = good();
        edit(&mut file);
        let path = dir.join(format!("{name}.gguf"));
        std::fs::write(&path, file.bytes()).unwrap();
        refused(&path, field);
    }
    let bytes = good().bytes();
    let cut = dir.join("cut.gguf");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    refused(&cut, "tensor");
    let cut = dir.join("cut_header.gguf");
    std::fs::write(&cut, &bytes[..2000]).unwrap();
    refused(&cut, "tokenizer.ggml.tokens");
    good_model_loads(&dir);
}

#[test]
fn counts_in_gguf_metadata_are_checked_against_the_tensors() {
    let dir = scratch("counts");
    let u64v = |v: u64| value(U64, &v.to_le_bytes());
    let cases = [
        ("llama.block_count", u32v(1_000_000_000)),
        ("llama.block_count", u32v(3)),
        ("llama.attention.head_count", u32v(0)),
        ("llama.attention.head_count", u32v(1 << 31)),
        ("llama.attention.head_count", u32v(3)),
        ("llama.attention.head_count", u32v(8)),
        ("llama.attention.head_count_kv", u32v(0)),
        ("llama.attention.head_count_kv", u32v(3)),
        ("llama.embedding_length", u32v(1 << 30)),
        ("llama.embedding_length", u32v(64)),
        ("llama.feed_forward_length", u32v(u32::MAX)),
        ("llama.feed_forward_length", u32v(65)),
        ("llama.context_length", u32v(0)),
        ("llama.context_length", u64v(1 << 60)),
        ("llama.rope.dimension_count", u32v(u32::MAX)),
        ("llama.block_count", strv("2")),
        ("llama.rope.freq_base", value(F32, &f32::NAN.to_le_bytes())),
        (
            "llama.attention.layer_norm_rms_epsilon",
            value(F32, &(-1f32).to_le_bytes()),
        ),
    ];
    for (i, (key, encoded)) in cases.into_iter().enumerate() {
        let mut file = good();
        file.set(key, encoded);
        let path = dir.join(format!("count{i}.gguf"));
        std::fs::write(&path, file.bytes()).unwrap();
        refused(&path, key);
    }
    // One token more than the embedding table has rows.
    let mut file = good();
    let (_, vocab) = read_pieces(&dir);
    let mut pieces = vocab;
    pieces.push("extra".into());
    file.set("tokenizer.ggml.tokens", strings(&pieces));
    let path = dir.join("vocab.gguf");
    std::fs::write(&path, file.bytes()).unwrap();
    refused(&path, "tokenizer.ggml.tokens");
    good_model_loads(&dir);
}

/// The good model's pieces, as read back.
fn read_pieces(dir: &Path) -> (std::path::PathBuf, Vec<String>) {
    let path = dir.join("pieces.gguf");
    std::fs::write(&path, good().bytes()).unwrap();
    let (content, _) = read_content(&path).unwrap();
    let pieces = content.metadata["tokenizer.ggml.tokens"]
        .to_vec()
        .unwrap()
        .iter()
        .map(|v| v.to_string().unwrap().clone())
        .collect();
    (path, pieces)
}

#[test]
fn counts_in_config_json_are_checked_against_the_weights() {
    let dir = scratch("config");
    let gguf = dir.join("good.gguf");
    std::fs::write(&gguf, good().bytes()).unwrap();
    let base = Pretrained::load(&gguf, &Device::Cpu).unwrap();
    let checkpoint = dir.join("checkpoint-dir");
    write_checkpoint_dir(&checkpoint, &base);
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(checkpoint.join("config.json")).unwrap())
            .unwrap();
    let cases = [
        ("num_hidden_layers", json!(1_000_000_000u64)),
        ("num_hidden_layers", json!(3)),
        ("num_attention_heads", json!(0)),
        ("num_attention_heads", json!(1u64 << 20)),
        ("num_key_value_heads", json!(0)),
        ("num_key_value_heads", json!(3)),
        ("hidden_size", json!(1u64 << 40)),
        ("head_dim", json!(1u64 << 62)),
        ("vocab_size", json!(1u64 << 40)),
        ("intermediate_size", json!(1u64 << 40)),
        ("max_position_embeddings", json!(1u64 << 60)),
        ("rope_theta", json!(-1.0)),
    ];
    for (key, hostile) in cases {
        let mut edited = config.clone();
        edited[key] = hostile;
        std::fs::write(checkpoint.join("config.json"), edited.to_string()).unwrap();
        refused_naming(&checkpoint, "checkpoint-dir", key);
    }
    // A config.json too long to be one.
    let mut long = config.clone();
    long["padding"] = json!("x".repeat(5 << 20));
    std::fs::write(checkpoint.join("config.json"), long.to_string()).unwrap();
    refused_naming(&checkpoint, "config.json", "longer than");
    // A safetensors header whose shape overflows.
    std::fs::write(checkpoint.join("config.json"), config.to_string()).unwrap();
    let header = br#"{"model.norm.weight":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,16]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    bytes.extend_from_slice(&[0; 16]);
    let weights = std::fs::read(checkpoint.join("model.safetensors")).unwrap();
    std::fs::write(checkpoint.join("model.safetensors"), bytes).unwrap();
    refused_naming(&checkpoint, "model.safetensors", "model.safetensors");
    std::fs::write(checkpoint.join("model.safetensors"), weights).unwrap();
    let model = Pretrained::load(&checkpoint, &Device::Cpu).unwrap();
    assert_eq!(model.spec, base.spec);
    good_model_loads(&dir);
}

/// A checkpoint directory of `base` that needs no tokenizer.json writer
/// (SentencePiece vocabularies from GGUF have none): the tokenizer is a
/// word-level one over the same pieces.
fn write_checkpoint_dir(dir: &Path, base: &Pretrained) {
    std::fs::create_dir_all(dir).unwrap();
    verifine_models::weights::save_safetensors(&base.weights, &dir.join("model.safetensors"))
        .unwrap();
    std::fs::write(
        dir.join("config.json"),
        base.spec.to_config_json().to_string(),
    )
    .unwrap();
    let (_, pieces) = read_pieces(dir);
    let vocab: serde_json::Map<String, serde_json::Value> = pieces
        .into_iter()
        .enumerate()
        .map(|(id, piece)| (piece, json!(id)))
        .collect();
    let tokenizer = json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null,
        "decoder": null, "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"}
    });
    std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).unwrap();
}
