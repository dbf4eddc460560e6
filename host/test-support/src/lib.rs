//! Scratch directories for tests (a dev-dependency of every crate): one fresh
//! directory per test under the system's temporary directory, removed when
//! the test is done with it, kept when the test fails so its files can be
//! looked at (its path is in the failure's output).

mod capped;
mod mutate;

pub use capped::{Caps, in_capped_child};
pub use mutate::{EXTREMES, mutate_bytes};

use std::path::{Path, PathBuf};

/// A test's directory: derefs to its [`Path`], removed on drop unless the
/// thread is panicking.
#[derive(Debug)]
pub struct ScratchDir(Option<tempfile::TempDir>);

/// A fresh, empty directory named after `test` (and unique, so parallel
/// runs of the same suite never share one).
pub fn scratch_dir(test: &str) -> ScratchDir {
    let dir = tempfile::Builder::new()
        .prefix(&format!("verifine-{test}-"))
        .tempdir()
        .expect("a scratch directory under the system's temporary directory");
    ScratchDir(Some(dir))
}

/// A fresh path named after `test`, not created yet: for commands that
/// create their own directory and refuse one that exists. Whatever they
/// create there is removed with the value, as for [`scratch_dir`].
pub fn scratch_path(test: &str) -> ScratchDir {
    let dir = scratch_dir(test);
    std::fs::remove_dir(&*dir).expect("the scratch directory was just created, empty");
    dir
}

impl ScratchDir {
    /// The path, the directory left in place (for a process or server that
    /// outlives the value).
    pub fn keep(mut self) -> PathBuf {
        self.0
            .take()
            .map(tempfile::TempDir::keep)
            .unwrap_or_default()
    }
}

impl std::ops::Deref for ScratchDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        self.0
            .as_ref()
            .map_or(Path::new(""), tempfile::TempDir::path)
    }
}

impl AsRef<Path> for ScratchDir {
    fn as_ref(&self) -> &Path {
        self
    }
}

impl AsRef<std::ffi::OsStr> for ScratchDir {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.as_os_str()
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take()
            && std::thread::panicking()
        {
            let _ = dir.keep();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scratch_dir_is_fresh_and_goes_when_dropped() {
        let dir = scratch_dir("base-scratch");
        assert!(dir.is_dir() && std::fs::read_dir(&*dir).unwrap().next().is_none());
        std::fs::write(dir.join("f"), "x").unwrap();
        let path = dir.to_path_buf();
        assert_ne!(path, scratch_dir("base-scratch").to_path_buf());
        drop(dir);
        assert!(!path.exists());
        let fresh = scratch_path("base-scratch");
        assert!(!fresh.exists());
        std::fs::create_dir_all(fresh.join("run")).unwrap();
        let path = fresh.to_path_buf();
        drop(fresh);
        assert!(!path.exists());
    }

    #[test]
    fn a_failing_test_keeps_its_scratch_dir() {
        let path = std::thread::spawn(|| {
            let dir = scratch_dir("base-scratch-kept");
            let path = dir.to_path_buf();
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                let _held = dir;
                panic!("the test fails");
            }));
            path
        })
        .join()
        .unwrap();
        assert!(path.is_dir());
        std::fs::remove_dir_all(path).unwrap();
    }
}
