//! Percentile bootstrap intervals, drawn on every core. Resample `r` takes
//! draws `r·n .. (r+1)·n` of the seeded stream wherever it runs, so the
//! same seed gives the same interval at any thread count.

use super::Estimate;
use verifine_base::SplitMix64;

/// Below this many index draws in all, one thread draws them: starting
/// threads would cost more than it saves.
const DRAWS_PER_THREAD: usize = 1 << 16;

/// The statistic on the full sample, with a 95% percentile interval from
/// `resamples` bootstrap resamples of the indices `0..n`.
pub fn bootstrap(
    n: usize,
    resamples: usize,
    seed: u64,
    statistic: impl Fn(&[usize]) -> f64 + Sync,
) -> Estimate {
    let [estimate] = bootstrap_many(n, resamples, seed, |indices| [statistic(indices)]);
    estimate
}

/// `K` statistics of the same resamples, each as [`bootstrap`] gives it
/// alone with this seed, for one pass over the draws (a confusion matrix
/// counted once serves five metrics).
pub fn bootstrap_many<const K: usize>(
    n: usize,
    resamples: usize,
    seed: u64,
    statistics: impl Fn(&[usize]) -> [f64; K] + Sync,
) -> [Estimate; K] {
    let all: Vec<usize> = (0..n).collect();
    let values = statistics(&all);
    if n == 0 || resamples == 0 {
        return values.map(|value| Estimate {
            value,
            ci_low: f64::NAN,
            ci_high: f64::NAN,
        });
    }
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let threads = cores
        .min(n.saturating_mul(resamples) / DRAWS_PER_THREAD)
        .clamp(1, resamples);
    let per_thread = resamples.div_ceil(threads);
    let resample_range = |range: std::ops::Range<usize>| {
        let mut rng = SplitMix64::after_draws(seed, (range.start as u64).wrapping_mul(n as u64));
        let mut indices = vec![0; n];
        range
            .map(|_| {
                indices.iter_mut().for_each(|i| *i = rng.below(n));
                statistics(&indices)
            })
            .collect::<Vec<_>>()
    };
    let drawn: Vec<[f64; K]> = if threads == 1 {
        resample_range(0..resamples)
    } else {
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads)
                .map(|t| {
                    let range = t * per_thread..((t + 1) * per_thread).min(resamples);
                    scope.spawn(move || resample_range(range))
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().expect("a bootstrap thread panicked"))
                .collect()
        })
    };
    std::array::from_fn(|k| {
        let mut finite: Vec<f64> = drawn
            .iter()
            .map(|d| d[k])
            .filter(|v| v.is_finite())
            .collect();
        finite.sort_by(f64::total_cmp);
        Estimate {
            value: values[k],
            ci_low: percentile(&finite, 0.025),
            ci_high: percentile(&finite, 0.975),
        }
    })
}

/// Linear-interpolated percentile of sorted values (NaN when empty).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let position = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let low = position.floor() as usize;
    let high = position.ceil() as usize;
    sorted[low] + (sorted[high] - sorted[low]) * (position - low as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_does_not_depend_on_how_many_threads_draw_it() {
        // 2 000 values × 500 resamples is enough draws for several threads;
        // the same resamples drawn in one sequence give the same interval.
        let values: Vec<f64> = (0..2000).map(|i| ((i * 37) % 101) as f64).collect();
        let mean = |idx: &[usize]| idx.iter().map(|&i| values[i]).sum::<f64>() / idx.len() as f64;
        let mut rng = SplitMix64::new(3);
        let mut means: Vec<f64> = (0..500)
            .map(|_| {
                let idx: Vec<usize> = (0..values.len()).map(|_| rng.below(values.len())).collect();
                mean(&idx)
            })
            .collect();
        means.sort_by(f64::total_cmp);
        let e = bootstrap(values.len(), 500, 3, mean);
        assert_eq!(
            (e.ci_low, e.ci_high),
            (percentile(&means, 0.025), percentile(&means, 0.975))
        );
        let [a, b] = bootstrap_many(values.len(), 500, 3, |idx| [mean(idx), -mean(idx)]);
        assert_eq!(a, e);
        assert_eq!((b.ci_low, b.ci_high), (-e.ci_high, -e.ci_low));
    }
}
