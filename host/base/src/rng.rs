//! The seeded generator behind every reproducible draw: bootstrap
//! resampling, data generation, SFT and prompt draws, sampling.

/// 64 bits no one can guess in advance, from the operating system's
/// randomness (each std `RandomState` is keyed anew from it): for names and
/// choices an adversary must not predict, not for reproducible draws.
pub fn os_random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

/// A small, fast, seedable generator (SplitMix64): reproducibility matters
/// here, not cryptographic quality.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator seeded with `seed`; the same seed gives the same stream.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The generator's whole state: `SplitMix64::new(state)` continues the
    /// same stream (checkpoints store it for exact resume).
    pub fn state(&self) -> u64 {
        self.0
    }

    /// The generator `SplitMix64::new(seed)` becomes after `draws` draws,
    /// in one step: threads that split a stream's draws between them (the
    /// bootstrap's resamples) give what one thread drawing them all gives.
    pub fn after_draws(seed: u64, draws: u64) -> Self {
        SplitMix64(seed.wrapping_add(draws.wrapping_mul(Self::GAMMA)))
    }

    const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

    /// The next 64 pseudo-random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(Self::GAMMA);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0), by Lemire's multiply-shift: one draw,
    /// always.
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::SplitMix64;

    #[test]
    fn after_draws_continues_the_stream_where_the_draws_leave_it() {
        let mut one = SplitMix64::new(42);
        for draws in 0..100u64 {
            assert_eq!(
                SplitMix64::after_draws(42, draws).next_u64(),
                one.next_u64()
            );
        }
    }
}
