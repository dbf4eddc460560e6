//! Reading JSONL with errors that name file:line, and writing outputs so that
//! a failure never leaves a half-written file.

use anyhow::{Context as _, Result, anyhow};
use serde::de::DeserializeOwned;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Reads one JSON value per non-blank line. A malformed line is an error
/// naming `file:line`.
pub fn read_jsonl<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut rows = Vec::new();
    for (index, line) in BufReader::new(file).lines().enumerate() {
        let line_no = index + 1;
        let line =
            line.with_context(|| format!("{}:{line_no}: unreadable line", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let row = serde_json::from_str(&line)
            .map_err(|e| anyhow!("{}:{line_no}: {e}", path.display()))?;
        rows.push(row);
    }
    Ok(rows)
}

/// Writes a file through a temporary sibling that is renamed into place only
/// when `write` succeeds (creating the parent directory if needed); on failure the temporary is removed and any existing
/// file at `path` is left untouched.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let tmp = temporary_sibling(path);
    let result = (|| {
        let file =
            std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let mut writer = BufWriter::new(file);
        write(&mut writer)?;
        let file = writer.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&tmp, path).with_context(|| format!("renaming into {}", path.display()))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Writes `rows` as JSONL, atomically.
pub fn write_jsonl<T: serde::Serialize>(path: &Path, rows: &[T]) -> Result<()> {
    write_atomically(path, |w| {
        for row in rows {
            serde_json::to_writer(&mut *w, row)?;
            w.write_all(b"\n")?;
        }
        Ok(())
    })
}

fn temporary_sibling(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".to_string());
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
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
        let dir = std::env::temp_dir().join(format!("verifine-data-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rows.jsonl");
        std::fs::write(&path, "{\"a\":1}\n\n{\"a\":\n").unwrap();
        let err = read_jsonl::<serde_json::Value>(&path)
            .unwrap_err()
            .to_string();
        assert!(err.contains("rows.jsonl:3:"), "{err}");
    }

    #[test]
    fn creates_missing_parent_directories() {
        let dir = std::env::temp_dir().join(format!("verifine-parent-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("runs").join("out.jsonl");
        write_jsonl(&path, &[serde_json::json!({"id": 1})]).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"id\":1}\n");
    }

    #[test]
    fn failed_write_leaves_the_old_file() {
        let dir = std::env::temp_dir().join(format!("verifine-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.jsonl");
        std::fs::write(&path, "old").unwrap();
        let result = write_atomically(&path, |w| {
            w.write_all(b"partial")?;
            Err(anyhow!("boom"))
        });
        assert!(result.is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "temporary file left behind"
        );
    }
}
