//! AVX-512 kernels for the float weight types (F32, F16, BF16) against activations of the same
//! type: `avx2_float`'s arithmetic (the reference's f32 products, accumulated in f64) sixteen
//! elements per step instead of eight.
//!
//! Per step and row: one load with its widening (`vcvtph2ps` for F16; `vpmovzxwd` and a shift
//! for BF16), one `vmulps`, two `vcvtps2pd` into eight f64 lanes each, two `vaddpd`. The AVX2
//! kernels spend about as many operations on eight elements, which left F16 and BF16 matvecs
//! compute-bound at 61–86% of the DRAM read on the 2-vCPU AVX-512 host. The sixteen f64 lanes
//! are summed in a fixed order at the end, then the tail one element at a time, as the
//! reference does; only the order of the f64 additions differs from the reference (bounded
//! in the tests at 1e-6·Σ|w·a|). The one-row kernels are the multi-row pass for one row, so
//! a row gets the same bits either way.

use crate::simd::entry;
use std::arch::x86_64::*;

entry!(
    dot_f32_avx512_entry => dot_f32_avx512,
    dot_f16_avx512_entry => dot_f16_avx512,
    dot_bf16_avx512_entry => dot_bf16_avx512,
);

entry!(rows
    dot_f32_avx512_rows_entry => dot_f32_avx512_rows,
    dot_f16_avx512_rows_entry => dot_f16_avx512_rows,
    dot_bf16_avx512_rows_entry => dot_bf16_avx512_rows,
);

/// Σ products of `R` weight rows against one activation row over `n` elements: per step the
/// activation's sixteen values are loaded once for all rows, each row's f32 products go into
/// its own two f64 accumulators (elements 0..7 and 8..15 of the step); at the end per row
/// the accumulators are added, halved down to one f64 in a fixed order, and the last
/// `n % 16` products are added one by one (`one`). Every 64 bytes each row is prefetched
/// [`crate::simd::PREFETCH_DISTANCE`] bytes ahead.
#[inline(always)]
fn accumulate_rows<const R: usize>(
    n: usize,
    (rows, size): (&[&[u8]], usize),
    load_w: impl Fn(usize, usize) -> __m512,
    load_a: impl Fn(usize) -> __m512,
    one: impl Fn(usize, usize) -> f32,
    out: &mut [f32],
) {
    // SAFETY: only inlined into the kernels below, which are compiled with AVX-512 F and DQ.
    unsafe {
        let mut lo = [_mm512_setzero_pd(); R];
        let mut hi = [_mm512_setzero_pd(); R];
        let full = n / 16 * 16;
        let pd = crate::simd::PREFETCH_DISTANCE;
        let line = 64 / size;
        let mut i = 0;
        while i < full {
            let a = load_a(i);
            if i % line == 0 {
                for row in &rows[..R] {
                    crate::simd::prefetch_ahead(row.as_ptr().wrapping_add(i * size), 64, pd);
                }
            }
            for r in 0..R {
                let p = _mm512_mul_ps(load_w(r, i), a);
                lo[r] = _mm512_add_pd(lo[r], _mm512_cvtps_pd(_mm512_castps512_ps256(p)));
                hi[r] = _mm512_add_pd(hi[r], _mm512_cvtps_pd(_mm512_extractf32x8_ps::<1>(p)));
            }
            i += 16;
        }
        for r in 0..R {
            let v = _mm512_add_pd(lo[r], hi[r]);
            let q = _mm256_add_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd::<1>(v));
            let h = _mm_add_pd(_mm256_castpd256_pd128(q), _mm256_extractf128_pd::<1>(q));
            let mut s = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
            for j in full..n {
                s += one(r, j) as f64;
            }
            out[r] = s as f32;
        }
    }
}

/// Sixteen 16-bit values at element `i` of `p`.
#[inline(always)]
fn load_u16x16(p: *const u8, i: usize) -> __m256i {
    // SAFETY: callers pass i + 16 ≤ the slice's element count (unaligned load).
    unsafe { _mm256_loadu_si256(p.add(2 * i).cast()) }
}

