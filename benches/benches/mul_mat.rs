//! Criterion benches of whole MUL_MAT nodes on the executor, named
//! `op/mul_mat/<type>/<K>x<N>x<T>/t<threads>` (weights `{K, N}`, `T` activation columns):
//! - `T = 1` (decode, a matvec) reports weight bytes per second (criterion's GiB/s);
//! - `T = 4` (four decode streams, the server's parallel slots) and `T = 64` (a prompt chunk)
//!   report floating-point operations, `2·K·N·T`, per second (criterion prints them as
//!   elem/s: read Gelem/s as GFLOP/s).
//!
//! The `4096x4096` weights fit in L3; the second decode shape has as many rows as make
//! twice the last-level cache in weights ([`dram_bytes`]: at least 512 MiB), so it
//! streams from DRAM.
//!
//! The prompt shape also runs on one thread at the AVX2 level (`t1-avx2`, where the CPU has
//! more): the kernels an AVX2-only host would run.
//!
//! `cargo bench -p fathom-benches --bench mul_mat` (all), or e.g. `-- 'op/mul_mat/q8_0'`.
#![allow(missing_docs)] // criterion_group! generates undocumented functions

use backends::Executor;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fathom_benches::exec_config;
use graph::{Graph, TensorDesc, WeightData};
use quant::simd::CpuLevel;
use quant::DType;

/// Random weight blocks of `t` (sane f16 scales at the types' scale offsets).
fn weights(t: DType, k: usize, n: usize) -> Vec<u8> {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut w = vec![0u8; quant::bytes_for(t, k * n).expect("whole blocks")];
    for b in w.iter_mut() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        *b = s as u8;
    }
    let scale = quant::scalar::f32_to_f16(0.003).to_le_bytes();
    let bs = t.info().type_size;
    let at: &[usize] = match t {
        DType::Q8_0
        | DType::Q2_0
        | DType::IQ2_XXS
        | DType::IQ2_XXS_X
        | DType::IQ1_S
        | DType::IQ1_S_X => &[0],
        DType::Q6_K => &[bs - 2],
        DType::Q4_K | DType::Q5_K => &[0, 2],
        _ => &[],
    };
    if matches!(t, DType::F32 | DType::F16 | DType::BF16) {
        let v: Vec<f32> = (0..k * n)
            .map(|i| ((i * 7919) % 1000) as f32 * 1e-4 - 0.05)
            .collect();
        quant::quantize_row(t, &v, &mut w).expect("float storage");
        return w;
    }
    for blk in w.chunks_exact_mut(bs) {
        for &o in at {
            blk[o..o + 2].copy_from_slice(&scale);
        }
    }
    w
}

fn executor(
    t: DType,
    k: usize,
    n: usize,
    cols: usize,
    threads: usize,
    level: CpuLevel,
) -> Executor {
    let mut g = Graph::new();
    let w = g
        .weight(
            "w",
            TensorDesc::new(t, &[k, n]).expect("shape"),
            WeightData::from_vec(weights(t, k, n)),
        )
        .expect("weight");
    let x = g
        .input("x", TensorDesc::f32(&[k, cols]).expect("shape"))
        .expect("input");
    let y = g.mul_mat(w, x).expect("mul_mat");
    g.output("y", y).expect("output");
    let mut e = Executor::new(g, exec_config(threads, level));
    let xs: Vec<f32> = (0..k * cols)
        .map(|i| ((i * 31) % 200) as f32 / 100.0 - 1.0)
        .collect();
    e.set_input_f32("x", &xs).expect("input");
    e
}

/// Weight bytes of the DRAM-bound shapes: twice the L3 Linux reports for CPU 0
/// (`/sys/devices/system/cpu/cpu0/cache/index3/size`), at least 512 MiB, at most 4 GiB.
fn dram_bytes() -> usize {
    let l3 = backends::topology::l3_bytes().unwrap_or(0);
    l3.saturating_mul(2).clamp(512 << 20, 4 << 30)
}

fn bench_mul_mat(c: &mut Criterion) {
    use DType::*;
    let types = [
        F32, BF16, Q8_0, Q6_K, Q5_K, Q4_K, Q2_0, IQ2_XXS, IQ2_XXS_X, IQ1_S, IQ1_S_X,
    ];
    let mut g = c.benchmark_group("op/mul_mat");
    g.sample_size(10);
    for t in types {
        let name = t.info().name;
        let row = quant::bytes_for(t, 4096).expect("whole blocks");
        let dram_rows = dram_bytes() / row / 64 * 64;
        for (k, n, cols) in [
            (4096usize, 4096usize, 1usize),
            (4096, dram_rows, 1),
            (4096, 4096, 4),
            (4096, 4096, 64),
        ] {
            for (threads, level) in [
                (1usize, CpuLevel::detect()),
                (2, CpuLevel::detect()),
                (1, CpuLevel::Avx2),
            ] {
                if level == CpuLevel::Avx2 && (cols == 1 || CpuLevel::detect() == CpuLevel::Avx2) {
                    continue;
                }
                let mut e = executor(t, k, n, cols, threads, level);
                let bytes = quant::bytes_for(t, k * n).expect("whole blocks") as u64;
                g.throughput(if cols == 1 {
                    Throughput::Bytes(bytes)
                } else {
                    Throughput::Elements((2 * k * n * cols) as u64)
                });
                let at = if level == CpuLevel::Avx2 { "-avx2" } else { "" };
                let id =
                    BenchmarkId::new(format!("{name}/{k}x{n}x{cols}"), format!("t{threads}{at}"));
                g.bench_function(id, |b| b.iter(|| e.run()));
            }
        }
    }
    g.finish();
}

criterion_group!(benches, bench_mul_mat);
criterion_main!(benches);
