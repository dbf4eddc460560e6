//! What the hostile-model tests build their files and measure with: a
//! GGUF writer that writes whatever header it is told (the hostile one
//! included), a good tiny llama to start from, and an allocator that
//! tells how much memory a call on this thread took at its peak.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::{Duration, Instant};

/// Counts the bytes each thread holds, so a test measures its own call
/// while others run beside it.
pub struct Counting;

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn track(delta: isize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call is forwarded to the system allocator unchanged; the
// bookkeeping allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            track(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            track(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is passed on.
        unsafe { System.dealloc(ptr, layout) };
        track(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        // SAFETY: the caller's contract is passed on.
        let p = unsafe { System.realloc(ptr, layout, new) };
        if !p.is_null() {
            track(new as isize - layout.size() as isize);
        }
        p
    }
}

/// Runs `f`, returning what it returned, the most memory it held at once
/// beyond what this thread held before, and how long it took.
pub fn measured<T>(f: impl FnOnce() -> T) -> (T, usize, Duration) {
    let before = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(before));
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    let peak = PEAK.with(Cell::get) - before;
    (out, peak.max(0) as usize, took)
}

/// GGUF value type codes.
pub const U8: u32 = 0;
pub const U32: u32 = 4;
pub const F32: u32 = 6;
pub const BOOL: u32 = 7;
pub const STRING: u32 = 8;
pub const ARRAY: u32 = 9;
pub const U64: u32 = 10;

pub fn string(s: &str) -> Vec<u8> {
    let mut out = (s.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(s.as_bytes());
    out
}

/// A typed value as a metadata entry stores it (type code first).
pub fn value(kind: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = kind.to_le_bytes().to_vec();
    out.extend_from_slice(payload);
    out
}

pub fn u32v(v: u32) -> Vec<u8> {
    value(U32, &v.to_le_bytes())
}

pub fn strv(s: &str) -> Vec<u8> {
    value(STRING, &string(s))
}

/// An array of `n` elements of `kind` whose encoded elements are `payload`.
pub fn array(kind: u32, n: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = ARRAY.to_le_bytes().to_vec();
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

pub fn strings(items: &[String]) -> Vec<u8> {
    let payload: Vec<u8> = items.iter().flat_map(|s| string(s)).collect();
    array(STRING, items.len() as u64, &payload)
}

pub fn f32s(items: &[f32]) -> Vec<u8> {
    let payload: Vec<u8> = items.iter().flat_map(|x| x.to_le_bytes()).collect();
    array(F32, items.len() as u64, &payload)
}

/// One tensor: dims in GGUF order (innermost first), f32 data unless the
/// dtype says otherwise; `offset` overrides the packed one.
pub struct TensorEntry {
    pub name: String,
    pub dims: Vec<u64>,
    pub dtype: u32,
    pub offset: Option<u64>,
    pub data: Vec<u8>,
}

/// A GGUF file as written: each part replaceable by a test.
pub struct Gguf {
    pub version: u32,
    pub tensor_count: Option<u64>,
    pub kv_count: Option<u64>,
    pub kvs: Vec<(String, Vec<u8>)>,
    pub tensors: Vec<TensorEntry>,
}

impl Gguf {
    /// Sets `key` (replacing it where present).
    pub fn set(&mut self, key: &str, encoded: Vec<u8>) -> &mut Self {
        match self.kvs.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = encoded,
            None => self.kvs.push((key.into(), encoded)),
        }
        self
    }

    pub fn tensor(&mut self, name: &str) -> &mut TensorEntry {
        self.tensors.iter_mut().find(|t| t.name == name).unwrap()
    }

    pub fn bytes(&self) -> Vec<u8> {
        let mut out = 0x4655_4747u32.to_le_bytes().to_vec();
        out.extend_from_slice(&self.version.to_le_bytes());
        let tensors = self.tensor_count.unwrap_or(self.tensors.len() as u64);
        out.extend_from_slice(&tensors.to_le_bytes());
        let kvs = self.kv_count.unwrap_or(self.kvs.len() as u64);
        out.extend_from_slice(&kvs.to_le_bytes());
        for (key, encoded) in &self.kvs {
            out.extend_from_slice(&string(key));
            out.extend_from_slice(encoded);
        }
        let pad = |n: u64| n.div_ceil(32) * 32;
        let mut offset = 0u64;
        for t in &self.tensors {
            out.extend_from_slice(&string(&t.name));
            out.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&t.dtype.to_le_bytes());
            out.extend_from_slice(&t.offset.unwrap_or(offset).to_le_bytes());
            offset += pad(t.data.len() as u64);
        }
        out.resize(pad(out.len() as u64) as usize, 0);
        for t in &self.tensors {
            out.extend_from_slice(&t.data);
            out.resize(pad(out.len() as u64) as usize, 0);
        }
        out
    }
}

