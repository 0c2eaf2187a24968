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
//! kernels give each output the one-row kernel's bits.

use crate::fp8::e4m3_to_f32;
use crate::simd::entry;
use std::arch::x86_64::*;

entry!(dot_f8_avx2_entry => dot_f8_avx2);
entry!(rows dot_f8_avx2_rows_entry => dot_f8_avx2_rows);
entry!(multi dot_f8_avx2_multi_entry => dot_f8_avx2_multi);

/// Elements per f32 block before its lanes go into the f64 sums.
const BLOCK: usize = 64;

/// Sixteen codes at element `i` of `p` as two registers of eight f32 of value `v / 256`.
#[inline(always)]
fn widen16(p: *const u8, i: usize) -> (__m256, __m256) {
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

/// One output's sums: an f32 block accumulator (sixteen products per step, eight lanes,
/// the low eight then the high eight) and the f64 lanes the blocks are added into.
#[derive(Clone, Copy)]
struct Acc {
    f: __m256,
    lo: __m256d,
    hi: __m256d,
}

impl Acc {
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
    /// Sixteen products, weights `w` times the activation at element `i` of `a`.
    #[inline(always)]
    fn fma16(&mut self, w: (__m256, __m256), a: &[u8], i: usize) {
        // SAFETY: FMA; inlined into kernels compiled with it.
        unsafe {
            self.f = _mm256_fmadd_ps(w.0, act8(a, i), self.f);
            self.f = _mm256_fmadd_ps(w.1, act8(a, i + 8), self.f);
        }
    }
    /// Adds the block's lanes into the f64 sums and starts a new block.
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
    /// The total: the f64 lanes times 256, then the tail `w[j]·a[j]` for `j` in `full..n`.
    #[inline(always)]
    fn finish(mut self, w: &[u8], a: &[u8], full: usize, n: usize) -> f32 {
        self.flush();
        // SAFETY: AVX only; inlined into AVX2 kernels.
        let mut s = unsafe {
            let v = _mm256_add_pd(self.lo, self.hi);
            let h = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
            _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)))
        } * 256.0;
        for j in full..n {
            s += (e4m3_to_f32(w[j]) * act1(a, j)) as f64;
        }
        s as f32
    }
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
    let full = n / 16 * 16;
    let mut acc = Acc::new();
    let mut i = 0;
    while i < full {
        acc.fma16(widen16(w.as_ptr(), i), a, i);
        i += 16;
        if i % BLOCK == 0 {
            acc.flush();
        }
    }
    acc.finish(w, a, full, n)
}

/// [`dot_f8_avx2`] for `R` rows against one activation: each row keeps its own sums (the
/// one-row kernel's operations in its order), and each row is prefetched a fixed distance
/// ahead once per 64-byte line.
#[inline(always)]
fn rows_pass<const R: usize>(n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    let mut acc = [Acc::new(); R];
    let full = n / 16 * 16;
    let pd = crate::simd::PREFETCH_DISTANCE;
    let mut i = 0;
    while i < full {
        if i % 64 == 0 {
            for row in &rows[..R] {
                crate::simd::prefetch_ahead(row.as_ptr().wrapping_add(i), 64, pd);
            }
        }
        for r in 0..R {
            acc[r].fma16(widen16(rows[r].as_ptr(), i), a, i);
        }
        i += 16;
        if i % BLOCK == 0 {
            for x in acc.iter_mut() {
                x.flush();
            }
        }
    }
    for r in 0..R {
        out[r] = acc[r].finish(rows[r], a, full, n);
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

/// [`dot_f8_avx2`] for one row against `C` activations: each sixteen codes are widened once
/// for every column (the one-row kernel's operations per column, in its order).
#[inline(always)]
fn cols_pass<const C: usize>(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    let mut acc = [Acc::new(); C];
    let full = n / 16 * 16;
    let mut i = 0;
    while i < full {
        let x = widen16(w.as_ptr(), i);
        for c in 0..C {
            acc[c].fma16(x, acts[c], i);
        }
        i += 16;
        if i % BLOCK == 0 {
            for x in acc.iter_mut() {
                x.flush();
            }
        }
    }
    for c in 0..C {
        out[c] = acc[c].finish(w, acts[c], full, n);
    }
}

/// F8_E4M3 · F32 for one weight row and several activations, eight per pass (the bits of
/// [`dot_f8_avx2`]).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_f8_avx2_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    for (acts, out) in acts.chunks(8).zip(out.chunks_mut(8)) {
        let n = common(n, &[w], acts);
        match acts.len() {
            1 => cols_pass::<1>(n, w, acts, out),
            2 => cols_pass::<2>(n, w, acts, out),
            3 => cols_pass::<3>(n, w, acts, out),
            4 => cols_pass::<4>(n, w, acts, out),
            5 => cols_pass::<5>(n, w, acts, out),
            6 => cols_pass::<6>(n, w, acts, out),
            7 => cols_pass::<7>(n, w, acts, out),
            _ => cols_pass::<8>(n, w, acts, out),
        }
    }
}
