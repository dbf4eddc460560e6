//! The judge loop between rounds: when the trigger fired during the last
//! round, the newest policy answers the anchor set, the query set goes to
//! the labeller, the labelled cases join the accumulated judge evaluation
//! set, and calibration revises the judge. Also the frozen judge test set,
//! labelled once by another annotator and never used to decide anything.

use super::{Evolve, EvolveProgress};
use crate::agent::{RevisionAgent, RuleSearchAgent};
use crate::annotator::{Annotator, overall};
use crate::calibration::{CalibrationEntry, CalibrationStop, Hooks, LabelledSet, calibrate};
use crate::cases::Case;
use crate::command_agent::CommandAgent;
use crate::config::Labeller;
use crate::curriculum::misread;
use crate::error::{EvolveError, Result};
use crate::judge::JudgeRevision;
use crate::judge::code::{HandedIn, record_event};
use crate::labels::{Clarification, HUMAN, JudgeView, Label, LabelStore, QueueItem, SIMULATED};
use crate::summary::LoopRecord;
use crate::verifier::VerifierAgent;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::path::PathBuf;
use verifine_base::{SplitMix64, read_jsonl, read_jsonl_if_exists, write_atomically, write_jsonl};
use verifine_hotswap::EventKind;
use verifine_hotswap::revision::Origin;
use verifine_train::task::{generate, with_slip};

/// Mixed into the seed for the test set's problems.
const TEST_STREAM: u64 = 0x07E5_75E7;

/// One case of the frozen test set with its label.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct TestCase {
    /// The case.
    pub(super) case: Case,
    /// The independent annotator's label.
    pub(super) label: Label,
}

