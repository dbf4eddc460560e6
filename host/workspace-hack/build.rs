//! Empty: cargo only resolves `[build-dependencies]` (and so their host-side
//! features) for a package that has a build script.
fn main() {}
