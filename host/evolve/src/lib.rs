//! Co-evolution of a policy and its reference-free judge (`verifine
//! evolve`). The policy loop trains policies from one SFT base (or from the
//! best policy so far) with the live judge as the reward and a
//! judge-guided curriculum; the judge
//! loop, when a trigger sees progress stall on the fixed reference-based
//! evaluator, asks people (or a simulated annotator) to label the cases the
//! judge is least sure of, and lets a revision agent propose new rules that
//! are accepted only when agreement with the labels rises without
//! regressions. Training's code runs the rounds; this crate owns the loops.

#![warn(missing_docs)]

pub mod agent;
pub mod annotator;
pub mod calibration;
pub mod cases;
pub mod command_agent;
pub mod config;
pub mod curriculum;
pub mod error;
pub mod failures;
pub mod judge;
pub mod judge_loop;
pub mod kept;
pub mod labels;
pub mod membership;
pub mod plot;
pub mod queries;
pub mod queue;
mod reading;
pub mod report;
pub mod reward;
pub mod round;
pub mod run;
pub mod seeds;
pub mod select;
pub mod verifier;

pub use config::EvolveConfig;
pub use error::{EvolveError, Result};
pub use report::EvolveSummary;
pub use run::{EvolveProgress, open, resume, start};
