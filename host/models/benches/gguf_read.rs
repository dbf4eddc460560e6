//! Reading a GGUF header with candle's `Content::read` (the reader
//! verifine used before, the anchor) against verifine's bounded reader,
//! in the same run: a synthetic file with a realistic 49 152-token
//! byte-level vocabulary, the same file with a 50 MB array nothing reads,
//! and SmolLM2-135M Q4_1 (`models/fetch.sh smollm2`) when present, for
//! which a full model load (header, spec, every tensor dequantized,
//! tokenizer) is timed both ways too. Prints medians, their ratio
//! (verifine / candle) and the peak memory each header read held.
//!
//! `cargo bench -p verifine-models --bench gguf_read`

use candle_core::Device;
use candle_core::quantized::gguf_file::{self, Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};
use std::time::{Duration, Instant};
use verifine_models::{TextTokenizer, gguf};

/// Counts live bytes and their peak (the bench runs on one thread).
struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn track(delta: isize) {
    let now = LIVE.fetch_add(delta, Relaxed) + delta;
    PEAK.fetch_max(now, Relaxed);
}

// SAFETY: every call goes to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        track(layout.size() as isize);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        track(-(layout.size() as isize));
        // SAFETY: the caller's contract is passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        track(new as isize - layout.size() as isize);
        // SAFETY: the caller's contract is passed on.
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Median wall time of `rounds` runs of `f`, and the most memory one run
/// held beyond what was live before it.
fn time<T>(rounds: usize, mut f: impl FnMut() -> T) -> (Duration, f64) {
    let mut times = Vec::with_capacity(rounds);
    let mut peak = 0;
    for _ in 0..rounds {
        let before = LIVE.load(Relaxed);
        PEAK.store(before, Relaxed);
        let start = Instant::now();
        std::hint::black_box(f());
        times.push(start.elapsed());
        peak = peak.max(PEAK.load(Relaxed) - before);
    }
    times.sort();
    (times[rounds / 2], peak as f64 / (1 << 20) as f64)
}

fn compare<A, B>(what: &str, rounds: usize, old: impl FnMut() -> A, new: impl FnMut() -> B) {
    let (old, old_mib) = time(rounds, old);
    let (new, new_mib) = time(rounds, new);
    println!(
        "{what:<44} candle {:>9.2} ms {old_mib:>8.1} MiB | verifine {:>9.2} ms {new_mib:>8.1} MiB | ratio {:.3}",
        old.as_secs_f64() * 1e3,
        new.as_secs_f64() * 1e3,
        new.as_secs_f64() / old.as_secs_f64()
    );
}

fn candle_read(path: &Path) -> Content {
    let mut file = std::fs::File::open(path).unwrap();
    Content::read(&mut file).unwrap()
}

/// A header like SmolLM2's: 49 152 byte-level tokens, 48 900 merges,
/// token types, a chat template; `unused` adds a 50 MB `u8` array.
fn synthetic(path: &Path, unused: bool) {
    let tokens: Vec<Value> = (0..49_152)
        .map(|i| Value::String(format!("Ġtok{i:05}")))
        .collect();
    let merges: Vec<Value> = (0..48_900)
        .map(|i| Value::String(format!("Ġt ok{i:05}")))
        .collect();
    let types: Vec<Value> = (0..49_152).map(|_| Value::I32(1)).collect();
    let mut metadata = vec![
        ("general.architecture", Value::String("llama".into())),
        ("llama.block_count", Value::U32(30)),
        ("tokenizer.ggml.model", Value::String("gpt2".into())),
        ("tokenizer.ggml.tokens", Value::Array(tokens)),
        ("tokenizer.ggml.merges", Value::Array(merges)),
        ("tokenizer.ggml.token_type", Value::Array(types)),
        (
            "tokenizer.chat_template",
            Value::String("{% for m in messages %}{{ m.content }}{% endfor %}".repeat(20)),
        ),
    ];
    if unused {
        metadata.push((
            "hostile.unused",
            Value::Array((0..50_000_000).map(|_| Value::U8(7)).collect()),
        ));
    }
    let embedding = candle_core::Tensor::zeros((49_152, 64), candle_core::DType::F32, &Device::Cpu)
        .and_then(|t| QTensor::quantize(&t, GgmlDType::Q8_0))
        .unwrap();
    let metadata: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
    let mut file = std::fs::File::create(path).unwrap();
    gguf_file::write(&mut file, &metadata, &[("token_embd.weight", &embedding)]).unwrap();
}

fn main() {
    let dir = std::env::temp_dir().join(format!("verifine-gguf-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plain = dir.join("synthetic.gguf");
    synthetic(&plain, false);
    compare(
        "header, synthetic 49k-token vocabulary",
        31,
        || candle_read(&plain),
        || gguf::read_content(&plain).unwrap(),
    );
    let unused = dir.join("unused.gguf");
    synthetic(&unused, true);
    compare(
        "header, same + 50 MB array nothing reads",
        1,
        || candle_read(&unused),
        || gguf::read_content(&unused).unwrap(),
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let smollm: PathBuf = [env!("CARGO_MANIFEST_DIR"), "../../models/smollm2"]
        .iter()
        .collect::<PathBuf>()
        .join("SmolLM2-135M-Instruct.Q4_1.gguf");
    if !smollm.is_file() {
        println!("{} absent: `models/fetch.sh smollm2`", smollm.display());
        return;
    }
    compare(
        "header, SmolLM2-135M Q4_1",
        31,
        || candle_read(&smollm),
        || gguf::read_content(&smollm).unwrap(),
    );
    let load = |content: Content, mut file: std::fs::File| {
        let spec = gguf::spec(&content, &smollm).unwrap();
        let weights = gguf::weights(&content, &mut file, &spec, &smollm, &Device::Cpu).unwrap();
        let tokenizer = TextTokenizer::from_gguf(&content, &smollm).unwrap();
        (weights.len(), tokenizer.vocab_size())
    };
    compare(
        "full load, SmolLM2-135M Q4_1",
        5,
        || {
            let mut file = std::fs::File::open(&smollm).unwrap();
            let content = Content::read(&mut file).unwrap();
            load(content, file)
        },
        || {
            let (content, file) = gguf::read_content(&smollm).unwrap();
            load(content, file)
        },
    );
}
