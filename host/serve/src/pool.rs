//! The scoring pool: dedicated threads, each with its own plugin instances,
//! so scoring never blocks the async runtime. A job carries the revision
//! generation its request started with, and is scored by exactly that
//! generation even if a swap happened since.
//!
//! The queue is bounded, and a job whose request is gone (its deadline
//! passed, its client hung up) is dropped when a worker reaches it, and
//! between batches once started: abandoned work, judge calls included,
//! is not paid for.

use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, oneshot};
use verifine_runtime::scoring::{RewardPlugins, ScoredSample, Scorer};
use verifine_runtime::scoring_bounds::{self, ScoringBounds};
use verifine_runtime::{Provenance, Sample};

/// Scorers a worker keeps, one per recent generation, so requests that
/// started before a swap and after it can interleave without rebuilding
/// instances on every job.
const SCORERS_KEPT: usize = 3;

/// One set of live revisions: what a request is scored with from start to end.
pub struct Generation {
    /// Counts swaps since the server started (0: the configured plugins).
    pub id: u64,
    /// The rubric and aggregator.
    pub plugins: RewardPlugins,
    /// Rubric and aggregator provenance, in that order.
    pub revisions: [Provenance; 2],
    /// The `x-verifine-revisions` header, made once per generation rather
    /// than once per answer.
    header: String,
}

impl Generation {
    /// A generation of `plugins`.
    pub fn new(id: u64, plugins: RewardPlugins) -> Self {
        let revisions = [plugins.rubric.provenance(), plugins.aggregator.provenance()];
        let short = |p: &Provenance| {
            format!(
                "{}@{}+{}",
                p.name,
                p.version,
                &p.sha256[..12.min(p.sha256.len())]
            )
        };
        let header = format!(
            "generation={id}; rubric={}; aggregator={}",
            short(&revisions[0]),
            short(&revisions[1])
        );
        Generation {
            id,
            plugins,
            revisions,
            header,
        }
    }

    /// The `x-verifine-revisions` header: `rubric=name@version+sha256[..12]`
    /// and likewise for the aggregator, with the generation.
    pub fn header(&self) -> &str {
        &self.header
    }

    /// The revisions as response bodies carry them.
    pub fn revisions_json(&self) -> Value {
        let [rubric, aggregator] = &self.revisions;
        json!({ "generation": self.id, "rubric": rubric, "aggregator": aggregator })
    }
}

/// Samples, and how each was scored, in order.
pub type Scored = (Vec<Sample>, Vec<ScoredSample>);

/// Scored samples, and a copy for the watch over a promoted revision.
pub struct Observation {
    /// What was scored.
    pub samples: Vec<Sample>,
    /// How.
    pub scored: Vec<ScoredSample>,
}

struct Job {
    generation: Arc<Generation>,
    samples: Vec<Sample>,
    reply: oneshot::Sender<Scored>,
    /// The request's deadline and whether its client is still there: the
    /// plugins' judge queries, inside a batch too, respect both.
    bounds: ScoringBounds,
    /// The samples' share of the in-flight budget: released when the job
    /// ends, answered or dropped, not when its request gives up on it.
    _budget: OwnedSemaphorePermit,
}

/// Why a job was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    /// As many jobs wait as the queue holds.
    #[error("{0} scoring jobs are queued, the server's limit; retry shortly")]
    QueueFull(usize),
    /// The pool was stopped or every worker is gone.
    #[error("the scoring pool has stopped")]
    Stopped,
}

/// Worker threads scoring jobs in arrival order.
pub struct Pool {
    jobs: Mutex<Option<SyncSender<Job>>>,
    queue_capacity: usize,
    workers: Mutex<Vec<std::thread::JoinHandle<()>>>,
    abandoned: Arc<AtomicU64>,
}

/// Where workers send copies of what they scored while a revision is watched.
#[derive(Clone)]
pub struct Observer {
    /// Whether anyone is watching (checked before copying anything).
    pub watching: Arc<std::sync::atomic::AtomicBool>,
    /// Bounded: when the watcher falls behind, observations are dropped.
    pub sender: SyncSender<Observation>,
}

