//! The live reward function of a run: a rubric slot and an aggregator slot,
//! the gate, and the swap point where pending requests are decided.

mod state;
mod watch;

use state::store_bytes;
pub use state::{LiveState, SlotRecord};

use super::agent::{self, AgentConfig};
use super::events::{self, Event, EventKind};
use super::gate::{CanaryCase, Gate, GateConfig, Submission};
use super::inbox::{self, Action, Request};
use super::revision::{Origin, Revision, RevisionHistory};
use super::shadow::Shadow;
use super::slot::Slot;
use crate::error::{HotswapError, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use verifine_runtime::scoring::{DEFAULT_AGGREGATOR, RewardPlugins, ScoredSample, Scorer};
use verifine_runtime::{
    Plugin, PluginSetting, PluginSpec, Provenance, Runtime, Sample, spec_bytes,
};

/// What one swap point did.
#[derive(Debug, Default)]
pub struct SwapOutcome {
    /// A slot's live revision changed.
    pub changed: bool,
    /// Requests decided here; remove them (with [`SwapOutcome::finish`])
    /// after the checkpoint that records the outcome.
    pub decided: Vec<Request>,
    /// Unreadable request directories, to remove likewise.
    pub unreadable: Vec<PathBuf>,
    /// A watch over a promoted revision ended (passed, or rolled it back).
    pub watch_ended: bool,
}

impl SwapOutcome {
    /// Whether anything was decided (and a checkpoint should record it).
    pub fn any(&self) -> bool {
        !self.decided.is_empty() || !self.unreadable.is_empty() || self.watch_ended
    }

    /// Removes the decided requests from the inbox.
    pub fn finish(self) -> Result<()> {
        for request in &self.decided {
            request.done()?;
        }
        for dir in &self.unreadable {
            inbox::remove_entry(dir)?;
        }
        Ok(())
    }
}

/// The reward function of a run, with swappable revisions.
pub struct LiveReward {
    runtime: Runtime,
    template: RewardPlugins,
    rubric: RevisionHistory,
    aggregator: RevisionHistory,
    gate: Gate,
    scorer: Scorer,
    run_dir: PathBuf,
    handled: Vec<String>,
    shadows: Vec<Shadow>,
}

impl LiveReward {
    /// Loads the configured plugins as the first live revisions and stores
    /// their bytes under `run_dir/revisions/`.
    pub fn new(
        runtime: Runtime,
        rubric: &PluginSetting,
        aggregator: Option<&PluginSetting>,
        run_dir: &Path,
        keep: usize,
        gate: GateConfig,
        canary: Vec<CanaryCase>,
    ) -> Result<Self> {
        let template = RewardPlugins::from_settings(&runtime, rubric, aggregator)?;
        let aggregator_spec =
            aggregator.map_or(PluginSpec::from(DEFAULT_AGGREGATOR), |a| a.plugin.clone());
        // The template's plugins are the first revisions; their bytes are
        // kept in the run directory, not loaded a second time.
        let first_revision = |plugin: &Arc<Plugin>, spec: &PluginSpec| -> Result<Revision> {
            store_bytes(run_dir, &plugin.sha256, &spec_bytes(spec)?.0)?;
            Ok(Revision::new(
                plugin.clone(),
                Origin::Config {
                    spec: spec.to_string(),
                },
            ))
        };
        let rubric_revision = first_revision(&template.rubric, &rubric.plugin)?;
        let aggregator_revision = first_revision(&template.aggregator, &aggregator_spec)?;
        let scorer = template.scorer()?;
        Ok(LiveReward {
            gate: Gate::new(gate, canary, template.clone()),
            rubric: RevisionHistory::new(rubric_revision, keep),
            aggregator: RevisionHistory::new(aggregator_revision, keep),
            runtime,
            template,
            scorer,
            run_dir: run_dir.to_path_buf(),
            handled: Vec::new(),
            shadows: Vec::new(),
        })
    }

    /// Scores `samples` (rollouts of `step`) with the live revisions; a
    /// watched revision's scores are compared with the one it replaced.
    pub fn score(&mut self, step: usize, samples: &[Sample]) -> Vec<ScoredSample> {
        let scored = self.scorer.score_batch(step as u64, 0, samples);
        self.observe(step, samples, &scored);
        scored
    }

    /// Shows a watched revision's scores of `samples`, scored elsewhere
    /// (by a pool of workers holding [`LiveReward::reward_plugins`]), to the
    /// watch, which scores them with the revision it replaced.
    pub fn observe(&mut self, step: usize, samples: &[Sample], scored: &[ScoredSample]) {
        let threshold = self.gate.config().canary_threshold;
        for shadow in &mut self.shadows {
            shadow.observe(step as u64, samples, scored, threshold);
        }
    }

    /// Whether a promoted revision is being watched (then scores made
    /// elsewhere should be passed to [`LiveReward::observe`]).
    pub fn watching(&self) -> bool {
        !self.shadows.is_empty()
    }

    /// The live revisions as a reward function, for scorers on other
    /// threads; take it again after a swap point that changed a slot.
    pub fn reward_plugins(&self) -> RewardPlugins {
        RewardPlugins {
            rubric: self.rubric.live().plugin.clone(),
            aggregator: self.aggregator.live().plugin.clone(),
            ..self.template.clone()
        }
    }

    /// The runtime the revisions were loaded with (to load other plugins of
    /// the run into).
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Name, version and sha256 of the live rubric and aggregator.
    pub fn provenance(&self) -> Vec<Provenance> {
        vec![
            self.rubric.live().provenance(),
            self.aggregator.live().provenance(),
        ]
    }

    fn slot(&self, slot: Slot) -> &RevisionHistory {
        match slot {
            Slot::Rubric => &self.rubric,
            Slot::Aggregator => &self.aggregator,
        }
    }

    /// Judges the watched revisions (see [`crate::shadow`]), then decides
    /// every pending inbox request, in order: gated promotions, rollbacks.
    /// Records each in `events.jsonl`.
    pub fn swap_point(&mut self, step: usize) -> Result<SwapOutcome> {
        let mut outcome = SwapOutcome::default();
        self.judge_shadows(step, &mut outcome)?;
        for request in inbox::pending(&self.run_dir)? {
            let request = match request {
                Ok(r) => r,
                Err(unreadable) => {
                    self.event(Event {
                        reasons: vec![unreadable.reason],
                        ..Event::new(step, unreadable.slot, EventKind::Refused)
                    })?;
                    outcome.unreadable.push(unreadable.dir);
                    continue;
                }
            };
            let name = request_name(&request);
            if self.handled.contains(&name) {
                outcome.decided.push(request);
                continue;
            }
            let started = Instant::now();
            let live_before = self.slot(request.slot).live().record();
            match &request.action {
                Action::Promote { origin } => {
                    let candidate = match request.plugin_bytes() {
                        Ok(bytes) => Submission {
                            bytes,
                            origin: origin.clone(),
                            cases: request.cases(),
                        },
                        Err(e) => {
                            self.event(Event {
                                live_before: Some(live_before),
                                reasons: vec![e],
                                ..Event::new(step, request.slot, EventKind::Refused)
                            })?;
                            self.handled.push(name);
                            outcome.decided.push(request);
                            continue;
                        }
                    };
                    let changed = self.decide(step, request.slot, candidate, started)?;
                    outcome.changed |= changed;
                }
                Action::Rollback => {
                    let slot = self.slot(request.slot);
                    let result = slot.rollback();
                    let millis = Some(started.elapsed().as_secs_f64() * 1e3);
                    match result {
                        Ok(restored) => {
                            outcome.changed = true;
                            self.shadows.clear();
                            self.event(Event {
                                live_before: Some(live_before),
                                candidate: Some(restored.record()),
                                millis,
                                ..Event::new(step, request.slot, EventKind::RolledBack)
                            })?;
                        }
                        Err(e) => self.event(Event {
                            live_before: Some(live_before),
                            reasons: vec![format!("{e:#}")],
                            millis,
                            ..Event::new(step, request.slot, EventKind::RollbackRefused)
                        })?,
                    }
                }
            }
            self.handled.push(name);
            outcome.decided.push(request);
        }
        if outcome.changed {
            self.rebuild_scorer()?;
        }
        Ok(outcome)
    }

    /// Gates a candidate and makes it live when it passes; returns whether it did.
    fn decide(
        &mut self,
        step: usize,
        slot_name: Slot,
        candidate: Submission,
        started: Instant,
    ) -> Result<bool> {
        let other = self.slot(slot_name.partner()).live().plugin.clone();
        // Fields, not `self.slot`: the gate is borrowed mutably below.
        let slot = match slot_name {
            Slot::Rubric => &self.rubric,
            Slot::Aggregator => &self.aggregator,
        };
        let live_before = slot.live().record();
        let verdict = self
            .gate
            .check(&self.runtime, slot, &other, &candidate, step);
        let record = verdict.revision.as_ref().map(Revision::record);
        let base = Event {
            live_before: Some(live_before),
            candidate: record,
            canary_live: verdict.canary_live,
            canary_candidate: verdict.canary_candidate,
            ..Event::new(step, slot_name, EventKind::Refused)
        };
        let Some(revision) = verdict.revision.filter(|_| verdict.accepted) else {
            self.event(Event {
                reasons: verdict.reasons,
                millis: Some(started.elapsed().as_secs_f64() * 1e3),
                ..base
            })?;
            return Ok(false);
        };
        store_bytes(&self.run_dir, &revision.plugin.sha256, &candidate.bytes)?;
        slot.promote(revision)?;
        self.event(Event {
            event: EventKind::Promoted,
            millis: Some(started.elapsed().as_secs_f64() * 1e3),
            ..base
        })?;
        self.start_shadow(slot_name, step, verdict.canary_leniency)?;
        Ok(true)
    }

    /// Asks the revision agent at `step`, when canary cases are disputed, and
    /// puts its revision into the inbox (decided at the next swap point).
    pub fn ask_agent(&mut self, config: &AgentConfig, step: usize) -> Result<()> {
        let rubric = self.rubric.live();
        let aggregator = self.aggregator.live().plugin.clone();
        let disputed = self.gate.disputed(&rubric.plugin, &aggregator)?;
        if disputed.len() < config.min_disputed.max(1) {
            return Ok(());
        }
        let dir = self.run_dir.join("agent").join(format!("step-{step:08}"));
        match agent::ask(config, &dir, step, &rubric.record(), &disputed) {
            Ok(Some(answer)) => {
                let cases = answer
                    .cases
                    .as_ref()
                    .map(|(c, s)| (c.as_path(), s.as_path()));
                inbox::submit(
                    &self.run_dir,
                    Slot::Rubric,
                    &Action::Promote {
                        origin: answer.origin,
                    },
                    Some(&answer.bytes),
                    cases,
                )?;
            }
            Ok(None) => self.event(Event {
                reasons: vec![format!("see {}", dir.join("agent.log").display())],
                ..Event::new(step, Slot::Rubric, EventKind::AgentNoRevision)
            })?,
            Err(e) => self.event(Event {
                reasons: vec![format!("{e:#}")],
                ..Event::new(step, Slot::Rubric, EventKind::AgentFailed)
            })?,
        }
        Ok(())
    }

    /// Moves candidates dropped into `watch_dir/<slot>/` into the inbox;
    /// each file is renamed to `*.taken` once handed in. Only regular files
    /// up to [`verifine_confined::MAX_COMPONENT_BYTES`] are read: anything else (a
    /// directory, a FIFO, a symlink, an oversized file) is refused with an
    /// event and renamed to `*.refused`. Write a candidate elsewhere and
    /// rename it in: a half-written file is read as it is, and the gate
    /// refuses it.
    pub fn collect_watched(&self, watch_dir: &Path, step: usize) -> Result<()> {
        for slot in Slot::ALL {
            let Ok(entries) = std::fs::read_dir(watch_dir.join(slot.as_str())) else {
                continue;
            };
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
                .collect();
            files.sort();
            for file in files {
                let bytes = match verifine_confined::read_regular_file(
                    &file,
                    verifine_confined::MAX_COMPONENT_BYTES,
                ) {
                    Ok(bytes) => bytes,
                    Err(reason) => {
                        self.event(Event {
                            reasons: vec![reason],
                            ..Event::new(step, slot, EventKind::Refused)
                        })?;
                        if let Err(e) = std::fs::rename(&file, file.with_extension("wasm.refused"))
                        {
                            tracing::warn!(file = %file.display(), "could not set a refused candidate aside: {e}");
                        }
                        continue;
                    }
                };
                let origin = Origin::Watched {
                    path: file.display().to_string(),
                };
                inbox::submit(
                    &self.run_dir,
                    slot,
                    &Action::Promote { origin },
                    Some(&bytes),
                    None,
                )?;
                std::fs::rename(&file, file.with_extension("wasm.taken"))
                    .map_err(|e| HotswapError::io("renaming", &file, e))?;
            }
        }
        Ok(())
    }

    fn rebuild_scorer(&mut self) -> Result<()> {
        self.scorer = self.reward_plugins().scorer()?;
        Ok(())
    }

    fn event(&self, event: Event) -> Result<()> {
        events::append(&self.run_dir.join("events.jsonl"), &event)
    }
}

fn request_name(request: &Request) -> String {
    format!(
        "{}/{}",
        request.slot,
        request
            .dir
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned())
    )
}
