//! The live reward function of a run: a rubric slot and an aggregator slot,
//! the gate, and the swap point where pending requests are decided.

use super::agent::{self, AgentConfig};
use super::events::{self, Event};
use super::gate::{CanaryCase, Candidate, Gate, GateConfig};
use super::inbox::{self, Action, Request};
use super::revision::{Origin, Revision, RevisionRecord, RevisionSlot};
use crate::runtime::{Plugin, Provenance, Runtime, spec_bytes};
use crate::scoring::{DEFAULT_AGGREGATOR, PluginSlot, RewardFunction, Scorer};
use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// A slot's revisions as a checkpoint records them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlotRecord {
    /// The live revision.
    pub live: RevisionRecord,
    /// Previous revisions, newest first.
    pub previous: Vec<RevisionRecord>,
}

/// What a checkpoint keeps of the live reward.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LiveState {
    /// By slot name.
    pub slots: BTreeMap<String, SlotRecord>,
    /// Inbox requests already decided (their directories may survive a kill
    /// between the checkpoint and their removal).
    pub handled: Vec<String>,
}

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
}

impl SwapOutcome {
    /// Whether anything was decided (and a checkpoint should record it).
    pub fn any(&self) -> bool {
        !self.decided.is_empty() || !self.unreadable.is_empty()
    }

    /// Removes the decided requests from the inbox.
    pub fn finish(self) -> Result<()> {
        for request in &self.decided {
            request.done()?;
        }
        for dir in &self.unreadable {
            std::fs::remove_dir_all(dir)?;
        }
        Ok(())
    }
}

/// The reward function of a run, with swappable revisions.
pub struct LiveReward {
    runtime: Runtime,
    template: RewardFunction,
    rubric: RevisionSlot,
    aggregator: RevisionSlot,
    gate: Gate,
    scorer: Scorer,
    run_dir: PathBuf,
    handled: Vec<String>,
}

impl LiveReward {
    /// Loads the configured plugins as the first live revisions and stores
    /// their bytes under `run_dir/revisions/`.
    pub fn new(
        runtime: Runtime,
        rubric: &PluginSlot,
        aggregator: Option<&PluginSlot>,
        run_dir: &Path,
        keep: usize,
        gate: GateConfig,
        canary: Vec<CanaryCase>,
    ) -> Result<Self> {
        let template = RewardFunction::from_slots(&runtime, rubric, aggregator)?;
        let aggregator_spec = aggregator.map_or(DEFAULT_AGGREGATOR, |a| a.plugin.as_str());
        // The template's plugins are the first revisions; their bytes are
        // kept in the run directory, not loaded a second time.
        let first_revision = |plugin: &Arc<Plugin>, spec: &str| -> Result<Revision> {
            store_bytes(run_dir, &plugin.sha256, &spec_bytes(spec)?.0)?;
            Ok(Revision::new(
                plugin.clone(),
                Origin::Config {
                    spec: spec.to_string(),
                },
            ))
        };
        let rubric_revision = first_revision(&template.rubric, &rubric.plugin)?;
        let aggregator_revision = first_revision(&template.aggregator, aggregator_spec)?;
        let scorer = template.scorer()?;
        Ok(LiveReward {
            gate: Gate::new(gate, canary, template.clone()),
            rubric: RevisionSlot::new(rubric_revision, keep),
            aggregator: RevisionSlot::new(aggregator_revision, keep),
            runtime,
            template,
            scorer,
            run_dir: run_dir.to_path_buf(),
            handled: Vec::new(),
        })
    }

    /// The scorer of the live revisions.
    pub fn scorer(&mut self) -> &mut Scorer {
        &mut self.scorer
    }

    /// The runtime (to load other plugins into) and the live scorer, together.
    pub fn runtime_and_scorer(&mut self) -> (&Runtime, &mut Scorer) {
        (&self.runtime, &mut self.scorer)
    }

    /// Name, version and sha256 of the live rubric and aggregator.
    pub fn provenance(&self) -> Vec<Provenance> {
        vec![
            self.rubric.live().provenance(),
            self.aggregator.live().provenance(),
        ]
    }

