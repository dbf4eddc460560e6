//! Reading JSONL with errors that name file:line, and writing outputs so that
//! a failure never leaves a half-written file.

use crate::write_behind::WriteBehind;
use serde::de::DeserializeOwned;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// A file that could not be read or written; every variant names its path.
#[derive(Debug, Error)]
pub enum FileError {
    /// The operating system refused (open, read, create, rename …).
    #[error("{action} {}: {error}", path.display())]
    Io {
        /// What was being done: "opening", "creating", "renaming into" …
        action: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// What the operating system said (in the message, not a separate
        /// source, so a chain prints it once).
        error: std::io::Error,
    },
    /// A line of a JSONL file that is not the expected JSON.
    #[error("{}:{line}: {message}", path.display())]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
}

impl FileError {
    /// An I/O failure while doing `action` on `path`.
    pub fn io(action: &'static str, path: &Path, error: std::io::Error) -> Self {
        FileError::Io {
            action,
            path: path.to_path_buf(),
            error,
        }
    }
}

/// The longest row a JSONL file may hold: a longer one is refused with its
/// `file:line` before it is read whole (or reaches a plugin).
pub const MAX_ROW_BYTES: usize = 16 << 20;

/// Reads one JSON value per non-blank line. A malformed line, or one longer
/// than [`MAX_ROW_BYTES`], is an error naming `file:line`.
pub fn read_jsonl<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, FileError> {
    let file = std::fs::File::open(path).map_err(|e| FileError::io("opening", path, e))?;
    rows(file, path)
}

/// [`read_jsonl`] for a log that grows as a run goes: before its first row
/// is written the file does not exist, and that means no rows. Any other
/// failure to open it is still an error.
pub fn read_jsonl_if_exists<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, FileError> {
    match std::fs::File::open(path) {
        Ok(file) => rows(file, path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(FileError::io("opening", path, e)),
    }
}

/// The rows of an opened JSONL file.
fn rows<T: DeserializeOwned>(file: std::fs::File, path: &Path) -> Result<Vec<T>, FileError> {
    JsonlLines::new(BufReader::new(file), path)
        .map(|line| {
            let (line_no, text) = line?;
            serde_json::from_str(&text).map_err(|e| FileError::Line {
                path: path.to_path_buf(),
                line: line_no,
                message: e.to_string(),
            })
        })
        .collect()
}

/// The non-blank lines of a JSONL stream with their 1-based numbers, one at
/// a time (a file larger than memory is read in constant space). A line that
/// is not UTF-8, or longer than [`MAX_ROW_BYTES`], is an error naming
/// `file:line`; the iterator ends after an error.
pub struct JsonlLines<R> {
    reader: R,
    path: PathBuf,
    line_no: usize,
    failed: bool,
}

impl<R: BufRead> JsonlLines<R> {
    /// Lines of `reader`; `path` names it in errors.
    pub fn new(reader: R, path: &Path) -> Self {
        JsonlLines {
            reader,
            path: path.to_path_buf(),
            line_no: 0,
            failed: false,
        }
    }

    /// Appends the next line's bytes (without its line end) to `buf` and
    /// returns its number; `None` at the end. Neither UTF-8 nor blankness is
    /// checked: a caller that reads lines in bulk checks them where it
    /// parses them ([`line_text`]).
    pub fn read_line_into(&mut self, buf: &mut Vec<u8>) -> Option<Result<usize, FileError>> {
        if self.failed {
            return None;
        }
        self.line_no += 1;
        let start = buf.len();
        let read = (&mut self.reader)
            .take(MAX_ROW_BYTES as u64 + 1)
            .read_until(b'\n', buf);
        match read {
            Ok(0) => return None,
            Ok(_) => {}
            Err(e) => return Some(Err(self.error(format!("unreadable line: {e}")))),
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
        } else if buf.len() - start > MAX_ROW_BYTES {
            let cap = MAX_ROW_BYTES >> 20;
            let message = format!("a row of more than {cap} MiB; rows are capped");
            return Some(Err(self.error(message)));
        }
        Some(Ok(self.line_no))
    }

    /// Up to `rows` lines into one buffer (`None` at the end), for callers
    /// that hand a chunk of lines to other threads to parse.
    pub fn read_chunk(&mut self, rows: usize) -> Result<Option<LineChunk>, FileError> {
        let mut chunk = LineChunk::default();
        while chunk.lines.len() < rows {
            let start = chunk.bytes.len();
            match self.read_line_into(&mut chunk.bytes) {
                None => break,
                Some(line) => chunk.lines.push((line?, start..chunk.bytes.len())),
            }
        }
        Ok((!chunk.lines.is_empty()).then_some(chunk))
    }

    fn error(&mut self, message: String) -> FileError {
        self.failed = true;
        FileError::Line {
            path: self.path.clone(),
            line: self.line_no,
            message,
        }
    }
}

/// Lines read by [`JsonlLines::read_chunk`]: one buffer, and each line's
/// number and bytes in it. UTF-8 and blank lines are left to whoever parses
/// them ([`line_text`]).
#[derive(Debug, Default)]
pub struct LineChunk {
    /// The lines' bytes, one after another, without line ends.
    pub bytes: Vec<u8>,
    /// Each line's 1-based number and its range in `bytes`.
    pub lines: Vec<(usize, std::ops::Range<usize>)>,
}

impl LineChunk {
    /// The bytes of the line at `range` (one of [`Self::lines`]).
    pub fn line(&self, range: &std::ops::Range<usize>) -> &[u8] {
        &self.bytes[range.clone()]
    }
}

/// A line read by [`JsonlLines::read_line_into`] as text: `None` for a
/// blank line, an error naming `path:line` for one that is not UTF-8.
pub fn line_text<'a>(
    path: &Path,
    line: usize,
    bytes: &'a [u8],
) -> Result<Option<&'a str>, FileError> {
    match std::str::from_utf8(bytes) {
        Ok(text) if text.trim().is_empty() => Ok(None),
        Ok(text) => Ok(Some(text)),
        Err(e) => Err(FileError::Line {
            path: path.to_path_buf(),
            line,
            message: format!("unreadable line: {e}"),
        }),
    }
}

