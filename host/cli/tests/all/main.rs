//! The CLI's integration tests, in one binary (one link instead of one per
//! file). Modules that need a feature are compiled with it only.

#[cfg(feature = "train")]
mod common;

#[cfg(feature = "train")]
mod evolve_resume;
#[cfg(feature = "local-judge")]
mod judge_distill;
#[cfg(all(feature = "train", feature = "local-judge"))]
mod judge_train;
mod labels_import;
mod release;
#[cfg(feature = "train")]
mod train_resume;
#[cfg(feature = "local-judge")]
mod verifiers_screen;