    fn slot(&self, name: &str) -> &RevisionSlot {
        if name == "aggregator" {
            &self.aggregator
        } else {
            &self.rubric
        }
    }

    /// Canary agreement of the live reward function.
    pub fn live_agreement(&mut self) -> Result<f64> {
        let (rubric, aggregator) = (
            self.rubric.live().plugin.clone(),
            self.aggregator.live().plugin.clone(),
        );
        self.gate.agreement(&rubric, &aggregator)
    }

    /// Decides every pending inbox request, in order: gated promotions,
    /// rollbacks. Records each in `events.jsonl`.
    pub fn swap_point(&mut self, step: usize) -> Result<SwapOutcome> {
        let mut outcome = SwapOutcome::default();
        for request in inbox::pending(&self.run_dir)? {
            let request = match request {
                Ok(r) => r,
                Err((dir, reason)) => {
                    self.event(Event {
                        reasons: vec![reason],
                        ..event(step, &slot_of(&dir), "refused")
                    })?;
                    outcome.unreadable.push(dir);
                    continue;
                }
            };
            let name = request_name(&request);
            if self.handled.contains(&name) {
                outcome.decided.push(request);
                continue;
            }
            let started = Instant::now();
            let live_before = self.slot(&request.slot).live().record();
            match &request.action {
                Action::Promote { origin } => {
                    let candidate = match request.plugin_bytes() {
                        Ok(bytes) => Candidate {
                            bytes,
                            origin: origin.clone(),
                            cases: request.cases(),
                        },
                        Err(e) => {
                            self.event(Event {
                                live_before: Some(live_before),
                                reasons: vec![format!("{e:#}")],
                                ..event(step, &request.slot, "refused")
                            })?;
                            self.handled.push(name);
                            outcome.decided.push(request);
                            continue;
                        }
                    };
                    let changed = self.decide(step, &request.slot, candidate, started)?;
                    outcome.changed |= changed;
                }
                Action::Rollback => {
                    let slot = self.slot(&request.slot);
                    let result = slot.rollback();
                    let millis = Some(started.elapsed().as_secs_f64() * 1e3);
                    match result {
                        Ok(restored) => {
                            outcome.changed = true;
                            self.event(Event {
                                live_before: Some(live_before),
                                candidate: Some(restored.record()),
                                millis,
                                ..event(step, &request.slot, "rolled-back")
                            })?;
                        }
                        Err(e) => self.event(Event {
                            live_before: Some(live_before),
                            reasons: vec![format!("{e:#}")],
                            millis,
                            ..event(step, &request.slot, "rollback-refused")
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
        slot_name: &str,
        candidate: Candidate,
        started: Instant,
    ) -> Result<bool> {
        let other = match slot_name {
            "aggregator" => self.rubric.live().plugin.clone(),
            _ => self.aggregator.live().plugin.clone(),
        };
        let slot = if slot_name == "aggregator" {
            &self.aggregator
        } else {
            &self.rubric
        };
        let live_before = slot.live().record();
        let verdict = self.gate.check(&self.runtime, slot, &other, &candidate);
        let record = verdict.revision.as_ref().map(Revision::record);
        let base = Event {
            live_before: Some(live_before),
            candidate: record,
            canary_live: verdict.canary_live,
            canary_candidate: verdict.canary_candidate,
            ..event(step, slot_name, "refused")
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
            event: "promoted".to_string(),
            millis: Some(started.elapsed().as_secs_f64() * 1e3),
            ..base
        })?;
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
                    "rubric",
                    &Action::Promote {
                        origin: answer.origin,
                    },
                    Some(&answer.bytes),
                    cases,
                )?;
            }
            Ok(None) => self.event(Event {
                reasons: vec![format!("see {}", dir.join("agent.log").display())],
                ..event(step, "rubric", "agent-no-revision")
            })?,
            Err(e) => self.event(Event {
                reasons: vec![format!("{e:#}")],
                ..event(step, "rubric", "agent-failed")
            })?,
        }
        Ok(())
    }

    /// Moves candidates dropped into `watch_dir/<slot>/` into the inbox;
    /// each file is renamed to `*.taken` once handed in.
    pub fn collect_watched(&self, watch_dir: &Path) -> Result<()> {
        for slot in inbox::SLOTS {
            let Ok(entries) = std::fs::read_dir(watch_dir.join(slot)) else {
                continue;
            };
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "wasm"))
                .collect();
            files.sort();
            for file in files {
                let bytes = std::fs::read(&file)?;
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
                std::fs::rename(&file, file.with_extension("wasm.taken"))?;
            }
        }
        Ok(())
    }

