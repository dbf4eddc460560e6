//! The integration tests of the co-evolution loop, in one binary (one link instead of
//! one per file: wasmtime keeps a single `tests/all` for the same reason).
//! Each module is one file's specification.

mod common;

mod code_revisions;
mod evolve_run;
mod kept_policy;
mod label_queue;
mod labels_import;