/// Little-endian 16-bit element `j` of `b` as f32, through `from_bits` (F16, BF16).
fn half_at(b: &[u8], j: usize, from_bits: fn(u16) -> f32) -> f32 {
    from_bits(u16::from_le_bytes([b[2 * j], b[2 * j + 1]]))
}

/// Little-endian f32 element `j` of `b`.
fn f32_at(b: &[u8], j: usize) -> f32 {
    f32::from_le_bytes([b[4 * j], b[4 * j + 1], b[4 * j + 2], b[4 * j + 3]])
}

/// The multi-row kernel body for elements of `size` bytes: four rows per pass of
/// [`accumulate_rows`], `load(p, i)` giving sixteen f32 values from element `i` of a row or
/// the activation (`p` its first byte; i + 16 ≤ n), `elem` one value for the tail.
#[inline(always)]
fn rows_kernel(
    n: usize,
    (rows, a, out): (&[&[u8]], &[u8], &mut [f32]),
    size: usize,
    load: impl Fn(*const u8, usize) -> __m512,
    elem: impl Fn(&[u8], usize) -> f32,
) {
    for (rows, out) in rows.chunks(4).zip(out.chunks_mut(4)) {
        let n = crate::simd::float::avx2::common_len(n, rows, a, size);
        macro_rules! pass {
            ($r:literal) => {
                accumulate_rows::<$r>(
                    n,
                    (rows, size),
                    |r, i| load(rows[r].as_ptr(), i),
                    |i| load(a.as_ptr(), i),
                    |r, j| elem(rows[r], j) * elem(a, j),
                    out,
                )
            };
        }
        crate::simd::float::avx2::rows_pass!(rows.len(), pass);
    }
}

/// F32 · F32 for several weight rows, four per pass.
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn dot_f32_avx512_rows(n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: `rows_kernel` loads elements i..i + 16 of a row or activation of ≥ i + 16
    // elements only (unaligned load).
    let load = |p: *const u8, i| unsafe { _mm512_loadu_ps(p.cast::<f32>().add(i)) };
    rows_kernel(n, (rows, a, out), 4, load, f32_at);
}

/// F16 · F16 for several weight rows, four per pass.
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn dot_f16_avx512_rows(n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    let load = |p, i| _mm512_cvtph_ps(load_u16x16(p, i));
    let elem = |b: &[u8], j| half_at(b, j, crate::scalar::f16_to_f32);
    rows_kernel(n, (rows, a, out), 2, load, elem);
}

/// BF16 · BF16 for several weight rows, four per pass (bf16 → f32 is a 16-bit left shift).
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn dot_bf16_avx512_rows(n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    let load = |p, i| {
        let v = _mm512_cvtepu16_epi32(load_u16x16(p, i));
        _mm512_castsi512_ps(_mm512_slli_epi32::<16>(v))
    };
    let elem = |b: &[u8], j| half_at(b, j, crate::scalar::bf16_to_f32);
    rows_kernel(n, (rows, a, out), 2, load, elem);
}

/// F32 · F32: the multi-row pass for one row.
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn dot_f32_avx512(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut o = [0f32];
    // SAFETY: same features as this function.
    unsafe { dot_f32_avx512_rows(n, &[w], a, &mut o) };
    o[0]
}

/// F16 · F16: the multi-row pass for one row.
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn dot_f16_avx512(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut o = [0f32];
    // SAFETY: same features as this function.
    unsafe { dot_f16_avx512_rows(n, &[w], a, &mut o) };
    o[0]
}

/// BF16 · BF16: the multi-row pass for one row.
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn dot_bf16_avx512(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut o = [0f32];
    // SAFETY: same features as this function.
    unsafe { dot_bf16_avx512_rows(n, &[w], a, &mut o) };
    o[0]
}