impl Evolve {
    /// Builds and labels the frozen judge test set: the base policy's
    /// sampled answers and constructed ones (gold, slipped, misread, no
    /// final line), labelled by an annotator with another seed.
    pub(super) fn test_set(&mut self) -> Result<()> {
        let n = self.config.test_cases;
        let heldout = self.heldout();
        let problems: Vec<_> = generate(
            self.config.train.seed ^ TEST_STREAM,
            n,
            &self.config.train.task,
        )
        .into_iter()
        .filter(|p| heldout.iter().all(|h| h.prompt != p.prompt))
        .collect();
        let sampled = n * 3 / 5;
        let answers = self.newest_answers_from(
            &problems[..sampled.min(problems.len())],
            1,
            self.config.train.seed ^ TEST_STREAM,
        )?;
        let mut rng = SplitMix64::new(self.config.train.seed ^ TEST_STREAM);
        let cases: Vec<Case> = problems
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let response = match answers.get(i) {
                    Some(a) => a[0].clone(),
                    None => match i % 4 {
                        0 => p.solution.clone(),
                        1 => with_slip(p, &mut rng),
                        2 => misread(p, &mut rng),
                        _ => p
                            .solution
                            .rsplit_once('\n')
                            .map_or(String::new(), |(s, _)| s.to_string()),
                    },
                };
                Case::new(format!("test-{i}"), p, response)
            })
            .collect();
        let labels = Annotator::new("test-annotator", self.config.annotator.independent())
            .label(&cases, &[]);
        let rows: Vec<TestCase> = cases
            .into_iter()
            .zip(labels)
            .map(|(case, label)| TestCase { case, label })
            .collect();
        Ok(write_jsonl(&self.judge_dir().join("test.jsonl"), &rows)?)
    }

    /// The judge loop producing round `round`'s judge.
    pub(super) fn judge_loop(&mut self, round: u32) -> Result<()> {
        let previous = if round == 1 {
            "guided-initial".to_string()
        } else {
            format!("R{}", round - 1)
        };
        let fired = self.state.fired.get(&previous).copied().unwrap_or(false);
        if let Some(review) = self.state.review.clone() {
            if review.exists() && self.config.calibration.pause_on_review {
                let note = format!(
                    "paused: waiting for the review requested in {}",
                    review.display()
                );
                return self.record_loop(round, false, note, 0, 0);
            }
            self.state.review = None;
        }
        if !fired {
            let note = format!(
                "the trigger did not fire during {previous}: the judge stays at r{}",
                self.state.live.number
            );
            return self.record_loop(round, false, note, 0, 0);
        }
        let batch = self.query_batch(round)?;
        let labeller = self.labeller_name();
        let labels_path = self.judge_dir().join("labels.jsonl");
        let mut store = LabelStore::load(&labels_path)?;
        let latest = store.latest(labeller);
        let unlabelled: Vec<Case> = batch
            .iter()
            .filter(|q| !latest.contains_key(&q.case.id))
            .map(|q| q.case.clone())
            .collect();
        if !unlabelled.is_empty() {
            match self.config.labeller {
                Labeller::Simulated => {
                    let earlier = self.accumulated(round - 1, &store, labeller)?;
                    let earlier: Vec<(Case, Label)> =
                        earlier.cases.into_iter().zip(earlier.labels).collect();
                    let mut annotator = Annotator::new(SIMULATED, self.config.annotator.clone());
                    annotator.restore(self.state.annotator);
                    store.extend(annotator.label(&unlabelled, &earlier));
                    store.save(&labels_path)?;
                    self.state.annotator = annotator.state();
                    self.save_state()?;
                }
                Labeller::Human => {
                    let queue: Vec<&QueueItem> = batch
                        .iter()
                        .filter(|q| !latest.contains_key(&q.case.id))
                        .collect();
                    let path = self.judge_dir().join("queue.jsonl");
                    write_jsonl(&path, &queue)?;
                    return Err(EvolveError::Invalid(format!(
                        "{} cases wait for labels in {}: label them (`verifine labels export`/`import`), then `verifine evolve --resume {}`",
                        queue.len(),
                        path.display(),
                        self.dir.display()
                    )));
                }
            }
        }
        let set = self.accumulated(round, &store, labeller)?;
        let done: Vec<CalibrationEntry> =
            read_jsonl_if_exists::<CalibrationEntry>(&self.judge_dir().join("calibration.jsonl"))?
                .into_iter()
                .filter(|e| e.round == round)
                .collect();
        let clarifications: Vec<Clarification> =
            read_jsonl_if_exists(&self.judge_dir().join("clarifications.jsonl"))?;
        let log_path = self.judge_dir().join("calibration.jsonl");
        if !log_path.exists() {
            write_jsonl::<CalibrationEntry>(&log_path, &[])?;
        }
        let judge_dir = self.judge_dir();
        let mut agent: Box<dyn RevisionAgent + '_> = if let Some(retrain) = &self.config.verifier {
            Box::new(VerifierAgent::new(
                retrain,
                &self.judge,
                judge_dir.join("verifier").join(format!("round-{round}")),
                self.config.loop_seed() ^ u64::from(round),
            ))
        } else if self.config.agent.command.is_empty() {
            Box::new(RuleSearchAgent)
        } else {
            Box::new(CommandAgent::new(
                self.config.agent.clone(),
                judge_dir.join(format!("agent-round-{round}")),
                &judge_dir,
                round,
            ))
        };
        let judge = &self.judge;
        let progress = self.progress.clone();
        let origin = Origin::Agent {
            command: agent.name(),
            step: round as usize,
        };
        let outcome = calibrate(
            &self.config.calibration,
            round,
            &set,
            self.state.live.clone(),
            self.state
                .revisions
                .iter()
                .map(|r| r.number)
                .max()
                .unwrap_or(0)
                + 1,
            &done,
            agent.as_mut(),
            &clarifications,
            Hooks {
                score: &mut |revision| judge.score(revision, &set.cases),
                admit: &mut |code, live| judge.admit(code, live, origin.clone()),
                log: &mut |entry, live, candidate| {
                    let mut all: Vec<CalibrationEntry> = read_jsonl_if_exists(&log_path)?;
                    all.push(entry.clone());
                    write_jsonl(&log_path, &all)?;
                    if let Some(code) = &entry.code {
                        let candidate = match code {
                            HandedIn::Admitted(_) => Some(judge.record(candidate)?),
                            HandedIn::Refused { .. } => None,
                        };
                        let kind = match entry.revision {
                            Some(_) => EventKind::Promoted,
                            None => EventKind::Refused,
                        };
                        record_event(
                            &judge_dir,
                            round,
                            kind,
                            judge.record(live)?,
                            candidate,
                            &entry.decision.reason,
                        )?;
                    }
                    (progress.borrow_mut())(EvolveProgress::Calibration {
                        iteration: entry.iteration,
                        accepted: entry.revision.is_some(),
                    });
                    Ok(())
                },
            },
        )?;
        drop(agent);
        let entries: Vec<CalibrationEntry> = read_jsonl_if_exists::<CalibrationEntry>(&log_path)?
            .into_iter()
            .filter(|e| e.round == round)
            .collect();
        let mut live = self.state.live.clone();
        for entry in &entries {
            if let Some(number) = entry.revision {
                let code = match &entry.code {
                    Some(HandedIn::Admitted(code)) => Some(code.clone()),
                    _ => live.code.clone(),
                };
                live = JudgeRevision {
                    number,
                    rules: entry.rules.clone(),
                    origin: entry.rationale.clone(),
                    code,
                    verifier: entry.verifier.clone().or(live.verifier.clone()),
                };
                if self.state.revisions.iter().all(|r| r.number != number) {
                    self.state.revisions.push(live.clone());
                }
            }
        }
        self.state.live = outcome.live;
        let note = match &outcome.stop {
            CalibrationStop::AgentDone => {
                "calibrated until the agent had nothing more to propose".to_string()
            }
            CalibrationStop::VersionCap => format!(
                "stopped at the cap of {} proposals",
                self.config.calibration.max_versions
            ),
            CalibrationStop::ReviewRequested { reason } => {
                let path = self.judge_dir().join(format!("review-round-{round}.md"));
                let text = format!(
                    "# Review requested (judge loop {round})\n\n{reason}.\n\nThe live judge is r{} (rules below). \
                     Look at `calibration.jsonl` and the disputed cases, revise the rubric or the labels, \
                     then delete this file: the judge loop stays paused while it exists.\n\n```json\n{}\n```\n",
                    self.state.live.number,
                    serde_json::to_string_pretty(&self.state.live.rules).unwrap_or_default()
                );
                write_atomically(&path, |w| w.write_all(text.as_bytes()))?;
                self.state.review = Some(path);
                format!("review requested: {reason}")
            }
        };
        self.record_loop(round, true, note, batch.len(), outcome.accepted)
    }

    /// The query batch of a loop: read back when it was chosen already.
    fn query_batch(&self, round: u32) -> Result<Vec<QueueItem>> {
        let path = self.judge_dir().join(format!("batch-{round}.jsonl"));
        if path.exists() {
            return Ok(read_jsonl(&path)?);
        }
        let (cases, _) = self.anchor_cases(&format!("j{round}"), (u64::from(round) << 8) | 2)?;
        let scores = self.judge.score(&self.state.live, &cases)?;
        let evaluator = self.evaluator_totals(&cases)?;
        let picked = crate::queries::select(
            &self.config.queries,
            &cases,
            &scores,
            &evaluator,
            &HashSet::new(),
        );
        let items: Vec<QueueItem> = picked
            .into_iter()
            .map(|(i, reason)| QueueItem {
                case: cases[i].clone(),
                reason,
                judge: JudgeView {
                    revision: self.state.live.number,
                    total: scores[i].total,
                    dimensions: scores[i].dimensions.clone(),
                    explanation: scores[i].explanation.clone(),
                },
                label: None,
            })
            .collect();
        write_jsonl(&path, &items)?;
        Ok(items)
    }

    /// The accumulated judge evaluation set up to `round`'s batch, with the
    /// newest label of each case; the newest batch is `current`.
    pub(super) fn accumulated(
        &self,
        round: u32,
        store: &LabelStore,
        labeller: &str,
    ) -> Result<LabelledSet> {
        let latest = store.latest(labeller);
        let mut set = LabelledSet::default();
        for r in 1..=round {
            let path = self.judge_dir().join(format!("batch-{r}.jsonl"));
            for item in read_jsonl_if_exists::<QueueItem>(&path)? {
                let Some(label) = latest.get(&item.case.id) else {
                    continue;
                };
                let index = set.cases.len();
                if r == round {
                    set.current.push(index)
                } else {
                    set.earlier.push(index)
                }
                let mut label = label.clone();
                label.total = overall(&label.dimensions);
                set.cases.push(item.case);
                set.labels.push(label);
            }
        }
        Ok(set)
    }

    fn record_loop(
        &mut self,
        round: u32,
        ran: bool,
        note: String,
        labelled: usize,
        accepted: usize,
    ) -> Result<()> {
        tracing::info!(round, ran, %note, "judge loop");
        let path = self.judge_dir().join("loops.jsonl");
        let mut all: Vec<LoopRecord> = read_jsonl_if_exists(&path)?;
        all.retain(|r| r.round != round);
        all.push(LoopRecord {
            round,
            ran,
            note,
            labelled,
            accepted,
            live: self.state.live.number,
        });
        Ok(write_jsonl(&path, &all)?)
    }

    /// The name the configured labeller's labels carry.
    pub(super) fn labeller_name(&self) -> &'static str {
        match self.config.labeller {
            Labeller::Simulated => SIMULATED,
            Labeller::Human => HUMAN,
        }
    }

    /// `judge/` of the run.
    pub(super) fn judge_dir(&self) -> PathBuf {
        self.dir.join("judge")
    }
}
