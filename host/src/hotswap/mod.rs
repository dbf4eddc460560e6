//! Live plugin revisions: the slots of a run, the gate a candidate passes
//! before it goes live (kind and API check, its own snapshot cases, a canary
//! agreement check against the live revision), the run-directory inbox through
//! which `verifine plugin promote|rollback` and agents hand in requests, and
//! the events log.
//!
//! Swaps happen only at step boundaries, between reward calls; a call holds a
//! snapshot of the revision it started with.

pub mod agent;
pub mod cases;
pub mod events;
pub mod gate;
pub mod inbox;
pub mod live;
pub mod plugin_crate;
pub mod revision;

pub use revision::{Origin, Revision, RevisionRecord, RevisionSlot};
