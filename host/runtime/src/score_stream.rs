//! Scoring a JSONL file of any size. Rows are read, parsed, scored and
//! written back in chunks of whole plugin batches, every stage on the
//! worker threads themselves: a worker takes the next chunk, parses,
//! scores and formats it, and writes whatever chunks are next in order, so
//! `threads` workers are all the threads there are and keep that many
//! cores busy. Output rows keep the input's order. At most a few chunks per
//! worker are held at once, and the ids seen spill to a scratch file past
//! a bound ([`SeenIds`]), so memory stays flat whatever the file's size.

mod workers;

use crate::Provenance;
use crate::error::{Result, RuntimeError};
use crate::rows::{output_row_in_place, parse_input_line};
use crate::scorer_pool::ScorerPool;
use crate::scoring::Scorer;
use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use verifine_base::files::{FileError, JsonlLines, LineChunk, line_text};
use verifine_base::{IdHasher, SeenIds};

/// Chunks each worker may have between being read and being written.
const CHUNKS_PER_WORKER: usize = 4;

/// Rows per chunk by default (rounded up to whole plugin batches): large
/// enough that taking, ordering and writing a chunk is a small part of its
/// time (64-row chunks cost two threads a tenth of their speed-up,
/// BENCHMARKS.md), small enough that a few per worker stay a few MB.
pub const DEFAULT_CHUNK_ROWS: usize = 1024;

/// What a streamed run counted. The totals' mean and spread are kept as
/// they come (Welford), not as a list.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StreamTotals {
    /// Rows read.
    pub rows: usize,
    /// Rows with a total.
    pub scored: usize,
    /// Rows whose scoring failed.
    pub errors: usize,
    mean: f64,
    squares: f64,
}

impl StreamTotals {
    /// Judged rows for which the rubric defines no score.
    pub fn undefined(&self) -> usize {
        self.rows - self.scored - self.errors
    }

    /// The mean total; `None` when nothing was scored.
    pub fn mean(&self) -> Option<f64> {
        (self.scored > 0).then_some(self.mean)
    }

    /// The standard deviation of the mean as the bootstrap estimates it, in
    /// its limit of infinitely many resamples: the totals' population
    /// standard deviation over √n (exact, and computed in one pass).
    pub fn std_of_mean(&self) -> Option<f64> {
        let n = self.scored as f64;
        (self.scored > 0).then(|| (self.squares / n).sqrt() / n.sqrt())
    }

    fn add(&mut self, total: Option<f64>, failed: bool) {
        self.rows += 1;
        if failed {
            self.errors += 1;
        }
        if let Some(total) = total {
            self.scored += 1;
            let delta = total - self.mean;
            self.mean += delta / self.scored as f64;
            self.squares += delta * (total - self.mean);
        }
    }
}

/// Thread seconds each stage took over the run (the shares say where the
/// time goes).
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct StageSeconds {
    /// Reading lines (one thread).
    pub read: f64,
    /// Parsing rows into samples (workers).
    pub parse: f64,
    /// The plugins (workers).
    pub score: f64,
    /// Output rows to JSON (workers).
    pub format: f64,
    /// Writing bytes in order (the calling thread).
    pub write: f64,
}

/// How a stream is cut and run.
#[derive(Debug, Clone, Copy)]
pub struct StreamSettings {
    /// Rows per plugin call.
    pub batch_size: usize,
    /// Worker threads.
    pub threads: usize,
    /// Ids held in memory before they spill ([`SeenIds::with_limit`]).
    pub ids_in_memory: usize,
    /// Rows handed to a worker at a time, rounded up to whole batches
    /// ([`DEFAULT_CHUNK_ROWS`]).
    pub chunk_rows: usize,
}

/// One chunk's output, ready to write.
struct ChunkOut {
    bytes: Vec<u8>,
    /// Per row: its line, a hash of its id, its total, whether it failed.
    rows: Vec<(usize, u128, Option<f64>, bool)>,
    /// The rows' ids one after another (to name a repeat), and where each ends.
    ids: String,
    id_ends: Vec<usize>,
}

/// Scores the JSONL rows of `input` (named `path` in errors) into `output`
/// (named `output_name`), in input order. A row that cannot be read or
/// parsed, or whose id repeats an earlier row's, stops the run with an
/// error naming `path:line`; what was written by then is incomplete, so
/// write to a temporary file. `on_batch` hears each chunk's size once it
/// is written. With `threads` at 1 the calling thread runs every stage.
pub fn score_stream(
    pool: &ScorerPool,
    input: impl BufRead + Send,
    path: &Path,
    (output, output_name): (&mut (dyn Write + Send), &Path),
    settings: StreamSettings,
    on_batch: &(dyn Fn(usize) + Sync),
) -> Result<(StreamTotals, StageSeconds)> {
    let clock = Clocks::default();
    let context = ChunkContext {
        batch_size: settings.batch_size.max(1),
        path,
        clock: &clock,
        id_hasher: IdHasher::new(),
        rubric: pool.function().rubric.provenance(),
        aggregator: pool.function().aggregator.provenance(),
    };
    let mut ordered = Ordered {
        output,
        output_name,
        path,
        clock: &clock,
        on_batch,
        ids: SeenIds::with_limit(settings.ids_in_memory, &std::env::temp_dir()),
        totals: StreamTotals::default(),
    };
    let mut lines = JsonlLines::new(input, path);
    let batch_size = context.batch_size;
    // Whole plugin batches per chunk: what a chunk costs to hand between
    // threads is paid per chunk, not per batch.
    let rows = batch_size * settings.chunk_rows.max(1).div_ceil(batch_size);
    if settings.threads <= 1 {
        let mut scorer = pool.take()?;
        let run = (|| -> Result<()> {
            loop {
                let started = Instant::now();
                let chunk = lines.read_chunk(rows)?;
                clock.add(&clock.read, started);
                let Some(chunk) = chunk else { break };
                ordered.write(context.run(&mut scorer, &chunk)?)?;
            }
            Ok(())
        })();
        pool.put(scorer);
        run?;
        return ordered.finish(&clock);
    }
    let ordered =
        workers::score_in_workers(pool, lines, ordered, &context, settings.threads, rows)?;
    ordered.finish(&clock)
}

