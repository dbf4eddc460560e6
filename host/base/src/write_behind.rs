//! A file writer that starts its data on the way to disk while it is still
//! being written. A file written atomically is synced before it is renamed
//! into place; for a large output (`verifine score` writes hundreds of MB)
//! that final sync waited a tenth of a second and more for everything at
//! once, a serial step at the end of an otherwise parallel run. Here, every
//! [`FLUSH_EVERY`] bytes a helper thread syncs what was written so far,
//! while writing goes on, so the final sync waits only for the tail.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Bytes written between background syncs.
const FLUSH_EVERY: u64 = 32 << 20;

/// A buffered file writer with background syncs (see the module doc).
pub(crate) struct WriteBehind {
    file: BufWriter<File>,
    since_flush: u64,
    flusher: Option<Flusher>,
}

struct Flusher {
    wake: mpsc::Sender<()>,
    /// The first background sync's error, if one failed.
    thread: JoinHandle<std::io::Result<()>>,
}

impl WriteBehind {
    pub(crate) fn new(file: File) -> Self {
        WriteBehind {
            file: BufWriter::new(file),
            since_flush: 0,
            flusher: None,
        }
    }

    /// Flushes the buffer, waits for the background syncs, and syncs the
    /// whole file: on `Ok` every byte is on disk.
    pub(crate) fn finish(mut self) -> std::io::Result<()> {
        self.file.flush()?;
        if let Some(flusher) = self.flusher.take() {
            drop(flusher.wake);
            // The helper's handle shares this one's open file, and the
            // kernel reports a failed write-back once per open file: an
            // error the helper saw is not seen again below, so it is
            // returned here.
            flusher.thread.join().unwrap_or_else(|_| {
                Err(std::io::Error::other("the write-behind thread panicked"))
            })?;
        }
        self.file.get_ref().sync_all()
    }

    /// Hands what was written so far to the helper thread to sync (started
    /// on first use; a request while one runs is folded into the next).
    fn flush_behind(&mut self) -> std::io::Result<()> {
        self.file.flush()?;
        self.since_flush = 0;
        if self.flusher.is_none() {
            let file = self.file.get_ref().try_clone()?;
            let (wake, woken) = mpsc::channel::<()>();
            let thread = std::thread::Builder::new()
                .name("write-behind".into())
                .spawn(move || {
                    while woken.recv().is_ok() {
                        while woken.try_recv().is_ok() {}
                        file.sync_data()?;
                    }
                    Ok(())
                })?;
            self.flusher = Some(Flusher { wake, thread });
        }
        if let Some(flusher) = &self.flusher {
            let _ = flusher.wake.send(());
        }
        Ok(())
    }
}

impl Write for WriteBehind {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let written = self.file.write(bytes)?;
        self.since_flush += written as u64;
        if self.since_flush >= FLUSH_EVERY {
            self.flush_behind()?;
        }
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Drop for WriteBehind {
    fn drop(&mut self) {
        if let Some(flusher) = self.flusher.take() {
            drop(flusher.wake);
            let _ = flusher.thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_past_several_background_syncs_is_written_whole() {
        let path = std::env::temp_dir().join(format!("write-behind-{}", std::process::id()));
        let piece: Vec<u8> = (0..=255u8).cycle().take(1 << 20).collect();
        let pieces = 2 * (FLUSH_EVERY >> 20) as usize + 3;
        let mut writer = WriteBehind::new(File::create(&path).unwrap());
        for _ in 0..pieces {
            writer.write_all(&piece).unwrap();
        }
        writer.write_all(b"tail").unwrap();
        assert!(writer.flusher.is_some(), "the background syncs started");
        writer.finish().unwrap();
        let written = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(written.len(), pieces * piece.len() + 4);
        assert!(written.chunks(piece.len()).take(pieces).all(|p| p == piece));
        assert!(written.ends_with(b"tail"));
    }
}
