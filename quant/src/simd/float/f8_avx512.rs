//! AVX-512 kernels for FP8 E4M3 weights against F32 activations ([`crate::DType::F8_E4M3`],
//! the official checkpoint's dense matrices in place): one row, several rows (decode
//! matvecs) and several columns. The arithmetic of the AVX2 kernels (`f8`), thirty-two
//! codes per step instead of sixteen.
//!
//! Per step: one 32-byte load widened to sixteen-bit lanes (`vpmovzxbw`), the same three
//! integer operations that make each code an f16 of value `v / 256` (shift to the high byte,
//! arithmetic shift right by one, mask bit 14), two `vcvtph2ps` to sixteen f32 each, and two
//! FMAs against the activation. On the AVX2 kernels' sixteen codes per step the shuffle port
//! (widening, lane extraction, `vcvtph2ps`) took four operations per sixteen bytes and left
//! the matvec at 57% of the DRAM read on a 2-vCPU AVX-512 host; here it is four per
//! thirty-two.
//!
//! Sums: sixteen f32 lanes accumulate by FMA over 128-element blocks (eight terms per lane,
//! as in the AVX2 kernels), each block's lanes are added into sixteen f64 lanes, the f64
//! lanes are reduced in a fixed order and multiplied back by 256 (exact), then the tail
//! (`n % 32` elements) is added one product at a time as the reference does. The bound
//! against the reference is the AVX2 kernels' (about 9·2⁻²⁴·Σ|w·a|, under the float family's
//! 1e-6·Σ|w·a|); below thirty-two elements the result is the reference's bits. The multi-row
//! and multi-column kernels give each output the one-row kernel's bits. NaN codes are refused
//! at load, as for the AVX2 kernels.

use crate::fp8::e4m3_to_f32;
use crate::simd::entry;
use std::arch::x86_64::*;

entry!(dot_f8_avx512_entry => dot_f8_avx512);
entry!(rows dot_f8_avx512_rows_entry => dot_f8_avx512_rows);
entry!(multi dot_f8_avx512_multi_entry => dot_f8_avx512_multi);

/// Codes per step.
const STEP: usize = 32;
/// Elements per f32 block before its lanes go into the f64 sums.
const BLOCK: usize = 128;

/// Thirty-two codes at element `i` of `p` as two registers of sixteen f32 of value `v / 256`.
#[inline(always)]
fn widen32(p: *const u8, i: usize) -> (__m512, __m512) {
    // SAFETY: callers pass i + 32 ≤ the slice's length (an unaligned 32-byte load); the
    // intrinsics need AVX-512 F and BW, which every kernel inlining this is compiled with.
    unsafe {
        let u = _mm512_cvtepu8_epi16(_mm256_loadu_si256(p.add(i).cast()));
        let h = _mm512_and_si512(
            _mm512_srai_epi16(_mm512_slli_epi16(u, 8), 1),
            _mm512_set1_epi16(0xBF80u16 as i16),
        );
        (
            _mm512_cvtph_ps(_mm512_castsi512_si256(h)),
            _mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1)),
        )
    }
}

/// The activation's sixteen f32 at element `i`.
#[inline(always)]
fn act16(a: &[u8], i: usize) -> __m512 {
    // SAFETY: callers pass i + 16 ≤ the activation's element count (unaligned load).
    unsafe { _mm512_loadu_ps(a.as_ptr().cast::<f32>().add(i)) }
}

/// Element `j` of an F32 activation row.
#[inline(always)]
fn act1(a: &[u8], j: usize) -> f32 {
    f32::from_le_bytes([a[4 * j], a[4 * j + 1], a[4 * j + 2], a[4 * j + 3]])
}

/// One output's sums: an f32 block accumulator (thirty-two products per step, sixteen lanes,
/// the low sixteen then the high sixteen) and the f64 lanes the blocks are added into.
#[derive(Clone, Copy)]
struct Acc {
    f: __m512,
    lo: __m512d,
    hi: __m512d,
}

