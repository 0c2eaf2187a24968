//! AVX2 kernels for FP8 E4M3 weights (the official DeepSeek checkpoint's dense matrices,
//! used in place: [`crate::DType::F8_E4M3`]) against F32 activations: one row, several rows
//! (decode matvecs) and several columns (prompt chunks). Block scales are not the kernels'
//! business: MUL_MAT multiplies the activations by them first (they are powers of two, so
//! that is exact).
//!
//! An E4M3 code widens to f16 exactly in three integer operations on 16-bit lanes: the code
//! shifted to the high byte (sign at bit 15), an arithmetic shift right by one (exponent and
//! mantissa to bits 13…7, the sign copied into bit 14) and a mask clearing bit 14 give an f16
//! of value `v / 256` (subnormal codes included: both formats' subnormals scale alike), which
//! `vcvtph2ps` turns into f32. The NaN codes (S.1111.111) widen to 480 here, not NaN: a
//! checkpoint holding one is refused at load, so no kernel meets it.
//!
//! Sums: each of eight f32 lanes accumulates `(v / 256) · a` by FMA over 64-element blocks
//! (eight terms per lane, one accumulator per output so that a pass holds eight columns in
//! registers), each block's lanes are added into f64 accumulators, and the total
//! is multiplied back by 256 (exact). Against the reference (each product rounded to f32,
//! summed in f64) that is within about 9·2⁻²⁴·Σ|w·a| — under the float family's test bound
//! of 1e-6·Σ|w·a| — at a third of the f64-per-product kernels' instructions (a 1-byte weight
//! has half a 2-byte one's DRAM time to be computed in). The multi-row and multi-column
//! kernels give each output the one-row kernel's bits: the one-row, multi-row and
//! multi-column drivers are written once over [`F8Acc`], the sums of one register width
//! (this file's AVX2 `Acc`, `f8_avx512`'s).

use crate::fp8::e4m3_to_f32;
use crate::simd::entry;
use std::arch::x86_64::*;

entry!(dot_f8_avx2_entry => dot_f8_avx2);
entry!(rows dot_f8_avx2_rows_entry => dot_f8_avx2_rows);
entry!(multi dot_f8_avx2_multi_entry => dot_f8_avx2_multi);

/// One output's FP8 sums at one register width: the AVX2 [`Acc`] here, the AVX-512 one in
/// `f8_avx512`. The one-row, multi-row and multi-column drivers below are written once over
/// it, so every width's outputs have its one-row kernel's bits by construction.
pub(super) trait F8Acc: Copy {
    /// Codes per step.
    const STEP: usize;
    /// Elements per f32 block before its lanes go into the f64 sums.
    const BLOCK: usize;
    /// A step's codes, widened to f32 of value `v / 256`.
    type W: Copy;
    fn new() -> Self;
    /// The step's codes at element `i` of `p` (callers pass `i + STEP` ≤ the row's length).
    fn widen(p: *const u8, i: usize) -> Self::W;
    /// A step's products, weights `w` times the activation at element `i` of `a` (callers
    /// pass `i + STEP` ≤ the activation's element count).
    fn fma(&mut self, w: Self::W, a: &[u8], i: usize);
    /// Adds the block's lanes into the f64 sums and starts a new block.
    fn flush(&mut self);
    /// The f64 lanes, reduced in a fixed order.
    fn reduce(&self) -> f64;
}

/// The AVX2 sums: an f32 block accumulator (sixteen products per step, eight lanes, the low
/// eight then the high eight) and the f64 lanes the blocks are added into.
#[derive(Clone, Copy)]
struct Acc {
    f: __m256,
    lo: __m256d,
    hi: __m256d,
}

impl F8Acc for Acc {
    const STEP: usize = 16;
    const BLOCK: usize = 64;
    type W = (__m256, __m256);
    #[inline(always)]
    fn new() -> Acc {
        // SAFETY: AVX only; inlined into AVX2 kernels.
        unsafe {
            Acc {
                f: _mm256_setzero_ps(),
                lo: _mm256_setzero_pd(),
                hi: _mm256_setzero_pd(),
            }
        }
    }
    #[inline(always)]
    fn widen(p: *const u8, i: usize) -> Self::W {
        // SAFETY: callers pass i + 16 ≤ the slice's length (an unaligned 16-byte load); the
        // intrinsics need AVX2 and F16C, which every kernel inlining this is compiled with.
        unsafe {
            let u = _mm256_cvtepu8_epi16(_mm_loadu_si128(p.add(i).cast()));
            let h = _mm256_and_si256(
                _mm256_srai_epi16(_mm256_slli_epi16(u, 8), 1),
                _mm256_set1_epi16(0xBF80u16 as i16),
            );
            (
                _mm256_cvtph_ps(_mm256_castsi256_si128(h)),
                _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)),
            )
        }
    }
    #[inline(always)]
    fn fma(&mut self, w: Self::W, a: &[u8], i: usize) {
        // SAFETY: FMA, inlined into kernels compiled with it; callers pass i + 16 ≤ the
        // activation's element count (unaligned loads).
        unsafe {
            let act = a.as_ptr().cast::<f32>().add(i);
            self.f = _mm256_fmadd_ps(w.0, _mm256_loadu_ps(act), self.f);
            self.f = _mm256_fmadd_ps(w.1, _mm256_loadu_ps(act.add(8)), self.f);
        }
    }
    #[inline(always)]
    fn flush(&mut self) {
        // SAFETY: AVX only; inlined into AVX2 kernels.
        unsafe {
            let f = self.f;
            self.lo = _mm256_add_pd(self.lo, _mm256_cvtps_pd(_mm256_castps256_ps128(f)));
            self.hi = _mm256_add_pd(self.hi, _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));
            self.f = _mm256_setzero_ps();
        }
    }
    #[inline(always)]
    fn reduce(&self) -> f64 {
        // SAFETY: AVX only; inlined into AVX2 kernels.
        unsafe {
            let v = _mm256_add_pd(self.lo, self.hi);
            let h = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
            _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)))
        }
    }
}

