//! No code: this crate exists for its `Cargo.toml`, which pins the features
//! of shared dependencies so that one compiled copy of each serves the tests,
//! the CLI and the Python extension (see the manifest's comment).