    /// The slots for a checkpoint.
    pub fn state(&self) -> LiveState {
        let record = |slot: &RevisionSlot| SlotRecord {
            live: slot.live().record(),
            previous: slot.previous().iter().map(|r| r.record()).collect(),
        };
        // Only the most recent names matter: older requests are long gone.
        let handled = self
            .handled
            .iter()
            .rev()
            .take(1000)
            .rev()
            .cloned()
            .collect();
        LiveState {
            slots: BTreeMap::from([
                ("rubric".to_string(), record(&self.rubric)),
                ("aggregator".to_string(), record(&self.aggregator)),
            ]),
            handled,
        }
    }

    /// Restores the slots a checkpoint recorded, from the bytes under
    /// `run_dir/revisions/`.
    pub fn restore(&mut self, state: &LiveState, step: usize) -> Result<()> {
        for (name, record) in &state.slots {
            let load = |r: &RevisionRecord| -> Result<Revision> {
                let path = revision_path(&self.run_dir, &r.plugin.sha256);
                let bytes = std::fs::read(&path)
                    .with_context(|| format!("reading revision {}", path.display()))?;
                let plugin = self
                    .runtime
                    .load_bytes(&bytes, &path.display().to_string())?;
                Ok(Revision {
                    plugin,
                    origin: r.origin.clone(),
                    loaded_at: r.loaded_at,
                })
            };
            let live = load(&record.live)?;
            let previous = record
                .previous
                .iter()
                .map(load)
                .collect::<Result<Vec<_>>>()?;
            self.slot(name).restore(live, previous);
        }
        self.handled = state.handled.clone();
        self.rebuild_scorer()?;
        for (name, record) in &state.slots {
            self.event(Event {
                candidate: Some(record.live.clone()),
                ..event(step, name, "resumed")
            })?;
        }
        Ok(())
    }

    fn rebuild_scorer(&mut self) -> Result<()> {
        let function = RewardFunction {
            rubric: self.rubric.live().plugin.clone(),
            aggregator: self.aggregator.live().plugin.clone(),
            ..self.template.clone()
        };
        self.scorer = function.scorer()?;
        Ok(())
    }

    fn event(&self, event: Event) -> Result<()> {
        events::append(&self.run_dir.join("events.jsonl"), &event)
    }
}

fn event(step: usize, slot: &str, kind: &str) -> Event {
    Event {
        step,
        slot: slot.to_string(),
        event: kind.to_string(),
        live_before: None,
        candidate: None,
        reasons: Vec::new(),
        canary_live: None,
        canary_candidate: None,
        millis: None,
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

fn slot_of(dir: &Path) -> String {
    dir.parent()
        .and_then(|p| p.file_name())
        .map_or("unknown".to_string(), |n| n.to_string_lossy().into_owned())
}

fn revision_path(run_dir: &Path, sha256: &str) -> PathBuf {
    run_dir.join("revisions").join(format!("{sha256}.wasm"))
}

/// Keeps a revision's bytes in the run directory, so a resumed run restores
/// exactly the revision that was live, wherever its file went.
fn store_bytes(run_dir: &Path, sha256: &str, bytes: &[u8]) -> Result<()> {
    let path = revision_path(run_dir, sha256);
    if path.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(path.parent().expect("revisions dir"))?;
    crate::data::write_atomically(&path, |w| Ok(w.write_all(bytes)?))
}
