//! Softmax over a row, and the `exp` it and the activations use.

/// `eˣ` to about 2 ulp, written so that loops over slices vectorize (libm's
/// `expf` is a call per element). Inputs below −87.3 give exactly 0, so a
/// masked attention score (−1e9) weighs nothing.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const UNDERFLOW: f32 = -87.3;
    let underflows = x < UNDERFLOW;
    const LOG2_E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split in two so that `n · LN2_HI` is exact.
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Adding and subtracting 1.5 · 2²³ rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(UNDERFLOW, 88.3);
    let n = (x * LOG2_E + ROUND) - ROUND;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    // Taylor series to r⁶ on |r| ≤ ln 2 / 2: error below 1.2e-7.
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    if underflows { 0.0 } else { p * scale }
}

/// Replaces `row` by its softmax (the maximum subtracted first, so large
/// scores do not overflow). The exponentials and their sum are separate
/// loops, with eight partial sums, so that both vectorize.
#[inline(always)]
pub fn softmax_in_place(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    row.iter_mut().for_each(|x| *x = exp(*x - max));
    let mut partial = [0f32; 8];
    let chunks = row.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().sum();
    for chunk in chunks {
        for lane in 0..8 {
            partial[lane] += chunk[lane];
        }
    }
    let inverse = 1.0 / (partial.iter().sum::<f32>() + tail);
    row.iter_mut().for_each(|x| *x *= inverse);
}
