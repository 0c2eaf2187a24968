//! Criterion benches of V4's attention nodes at depth, on the executor, with the shapes of
//! one CSA layer of DeepSeek-V4-Flash (64 heads of 512, one shared K = V row per key; the
//! Lightning Indexer's 64 heads of 128):
//!
//! - `op/flash_attn/<T>x<n_kv>/t<threads>`: `T` query tokens over `n_kv` keys = a 128-key
//!   sliding window plus the compressed cache after `depth` tokens (`depth / 4` entries), each
//!   token seeing its window and 512 compressed entries picked at random (the indexer's
//!   top-k, as an additive mask);
//! - `op/flash_attn_avx2/…`: the same with the AVX2 kernels, on a CPU that has more;
//! - `op/dsa_indexer/<T>x<n_kv>/t<threads>`: the indexer's scores and top-512 of `T` tokens
//!   over `n_kv` compressed F32 keys, all visible (the fused DSA_INDEXER, tokens per thread);
//! - `op/dsa_scores_select/1x<n_kv>/t<threads>`: the same for one token as the decode step
//!   computes it, DSA_SCORES (keys split between the threads) then DSA_SELECT.
//!
//! Throughput is query tokens per second (criterion's elem/s). `T = 1` is a decode step,
//! `T = 64` a slice of a prompt chunk (a 512-token chunk is eight of them).
//!
//! `cargo bench -p fathom-benches --bench attention` (all), or e.g. `-- 'op/flash_attn'`.
#![allow(missing_docs)] // criterion_group! generates undocumented functions

use backends::Executor;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fathom_benches::{exec_config, test_data};
use graph::{Graph, TensorDesc};
use quant::simd::CpuLevel;

/// V4-Flash's attention heads and head size.
const HEADS: usize = 64;
const HEAD_DIM: usize = 512;
/// The indexer's heads and head size, and its top-k.
const IDX_HEADS: usize = 64;
const IDX_DIM: usize = 128;
const TOP_K: usize = 512;
/// Sliding-window keys ahead of the compressed ones.
const WINDOW: usize = 128;

/// Additive mask `{n_kv, t}`: each token sees the window and `TOP_K` compressed keys spread
/// over the cache (a multiplicative hash of pick and token, duplicates skipped).
fn sparse_mask(n_kv: usize, t: usize) -> Vec<f32> {
    let comp = n_kv - WINDOW;
    let mut m = vec![f32::NEG_INFINITY; n_kv * t];
    for (tt, row) in m.chunks_exact_mut(n_kv).enumerate() {
        row[..WINDOW].fill(0.0);
        let (mut picked, mut k) = (0, 0usize);
        while picked < TOP_K.min(comp) {
            let j = WINDOW + (k.wrapping_mul(2_654_435_761) ^ tt.wrapping_mul(40_503)) % comp;
            k += 1;
            if row[j] != 0.0 {
                row[j] = 0.0;
                picked += 1;
            }
        }
    }
    m
}

fn flash_attn(t: usize, n_kv: usize, threads: usize, cpu: CpuLevel) -> Executor {
    let mut g = Graph::new();
    let f32d = |ne: &[usize]| TensorDesc::f32(ne).expect("shape");
    let q = g.input("q", f32d(&[HEAD_DIM, HEADS, t])).expect("input");
    let kv = g.input("kv", f32d(&[HEAD_DIM, n_kv])).expect("input");
    let mask = g.input("mask", f32d(&[n_kv, t])).expect("input");
    let sinks = g.input("sinks", f32d(&[HEADS])).expect("input");
    let scale = 1.0 / (HEAD_DIM as f32).sqrt();
    let y = g
        .flash_attn_ext(q, kv, Some(mask), Some(sinks), scale)
        .expect("flash_attn_ext");
    g.output("y", y).expect("output");
    let mut e = Executor::new(g, exec_config(threads, cpu));
    e.set_input_f32("q", &test_data(HEAD_DIM * HEADS * t, 1))
        .expect("q");
    e.set_input_f32("kv", &test_data(HEAD_DIM * n_kv, 2))
        .expect("kv");
    e.set_input_f32("mask", &sparse_mask(n_kv, t))
        .expect("mask");
    e.set_input_f32("sinks", &test_data(HEADS, 3))
        .expect("sinks");
    e
}