/// Element `j` of an F32 activation row.
#[inline(always)]
fn act1(a: &[u8], j: usize) -> f32 {
    f32::from_le_bytes([a[4 * j], a[4 * j + 1], a[4 * j + 2], a[4 * j + 3]])
}

/// The total: the block's lanes flushed, the f64 lanes reduced and times 256, then the tail
/// `w[j]·a[j]` for `j` in `full..n`, one product at a time as the reference adds them.
#[inline(always)]
fn finish<A: F8Acc>(mut acc: A, w: &[u8], a: &[u8], full: usize, n: usize) -> f32 {
    acc.flush();
    let mut s = acc.reduce() * 256.0;
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

/// `R` rows against one activation: each row keeps its own sums (the one-row kernel's
/// operations in its order), and each row is prefetched a fixed distance ahead once per
/// 64-byte line. The one-row kernel is this pass for one row.
#[inline(always)]
fn rows_pass<A: F8Acc, const R: usize>(n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    let mut acc = [A::new(); R];
    let full = n / A::STEP * A::STEP;
    let pd = crate::simd::PREFETCH_DISTANCE;
    let mut i = 0;
    while i < full {
        if i % 64 == 0 {
            for row in &rows[..R] {
                crate::simd::prefetch_ahead(row.as_ptr().wrapping_add(i), 64, pd);
            }
        }
        for r in 0..R {
            acc[r].fma(A::widen(rows[r].as_ptr(), i), a, i);
        }
        i += A::STEP;
        if i % A::BLOCK == 0 {
            for x in acc.iter_mut() {
                x.flush();
            }
        }
    }
    for r in 0..R {
        out[r] = finish(acc[r], rows[r], a, full, n);
    }
}

/// One row against `C` activations: each step's codes are widened once for every column
/// (the one-row kernel's operations per column, in its order).
#[inline(always)]
fn cols_pass<A: F8Acc, const C: usize>(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    let mut acc = [A::new(); C];
    let full = n / A::STEP * A::STEP;
    let mut i = 0;
    while i < full {
        let x = A::widen(w.as_ptr(), i);
        for c in 0..C {
            acc[c].fma(x, acts[c], i);
        }
        i += A::STEP;
        if i % A::BLOCK == 0 {
            for x in acc.iter_mut() {
                x.flush();
            }
        }
    }
    for c in 0..C {
        out[c] = finish(acc[c], w, acts[c], full, n);
    }
}

/// F8_E4M3 · F32, one row.
#[inline(always)]
pub(super) fn dot<A: F8Acc>(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let n = common(n, &[w], &[a]);
    let mut out = [0.0f32];
    rows_pass::<A, 1>(n, &[w], a, &mut out);
    out[0]
}

/// F8_E4M3 · F32 for several weight rows, four per pass (the bits of [`dot`]).
#[inline(always)]
pub(super) fn rows<A: F8Acc>(n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    for (rows, out) in rows.chunks(4).zip(out.chunks_mut(4)) {
        let n = common(n, rows, &[a]);
        match rows.len() {
            1 => rows_pass::<A, 1>(n, rows, a, out),
            2 => rows_pass::<A, 2>(n, rows, a, out),
            3 => rows_pass::<A, 3>(n, rows, a, out),
            _ => rows_pass::<A, 4>(n, rows, a, out),
        }
    }
}

/// F8_E4M3 · F32 for one weight row and several activations, eight per pass (the bits of
/// [`dot`]).
#[inline(always)]
pub(super) fn multi<A: F8Acc>(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    for (acts, out) in acts.chunks(8).zip(out.chunks_mut(8)) {
        let n = common(n, &[w], acts);
        match acts.len() {
            1 => cols_pass::<A, 1>(n, w, acts, out),
            2 => cols_pass::<A, 2>(n, w, acts, out),
            3 => cols_pass::<A, 3>(n, w, acts, out),
            4 => cols_pass::<A, 4>(n, w, acts, out),
            5 => cols_pass::<A, 5>(n, w, acts, out),
            6 => cols_pass::<A, 6>(n, w, acts, out),
            7 => cols_pass::<A, 7>(n, w, acts, out),
            _ => cols_pass::<A, 8>(n, w, acts, out),
        }
    }
}

/// F8_E4M3 · F32.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_f8_avx2(n: usize, w: &[u8], a: &[u8]) -> f32 {
    dot::<Acc>(n, w, a)
}

/// F8_E4M3 · F32 for several weight rows (the bits of [`dot_f8_avx2`]).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_f8_avx2_rows(n: usize, rs: &[&[u8]], a: &[u8], out: &mut [f32]) {
    rows::<Acc>(n, rs, a, out)
}

/// F8_E4M3 · F32 for one weight row and several activations (the bits of [`dot_f8_avx2`]).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_f8_avx2_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    multi::<Acc>(n, w, acts, out)
}
