//! Reading a custom op's CPU arguments.

use candle_core::{CpuStorage, Layout, WithDType};

/// The contiguous data of a custom op's argument.
pub fn contiguous_data<'a, T: WithDType>(
    storage: &'a CpuStorage,
    layout: &Layout,
) -> candle_core::Result<&'a [T]> {
    let data = storage.as_slice::<T>()?;
    match layout.contiguous_offsets() {
        Some((start, end)) => Ok(&data[start..end]),
        None => candle_core::bail!("fused op: expected a contiguous tensor"),
    }
}

/// Length of the last dimension (the rows the row-wise ops work on).
pub fn row_len(layout: &Layout) -> candle_core::Result<usize> {
    layout
        .shape()
        .dims()
        .last()
        .copied()
        .filter(|&n| n > 0)
        .ok_or_else(|| candle_core::Error::Msg("fused op: empty last dimension".into()))
}

/// Outputs smaller than this are written on the calling thread: below it,
/// waking the pool costs more than the op, and more when it is not the
/// pool the caller's products run on (training's are on rayon's). At
/// 1 << 16 a policy's rollouts ran 10% slower than on the calling thread.
const PARALLEL_FROM: usize = 1 << 18;

/// A pointer the pool's threads may share: each writes its own chunk.
struct Cells(*mut f32);
// SAFETY: `for_each_chunk` hands every thread disjoint chunks of one slice
// that outlives the pool's call.
unsafe impl Sync for Cells {}

/// Calls `f(first element, chunk)` over `out` split into chunks of whole
/// units (`unit` elements: a row), on candle's thread pool when `out` is
/// large and on the calling thread otherwise. Candle's pool, not rayon's:
/// the local judge runs its products there, and a second pool spinning
/// beside it costs more than these ops gain.
pub(super) fn for_each_chunk(out: &mut [f32], unit: usize, f: impl Fn(usize, &mut [f32]) + Sync) {
    let len = out.len();
    if len < PARALLEL_FROM || unit == 0 {
        return f(0, out);
    }
    let chunk = (PARALLEL_FROM / 4).div_ceil(unit) * unit;
    let cells = Cells(out.as_mut_ptr());
    let cells = &cells;
    candle_core::utils::barrier_pool().execute_chunked(len.div_ceil(chunk), |items| {
        for item in items {
            let start = item * chunk;
            let end = len.min(start + chunk);
            // SAFETY: `start..end` lies inside `out` and no other item
            // covers it; `out` is borrowed mutably for the whole call.
            let part = unsafe { std::slice::from_raw_parts_mut(cells.0.add(start), end - start) };
            f(start, part);
        }
    });
}
