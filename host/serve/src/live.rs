//! The server's live revisions: the same slots, gate, inbox, watched
//! directory and `events.jsonl` as a training run, decided by one swap
//! thread. Where training swaps at step boundaries, the server swaps at
//! ticks (every `swap_interval_ms`); the tick number is the step its events
//! name. Requests read the current [`Generation`] once, when they start.

use crate::error::{Result, ServeError};
use crate::pool::{Generation, Observation, Observer};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use verifine_hotswap::gate::{CanaryCase, GateConfig};
use verifine_hotswap::live::{LiveReward, LiveState};
use verifine_runtime::{PluginSetting, Runtime};

/// The file in the serve directory that records the live revisions, so a
/// restarted server serves what was live when it stopped.
pub const STATE_FILE: &str = "live.json";

/// Observations queued for the watch before new ones are dropped.
const OBSERVATIONS_QUEUED: usize = 256;

/// How the server's revisions are kept and swapped.
#[derive(Debug, Clone)]
pub struct SwapOptions {
    /// Previous revisions kept per slot for rollback.
    pub keep_revisions: usize,
    /// The canary comparison and the watch after a promotion (its
    /// `shadow_steps` count ticks).
    pub gate: GateConfig,
    /// Labelled cases the gate checks a candidate on (none: only the
    /// candidate's own snapshot cases and the kind/version checks).
    pub canary: Vec<CanaryCase>,
    /// A directory watched for `<slot>/*.wasm` candidates.
    pub watch_dir: Option<PathBuf>,
    /// Time between swap points.
    pub interval: Duration,
}

/// What the request handlers share with the swap thread.
pub struct Live {
    current: RwLock<Arc<Generation>>,
    stop: AtomicBool,
}

impl Live {
    /// The generation a request starting now is scored with.
    pub fn current(&self) -> Arc<Generation> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn publish(&self, generation: Generation) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(generation);
    }

    /// Asks the swap thread to finish after its current tick.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The swap thread's side: the live reward, and where it writes.
pub struct Swapper {
    configured: String,
    reward: LiveReward,
    live: Arc<Live>,
    dir: PathBuf,
    options: SwapOptions,
    observations: Receiver<Observation>,
    watching: Arc<AtomicBool>,
    tick: usize,
}

