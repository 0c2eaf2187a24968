//! AVX2 kernels for the float weight types (F32, F16, BF16) against activations of the same
//! type. The references multiply in f32 and accumulate in f64 one element after another;
//! these kernels form the same f32 products (exact for F16/BF16 operands, the reference's
//! rounding for F32) and accumulate them in f64 over eight lanes. The f64 sums are taken in a
//! different order, so the result can differ from the reference in the last bit of the f64
//! sum — below f32 resolution in all but rare ties; the tests bound it at 1e-6·Σ|w·a|.

use crate::simd::entry;
use std::arch::x86_64::*;

entry!(
    dot_f32_avx2_entry => dot_f32_avx2,
    dot_f16_avx2_entry => dot_f16_avx2,
    dot_bf16_avx2_entry => dot_bf16_avx2,
);

/// Σ products over `n` elements, eight at a time through `load8` (element offset → eight
/// f32 weights and eight f32 activations), the tail through `one`.
#[inline(always)]
fn accumulate(
    n: usize,
    load8: impl Fn(usize) -> (__m256, __m256),
    one: impl Fn(usize) -> f32,
) -> f32 {
    // SAFETY: the intrinsics below are only reached from kernels compiled with AVX2, FMA and
    // F16C, into which this helper is always inlined.
    unsafe {
        let (mut lo, mut hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
        let full = n / 8 * 8;
        let mut i = 0;
        while i < full {
            let (w, a) = load8(i);
            let p = _mm256_mul_ps(w, a);
            lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
            hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
            i += 8;
        }
        let v = _mm256_add_pd(lo, hi);
        let h = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
        let mut s = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
        for j in full..n {
            s += one(j) as f64;
        }
        s as f32
    }
}

/// F32 · F32.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_f32_avx2(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let n = n.min(w.len() / 4).min(a.len() / 4);
    let (wp, ap) = (w.as_ptr().cast::<f32>(), a.as_ptr().cast::<f32>());
    let f = |b: &[u8], j: usize| {
        f32::from_le_bytes([b[4 * j], b[4 * j + 1], b[4 * j + 2], b[4 * j + 3]])
    };
    accumulate(
        n,
        // SAFETY: i + 8 ≤ n elements lie inside both slices (unaligned loads).
        |i| unsafe { (_mm256_loadu_ps(wp.add(i)), _mm256_loadu_ps(ap.add(i))) },
        |j| f(w, j) * f(a, j),
    )
}

/// Eight 16-bit values at element `i` of `p`.
#[inline(always)]
fn load_u16x8(p: *const u8, i: usize) -> __m128i {
    // SAFETY: callers pass i + 8 ≤ the slice's element count (unaligned load).
    unsafe { _mm_loadu_si128(p.add(2 * i).cast()) }
}

/// F16 · F16.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_f16_avx2(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let n = n.min(w.len() / 2).min(a.len() / 2);
    let h = |b: &[u8], j: usize| {
        crate::scalar::f16_to_f32(u16::from_le_bytes([b[2 * j], b[2 * j + 1]]))
    };
    accumulate(
        n,
        |i| {
            (
                _mm256_cvtph_ps(load_u16x8(w.as_ptr(), i)),
                _mm256_cvtph_ps(load_u16x8(a.as_ptr(), i)),
            )
        },
        |j| h(w, j) * h(a, j),
    )
}

/// BF16 · BF16 (bf16 → f32 is a 16-bit left shift).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_bf16_avx2(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let n = n.min(w.len() / 2).min(a.len() / 2);
    let h = |b: &[u8], j: usize| {
        crate::scalar::bf16_to_f32(u16::from_le_bytes([b[2 * j], b[2 * j + 1]]))
    };
    let widen = |v: __m128i| -> __m256 {
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16))
    };
    accumulate(
        n,
        |i| {
            (
                widen(load_u16x8(w.as_ptr(), i)),
                widen(load_u16x8(a.as_ptr(), i)),
            )
        },
        |j| h(w, j) * h(a, j),
    )
}

entry!(rows
    dot_f32_avx2_rows_entry => dot_f32_avx2_rows,
    dot_f16_avx2_rows_entry => dot_f16_avx2_rows,
    dot_bf16_avx2_rows_entry => dot_bf16_avx2_rows,
);