impl<R: BufRead> Iterator for JsonlLines<R> {
    type Item = Result<(usize, String), FileError>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut bytes = Vec::new();
        loop {
            bytes.clear();
            let line = match self.read_line_into(&mut bytes)? {
                Ok(line) => line,
                Err(e) => return Some(Err(e)),
            };
            match line_text(&self.path, line, &bytes) {
                Ok(None) => continue,
                Ok(Some(text)) => return Some(Ok((line, text.to_string()))),
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// Writes a file through a temporary sibling that is renamed into place only
/// when `write` succeeds (creating the parent directory if needed); on
/// failure the temporary is removed and any existing file at `path` is left
/// untouched.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut (dyn Write + Send)) -> std::io::Result<()>,
) -> Result<(), FileError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| FileError::io("creating", dir, e))?;
    }
    let tmp = temporary_sibling(path);
    let result = (|| {
        // A fresh, unpredictable name opened exclusively: nothing planted at
        // it beforehand (a symlink, say) is followed or overwritten.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| FileError::io("creating", &tmp, e))?;
        // Large outputs start their way to disk while being written.
        let mut writer = WriteBehind::new(file);
        let written = write(&mut writer).and_then(|()| writer.finish());
        written.map_err(|e| FileError::io("writing", &tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| FileError::io("renaming into", path, e))?;
        sync_parent(path);
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Writes `rows` as JSONL, atomically.
pub fn write_jsonl<T: serde::Serialize>(path: &Path, rows: &[T]) -> Result<(), FileError> {
    write_atomically(path, |w| {
        for row in rows {
            serde_json::to_writer(&mut *w, row)?;
            w.write_all(b"\n")?;
        }
        Ok(())
    })
}

/// A hidden name beside `path` that no one can guess in advance: the
/// process id and 64 bits the standard library seeds from the operating
/// system's randomness (each `RandomState` draws new keys).
pub fn temporary_sibling(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".to_string());
    let random = crate::os_random_u64();
    path.with_file_name(format!(".{name}.tmp-{}-{random:016x}", std::process::id()))
}

/// Makes a rename into `path` durable: syncs the directory that holds it.
/// Best effort (some platforms cannot open a directory for syncing).
pub fn sync_parent(path: &Path) {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    if let Ok(handle) = std::fs::File::open(dir) {
        let _ = handle.sync_all();
    }
}

/// Reads a row id that may be a JSON string or number.
pub fn id_string(value: &serde_json::Value) -> Option<String> {
    match value {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_line_names_file_and_line() {
        let dir = verifine_test_support::scratch_dir("data");
        let path = dir.join("rows.jsonl");
        std::fs::write(&path, "{\"a\":1}\n\n{\"a\":\n").unwrap();
        let err = read_jsonl::<serde_json::Value>(&path)
            .unwrap_err()
            .to_string();
        assert!(err.contains("rows.jsonl:3:"), "{err}");
    }

    #[test]
    fn a_log_not_written_yet_has_no_rows() {
        let dir = verifine_test_support::scratch_dir("not-yet");
        let path = dir.join("log.jsonl");
        assert!(
            read_jsonl_if_exists::<serde_json::Value>(&path)
                .unwrap()
                .is_empty()
        );
        std::fs::write(&path, "{\"a\":1}\n").unwrap();
        assert_eq!(
            read_jsonl_if_exists::<serde_json::Value>(&path)
                .unwrap()
                .len(),
            1
        );
        let err =
            read_jsonl_if_exists::<serde_json::Value>(&dir.join("log.jsonl/below")).unwrap_err();
        assert!(matches!(err, FileError::Io { .. }), "{err}");
    }

    #[test]
    fn creates_missing_parent_directories() {
        let dir = verifine_test_support::scratch_path("parent");
        let path = dir.join("runs").join("out.jsonl");
        write_jsonl(&path, &[serde_json::json!({"id": 1})]).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"id\":1}\n");
    }

    #[test]
    fn failed_write_leaves_the_old_file() {
        let dir = verifine_test_support::scratch_dir("atomic");
        let path = dir.join("out.jsonl");
        std::fs::write(&path, "old").unwrap();
        let result = write_atomically(&path, |w| {
            w.write_all(b"partial")?;
            Err(std::io::Error::other("boom"))
        });
        assert!(result.is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "temporary file left behind"
        );
    }

    #[test]
    #[cfg(unix)]
    fn a_symlink_planted_at_a_temporary_name_is_not_followed() {
        let dir = verifine_test_support::scratch_dir("plant");
        let victim = dir.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        // The name the writer used before it was unpredictable.
        let old_name = dir.join(format!(".out.jsonl.tmp-{}", std::process::id()));
        std::os::unix::fs::symlink(&victim, &old_name).unwrap();
        let out = dir.join("out.jsonl");
        write_jsonl(&out, &[serde_json::json!({"id": 1})]).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "{\"id\":1}\n");
        assert_ne!(temporary_sibling(&out), temporary_sibling(&out));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_overlong_row_is_refused_with_its_line_before_it_is_read_whole() {
        let dir = verifine_test_support::scratch_dir("long-row");
        let path = dir.join("rows.jsonl");
        let mut text = String::from("{\"a\":1}\r\n{\"a\":\"");
        text.push_str(&"x".repeat(MAX_ROW_BYTES + 10));
        text.push_str("\"}\n");
        std::fs::write(&path, text).unwrap();
        let err = read_jsonl::<serde_json::Value>(&path)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("rows.jsonl:2:") && err.contains("MiB"),
            "{err}"
        );
        // A file of ordinary rows (CRLF ends too) reads as before.
        std::fs::write(&path, "{\"a\":1}\r\n\n{\"a\":2}").unwrap();
        let rows: Vec<serde_json::Value> = read_jsonl(&path).unwrap();
        assert_eq!(
            rows,
            [serde_json::json!({"a": 1}), serde_json::json!({"a": 2})]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
