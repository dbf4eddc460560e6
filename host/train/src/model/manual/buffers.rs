//! Activation buffers reused from one pass to the next.
//!
//! A training pass allocates a few hundred megabytes of activations; fresh
//! allocations of that size come from the kernel as untouched pages, and
//! faulting them in cost 30% of a step in an earlier profile. Returned
//! buffers wait in a process-wide pool for the next pass instead, so a run
//! holds about one pass's activations between steps (the memory the pass
//! needed anyway).

use std::ops::{Deref, DerefMut};
use std::sync::Mutex;

/// Buffers waiting for reuse.
static POOL: Mutex<Vec<Vec<f32>>> = Mutex::new(Vec::new());

/// More returned buffers than this are freed (the smallest first).
const MAX_POOLED: usize = 4096;

/// An `f32` buffer that goes back to the pool when dropped.
pub(super) struct Buffer(Vec<f32>);

impl Buffer {
    /// `len` elements whose values are left over from an earlier use: for
    /// outputs that are written whole.
    pub fn scratch(len: usize) -> Self {
        let reused = {
            let mut pool = POOL.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            // The smallest buffer that fits, so large ones stay for large uses.
            let best = pool
                .iter()
                .enumerate()
                .filter(|(_, b)| b.capacity() >= len)
                .min_by_key(|(_, b)| b.capacity())
                .map(|(i, _)| i);
            best.map(|i| pool.swap_remove(i))
        };
        let mut data = reused.unwrap_or_default();
        data.resize(len, 0.0);
        data.truncate(len);
        Buffer(data)
    }

    /// `len` zeros.
    pub fn zeros(len: usize) -> Self {
        let mut buffer = Buffer::scratch(len);
        buffer.fill(0.0);
        buffer
    }

    /// A copy of `values`.
    pub fn copy_of(values: &[f32]) -> Self {
        let mut buffer = Buffer::scratch(values.len());
        buffer.copy_from_slice(values);
        buffer
    }
}

impl Deref for Buffer {
    type Target = [f32];

    fn deref(&self) -> &[f32] {
        &self.0
    }
}

impl DerefMut for Buffer {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.0
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        let data = std::mem::take(&mut self.0);
        if data.capacity() == 0 {
            return;
        }
        let mut pool = POOL.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        pool.push(data);
        if pool.len() > MAX_POOLED {
            let smallest = pool
                .iter()
                .enumerate()
                .min_by_key(|(_, b)| b.capacity())
                .map(|(i, _)| i);
            if let Some(i) = smallest {
                pool.swap_remove(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_have_the_asked_length_and_zeros_stay_zero_after_reuse() {
        for len in [1000, 10, 5000, 1000, 0] {
            let mut dirty = Buffer::scratch(len);
            assert_eq!(dirty.len(), len);
            dirty.fill(f32::NAN);
            drop(dirty);
            let zeros = Buffer::zeros(len);
            assert_eq!(zeros.len(), len);
            assert!(zeros.iter().all(|&x| x == 0.0));
        }
    }
}