/// What every worker needs to turn a chunk into output.
struct ChunkContext<'a> {
    /// Rows per plugin call.
    batch_size: usize,
    path: &'a Path,
    clock: &'a Clocks,
    id_hasher: IdHasher,
    rubric: Provenance,
    aggregator: Provenance,
}

impl ChunkContext<'_> {
    /// Parses, scores and formats one chunk.
    fn run(&self, scorer: &mut Scorer, chunk: &LineChunk) -> Result<ChunkOut> {
        let started = Instant::now();
        let mut lines = Vec::with_capacity(chunk.lines.len());
        let mut samples = Vec::with_capacity(chunk.lines.len());
        for (line, range) in &chunk.lines {
            let Some(text) = line_text(self.path, *line, chunk.line(range))? else {
                continue;
            };
            let sample =
                parse_input_line(text).map_err(|message| line_error(self.path, *line, message))?;
            lines.push(*line);
            samples.push(sample);
        }
        self.clock.add(&self.clock.parse, started);
        let mut out = ChunkOut {
            bytes: Vec::with_capacity(chunk.bytes.len() + samples.len() * 128),
            rows: Vec::with_capacity(samples.len()),
            ids: String::new(),
            id_ends: Vec::with_capacity(samples.len()),
        };
        let batches = samples
            .chunks(self.batch_size)
            .zip(lines.chunks(self.batch_size));
        for (batch, lines) in batches {
            let started = Instant::now();
            let scored = scorer.score_batch_in_place(0, 0, batch);
            self.clock.add(&self.clock.score, started);
            let started = Instant::now();
            for ((sample, scored), &line) in batch.iter().zip(scored.iter()).zip(lines) {
                let row = output_row_in_place(sample, scored, &self.rubric, &self.aggregator);
                serde_json::to_writer(&mut out.bytes, &row).map_err(|e| {
                    line_error(self.path, line, format!("its output row is not JSON: {e}"))
                })?;
                out.bytes.push(b'\n');
                let hash = self.id_hasher.hash(&sample.id);
                let failed = scored.error.is_some();
                out.rows.push((line, hash, scored.total, failed));
                out.ids.push_str(&sample.id);
                out.id_ends.push(out.ids.len());
            }
            self.clock.add(&self.clock.format, started);
        }
        Ok(out)
    }
}

#[cfg(test)]
#[path = "score_stream_tests.rs"]
mod tests;

/// The writing end: chunks in input order, ids checked on the way.
struct Ordered<'a> {
    output: &'a mut (dyn Write + Send),
    output_name: &'a Path,
    path: &'a Path,
    clock: &'a Clocks,
    on_batch: &'a (dyn Fn(usize) + Sync),
    ids: SeenIds,
    totals: StreamTotals,
}

impl Ordered<'_> {
    fn write(&mut self, chunk: ChunkOut) -> Result<()> {
        let started = Instant::now();
        for (i, (line, hash, total, failed)) in chunk.rows.iter().enumerate() {
            if let Some(repeat) = self.ids.insert(*hash, *line)? {
                let start = if i == 0 { 0 } else { chunk.id_ends[i - 1] };
                let id = &chunk.ids[start..chunk.id_ends[i]];
                let id = (repeat.again == *line).then_some(id);
                return Err(line_error(self.path, repeat.again, repeat.message(id)));
            }
            self.totals.add(*total, *failed);
        }
        self.output
            .write_all(&chunk.bytes)
            .map_err(|e| FileError::io("writing", self.output_name, e))?;
        self.clock.add(&self.clock.write, started);
        (self.on_batch)(chunk.rows.len());
        Ok(())
    }

    /// After the last chunk: a repeat across the ids that spilled is an
    /// error too (the output, written to a temporary file, is dropped).
    fn finish(self, clock: &Clocks) -> Result<(StreamTotals, StageSeconds)> {
        if let Some(repeat) = self.ids.finish()? {
            return Err(line_error(self.path, repeat.again, repeat.message(None)));
        }
        Ok((self.totals, clock.seconds()))
    }
}

fn line_error(path: &Path, line: usize, message: String) -> RuntimeError {
    RuntimeError::File(FileError::Line {
        path: path.to_path_buf(),
        line,
        message,
    })
}

/// Nanoseconds per stage, added from every thread.
#[derive(Default)]
struct Clocks {
    read: AtomicU64,
    parse: AtomicU64,
    score: AtomicU64,
    format: AtomicU64,
    write: AtomicU64,
}

impl Clocks {
    fn add(&self, stage: &AtomicU64, since: Instant) {
        stage.fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    fn seconds(&self) -> StageSeconds {
        let s = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 / 1e9;
        StageSeconds {
            read: s(&self.read),
            parse: s(&self.parse),
            score: s(&self.score),
            format: s(&self.format),
            write: s(&self.write),
        }
    }
}
