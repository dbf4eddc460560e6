//! The disk cache: an answer is stored under the sha256 of the model and
//! the whole request, so asking the same question again is free and gives
//! the same answer (re-scoring a dataset is deterministic). Files are
//! written whole (temporary file, then rename); an unreadable entry is a
//! miss, never an error.

use serde::Serialize;
use std::path::{Path, PathBuf};
use verifine_runtime::judge_models::{ModelAnswer, ModelRequest};

/// Cached answers in one directory.
#[derive(Debug, Clone)]
pub struct DiskCache {
    dir: PathBuf,
}

/// What the key covers.
#[derive(Serialize)]
struct Key<'a> {
    model: &'a str,
    base_url: &'a str,
    request: &'a ModelRequest,
}

impl DiskCache {
    /// A cache in `dir` (created on first store).
    pub fn new(dir: &Path) -> Self {
        DiskCache {
            dir: dir.to_path_buf(),
        }
    }

    /// The key of `request` sent to `model` at `base_url` (hex sha256).
    pub fn key(base_url: &str, model: &str, request: &ModelRequest) -> String {
        let bytes = serde_json::to_vec(&Key {
            model,
            base_url,
            request,
        })
        .expect("a request serializes");
        verifine_runtime::engine::sha256_hex(&bytes)
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(&key[..2]).join(format!("{key}.json"))
    }

    /// The stored answer, marked as cached and free.
    pub fn get(&self, key: &str) -> Option<ModelAnswer> {
        let text = std::fs::read_to_string(self.path(key)).ok()?;
        let mut answer: ModelAnswer = serde_json::from_str(&text).ok()?;
        answer.cached = true;
        answer.seconds = 0.0;
        answer.usage = Default::default();
        Some(answer)
    }

    /// Stores an answer; a failure to store is logged, not fatal.
    pub fn put(&self, key: &str, answer: &ModelAnswer) {
        let path = self.path(key);
        let stored = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                let json = serde_json::to_vec(answer).map_err(|e| e.to_string())?;
                verifine_base::write_atomically(&path, |w| w.write_all(&json))
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = stored {
            tracing::warn!(path = %path.display(), "judge cache: not stored: {e}");
        }
    }
}