impl Pool {
    /// Starts `workers` threads scoring in batches of `batch_size`, with at
    /// most `queued` jobs waiting for them.
    pub fn start(workers: usize, batch_size: usize, queued: usize, observer: Observer) -> Pool {
        let queue_capacity = queued.max(1);
        let (sender, receiver) = std::sync::mpsc::sync_channel::<Job>(queue_capacity);
        let receiver = Arc::new(Mutex::new(receiver));
        let abandoned = Arc::new(AtomicU64::new(0));
        let handles = (0..workers.max(1))
            .map(|i| {
                let receiver = receiver.clone();
                let observer = observer.clone();
                let abandoned = abandoned.clone();
                std::thread::Builder::new()
                    .name(format!("verifine-score-{i}"))
                    .spawn(move || work(&receiver, batch_size.max(1), &observer, &abandoned))
                    .expect("spawning a scoring thread")
            })
            .collect();
        Pool {
            jobs: Mutex::new(Some(sender)),
            queue_capacity,
            workers: Mutex::new(handles),
            abandoned,
        }
    }

    /// Queues `samples` for scoring by `generation`, holding `budget` until
    /// the job ends; the answer arrives on the returned channel (closed if
    /// a worker died). Dropping that channel abandons the job.
    pub fn submit(
        &self,
        generation: Arc<Generation>,
        samples: Vec<Sample>,
        budget: OwnedSemaphorePermit,
        bounds: ScoringBounds,
    ) -> Result<oneshot::Receiver<Scored>, SubmitError> {
        let (reply, answer) = oneshot::channel();
        let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let jobs = jobs.as_ref().ok_or(SubmitError::Stopped)?;
        let job = Job {
            generation,
            samples,
            reply,
            bounds,
            _budget: budget,
        };
        match jobs.try_send(job) {
            Ok(()) => Ok(answer),
            Err(TrySendError::Full(_)) => Err(SubmitError::QueueFull(self.queue_capacity)),
            Err(TrySendError::Disconnected(_)) => Err(SubmitError::Stopped),
        }
    }

    /// Jobs dropped unscored, or left part-scored, because their request
    /// was gone.
    pub fn abandoned(&self) -> u64 {
        self.abandoned.load(Ordering::Relaxed)
    }

    /// Stops taking jobs and waits for the workers to finish the queued ones.
    pub fn stop(&self) {
        self.jobs.lock().unwrap_or_else(|e| e.into_inner()).take();
        let workers = std::mem::take(&mut *self.workers.lock().unwrap_or_else(|e| e.into_inner()));
        for worker in workers {
            let _ = worker.join();
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.stop();
    }
}

fn work(
    receiver: &Mutex<Receiver<Job>>,
    batch_size: usize,
    observer: &Observer,
    abandoned: &AtomicU64,
) {
    let mut scorers: VecDeque<(u64, Scorer)> = VecDeque::new();
    loop {
        let job = {
            let receiver = receiver.lock().unwrap_or_else(|e| e.into_inner());
            match receiver.recv() {
                Ok(job) => job,
                Err(_) => return,
            }
        };
        if job.reply.is_closed() || job.bounds.is_over() {
            abandoned.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let Some(scorer) = scorer_for(&mut scorers, &job.generation) else {
            let failed = job
                .samples
                .iter()
                .map(|_| failed("could not instantiate the plugins"))
                .collect();
            let _ = job.reply.send((job.samples, failed));
            continue;
        };
        let mut scored = Vec::with_capacity(job.samples.len());
        for batch in job.samples.chunks(batch_size) {
            if job.reply.is_closed() || job.bounds.is_over() {
                break;
            }
            let bounds = job.bounds.clone();
            scored.extend(scoring_bounds::within(bounds, || {
                scorer.score_batch(0, 0, batch)
            }));
        }
        if scored.len() < job.samples.len() {
            abandoned.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        if observer.watching.load(Ordering::Relaxed) {
            let copy = Observation {
                samples: job.samples.clone(),
                scored: scored.clone(),
            };
            if let Err(TrySendError::Full(_)) = observer.sender.try_send(copy) {
                tracing::debug!("the revision watch is behind; an observation was dropped");
            }
        }
        let _ = job.reply.send((job.samples, scored));
    }
}

fn scorer_for<'a>(
    scorers: &'a mut VecDeque<(u64, Scorer)>,
    generation: &Generation,
) -> Option<&'a mut Scorer> {
    if let Some(i) = scorers.iter().position(|(id, _)| *id == generation.id) {
        return Some(&mut scorers[i].1);
    }
    match generation.plugins.scorer() {
        Ok(scorer) => {
            if scorers.len() == SCORERS_KEPT {
                scorers.pop_front();
            }
            scorers.push_back((generation.id, scorer));
            scorers.back_mut().map(|(_, s)| s)
        }
        Err(e) => {
            tracing::error!("generation {}: {e}", generation.id);
            None
        }
    }
}

fn failed(reason: &str) -> ScoredSample {
    ScoredSample {
        total: None,
        rubric_total: None,
        judgment: None,
        error: Some(reason.to_string()),
    }
}
