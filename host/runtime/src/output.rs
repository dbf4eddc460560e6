//! Where a plugin's stdout and stderr go. Neither may cost the host memory
//! that grows with the number of calls, and neither may fail the plugin:
//! stdout is discarded, and stderr keeps only the last [`STDERR_KEPT`] bytes
//! written since the current call began. The host quotes that tail when a
//! call traps (a Rust panic message is the last thing a plugin writes), so
//! an error shows what the failing call said, not what earlier calls did.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Bytes of stderr kept per call: the newest ones; older ones are dropped.
pub const STDERR_KEPT: usize = 16 * 1024;

/// Bytes one write may carry (what the stream tells WASI it can take); a
/// longer write is split by the guest. Writes never fail or wait.
const WRITE_PERMIT: usize = 64 * 1024;

/// The newest bytes a plugin wrote to stderr in the current call, shared
/// between the store's WASI context (which writes) and the host (which reads
/// and resets).
#[derive(Clone, Default)]
pub struct StderrTail {
    kept: Arc<Mutex<Tail>>,
}

#[derive(Default)]
struct Tail {
    bytes: VecDeque<u8>,
    dropped: u64,
}

impl StderrTail {
    /// A new, empty tail.
    pub fn new() -> Self {
        Self::default()
    }

    /// A call begins: what earlier calls wrote is forgotten.
    pub fn reset(&self) {
        let mut tail = self.lock();
        tail.bytes.clear();
        tail.dropped = 0;
    }

    /// The kept bytes, and how many older bytes of this call were dropped.
    pub fn contents(&self) -> (Vec<u8>, u64) {
        let tail = self.lock();
        (tail.bytes.iter().copied().collect(), tail.dropped)
    }

    fn append(&self, bytes: &[u8]) {
        let mut tail = self.lock();
        let kept_from_write = &bytes[bytes.len().saturating_sub(STDERR_KEPT)..];
        tail.dropped += (bytes.len() - kept_from_write.len()) as u64;
        let overflow = (tail.bytes.len() + kept_from_write.len()).saturating_sub(STDERR_KEPT);
        tail.bytes.drain(..overflow);
        tail.dropped += overflow as u64;
        tail.bytes.extend(kept_from_write);
    }

    /// A panic while holding the lock cannot leave the tail inconsistent
    /// (each update is a few plain operations), so a poisoned lock is used.
    fn lock(&self) -> MutexGuard<'_, Tail> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl IsTerminal for StderrTail {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for StderrTail {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    /// Only WASI preview 3 asks for this; the runtime links preview 2, so it
    /// is never used, and it takes nothing.
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(tokio::io::sink())
    }
}

impl OutputStream for StderrTail {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_PERMIT)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for StderrTail {
    async fn ready(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_newest_bytes_of_the_current_call_are_kept() {
        let mut tail = StderrTail::new();
        tail.write(bytes::Bytes::from(vec![b'a'; STDERR_KEPT]))
            .unwrap();
        tail.write(bytes::Bytes::from_static(b"panicked at the end"))
            .unwrap();
        let (kept, dropped) = tail.contents();
        assert_eq!(kept.len(), STDERR_KEPT);
        assert!(kept.ends_with(b"panicked at the end"));
        assert_eq!(dropped, 19);

        tail.write(bytes::Bytes::from(vec![b'b'; 3 * STDERR_KEPT]))
            .unwrap();
        let (kept, dropped) = tail.contents();
        assert_eq!(kept, vec![b'b'; STDERR_KEPT]);
        assert_eq!(dropped, 19 + 3 * STDERR_KEPT as u64);

        tail.reset();
        assert_eq!(tail.contents(), (Vec::new(), 0));
    }
}
