//! What a confined process leaves behind is read only after it and all it
//! started are gone, and only when its directory holds nothing but regular
//! files and directories: a symlink could point the reader at the user's
//! secrets, a FIFO or a device could block it forever. One file someone
//! else wrote is read the same way ([`read_regular_file`]).

use std::path::Path;

/// Most entries an output directory may hold.
pub const MAX_ENTRIES: usize = 20_000;
/// Most bytes its files may hold together.
pub const MAX_TOTAL_BYTES: u64 = 1 << 30;
/// Deepest nesting below it.
pub const MAX_DEPTH: usize = 32;

/// The largest component taken from someone else (a candidate handed in,
/// an agent's `revised.wasm`, a confined build's output); larger files are
/// refused unread.
pub const MAX_COMPONENT_BYTES: u64 = 64 << 20;

/// Reads `path` only if it is a regular file (not a directory, FIFO, socket
/// or symlink: reading those could block or escape) of at most `max_bytes`;
/// otherwise says why not. The file is opened first (not following a
/// symlink, not waiting on a FIFO) and the open file is checked, so it cannot
/// be swapped between the check and the read.
pub fn read_regular_file(path: &Path, max_bytes: u64) -> std::result::Result<Vec<u8>, String> {
    use std::io::Read;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NOFOLLOW | libc::O_NONBLOCK,
    );
    let file = match options.open(path) {
        Ok(file) => file,
        Err(e) => {
            return match std::fs::symlink_metadata(path) {
                Ok(m) if !m.file_type().is_file() => Err(format!(
                    "{} is not a regular file ({:?})",
                    path.display(),
                    m.file_type()
                )),
                _ => Err(format!("reading {}: {e}", path.display())),
            };
        }
    };
    let metadata = file
        .metadata()
        .map_err(|e| format!("reading {}: {e}", path.display()))?;
    if !metadata.file_type().is_file() {
        return Err(format!(
            "{} is not a regular file ({:?})",
            path.display(),
            metadata.file_type()
        ));
    }
    if metadata.len() > max_bytes {
        return Err(format!(
            "{} has {} bytes, more than the {max_bytes} allowed",
            path.display(),
            metadata.len()
        ));
    }
    let mut bytes = Vec::new();
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("reading {}: {e}", path.display()))?;
    if bytes.len() as u64 > max_bytes {
        return Err(format!(
            "{} grew past the {max_bytes} bytes allowed while it was read",
            path.display()
        ));
    }
    Ok(bytes)
}

/// Checks that `dir` and everything below it is a regular file or a
/// directory, within [`MAX_ENTRIES`], [`MAX_TOTAL_BYTES`] and [`MAX_DEPTH`];
/// otherwise names the first offending path.
pub fn check_tree(dir: &Path) -> Result<(), String> {
    let mut entries = 0usize;
    let mut bytes = 0u64;
    let mut pending = vec![(dir.to_path_buf(), 0usize)];
    while let Some((path, depth)) = pending.pop() {
        let metadata = std::fs::symlink_metadata(&path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        let kind = metadata.file_type();
        if kind.is_file() {
            bytes += metadata.len();
            if bytes > MAX_TOTAL_BYTES {
                return Err(format!(
                    "{} holds more than {MAX_TOTAL_BYTES} bytes of files",
                    dir.display()
                ));
            }
            continue;
        }
        if !kind.is_dir() {
            return Err(format!(
                "{} is not a regular file or a directory ({kind:?}); nothing the agent wrote is read",
                path.display()
            ));
        }
        if depth > MAX_DEPTH {
            return Err(format!(
                "{} is nested deeper than {MAX_DEPTH}",
                path.display()
            ));
        }
        let listing =
            std::fs::read_dir(&path).map_err(|e| format!("listing {}: {e}", path.display()))?;
        for entry in listing {
            let entry = entry.map_err(|e| format!("listing {}: {e}", path.display()))?;
            entries += 1;
            if entries > MAX_ENTRIES {
                return Err(format!(
                    "{} holds more than {MAX_ENTRIES} entries",
                    dir.display()
                ));
            }
            pending.push((entry.path(), depth + 1));
        }
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn only_files_and_directories_pass() {
        let dir = verifine_test_support::scratch_path("tree");
        std::fs::create_dir_all(dir.join("a/b")).unwrap();
        std::fs::write(dir.join("a/b/rules.json"), "{}").unwrap();
        assert_eq!(check_tree(&dir), Ok(()));
        std::os::unix::fs::symlink("/etc/passwd", dir.join("a/link")).unwrap();
        let refused = check_tree(&dir).unwrap_err();
        assert!(refused.contains("a/link"), "{refused}");
        std::fs::remove_file(dir.join("a/link")).unwrap();
        let fifo = std::ffi::CString::new(dir.join("a/b/pipe").to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(check_tree(&dir).unwrap_err().contains("pipe"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