/// [`accumulate`] for `R` weight rows against one activation row: the activation's eight
/// values are loaded once per step for all rows, and each row keeps its own two f64 lane
/// accumulators, so the `R` addition chains run side by side (one row's chain waits on the
/// f64 add's latency every eight elements). Per row the operations and their order are
/// [`accumulate`]'s: each result has the one-row kernel's bits.
///
/// Every 64 bytes, each of `rows` (`size` bytes per element) is prefetched
/// [`crate::simd::PREFETCH_DISTANCE`] bytes ahead of the element being read.
#[inline(always)]
fn accumulate_rows<const R: usize>(
    n: usize,
    (rows, size): (&[&[u8]], usize),
    load_w: impl Fn(usize, usize) -> __m256,
    load_a: impl Fn(usize) -> __m256,
    one: impl Fn(usize, usize) -> f32,
    out: &mut [f32],
) {
    // SAFETY: as in `accumulate`: only inlined into kernels compiled with AVX2, FMA and F16C.
    unsafe {
        let mut lo = [_mm256_setzero_pd(); R];
        let mut hi = [_mm256_setzero_pd(); R];
        let full = n / 8 * 8;
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
                let p = _mm256_mul_ps(load_w(r, i), a);
                lo[r] = _mm256_add_pd(lo[r], _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
                hi[r] = _mm256_add_pd(hi[r], _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
            }
            i += 8;
        }
        for r in 0..R {
            let v = _mm256_add_pd(lo[r], hi[r]);
            let h = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
            let mut s = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
            for j in full..n {
                s += one(r, j) as f64;
            }
            out[r] = s as f32;
        }
    }
}

/// Runs `$body!(R)` for the row count `$r` (1..=4) of a multi-row float kernel pass (also
/// `avx512_float`'s).
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
pub(super) use rows_pass;

/// The smallest element count any of `rows` and `a` holds (`size` bytes per element).
pub(super) fn common_len(n: usize, rows: &[&[u8]], a: &[u8], size: usize) -> usize {
    rows.iter()
        .fold(n.min(a.len() / size), |m, w| m.min(w.len() / size))
}

/// F32 · F32 for several weight rows, four per pass (the bits of [`dot_f32_avx2`]).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_f32_avx2_rows(n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    let f = |b: &[u8], j: usize| {
        f32::from_le_bytes([b[4 * j], b[4 * j + 1], b[4 * j + 2], b[4 * j + 3]])
    };
    for (rows, out) in rows.chunks(4).zip(out.chunks_mut(4)) {
        let n = common_len(n, rows, a, 4);
        macro_rules! pass {
            ($r:literal) => {
                accumulate_rows::<$r>(
                    n,
                    (rows, 4),
                    // SAFETY: i + 8 ≤ n elements lie inside every row (unaligned loads).
                    |r, i| unsafe { _mm256_loadu_ps(rows[r].as_ptr().cast::<f32>().add(i)) },
                    // SAFETY: as above, for the activation.
                    |i| unsafe { _mm256_loadu_ps(a.as_ptr().cast::<f32>().add(i)) },
                    |r, j| f(rows[r], j) * f(a, j),
                    out,
                )
            };
        }
        rows_pass!(rows.len(), pass);
    }
}

/// F16 · F16 for several weight rows, four per pass (the bits of [`dot_f16_avx2`]).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_f16_avx2_rows(n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    let h = |b: &[u8], j: usize| {
        crate::scalar::f16_to_f32(u16::from_le_bytes([b[2 * j], b[2 * j + 1]]))
    };
    for (rows, out) in rows.chunks(4).zip(out.chunks_mut(4)) {
        let n = common_len(n, rows, a, 2);
        macro_rules! pass {
            ($r:literal) => {
                accumulate_rows::<$r>(
                    n,
                    (rows, 2),
                    |r, i| _mm256_cvtph_ps(load_u16x8(rows[r].as_ptr(), i)),
                    |i| _mm256_cvtph_ps(load_u16x8(a.as_ptr(), i)),
                    |r, j| h(rows[r], j) * h(a, j),
                    out,
                )
            };
        }
        rows_pass!(rows.len(), pass);
    }
}

/// BF16 · BF16 for several weight rows, four per pass (the bits of [`dot_bf16_avx2`]).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_bf16_avx2_rows(n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    let h = |b: &[u8], j: usize| {
        crate::scalar::bf16_to_f32(u16::from_le_bytes([b[2 * j], b[2 * j + 1]]))
    };
    let widen = |v: __m128i| -> __m256 {
        _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16))
    };
    for (rows, out) in rows.chunks(4).zip(out.chunks_mut(4)) {
        let n = common_len(n, rows, a, 2);
        macro_rules! pass {
            ($r:literal) => {
                accumulate_rows::<$r>(
                    n,
                    (rows, 2),
                    |r, i| widen(load_u16x8(rows[r].as_ptr(), i)),
                    |i| widen(load_u16x8(a.as_ptr(), i)),
                    |r, j| h(rows[r], j) * h(a, j),
                    out,
                )
            };
        }
        rows_pass!(rows.len(), pass);
    }
}