/// SentencePiece pieces: control tokens, the 256 byte tokens, a few words.
fn pieces() -> Vec<String> {
    let mut pieces: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    pieces.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    pieces.extend(["\u{2581}YES", "\u{2581}NO", "\u{2581}a", "a"].map(String::from));
    pieces
}

/// Width, blocks, heads, KV heads, MLP width of the good model.
pub const SHAPE: (usize, usize, usize, usize, usize) = (32, 2, 4, 2, 64);

/// A good tiny llama: 2 blocks of width 32, 4 heads over 2 KV heads,
/// f32 weights, a SentencePiece vocabulary.
pub fn good() -> Gguf {
    let (width, blocks, heads, kv_heads, ff) = SHAPE;
    let pieces = pieces();
    let vocab = pieces.len();
    let kv = kv_heads * width / heads;
    let tensor = |name: String, rows: usize, cols: usize| {
        let data = (0..rows * cols)
            .flat_map(|i| (((i * 7919) % 97) as f32 / 970.0 - 0.05).to_le_bytes())
            .collect();
        let dims = match rows {
            1 => vec![cols as u64],
            _ => vec![cols as u64, rows as u64],
        };
        TensorEntry {
            name,
            dims,
            dtype: 0,
            offset: None,
            data,
        }
    };
    let mut tensors = vec![tensor("token_embd.weight".into(), vocab, width)];
    for i in 0..blocks {
        let b = |leaf: &str| format!("blk.{i}.{leaf}");
        tensors.extend([
            tensor(b("attn_norm.weight"), 1, width),
            tensor(b("attn_q.weight"), width, width),
            tensor(b("attn_k.weight"), kv, width),
            tensor(b("attn_v.weight"), kv, width),
            tensor(b("attn_output.weight"), width, width),
            tensor(b("ffn_norm.weight"), 1, width),
            tensor(b("ffn_gate.weight"), ff, width),
            tensor(b("ffn_up.weight"), ff, width),
            tensor(b("ffn_down.weight"), width, ff),
        ]);
    }
    tensors.push(tensor("output_norm.weight".into(), 1, width));
    let scores: Vec<f32> = (0..vocab).map(|i| -(i as f32)).collect();
    let u = |v: usize| u32v(v as u32);
    let kvs = vec![
        ("general.architecture", strv("llama")),
        ("llama.context_length", u(128)),
        ("llama.embedding_length", u(width)),
        ("llama.block_count", u(blocks)),
        ("llama.feed_forward_length", u(ff)),
        ("llama.attention.head_count", u(heads)),
        ("llama.attention.head_count_kv", u(kv_heads)),
        ("llama.rope.dimension_count", u(width / heads)),
        ("tokenizer.ggml.model", strv("llama")),
        ("tokenizer.ggml.tokens", strings(&pieces)),
        ("tokenizer.ggml.scores", f32s(&scores)),
        ("tokenizer.ggml.bos_token_id", u(1)),
        ("tokenizer.ggml.eos_token_id", u(2)),
    ];
    Gguf {
        version: 3,
        tensor_count: None,
        kv_count: None,
        kvs: kvs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        tensors,
    }
}

/// The most memory this test process may have held at any point: the
/// refused inputs, unbounded, would take tens of gigabytes.
pub const MEMORY: u64 = 1 << 30;

/// Checks the process's peak resident memory (Linux's `VmHWM`) against
/// [`MEMORY`].
pub fn assert_memory_bounded() {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return;
    };
    let peak_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    assert!(peak_kib * 1024 < MEMORY, "peak memory {peak_kib} KiB");
}
