//! `metrics.jsonl`: one line per step, appended and flushed as the run goes,
//! so a live run can be watched and a crashed one still tells its story.
//!
//! A kill can leave a partial last line; readers skip a line that does not
//! parse, and a resumed run first cuts the file back to the lines its
//! checkpoint had seen, so no step appears twice.

use crate::error::{Result, TrainError, ensure};
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

/// The appender.
pub struct MetricsLog {
    path: PathBuf,
    file: File,
    lines: usize,
}

impl MetricsLog {
    /// Starts an empty log at `path` (an existing file is replaced).
    pub fn create(path: &Path) -> Result<Self> {
        let file = File::create(path).map_err(|e| TrainError::io("creating", path, e))?;
        Ok(MetricsLog {
            path: path.to_path_buf(),
            file,
            lines: 0,
        })
    }

    /// Reopens the log of a resumed run, keeping its first `lines` complete
    /// lines and dropping everything after them.
    pub fn resume(path: &Path, lines: usize) -> Result<Self> {
        let mut kept = Vec::new();
        if path.exists() {
            let reader =
                BufReader::new(File::open(path).map_err(|e| TrainError::io("opening", path, e))?);
            for line in reader.split(b'\n').take(lines) {
                kept.push(line.map_err(|e| TrainError::io("reading", path, e))?);
            }
        }
        ensure!(
            kept.len() == lines,
            "{} holds {} lines but the checkpoint recorded {lines}",
            path.display(),
            kept.len()
        );
        verifine_base::files::write_atomically(path, |w| {
            for line in &kept {
                w.write_all(line)?;
                w.write_all(b"\n")?;
            }
            Ok(())
        })?;
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| TrainError::io("opening", path, e))?;
        Ok(MetricsLog {
            path: path.to_path_buf(),
            file,
            lines,
        })
    }

    /// Appends one line and flushes it to the file.
    pub fn append(&mut self, line: &impl Serialize) -> Result<()> {
        let mut text = serde_json::to_vec(line).expect("metrics lines serialize");
        text.push(b'\n');
        self.file
            .write_all(&text)
            .and_then(|()| self.file.flush())
            .map_err(|e| TrainError::io("appending to", &self.path, e))?;
        self.lines += 1;
        Ok(())
    }

    /// Lines written so far (recorded in checkpoints).
    pub fn lines(&self) -> usize {
        self.lines
    }

    /// Makes the lines so far durable (before a checkpoint names them).
    pub fn sync(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| TrainError::io("syncing", &self.path, e))
    }
}

/// The parsable lines of a metrics file (a torn last line is skipped).
pub fn read(path: &Path) -> Result<Vec<serde_json::Value>> {
    let text = std::fs::read_to_string(path).map_err(|e| TrainError::io("reading", path, e))?;
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resume_cuts_back_to_the_checkpointed_lines_and_appends() {
        let dir = verifine_test_support::scratch_dir("metrics");
        let path = dir.join("metrics.jsonl");
        let mut log = MetricsLog::create(&path).unwrap();
        for step in 0..3 {
            log.append(&json!({ "step": step })).unwrap();
        }
        drop(log);
        // A kill mid-write leaves a torn line after the checkpoint's two.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"step\": 9")
            .unwrap();
        assert_eq!(read(&path).unwrap().len(), 3, "the torn line is skipped");

        let mut log = MetricsLog::resume(&path, 2).unwrap();
        log.append(&json!({ "step": 2 })).unwrap();
        let steps: Vec<_> = read(&path)
            .unwrap()
            .iter()
            .map(|l| l["step"].clone())
            .collect();
        assert_eq!(steps, [json!(0), json!(1), json!(2)]);
        assert_eq!(log.lines(), 3);
        assert!(MetricsLog::resume(&path, 7).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
