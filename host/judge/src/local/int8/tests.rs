use super::blocks::BLOCK;
use super::*;
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};

const FORMATS: [GgmlDType; 7] = [
    GgmlDType::Q4_0,
    GgmlDType::Q4_1,
    GgmlDType::Q5_0,
    GgmlDType::Q5_1,
    GgmlDType::Q8_0,
    GgmlDType::Q4K,
    GgmlDType::Q5K,
];

/// Inputs of a test matrix in `dtype`: whole super-blocks for k-quants.
fn test_inputs(dtype: GgmlDType) -> usize {
    if matches!(dtype, GgmlDType::Q4K | GgmlDType::Q5K) {
        512
    } else {
        96
    }
}

/// A quantized `[outputs, inputs]` matrix and its dequantized values.
fn weights(dtype: GgmlDType, outputs: usize, inputs: usize, seed: u64) -> (QTensor, Vec<f32>) {
    let values: Vec<f32> = (0..outputs * inputs)
        .map(|i| {
            let h = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ seed;
            // Shifted per row so that Q4_1's offset is not zero.
            ((h >> 40) as f32 / (1u64 << 24) as f32 - 0.4) * (1.0 + (i / inputs) as f32 * 0.1)
        })
        .collect();
    let tensor = Tensor::from_vec(values, (outputs, inputs), &Device::Cpu).unwrap();
    let quantized = QTensor::quantize(&tensor, dtype).unwrap();
    let dequantized = quantized.dequantize(&Device::Cpu).unwrap();
    let flat = dequantized.flatten_all().unwrap().to_vec1().unwrap();
    (quantized, flat)
}

fn int8(quantized: &QTensor, kernel: Kernel) -> Int8Matrix {
    let (outputs, inputs) = quantized.shape().dims2().unwrap();
    let format = BlockFormat::of(quantized.dtype()).unwrap();
    Int8Matrix::new(format, outputs, inputs, &quantized.data().unwrap(), kernel).unwrap()
}

fn rows(count: usize, inputs: usize) -> Vec<f32> {
    (0..count * inputs)
        .map(|i| ((i * 7919 % 1013) as f32 / 1013.0 - 0.5) * if i % 97 == 0 { 8.0 } else { 1.0 })
        .collect()
}

#[test]
fn every_format_unpacks_to_the_values_candle_dequantizes() {
    for dtype in FORMATS {
        let (outputs, inputs) = (19, test_inputs(dtype));
        let (quantized, expected) = weights(dtype, outputs, inputs, 3);
        let packed = TiledMatrix::pack(
            BlockFormat::of(dtype).unwrap(),
            outputs,
            inputs,
            &quantized.data().unwrap(),
        )
        .unwrap();
        for o in 0..outputs {
            for i in 0..inputs {
                let (got, want) = (packed.value(o, i), expected[o * inputs + i]);
                assert!(
                    (got - want).abs() <= want.abs() * 1e-6 + 1e-7,
                    "{dtype:?} [{o}, {i}]: {got} against {want}"
                );
            }
        }
    }
}

/// The product the kernels must give up to float rounding: the weights as
/// candle dequantizes them times the rows as quantized.
fn reference(weights: &[f32], x: &QuantizedRows, outputs: usize) -> (Vec<f32>, Vec<f32>) {
    let k = x.inner;
    let mut exact = vec![0f32; x.rows * outputs];
    let mut magnitude = vec![0f32; x.rows * outputs];
    for r in 0..x.rows {
        for o in 0..outputs {
            let (mut sum, mut size) = (0f64, 0f64);
            for i in 0..k {
                let xi = f64::from(x.scale(r, i / BLOCK)) * f64::from(x.row(r)[i]);
                sum += f64::from(weights[o * k + i]) * xi;
                size += (f64::from(weights[o * k + i]) * xi).abs();
            }
            exact[r * outputs + o] = sum as f32;
            magnitude[r * outputs + o] = size as f32;
        }
    }
    (exact, magnitude)
}

#[test]
fn the_kernels_compute_the_product_of_the_dequantized_weights_and_rows() {
    let kernels = [Kernel::Portable, Kernel::detect()];
    for dtype in FORMATS {
        let unit = BlockFormat::of(dtype).unwrap().values();
        for (outputs, inputs) in [(1, unit), (16, 2 * unit), (33, 3 * unit)] {
            let (quantized, dense) = weights(dtype, outputs, inputs, 11);
            for count in [1, 3, 8, 9, 20] {
                let x = QuantizedRows::quantize(&rows(count, inputs), inputs);
                let (exact, magnitude) = reference(&dense, &x, outputs);
                for kernel in kernels {
                    let got = int8(&quantized, kernel).product(&x);
                    assert_eq!(got.len(), count * outputs);
                    for (cell, ((g, e), m)) in got.iter().zip(&exact).zip(&magnitude).enumerate() {
                        assert!(
                            (g - e).abs() <= m * 1e-5 + 1e-6,
                            "{kernel:?} {dtype:?} {outputs}×{inputs}, {count} rows, cell {cell}: {g} against {e}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn the_product_is_close_to_the_float_product() {
    // What quantizing the rows costs: within 1% of the products' size.
    let (outputs, inputs, count) = (40, 576, 5);
    let (quantized, dense) = weights(GgmlDType::Q4_1, outputs, inputs, 5);
    let x = rows(count, inputs);
    let got = int8(&quantized, Kernel::detect()).product(&QuantizedRows::quantize(&x, inputs));
    for r in 0..count {
        for o in 0..outputs {
            let terms = (0..inputs).map(|i| dense[o * inputs + i] * x[r * inputs + i]);
            let (sum, size) = terms.fold((0f32, 0f32), |(s, a), t| (s + t, a + t.abs()));
            let g = got[r * outputs + o];
            assert!(
                (g - sum).abs() <= size * 0.01,
                "[{r}, {o}]: {g} against {sum}"
            );
        }
    }
}

#[test]
fn a_matrix_of_the_wrong_size_or_width_is_refused() {
    let (quantized, _) = weights(GgmlDType::Q4_0, 4, 64, 1);
    let raw = quantized.data().unwrap();
    let short = Int8Matrix::new(
        BlockFormat::Q4_0,
        4,
        64,
        &raw[..raw.len() - 1],
        Kernel::Portable,
    );
    assert!(short.err().unwrap().contains("expected"));
    let ragged = Int8Matrix::new(BlockFormat::Q4_0, 4, 48, &raw, Kernel::Portable);
    assert!(ragged.err().unwrap().contains("whole blocks"));
}
