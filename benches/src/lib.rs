//! fathom-benches: criterion benchmarks (`cargo bench -p fathom-benches`) and, later, the
//! side-by-side comparisons with llama.cpp. The library part holds shared input generators.

/// Deterministic pseudo-random f32 values in roughly N(0, 1) shape (sum of uniforms), so every
/// bench run sees the same data without a `rand` dependency.
pub fn test_data(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            let mut acc = 0.0f32;
            for _ in 0..4 {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                acc += (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            }
            acc * 1.7
        })
        .collect()
}

/// The executor settings every op bench runs with: `threads` pinned workers at CPU level `cpu`
/// (the kernel table's level; [`quant::simd::CpuLevel::detect`] for this CPU's own), the rest
/// the executor's defaults (barrier elision on, no profiler, no guard bytes).
pub fn exec_config(threads: usize, cpu: quant::simd::CpuLevel) -> backends::ExecConfig {
    backends::ExecConfig {
        threads,
        cpu,
        ..backends::ExecConfig::default()
    }
}
