//! The judge's weight products at SmolLM2-135M's shapes (width 576, MLP
//! 1 536), one token (decoding) to 256 (a prompt's prefill): the integer
//! products of Q4_1 blocks against what the judge ran before them (the
//! weights widened to f32, `x · w` over a contiguous `[in, out]` copy,
//! the anchor) and against candle's own quantized kernels on the same
//! matrix requantized to Q8_0.
//!
//! `cargo bench -p verifine-judge --features local --bench int8_products`

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use verifine_judge::local::int8::{BlockFormat, Int8Matrix, Kernel, QuantizedRows};

const SHAPES: [(&str, usize, usize); 3] = [
    ("q_576x576", 576, 576),
    ("gate_576x1536", 1536, 576),
    ("down_1536x576", 576, 1536),
];

fn products(c: &mut Criterion) {
    let device = Device::Cpu;
    let kernel = Kernel::detect();
    for (name, outputs, inputs) in SHAPES {
        let weights = Tensor::randn(0f32, 0.05, (outputs, inputs), &device).unwrap();
        let q4_1 = QTensor::quantize(&weights, GgmlDType::Q4_1).unwrap();
        let int8 = Int8Matrix::new(
            BlockFormat::Q4_1,
            outputs,
            inputs,
            &q4_1.data().unwrap(),
            kernel,
        )
        .unwrap();
        let dense = q4_1
            .dequantize(&device)
            .unwrap()
            .t()
            .unwrap()
            .contiguous()
            .unwrap();
        let q8_0 = QMatMul::from_qtensor(
            QTensor::quantize(&q4_1.dequantize(&device).unwrap(), GgmlDType::Q8_0).unwrap(),
        )
        .unwrap();
        let mut group = c.benchmark_group(format!("products_{name}"));
        for rows in [1usize, 32, 256] {
            let x = Tensor::randn(0f32, 1.0, (rows, inputs), &device).unwrap();
            let values: Vec<f32> = x.flatten_all().unwrap().to_vec1().unwrap();
            group.bench_with_input(BenchmarkId::new("f32", rows), &x, |b, x| {
                b.iter(|| x.matmul(&dense).unwrap())
            });
            group.bench_with_input(BenchmarkId::new("int8", rows), &values, |b, v| {
                b.iter(|| int8.product(&QuantizedRows::quantize(v, inputs)))
            });
            group.bench_with_input(BenchmarkId::new("candle_q8_0", rows), &x, |b, x| {
                b.iter(|| q8_0.forward(x).unwrap())
            });
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(3));
    targets = products
}
criterion_main!(benches);