impl Acc {
    #[inline(always)]
    fn new() -> Acc {
        // SAFETY: AVX-512 F only; inlined into AVX-512 kernels.
        unsafe {
            Acc {
                f: _mm512_setzero_ps(),
                lo: _mm512_setzero_pd(),
                hi: _mm512_setzero_pd(),
            }
        }
    }
    /// Thirty-two products, weights `w` times the activation at element `i` of `a`.
    #[inline(always)]
    fn fma32(&mut self, w: (__m512, __m512), a: &[u8], i: usize) {
        // SAFETY: AVX-512 F; inlined into kernels compiled with it.
        unsafe {
            self.f = _mm512_fmadd_ps(w.0, act16(a, i), self.f);
            self.f = _mm512_fmadd_ps(w.1, act16(a, i + 16), self.f);
        }
    }
    /// Adds the block's lanes into the f64 sums and starts a new block.
    #[inline(always)]
    fn flush(&mut self) {
        // SAFETY: AVX-512 F and DQ; inlined into AVX-512 kernels.
        unsafe {
            let f = self.f;
            self.lo = _mm512_add_pd(self.lo, _mm512_cvtps_pd(_mm512_castps512_ps256(f)));
            let high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1));
            self.hi = _mm512_add_pd(self.hi, _mm512_cvtps_pd(high));
            self.f = _mm512_setzero_ps();
        }
    }
    /// The total: the f64 lanes, reduced in a fixed order, times 256, then the tail
    /// `w[j]·a[j]` for `j` in `full..n`.
    #[inline(always)]
    fn finish(mut self, w: &[u8], a: &[u8], full: usize, n: usize) -> f32 {
        self.flush();
        // SAFETY: AVX-512 F; inlined into AVX-512 kernels.
        let mut s = unsafe {
            let v = _mm512_add_pd(self.lo, self.hi);
            let q = _mm256_add_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd(v, 1));
            let h = _mm_add_pd(_mm256_castpd256_pd128(q), _mm256_extractf128_pd(q, 1));
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

/// F8_E4M3 · F32 for `R` rows against one activation: each row keeps its own sums (the
/// one-row kernel's operations in its order), and each row is prefetched a fixed distance
/// ahead once per 64-byte line. The one-row kernel is this pass for one row.
#[inline(always)]
fn rows_pass<const R: usize>(n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    let mut acc = [Acc::new(); R];
    let full = n / STEP * STEP;
    let pd = crate::simd::PREFETCH_DISTANCE;
    let mut i = 0;
    while i < full {
        if i % 64 == 0 {
            for row in &rows[..R] {
                crate::simd::prefetch_ahead(row.as_ptr().wrapping_add(i), 64, pd);
            }
        }
        for r in 0..R {
            acc[r].fma32(widen32(rows[r].as_ptr(), i), a, i);
        }
        i += STEP;
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

/// F8_E4M3 · F32.
#[target_feature(enable = "avx512f,avx512bw,avx512dq")]
unsafe fn dot_f8_avx512(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let n = common(n, &[w], &[a]);
    let mut out = [0.0f32];
    rows_pass::<1>(n, &[w], a, &mut out);
    out[0]
}

/// F8_E4M3 · F32 for several weight rows, four per pass (the bits of [`dot_f8_avx512`]).
#[target_feature(enable = "avx512f,avx512bw,avx512dq")]
unsafe fn dot_f8_avx512_rows(n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
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

/// [`dot_f8_avx512`] for one row against `C` activations: each thirty-two codes are widened
/// once for every column (the one-row kernel's operations per column, in its order).
#[inline(always)]
fn cols_pass<const C: usize>(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    let mut acc = [Acc::new(); C];
    let full = n / STEP * STEP;
    let mut i = 0;
    while i < full {
        let x = widen32(w.as_ptr(), i);
        for c in 0..C {
            acc[c].fma32(x, acts[c], i);
        }
        i += STEP;
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
/// [`dot_f8_avx512`]).
#[target_feature(enable = "avx512f,avx512bw,avx512dq")]
unsafe fn dot_f8_avx512_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
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
