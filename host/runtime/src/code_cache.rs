//! The on-disk cache of compiled plugin code, trusted only as far as it can
//! be checked.
//!
//! Loading compiled code runs it as native code (wasmtime's `deserialize` is
//! `unsafe` for that reason), so an entry is used only when:
//! - the cache directory belongs to this user and nobody else may write to it;
//! - the entry carries a tag, HMAC-SHA256 over the source's sha256, the
//!   engine's compatibility key and the compiled bytes, under a key kept
//!   outside the cache directory (`$VERIFINE_CACHE_KEY`, else
//!   `$XDG_CONFIG_HOME/verifine/code-cache.key`, else
//!   `~/.config/verifine/code-cache.key`, created with mode 0600).
//!
//! So an entry copied under another plugin's name, a corrupted entry, or one
//! written by someone without the key is recompiled instead of run. Anything
//! wrong with the cache only costs a compilation, never a load.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use verifine_base::{FileError, write_atomically};

/// Bytes of the tag in front of every entry.
const TAG_BYTES: usize = 32;

/// A checked cache directory and the key that signs its entries.
#[derive(Clone)]
pub struct CodeCache {
    dir: PathBuf,
    key: [u8; 32],
}

impl CodeCache {
    /// Opens `dir` (created, private, when missing). `None`, with a warning,
    /// when the directory can be written by others, belongs to someone else,
    /// or no key can be kept: the runtime then compiles without a cache.
    pub fn open(dir: PathBuf) -> Option<Self> {
        if let Err(reason) = private_dir(&dir) {
            tracing::warn!(dir = %dir.display(), "not using the compiled-code cache: {reason}");
            return None;
        }
        match load_or_create_key(&key_path()?) {
            Ok(key) => Some(CodeCache { dir, key }),
            Err(reason) => {
                tracing::warn!("not using the compiled-code cache: {reason}");
                None
            }
        }
    }

    /// Where the entry for this source and engine lives.
    pub fn entry(&self, source_sha256: &str, engine_key: &str) -> PathBuf {
        self.dir.join(format!("{source_sha256}-{engine_key}.cwasm"))
    }

    /// The compiled bytes of the entry, when it exists and its tag verifies.
    pub fn load(&self, source_sha256: &str, engine_key: &str) -> Option<Vec<u8>> {
        let path = self.entry(source_sha256, engine_key);
        let mut bytes = std::fs::read(&path).ok()?;
        if bytes.len() < TAG_BYTES {
            tracing::warn!(entry = %path.display(), "ignoring a truncated cache entry");
            return None;
        }
        let code = bytes.split_off(TAG_BYTES);
        let expected = self.tag(source_sha256, engine_key, &code);
        if !constant_time_eq(&bytes, &expected) {
            tracing::warn!(entry = %path.display(), "ignoring a cache entry whose tag does not verify");
            return None;
        }
        Some(code)
    }

    /// Stores compiled bytes with their tag (atomically).
    pub fn store(
        &self,
        source_sha256: &str,
        engine_key: &str,
        code: &[u8],
    ) -> Result<(), FileError> {
        let tag = self.tag(source_sha256, engine_key, code);
        write_atomically(&self.entry(source_sha256, engine_key), |w| {
            w.write_all(&tag)?;
            w.write_all(code)
        })
    }

    fn tag(&self, source_sha256: &str, engine_key: &str, code: &[u8]) -> [u8; 32] {
        hmac_sha256(
            &self.key,
            &[
                source_sha256.as_bytes(),
                b"\0",
                engine_key.as_bytes(),
                b"\0",
                code,
            ],
        )
    }
}

/// HMAC-SHA256 (RFC 2104) over the concatenation of `parts`.
fn hmac_sha256(key: &[u8; 32], parts: &[&[u8]]) -> [u8; 32] {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(key);
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let mut inner = Sha256::new();
    inner.update(pad(0x36));
    for part in parts {
        inner.update(part);
    }
    let mut outer = Sha256::new();
    outer.update(pad(0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Where the signing key is kept: outside the cache directory.
fn key_path() -> Option<PathBuf> {
    crate::engine::user_path(
        "VERIFINE_CACHE_KEY",
        "XDG_CONFIG_HOME",
        ".config",
        "code-cache.key",
    )
}

/// The key at `path`, created (32 random bytes, mode 0600) when missing.
fn load_or_create_key(path: &Path) -> Result<[u8; 32], String> {
    if let Ok(bytes) = std::fs::read(path) {
        return <[u8; 32]>::try_from(bytes.as_slice())
            .map_err(|_| format!("{} is not a 32-byte key", path.display()));
    }
    let dir = path.parent().ok_or("the key path has no directory")?;
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let key = random_key()?;
    let tmp = verifine_base::temporary_sibling(path);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options
        .open(&tmp)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &key).and_then(|()| f.sync_all()))
        // A key another process made first wins; ours is dropped.
        .and_then(|()| {
            std::fs::hard_link(&tmp, path).or_else(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => Ok(()),
                _ => Err(e),
            })
        });
    let _ = std::fs::remove_file(&tmp);
    written.map_err(|e| format!("writing the cache key {}: {e}", path.display()))?;
    let bytes = std::fs::read(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    <[u8; 32]>::try_from(bytes.as_slice())
        .map_err(|_| format!("{} is not a 32-byte key", path.display()))
}

fn random_key() -> Result<[u8; 32], String> {
    let mut key = [0u8; 32];
    let mut urandom =
        std::fs::File::open("/dev/urandom").map_err(|e| format!("no randomness for a key: {e}"))?;
    std::io::Read::read_exact(&mut urandom, &mut key)
        .map_err(|e| format!("no randomness for a key: {e}"))?;
    Ok(key)
}

/// The directory exists (created 0700 when missing), belongs to this user and
/// cannot be written by anyone else.
fn private_dir(dir: &Path) -> Result<(), String> {
    if !dir.exists() {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating it: {e}"))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| format!("making it private: {e}"))?;
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let metadata = std::fs::symlink_metadata(dir).map_err(|e| e.to_string())?;
        if !metadata.is_dir() {
            return Err("it is not a directory (or is a symlink)".to_string());
        }
        if metadata.mode() & 0o022 != 0 {
            return Err(format!(
                "others may write to it (mode {:o}); make it private with chmod 700",
                metadata.mode() & 0o777
            ));
        }
        // /proc/self belongs to this process's user (Linux); elsewhere the
        // ownership check is skipped.
        if let Ok(me) = std::fs::metadata("/proc/self")
            && me.uid() != metadata.uid()
        {
            return Err(format!(
                "it belongs to user {}, not to this user",
                metadata.uid()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_the_rfc_4231_vector() {
        // RFC 4231 test case 2 uses a 4-byte key; pad it as HMAC does.
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        let tag = hmac_sha256(&key, &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(
            hex::encode(tag),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
