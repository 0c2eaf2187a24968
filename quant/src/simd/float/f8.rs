//! AVX2 kernels for FP8 E4M3 weights (the official DeepSeek checkpoint's dense matrices,
//! used in place: [`crate::DType::F8_E4M3`]) against F32 activations: one row, several rows
//! (decode matvecs) and several columns (prompt chunks). Block scales are not the kernels'
//! business: MUL_MAT multiplies the activations by them first (they are powers of two, so
//! that is exact).
//!
//! An E4M3 code widens to f16 exactly: sign to bit 15, the seven exponent-and-mantissa bits
//! to bits 13…7 give an f16 of value `v / 256` (subnormal codes included: both formats'
//! subnormals scale the same way), which `vcvtph2ps` turns into f32. The products
//! `(v / 256) · a` are the reference's `v · a` divided by 256 exactly (but where they would
//! fall below 2⁻¹²⁶), are accumulated in f64 over eight lanes as the other float kernels do,
//! and the sum is multiplied back by 256. The NaN codes (S.1111.111) widen to 480 here, not
//! NaN: a checkpoint holding one is refused at load, so no kernel meets it.
//!
//! The f64 sums are taken in another order than the reference's: results are within
//! 1e-6·Σ|w·a| of it (the float family's bound); the multi-row and multi-column kernels give
//! each output the one-row kernel's bits.

use crate::fp8::e4m3_to_f32;
use crate::simd::entry;
use std::arch::x86_64::*;

entry!(dot_f8_avx2_entry => dot_f8_avx2);
entry!(rows dot_f8_avx2_rows_entry => dot_f8_avx2_rows);
entry!(multi dot_f8_avx2_multi_entry => dot_f8_avx2_multi);

/// Eight codes at element `i` of `p` as eight f32 of value `v / 256`.
#[inline(always)]
fn widen8(p: *const u8, i: usize) -> __m256 {
    // SAFETY: callers pass i + 8 ≤ the slice's length (an unaligned 8-byte load); the
    // intrinsics need AVX2 and F16C, which every kernel inlining this is compiled with.
    unsafe {
        let x = _mm_cvtepu8_epi16(_mm_loadl_epi64(p.add(i).cast()));
        let mag = _mm_slli_epi16(_mm_and_si128(x, _mm_set1_epi16(0x7F)), 7);
        let sign = _mm_slli_epi16(_mm_and_si128(x, _mm_set1_epi16(0x80)), 8);
        _mm256_cvtph_ps(_mm_or_si128(mag, sign))
    }
}

/// The activation's eight f32 at element `i`.
#[inline(always)]
fn act8(a: &[u8], i: usize) -> __m256 {
    // SAFETY: callers pass i + 8 ≤ the activation's element count (unaligned load).
    unsafe { _mm256_loadu_ps(a.as_ptr().cast::<f32>().add(i)) }
}

/// Element `j` of an F32 activation row.
#[inline(always)]
fn act1(a: &[u8], j: usize) -> f32 {
    f32::from_le_bytes([a[4 * j], a[4 * j + 1], a[4 * j + 2], a[4 * j + 3]])
}

/// Adds the eight products `p` to the two f64 lane accumulators.
#[inline(always)]
fn add8(lo: &mut __m256d, hi: &mut __m256d, p: __m256) {
    // SAFETY: AVX only; inlined into AVX2 kernels.
    unsafe {
        *lo = _mm256_add_pd(*lo, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
        *hi = _mm256_add_pd(*hi, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
    }
}

/// The lanes' sum times 256, then the tail `w[j]·a[j]` for `j` in `full..n`.
#[inline(always)]
fn finish(lo: __m256d, hi: __m256d, w: &[u8], a: &[u8], full: usize, n: usize) -> f32 {
    // SAFETY: AVX only; inlined into AVX2 kernels.
    let mut s = unsafe {
        let v = _mm256_add_pd(lo, hi);
        let h = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
        _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)))
    } * 256.0;
    for j in full..n {
        s += (e4m3_to_f32(w[j]) * act1(a, j)) as f64;
    }
    s as f32
}