/// Loads the configured plugins (or, when `dir` records live revisions
/// from an earlier start, those), returning the shared state, the observer
/// the scoring pool reports to, and the swap loop to run on its own thread.
pub fn start(
    runtime: Runtime,
    rubric: &PluginSetting,
    aggregator: Option<&PluginSetting>,
    dir: &Path,
    options: SwapOptions,
) -> Result<(Arc<Live>, Observer, Swapper)> {
    std::fs::create_dir_all(dir).map_err(|source| ServeError::Io {
        action: "creating",
        path: dir.to_path_buf(),
        source,
    })?;
    let mut reward = LiveReward::new(
        runtime,
        rubric,
        aggregator,
        dir,
        options.keep_revisions,
        options.gate.clone(),
        options.canary.clone(),
    )?;
    write_config_record(dir, rubric, aggregator)?;
    let configured = configured_specs(rubric, aggregator);
    let state_path = dir.join(STATE_FILE);
    let tick = match std::fs::read(&state_path) {
        Ok(bytes) => {
            let saved: SavedState =
                serde_json::from_slice(&bytes).map_err(|e| ServeError::State {
                    path: state_path.clone(),
                    message: e.to_string(),
                })?;
            if saved.configured == configured {
                reward.restore(&saved.live, saved.tick)?;
                tracing::info!("serving the revisions {} recorded", state_path.display());
            } else {
                tracing::warn!(
                    "{} records revisions of other configured plugins ({}); starting from {}",
                    state_path.display(),
                    saved.configured,
                    configured
                );
            }
            saved.tick
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(source) => {
            return Err(ServeError::Io {
                action: "reading",
                path: state_path,
                source,
            });
        }
    };
    let live = Arc::new(Live {
        current: RwLock::new(Arc::new(Generation::new(0, reward.reward_plugins()))),
        stop: AtomicBool::new(false),
    });
    let (sender, observations) = std::sync::mpsc::sync_channel(OBSERVATIONS_QUEUED);
    let watching = Arc::new(AtomicBool::new(reward.watching()));
    let observer = Observer {
        watching: watching.clone(),
        sender,
    };
    let swapper = Swapper {
        configured,
        reward,
        live: live.clone(),
        dir: dir.to_path_buf(),
        options,
        observations,
        watching,
        tick,
    };
    Ok((live, observer, swapper))
}

/// The state file's content.
#[derive(serde::Serialize, serde::Deserialize)]
struct SavedState {
    /// The plugins the server was started with: a record made for others
    /// is not restored.
    configured: String,
    tick: usize,
    live: LiveState,
}

impl Swapper {
    /// Runs swap points until [`Live::stop`]; between them, passes what the
    /// workers scored to the watch over a promoted revision. A swap point
    /// is due every interval whatever the load: observations are taken only
    /// while it is not due, so steady traffic (a stream of them) cannot
    /// hold off a promotion, a rollback or the end of a watch. A swap point
    /// comes at most one observation late.
    pub fn run(mut self) {
        let mut next = Instant::now() + self.options.interval;
        while !self.live.stop.load(Ordering::Relaxed) {
            let wait = next.saturating_duration_since(Instant::now());
            if !wait.is_zero() {
                match self
                    .observations
                    .recv_timeout(wait.min(Duration::from_millis(100)))
                {
                    Ok(observation) => {
                        self.reward
                            .observe(self.tick, &observation.samples, &observation.scored);
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    // The pool has stopped: nothing more to observe.
                    Err(RecvTimeoutError::Disconnected) => {
                        std::thread::sleep(wait.min(Duration::from_millis(100)));
                    }
                }
            }
            if Instant::now() < next {
                continue;
            }
            next = Instant::now() + self.options.interval;
            self.tick += 1;
            if let Err(e) = self.swap_point() {
                tracing::error!("swap point {}: {e}", self.tick);
            }
        }
    }

    /// One swap point: watched candidates into the inbox, every pending
    /// request decided, a changed slot published as a new generation.
    pub fn swap_point(&mut self) -> Result<()> {
        if let Some(watch_dir) = &self.options.watch_dir {
            self.reward.collect_watched(watch_dir, self.tick)?;
        }
        let outcome = self.reward.swap_point(self.tick)?;
        if outcome.changed {
            let id = self.live.current().id + 1;
            self.live
                .publish(Generation::new(id, self.reward.reward_plugins()));
            tracing::info!("generation {id} is live: {}", self.live.current().header());
        }
        self.watching
            .store(self.reward.watching(), Ordering::Relaxed);
        if outcome.any() || outcome.changed {
            self.save()?;
        }
        outcome.finish()?;
        Ok(())
    }

    fn save(&self) -> Result<()> {
        let saved = SavedState {
            configured: self.configured.clone(),
            tick: self.tick,
            live: self.reward.state(),
        };
        verifine_base::write_atomically(&self.dir.join(STATE_FILE), |w| {
            Ok(serde_json::to_writer_pretty(&mut *w, &saved)?)
        })?;
        Ok(())
    }
}

fn configured_specs(rubric: &PluginSetting, aggregator: Option<&PluginSetting>) -> String {
    format!(
        "rubric={} aggregator={}",
        rubric.plugin,
        aggregator.map_or("-".to_string(), |a| a.plugin.to_string())
    )
}

/// What the directory serves, written at start: a record for people, and
/// the marker `verifine plugin promote|rollback` looks for in a run
/// directory before handing it a request.
fn write_config_record(
    dir: &Path,
    rubric: &PluginSetting,
    aggregator: Option<&PluginSetting>,
) -> Result<()> {
    #[derive(serde::Serialize)]
    struct Record<'a> {
        rubric: &'a PluginSetting,
        #[serde(skip_serializing_if = "Option::is_none")]
        aggregator: Option<&'a PluginSetting>,
    }
    let text = toml::to_string(&Record { rubric, aggregator })
        .map_err(|e| ServeError::Option(format!("recording the configured plugins: {e}")))?;
    verifine_base::write_atomically(&dir.join("config.toml"), |w| {
        w.write_all(b"# verifine serve: the plugins this directory was started with\n")?;
        w.write_all(text.as_bytes())
    })?;
    Ok(())
}
