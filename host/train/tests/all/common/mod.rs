//! What the training integration tests share: a tiny run and a scratch
//! directory.

pub use verifine_train::test_support::tiny_config as tiny;

/// A fresh path `verifine-<suite>-<name>-…`, not created (a run creates
/// its own directory).
pub fn scratch(suite: &str, name: &str) -> verifine_test_support::ScratchDir {
    verifine_test_support::scratch_path(&format!("{suite}-{name}"))
}
