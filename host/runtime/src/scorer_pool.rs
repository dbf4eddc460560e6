//! Scorers kept between calls. Creating a scorer instantiates the plugins
//! and asks the rubric to describe itself — tens of microseconds, more than
//! judging one sample — so a caller that scores many small batches (a
//! per-sample reward callback in a Python trainer) keeps them here.

use crate::Sample;
use crate::error::{Result, RuntimeError};
use crate::scoring::{RewardPlugins, ScoredSample, Scorer};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Idle scorers of one reward function, reused across calls and threads.
pub struct ScorerPool {
    function: RewardPlugins,
    idle: Mutex<Vec<Scorer>>,
}

impl ScorerPool {
    /// An empty pool; scorers are made on first use.
    pub fn new(function: RewardPlugins) -> Self {
        ScorerPool {
            function,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// The criteria the rubric describes, read from a pooled scorer (made
    /// now if none is idle, and kept for the next call).
    pub fn criteria(&self) -> Result<Vec<crate::Criterion>> {
        let scorer = self.take()?;
        let criteria = scorer.criteria().to_vec();
        self.put(scorer);
        Ok(criteria)
    }

    /// The reward function the scorers run.
    pub fn function(&self) -> &RewardPlugins {
        &self.function
    }

    /// Scores `samples` in batches of `batch_size`, on the calling thread
    /// when there is one batch or one thread, else over up to `threads`
    /// scoped threads. Results come back in input order.
    pub fn score(
        &self,
        samples: &[Sample],
        batch_size: usize,
        threads: usize,
    ) -> Result<Vec<ScoredSample>> {
        self.score_reporting(samples, batch_size, threads, &|_| {})
    }

    /// [`ScorerPool::score`], calling `on_batch` with the size of every
    /// finished batch (a progress bar).
    pub fn score_reporting(
        &self,
        samples: &[Sample],
        batch_size: usize,
        threads: usize,
        on_batch: &(dyn Fn(usize) + Sync),
    ) -> Result<Vec<ScoredSample>> {
        let batches: Vec<&[Sample]> = samples.chunks(batch_size.max(1)).collect();
        let workers = threads.clamp(1, batches.len().max(1));
        if workers == 1 {
            let mut scorer = self.take()?;
            let scored = batches
                .iter()
                .flat_map(|batch| {
                    let scored = scorer.score_batch(0, 0, batch);
                    on_batch(batch.len());
                    scored
                })
                .collect();
            self.put(scorer);
            return Ok(scored);
        }
        let next = AtomicUsize::new(0);
        // The workers score for the same caller: its deadline, and whether
        // it is still there, hold for their judge queries too.
        let bounds = crate::scoring_bounds::current();
        type Done = Result<Vec<(usize, Vec<ScoredSample>)>>;
        let finished: Vec<Done> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..workers)
                .map(|_| {
                    let bounds = bounds.clone();
                    scope.spawn(|| -> Done {
                        crate::scoring_bounds::within(bounds, || {
                            let mut scorer = self.take()?;
                            let mut done = Vec::new();
                            loop {
                                let b = next.fetch_add(1, Ordering::Relaxed);
                                let Some(batch) = batches.get(b) else { break };
                                done.push((b, scorer.score_batch(0, 0, batch)));
                                on_batch(batch.len());
                            }
                            self.put(scorer);
                            Ok(done)
                        })
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(Err(RuntimeError::WorkerPanicked)))
                .collect()
        });
        let mut per_batch: Vec<Option<Vec<ScoredSample>>> = vec![None; batches.len()];
        for worker in finished {
            for (b, scored) in worker? {
                per_batch[b] = Some(scored);
            }
        }
        Ok(per_batch
            .into_iter()
            .flat_map(|b| b.expect("every batch is scored"))
            .collect())
    }

    pub(crate) fn take(&self) -> Result<Scorer> {
        let idle = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match idle {
            Some(scorer) => Ok(scorer),
            None => self.function.scorer(),
        }
    }

    pub(crate) fn put(&self, scorer: Scorer) {
        self.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(scorer);
    }
}

/// Scores every sample in batches of `batch_size` over `threads` workers,
/// each with its own plugin instances. Results come back in input order;
/// `on_batch` is called with the number of samples of each finished batch.
pub fn score_all(
    function: &RewardPlugins,
    samples: &[Sample],
    batch_size: usize,
    threads: usize,
    on_batch: &(dyn Fn(usize) + Sync),
) -> Result<Vec<ScoredSample>> {
    ScorerPool::new(function.clone()).score_reporting(samples, batch_size, threads, on_batch)
}
