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

use super::entry;
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
/// [`super::prefetch_distance`] bytes ahead.
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
        let pd = super::prefetch_distance();
        let line = 64 / size;
        let mut i = 0;
        while i < full {
            let a = load_a(i);
            if i % line == 0 {
                for row in &rows[..R] {
                    super::prefetch_ahead(row.as_ptr().wrapping_add(i * size), 64, pd);
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

/// Runs `$body!(R)` for the row count `$r` (1..=4) of a multi-row float kernel pass.
macro_rules! rows_pass {
    ($r:expr, $body:ident) => {
        match $r {
            1 => $body!(1),
            2 => $body!(2),
            3 => $body!(3),
            _ => $body!(4),
        }
    };
}

/// Sixteen 16-bit values at element `i` of `p`.
#[inline(always)]
fn load_u16x16(p: *const u8, i: usize) -> __m256i {
    // SAFETY: callers pass i + 16 ≤ the slice's element count (unaligned load).
    unsafe { _mm256_loadu_si256(p.add(2 * i).cast()) }
}

/// Little-endian f32 element `j` of `b`.
fn f32_at(b: &[u8], j: usize) -> f32 {
    f32::from_le_bytes([b[4 * j], b[4 * j + 1], b[4 * j + 2], b[4 * j + 3]])
}

/// Little-endian 16-bit element `j` of `b`.
fn u16_at(b: &[u8], j: usize) -> u16 {
    u16::from_le_bytes([b[2 * j], b[2 * j + 1]])
}

/// BF16 → f32 for sixteen values (a 16-bit left shift each).
#[target_feature(enable = "avx512f")]
#[inline]
fn widen_bf16(v: __m256i) -> __m512 {
    _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(v)))
}

/// F32 · F32 for several weight rows, four per pass.
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn dot_f32_avx512_rows(n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    for (rows, out) in rows.chunks(4).zip(out.chunks_mut(4)) {
        let n = super::avx2_float::common_len(n, rows, a, 4);
        macro_rules! pass {
            ($r:literal) => {
                accumulate_rows::<$r>(
                    n,
                    (rows, 4),
                    // SAFETY: i + 16 ≤ n elements lie inside every row (unaligned loads).
                    |r, i| unsafe { _mm512_loadu_ps(rows[r].as_ptr().cast::<f32>().add(i)) },
                    // SAFETY: as above, for the activation.
                    |i| unsafe { _mm512_loadu_ps(a.as_ptr().cast::<f32>().add(i)) },
                    |r, j| f32_at(rows[r], j) * f32_at(a, j),
                    out,
                )
            };
        }
        rows_pass!(rows.len(), pass);
    }
}

/// F16 · F16 for several weight rows, four per pass.
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn dot_f16_avx512_rows(n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    let h = |b: &[u8], j: usize| crate::scalar::f16_to_f32(u16_at(b, j));
    for (rows, out) in rows.chunks(4).zip(out.chunks_mut(4)) {
        let n = super::avx2_float::common_len(n, rows, a, 2);
        macro_rules! pass {
            ($r:literal) => {
                accumulate_rows::<$r>(
                    n,
                    (rows, 2),
                    |r, i| _mm512_cvtph_ps(load_u16x16(rows[r].as_ptr(), i)),
                    |i| _mm512_cvtph_ps(load_u16x16(a.as_ptr(), i)),
                    |r, j| h(rows[r], j) * h(a, j),
                    out,
                )
            };
        }
        rows_pass!(rows.len(), pass);
    }
}

/// BF16 · BF16 for several weight rows, four per pass.
#[target_feature(enable = "avx512f,avx512dq")]
unsafe fn dot_bf16_avx512_rows(n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    let h = |b: &[u8], j: usize| crate::scalar::bf16_to_f32(u16_at(b, j));
    for (rows, out) in rows.chunks(4).zip(out.chunks_mut(4)) {
        let n = super::avx2_float::common_len(n, rows, a, 2);
        macro_rules! pass {
            ($r:literal) => {
                accumulate_rows::<$r>(
                    n,
                    (rows, 2),
                    |r, i| widen_bf16(load_u16x16(rows[r].as_ptr(), i)),
                    |i| widen_bf16(load_u16x16(a.as_ptr(), i)),
                    |r, j| h(rows[r], j) * h(a, j),
                    out,
                )
            };
        }
        rows_pass!(rows.len(), pass);
    }
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
