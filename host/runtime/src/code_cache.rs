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
//! The directory check and the key live in [`SignedCacheDir`], which the
//! judge-answer cache uses too.
//!
//! So an entry copied under another plugin's name, a corrupted entry, or one
//! written by someone without the key is recompiled instead of run. Anything
//! wrong with the cache only costs a compilation, never a load.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use verifine_base::{FileError, write_atomically};

/// Bytes of the tag in front of every entry (an HMAC-SHA256).
pub const TAG_BYTES: usize = 32;

/// A checked cache directory and the key that signs its entries.
#[derive(Clone)]
pub struct CodeCache {
    signed: SignedCacheDir,
}

impl CodeCache {
    /// Opens `dir` (created, private, when missing). `None`, with a warning,
    /// when the directory can be written by others, belongs to someone else,
    /// or no key can be kept: the runtime then compiles without a cache.
    pub fn open(dir: PathBuf) -> Option<Self> {
        SignedCacheDir::open(dir, "compiled-code cache").map(|signed| CodeCache { signed })
    }

    /// Where the entry for this source and engine lives.
    pub fn entry(&self, source_sha256: &str, engine_key: &str) -> PathBuf {
        self.signed
            .dir()
            .join(format!("{source_sha256}-{engine_key}.cwasm"))
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
        if !self.signed.verify(
            &bytes,
            &[source_sha256.as_bytes(), engine_key.as_bytes()],
            &code,
        ) {
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
        let tag = self
            .signed
            .tag(&[source_sha256.as_bytes(), engine_key.as_bytes()], code);
        write_atomically(&self.entry(source_sha256, engine_key), |w| {
            w.write_all(&tag)?;
            w.write_all(code)
        })
    }
}

/// A cache directory that only this user can write, and the key that signs
/// what is kept in it: what any on-disk cache whose entries are trusted
/// needs (compiled code here, judge answers in `verifine-judge`), so every
/// such cache follows one rule.
#[derive(Clone)]
pub struct SignedCacheDir {
    dir: PathBuf,
    key: [u8; 32],
}

impl SignedCacheDir {
    /// Opens `dir` (created, private, when missing). `None`, with a warning
    /// naming `what` (the cache, for the log), when the directory can be
    /// written by others, belongs to someone else, or no key can be kept:
    /// the caller then works without a cache.
    pub fn open(dir: PathBuf, what: &str) -> Option<Self> {
        if let Err(reason) = private_dir(&dir) {
            tracing::warn!(dir = %dir.display(), "not using the {what}: {reason}");
            return None;
        }
        let Some(key_path) = key_path() else {
            tracing::warn!("not using the {what}: no place for its key (set VERIFINE_CACHE_KEY)");
            return None;
        };
        match load_or_create_key(&key_path) {
            Ok(key) => Some(SignedCacheDir { dir, key }),
            Err(reason) => {
                tracing::warn!("not using the {what}: {reason}");
                None
            }
        }
    }

    /// The checked directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The tag of an entry: HMAC-SHA256 over each part of its identity,
    /// each followed by a zero byte (so parts, which must hold no zero
    /// byte, cannot slide into each other), and then its contents. A cache
    /// may name its kind of entry first (the judge-answer cache does), so
    /// that no other cache's entry can pass for one of its own.
    pub fn tag(&self, identity: &[&[u8]], contents: &[u8]) -> [u8; 32] {
        let mut parts = Vec::with_capacity(identity.len() * 2 + 1);
        for part in identity {
            parts.push(*part);
            parts.push(b"\0".as_slice());
        }
        parts.push(contents);
        hmac_sha256(&self.key, &parts)
    }

    /// Whether `tag` is the tag of this identity and contents (compared in
    /// constant time).
    pub fn verify(&self, tag: &[u8], identity: &[&[u8]], contents: &[u8]) -> bool {
        constant_time_eq(tag, &self.tag(identity, contents))
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
    verifine_base::user_path(
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
