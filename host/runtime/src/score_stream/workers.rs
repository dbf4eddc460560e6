//! The stream on several threads: each worker reads the next chunk,
//! parses, scores and formats it, then writes every chunk that is next in
//! order. No reader or writer thread hands chunks over or is woken for
//! them, so `threads` workers are all the threads there are, and a chunk's
//! buffers are mostly freed by the thread that made them (a reader and a
//! writer thread beside the workers cost two threads much of their
//! speed-up, BENCHMARKS.md).

use super::{CHUNKS_PER_WORKER, ChunkContext, ChunkOut, Clocks, Ordered};
use crate::error::{Result, RuntimeError};
use crate::scorer_pool::ScorerPool;
use crate::scoring::Scorer;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Instant;
use verifine_base::files::{JsonlLines, LineChunk};

/// Scores every chunk of `lines` over `threads` workers into `ordered`, in
/// input order; the first failure stops them all and is the run's.
pub(super) fn score_in_workers<'a, R: BufRead + Send>(
    pool: &ScorerPool,
    lines: JsonlLines<R>,
    ordered: Ordered<'a>,
    context: &ChunkContext<'_>,
    threads: usize,
    rows: usize,
) -> Result<Ordered<'a>> {
    let shared = Shared {
        input: Mutex::new((lines, 0)),
        room: Condvar::new(),
        readers_waiting: AtomicUsize::new(0),
        output: Mutex::new((ordered, BTreeMap::new())),
        written: AtomicUsize::new(0),
        window: threads * CHUNKS_PER_WORKER,
        stop: AtomicBool::new(false),
    };
    let bounds = crate::scoring_bounds::current();
    let finished: Vec<Result<()>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let bounds = bounds.clone();
                let shared = &shared;
                scope.spawn(move || {
                    crate::scoring_bounds::within(bounds, || {
                        // A worker that panics holding a chunk would leave
                        // the others waiting for its turn: they stop too.
                        let _halt_on_panic = HaltOnPanic(shared);
                        let mut scorer: Option<Scorer> = None;
                        let run = shared.work(pool, &mut scorer, context, rows);
                        if run.is_err() {
                            shared.halt();
                        }
                        if let Some(scorer) = scorer {
                            pool.put(scorer);
                        }
                        run
                    })
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or(Err(RuntimeError::WorkerPanicked)))
            .collect()
    });
    // The first failure is the run's (the others stopped because of it).
    finished.into_iter().collect::<Result<Vec<()>>>()?;
    let (ordered, _) = shared
        .output
        .into_inner()
        .unwrap_or_else(|e| e.into_inner());
    Ok(ordered)
}

/// Stops the other workers when dropped by a panicking one.
struct HaltOnPanic<'s, 'a, R>(&'s Shared<'a, R>);

impl<R> Drop for HaltOnPanic<'_, '_, R> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.halt();
        }
    }
}

/// What the workers share: the lines (read under `input`) and the writing
/// end (written under `output`).
struct Shared<'a, R> {
    /// The lines, and the index of the next chunk.
    input: Mutex<(JsonlLines<R>, usize)>,
    /// Where a worker waits while reading on would leave more than
    /// `window` chunks between read and written.
    room: Condvar,
    readers_waiting: AtomicUsize,
    /// The writing end, and the chunks finished before their turn.
    output: Mutex<(Ordered<'a>, BTreeMap<usize, ChunkOut>)>,
    /// Chunks written so far.
    written: AtomicUsize,
    window: usize,
    /// Set after a failure: the workers stop taking chunks.
    stop: AtomicBool,
}

impl<R: BufRead> Shared<'_, R> {
    /// One worker's loop, until the lines end or a run fails.
    fn work(
        &self,
        pool: &ScorerPool,
        scorer: &mut Option<Scorer>,
        context: &ChunkContext<'_>,
        rows: usize,
    ) -> Result<()> {
        while let Some((index, chunk)) = self.next_chunk(context.clock, rows)? {
            let scorer = match scorer {
                Some(s) => s,
                None => scorer.insert(pool.take()?),
            };
            let out = context.run(scorer, &chunk)?;
            drop(chunk);
            self.write_in_order(index, out)?;
        }
        Ok(())
    }

    /// The next chunk and its index, once the window has room; `None` at
    /// the end of the lines or after a failure elsewhere.
    fn next_chunk(&self, clock: &Clocks, rows: usize) -> Result<Option<(usize, LineChunk)>> {
        let mut input = self.input.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if self.stop.load(Ordering::SeqCst) {
                return Ok(None);
            }
            // Counted before `written` is read, and `written` stored before
            // the count is read (both SeqCst): a writer that advances
            // `written` either sees this reader waiting and wakes it, or
            // this reader sees the new `written`.
            self.readers_waiting.fetch_add(1, Ordering::SeqCst);
            if input.1 < self.written.load(Ordering::SeqCst) + self.window {
                self.readers_waiting.fetch_sub(1, Ordering::SeqCst);
                break;
            }
            input = self.room.wait(input).unwrap_or_else(|e| e.into_inner());
            self.readers_waiting.fetch_sub(1, Ordering::SeqCst);
        }
        let started = Instant::now();
        let chunk = input.0.read_chunk(rows)?;
        clock.add(&clock.read, started);
        Ok(chunk.map(|chunk| {
            input.1 += 1;
            (input.1 - 1, chunk)
        }))
    }

    /// Files chunk `index` and writes every chunk whose turn has come.
    fn write_in_order(&self, index: usize, chunk: ChunkOut) -> Result<()> {
        let mut output = self.output.lock().unwrap_or_else(|e| e.into_inner());
        let (ordered, waiting) = &mut *output;
        waiting.insert(index, chunk);
        let mut next = self.written.load(Ordering::SeqCst);
        while let Some(chunk) = waiting.remove(&next) {
            ordered.write(chunk)?;
            next += 1;
        }
        self.written.store(next, Ordering::SeqCst);
        drop(output);
        if self.readers_waiting.load(Ordering::SeqCst) > 0 {
            let _input = self.input.lock().unwrap_or_else(|e| e.into_inner());
            self.room.notify_all();
        }
        Ok(())
    }
}

impl<R> Shared<'_, R> {
    /// After a failure: the other workers stop at their next chunk.
    fn halt(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let _input = self.input.lock().unwrap_or_else(|e| e.into_inner());
        self.room.notify_all();
    }
}
