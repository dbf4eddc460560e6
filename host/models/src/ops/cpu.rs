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
/// starting threads costs more than the op.
const PARALLEL_FROM: usize = 1 << 18;

/// Calls `f(first element, chunk)` over `out` split into one chunk per
/// thread (each a multiple of `unit` elements: whole rows), on scoped
/// threads when `out` is large and on the calling thread otherwise. Scoped
/// threads rather than a pool: the local judge runs its products on
/// candle's pool, and a second pool spinning beside it cost more than
/// these ops gain.
pub(super) fn for_each_chunk(out: &mut [f32], unit: usize, f: impl Fn(usize, &mut [f32]) + Sync) {
    let threads = candle_core::utils::get_num_threads().max(1);
    if out.len() < PARALLEL_FROM || threads == 1 || unit == 0 {
        return f(0, out);
    }
    let units = out.len() / unit;
    let chunk = units.div_ceil(threads) * unit;
    std::thread::scope(|scope| {
        let f = &f;
        let mut chunks = out.chunks_mut(chunk).enumerate();
        let (_, first) = chunks.next().expect("a non-empty output");
        for (i, rest) in chunks {
            scope.spawn(move || f(i * chunk, rest));
        }
        f(0, first);
    });
}
