//! The scoring pool: dedicated threads, each with its own plugin instances,
//! so scoring never blocks the async runtime. A job carries the revision
//! generation its request started with, and is scored by exactly that
//! generation even if a swap happened since.

use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;
use verifine_runtime::scoring::{RewardPlugins, ScoredSample, Scorer};
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
}

/// Worker threads scoring jobs in arrival order.
pub struct Pool {
    jobs: Mutex<Option<Sender<Job>>>,
    workers: Mutex<Vec<std::thread::JoinHandle<()>>>,
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
    /// Starts `workers` threads scoring in batches of `batch_size`.
    pub fn start(workers: usize, batch_size: usize, observer: Observer) -> Pool {
        let (sender, receiver) = std::sync::mpsc::channel::<Job>();
        let receiver = Arc::new(Mutex::new(receiver));
        let handles = (0..workers.max(1))
            .map(|i| {
                let receiver = receiver.clone();
                let observer = observer.clone();
                std::thread::Builder::new()
                    .name(format!("verifine-score-{i}"))
                    .spawn(move || work(&receiver, batch_size.max(1), &observer))
                    .expect("spawning a scoring thread")
            })
            .collect();
        Pool {
            jobs: Mutex::new(Some(sender)),
            workers: Mutex::new(handles),
        }
    }

    /// Queues `samples` for scoring by `generation`; the answer arrives on
    /// the returned channel (closed if the pool stopped or a worker died).
    pub fn submit(
        &self,
        generation: Arc<Generation>,
        samples: Vec<Sample>,
    ) -> oneshot::Receiver<Scored> {
        let (reply, answer) = oneshot::channel();
        let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(jobs) = jobs.as_ref() {
            // A send fails only when every worker is gone; the dropped reply
            // then closes `answer`, which the caller reports.
            let _ = jobs.send(Job {
                generation,
                samples,
                reply,
            });
        }
        answer
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

fn work(receiver: &Mutex<Receiver<Job>>, batch_size: usize, observer: &Observer) {
    let mut scorers: VecDeque<(u64, Scorer)> = VecDeque::new();
    loop {
        let job = {
            let receiver = receiver.lock().unwrap_or_else(|e| e.into_inner());
            match receiver.recv() {
                Ok(job) => job,
                Err(_) => return,
            }
        };
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
            scored.extend(scorer.score_batch(0, 0, batch));
        }
        if observer.watching.load(std::sync::atomic::Ordering::Relaxed) {
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
