//! The hand-written pass's arithmetic: `exp` over the range softmax uses,
//! and the strided matrix products.

use crate::model::kernels::{Mat, MatMut, matmul};
use verifine_base::SplitMix64;
use verifine_models::ops::exp;

#[test]
fn exp_is_accurate_over_the_range_softmax_uses() {
    let mut worst = 0f64;
    for i in -20_000..=20_000 {
        let x = i as f32 * 0.0043;
        let exact = f64::from(x).exp();
        worst = worst.max((f64::from(exp(x)) - exact).abs() / exact);
    }
    assert!(worst < 5e-7, "worst relative error {worst}");
    assert!(exp(-1e9) < 1e-37 && exp(-1e9) >= 0.0);
    assert!(exp(100.0).is_finite());
}

#[test]
fn strided_products_match_the_definition() {
    let mut rng = SplitMix64::new(9);
    let mut random =
        |n: usize| -> Vec<f32> { (0..n).map(|_| rng.below(100) as f32 / 10.0 - 5.0).collect() };
    // a: columns 2..5 of a [4, 7] matrix; b: the transpose of a [6, 3] matrix.
    let (a, b) = (random(4 * 7), random(6 * 3));
    let mut out = random(4 * 9);
    let before = out.clone();
    let a_view = Mat::strided(&a[2..], 4, 3, 7);
    let b_view = Mat::rows(&b, 6, 3).t();
    matmul(
        MatMut::strided(&mut out[1..], 4, 6, 9),
        a_view,
        b_view,
        true,
    );
    for i in 0..4 {
        for j in 0..9 {
            let expected = if (1..7).contains(&j) {
                let jj = j - 1;
                before[i * 9 + j]
                    + (0..3)
                        .map(|k| a[i * 7 + 2 + k] * b[jj * 3 + k])
                        .sum::<f32>()
            } else {
                before[i * 9 + j]
            };
            assert!((out[i * 9 + j] - expected).abs() < 1e-4, "({i}, {j})");
        }
    }
}

#[test]
#[should_panic(expected = "outside its buffer")]
fn a_view_past_its_buffer_is_refused() {
    let (a, b) = (vec![0f32; 6], vec![0f32; 6]);
    let mut out = vec![0f32; 4];
    matmul(
        MatMut::rows(&mut out, 2, 2),
        Mat::strided(&a, 2, 3, 4),
        Mat::rows(&b, 3, 2),
        false,
    );
}