/// The indexer's picks of `t` tokens: fused (DSA_INDEXER) or as DSA_SCORES + DSA_SELECT.
fn indexer(t: usize, n_kv: usize, threads: usize, fused: bool) -> Executor {
    let mut g = Graph::new();
    let f32d = |ne: &[usize]| TensorDesc::f32(ne).expect("shape");
    let q = g.input("q", f32d(&[IDX_DIM, IDX_HEADS, t])).expect("input");
    let k = g.input("k", f32d(&[IDX_DIM, n_kv])).expect("input");
    let w = g.input("w", f32d(&[IDX_HEADS, t])).expect("input");
    let nv = g
        .input(
            "nv",
            TensorDesc::new(quant::DType::I32, &[t]).expect("shape"),
        )
        .expect("input");
    let y = if fused {
        g.dsa_indexer(q, k, w, nv, TOP_K).expect("dsa_indexer")
    } else {
        let s = g.dsa_scores(q, k, w, nv).expect("dsa_scores");
        g.dsa_select(s, TOP_K).expect("dsa_select")
    };
    g.output("y", y).expect("output");
    let mut e = Executor::new(g, exec_config(threads, CpuLevel::detect()));
    e.set_input_f32("q", &test_data(IDX_DIM * IDX_HEADS * t, 4))
        .expect("q");
    e.set_input_f32("k", &test_data(IDX_DIM * n_kv, 5))
        .expect("k");
    let w: Vec<f32> = test_data(IDX_HEADS * t, 6)
        .iter()
        .map(|x| 0.1 * x)
        .collect();
    e.set_input_f32("w", &w).expect("w");
    e.set_input_i32("nv", &vec![n_kv as i32; t]).expect("nv");
    e
}

fn bench_attention(c: &mut Criterion) {
    let mut g = c.benchmark_group("op");
    g.sample_size(10);
    for depth in [8192usize, 32768] {
        let comp = depth / 4;
        for t in [1usize, 64] {
            g.throughput(Throughput::Elements(t as u64));
            for threads in [1usize, 2] {
                let n_kv = WINDOW + comp;
                let mut e = flash_attn(t, n_kv, threads, CpuLevel::detect());
                let id = BenchmarkId::new(format!("flash_attn/{t}x{n_kv}"), format!("t{threads}"));
                g.bench_function(id, |b| b.iter(|| e.run()));
                if CpuLevel::detect() > CpuLevel::Avx2 {
                    // the AVX2 kernels on a CPU with more
                    let mut e = flash_attn(t, n_kv, threads, CpuLevel::Avx2);
                    let id = BenchmarkId::new(
                        format!("flash_attn_avx2/{t}x{n_kv}"),
                        format!("t{threads}"),
                    );
                    g.bench_function(id, |b| b.iter(|| e.run()));
                }
                let mut e = indexer(t, comp, threads, true);
                let id = BenchmarkId::new(format!("dsa_indexer/{t}x{comp}"), format!("t{threads}"));
                g.bench_function(id, |b| b.iter(|| e.run()));
                if t == 1 {
                    let mut e = indexer(t, comp, threads, false);
                    let id = BenchmarkId::new(
                        format!("dsa_scores_select/{t}x{comp}"),
                        format!("t{threads}"),
                    );
                    g.bench_function(id, |b| b.iter(|| e.run()));
                }
            }
        }
    }
    g.finish();
}

criterion_group!(benches, bench_attention);
criterion_main!(benches);
