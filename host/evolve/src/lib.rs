//! Co-evolution of a policy and its reference-free judge (`verifine
//! evolve`). The policy loop trains policies from one SFT base (or from the
//! best policy so far) with the live judge as the reward and a
//! judge-guided curriculum; the judge
//! loop, when a trigger sees progress stall on the fixed reference-based
//! evaluator, asks people (or a simulated annotator) to label the cases the
//! judge is least sure of, and lets a revision agent propose new rules that
//! are accepted only when agreement with the labels rises without
//! regressions. Training's code runs the rounds; this crate owns the loops.
//!
//! Bottom-up, each part using only those before it or beside it: the
//! judged unit (`cases`) and the judge (`judge`, with code revisions),
//! [`labels`] and the simulated annotator, the loop's parts (queries,
//! failures, curriculum, the round's reward hook), revision agents and
//! calibration, the label [`queue`], [`config`], the results as data
//! ([`summary`]) with their plots and reading, the run and its tasks
//! (`run`), and [`seeds`] on top.

#![warn(missing_docs)]

mod agent;
mod annotator;
mod calibration;
mod cases;
mod command_agent;
pub mod config;
mod curriculum;
mod error;
mod failures;
mod judge;
pub mod labels;
mod plot;
mod queries;
pub mod queue;
mod reading;
mod reward;
mod run;
pub mod seeds;
pub mod summary;
#[cfg(test)]
mod testing;
mod verifier;

pub use cases::Case;
pub use config::EvolveConfig;
pub use error::{EvolveError, Result};
pub use run::{Evolve, EvolveProgress, open, resume, start};
pub use summary::EvolveSummary;
