//! Live plugin revisions: the slots of a run, the gate a candidate passes
//! before it goes live (kind and API check, its own snapshot cases, a canary
//! agreement check against the live revision), the run-directory inbox through
//! which `verifine plugin promote|rollback` and agents hand in requests, and
//! the events log. It is a run-directory protocol: training, the co-evolution
//! loop and the reward server all use it.
//!
//! Swaps happen only at step boundaries, between reward calls; a call holds a
//! snapshot of the revision it started with.

#![warn(missing_docs)]

pub mod agent;
pub mod config;
pub mod error;
pub mod events;
pub mod gate;
pub mod inbox;
pub mod live;
pub mod revision;
pub mod shadow;
pub mod slot;

pub use config::HotSwapConfig;
pub use error::HotswapError;
pub use events::{Event, EventKind};
pub use revision::{Origin, Revision, RevisionHistory, RevisionRecord};
pub use slot::Slot;
