//! The disk cache: an answer is stored under the sha256 of the model and
//! the whole request, so asking the same question again is free and gives
//! the same answer (re-scoring a dataset is deterministic). Files are
//! written whole (temporary file, then rename); an unreadable entry is a
//! miss, never an error.
//!
//! A cached answer becomes a reward without any server being asked, so an
//! entry is trusted only as far as the runtime trusts its compiled code
//! (one rule, [`SignedCacheDir`]): the directory must belong to this user
//! and be writable by no one else (else there is no cache), and every
//! entry carries an HMAC-SHA256 tag over its key and contents under the
//! key kept outside the cache (`$VERIFINE_CACHE_KEY`, else
//! `~/.config/verifine/code-cache.key`). An entry whose tag does not
//! verify (planted, copied under another question, or corrupt) is a miss
//! and is overwritten by the next answer.

use serde::Serialize;
use std::path::PathBuf;
use verifine_runtime::code_cache::{SignedCacheDir, TAG_BYTES};
use verifine_runtime::judge_models::{ModelAnswer, ModelRequest};

/// What every entry's tag names first, so no other signed cache's entry
/// can pass for a judge answer.
const ENTRY_KIND: &[u8] = b"verifine judge answer";

/// Cached answers in one checked directory.
#[derive(Clone)]
pub struct DiskCache {
    signed: SignedCacheDir,
}

/// What the key covers.
#[derive(Serialize)]
struct Key<'a> {
    model: &'a str,
    base_url: &'a str,
    request: &'a ModelRequest,
}

impl DiskCache {
    /// A cache in `dir` (created private when missing). `None`, with a
    /// warning, when the directory may be written by others, belongs to
    /// someone else, or no signing key can be kept: judges then ask their
    /// servers every time.
    pub fn open(dir: PathBuf) -> Option<Self> {
        SignedCacheDir::open(dir, "judge answer cache").map(|signed| DiskCache { signed })
    }

    /// The key of `request` sent to `model` at `base_url` (hex sha256).
    pub fn key(base_url: &str, model: &str, request: &ModelRequest) -> String {
        let bytes = serde_json::to_vec(&Key {
            model,
            base_url,
            request,
        })
        .expect("a request serializes");
        verifine_base::sha256_hex(&bytes)
    }

    /// Where the entry for `key` lives: the tag's bytes, then the
    /// answer's JSON.
    pub fn path(&self, key: &str) -> PathBuf {
        self.signed
            .dir()
            .join(&key[..2])
            .join(format!("{key}.answer"))
    }

    /// The stored answer, marked as cached and free, when its tag verifies.
    pub fn get(&self, key: &str) -> Option<ModelAnswer> {
        let path = self.path(key);
        let bytes = std::fs::read(&path).ok()?;
        let (tag, json) = bytes.split_at(TAG_BYTES.min(bytes.len()));
        if !self.signed.verify(tag, &[ENTRY_KIND, key.as_bytes()], json) {
            tracing::warn!(entry = %path.display(), "judge cache: ignoring an entry whose tag does not verify");
            return None;
        }
        let mut answer: ModelAnswer = serde_json::from_slice(json).ok()?;
        answer.cached = true;
        answer.seconds = 0.0;
        answer.usage = Default::default();
        Some(answer)
    }

    /// Stores an answer with its tag; a failure to store is logged, not
    /// fatal.
    pub fn put(&self, key: &str, answer: &ModelAnswer) {
        let path = self.path(key);
        let stored = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                let json = serde_json::to_vec(answer).map_err(|e| e.to_string())?;
                let tag = self.signed.tag(&[ENTRY_KIND, key.as_bytes()], &json);
                verifine_base::write_atomically(&path, |w| {
                    w.write_all(&tag)?;
                    w.write_all(&json)
                })
                .map_err(|e| e.to_string())
            });
        if let Err(e) = stored {
            tracing::warn!(path = %path.display(), "judge cache: not stored: {e}");
        }
    }
}