/// Elements every operand holds.
fn common(n: usize, rows: &[&[u8]], acts: &[&[u8]]) -> usize {
    let n = rows.iter().fold(n, |m, w| m.min(w.len()));
    acts.iter().fold(n, |m, a| m.min(a.len() / 4))
}

/// F8_E4M3 · F32.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_f8_avx2(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let n = common(n, &[w], &[a]);
    let full = n / 8 * 8;
    let (mut lo, mut hi) = (_mm256_setzero_pd(), _mm256_setzero_pd());
    let mut i = 0;
    while i < full {
        add8(
            &mut lo,
            &mut hi,
            _mm256_mul_ps(widen8(w.as_ptr(), i), act8(a, i)),
        );
        i += 8;
    }
    finish(lo, hi, w, a, full, n)
}

/// [`dot_f8_avx2`] for `R` rows against one activation: the activation is loaded once per
/// eight elements for all rows, each row keeps its own accumulators (the one-row kernel's
/// operations in its order), and each row is prefetched a fixed distance ahead once per
/// 64-byte line.
#[inline(always)]
fn rows_pass<const R: usize>(n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: AVX only; inlined into an AVX2 kernel.
    let (mut lo, mut hi) = unsafe { ([_mm256_setzero_pd(); R], [_mm256_setzero_pd(); R]) };
    let full = n / 8 * 8;
    let pd = crate::simd::PREFETCH_DISTANCE;
    let mut i = 0;
    while i < full {
        let x = act8(a, i);
        if i % 64 == 0 {
            for row in &rows[..R] {
                crate::simd::prefetch_ahead(row.as_ptr().wrapping_add(i), 64, pd);
            }
        }
        for r in 0..R {
            // SAFETY: AVX only.
            let p = unsafe { _mm256_mul_ps(widen8(rows[r].as_ptr(), i), x) };
            add8(&mut lo[r], &mut hi[r], p);
        }
        i += 8;
    }
    for r in 0..R {
        out[r] = finish(lo[r], hi[r], rows[r], a, full, n);
    }
}

/// F8_E4M3 · F32 for several weight rows, four per pass (the bits of [`dot_f8_avx2`]).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_f8_avx2_rows(n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    for (rows, out) in rows.chunks(4).zip(out.chunks_mut(4)) {
        let n = common(n, rows, &[a]);
        match rows.len() {
            1 => rows_pass::<1>(n, rows, a, out),
            2 => rows_pass::<2>(n, rows, a, out),
            3 => rows_pass::<3>(n, rows, a, out),
            _ => rows_pass::<4>(n, rows, a, out),
        }
    }
}

/// [`dot_f8_avx2`] for one row against `C` activations: each eight codes are widened once
/// for every column (the one-row kernel's operations per column, in its order).
#[inline(always)]
fn cols_pass<const C: usize>(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: AVX only; inlined into an AVX2 kernel.
    let (mut lo, mut hi) = unsafe { ([_mm256_setzero_pd(); C], [_mm256_setzero_pd(); C]) };
    let full = n / 8 * 8;
    let mut i = 0;
    while i < full {
        let x = widen8(w.as_ptr(), i);
        for c in 0..C {
            // SAFETY: AVX only.
            let p = unsafe { _mm256_mul_ps(x, act8(acts[c], i)) };
            add8(&mut lo[c], &mut hi[c], p);
        }
        i += 8;
    }
    for c in 0..C {
        out[c] = finish(lo[c], hi[c], w, acts[c], full, n);
    }
}

/// F8_E4M3 · F32 for one weight row and several activations, four per pass (the bits of
/// [`dot_f8_avx2`]).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_f8_avx2_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    for (acts, out) in acts.chunks(4).zip(out.chunks_mut(4)) {
        let n = common(n, &[w], acts);
        match acts.len() {
            1 => cols_pass::<1>(n, w, acts, out),
            2 => cols_pass::<2>(n, w, acts, out),
            3 => cols_pass::<3>(n, w, acts, out),
            _ => cols_pass::<4>(n, w, acts, out),
        }
    }
}
