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
//! and multi-column kernels give each output the one-row kernel's bits (the drivers are
//! `f8`'s, over this width's [`F8Acc`]). NaN codes are refused at load, as for the AVX2
//! kernels.

use super::f8::{dot, multi, rows, F8Acc};
use crate::simd::entry;
use std::arch::x86_64::*;

entry!(dot_f8_avx512_entry => dot_f8_avx512);
entry!(rows dot_f8_avx512_rows_entry => dot_f8_avx512_rows);
entry!(multi dot_f8_avx512_multi_entry => dot_f8_avx512_multi);

/// The AVX-512 sums: an f32 block accumulator (thirty-two products per step, sixteen lanes,
/// the low sixteen then the high sixteen) and the f64 lanes the blocks are added into.
#[derive(Clone, Copy)]
struct Acc {
    f: __m512,
    lo: __m512d,
    hi: __m512d,
}

impl F8Acc for Acc {
    const STEP: usize = 32;
    const BLOCK: usize = 128;
    type W = (__m512, __m512);
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
    #[inline(always)]
    fn widen(p: *const u8, i: usize) -> Self::W {
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
    #[inline(always)]
    fn fma(&mut self, w: Self::W, a: &[u8], i: usize) {
        // SAFETY: AVX-512 F, inlined into kernels compiled with it; callers pass i + 32 ≤ the
        // activation's element count (unaligned loads).
        unsafe {
            let act = a.as_ptr().cast::<f32>().add(i);
            self.f = _mm512_fmadd_ps(w.0, _mm512_loadu_ps(act), self.f);
            self.f = _mm512_fmadd_ps(w.1, _mm512_loadu_ps(act.add(16)), self.f);
        }
    }
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
    #[inline(always)]
    fn reduce(&self) -> f64 {
        // SAFETY: AVX-512 F; inlined into AVX-512 kernels.
        unsafe {
            let v = _mm512_add_pd(self.lo, self.hi);
            let q = _mm256_add_pd(_mm512_castpd512_pd256(v), _mm512_extractf64x4_pd(v, 1));
            let h = _mm_add_pd(_mm256_castpd256_pd128(q), _mm256_extractf128_pd(q, 1));
            _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)))
        }
    }
}

/// F8_E4M3 · F32.
#[target_feature(enable = "avx512f,avx512bw,avx512dq")]
unsafe fn dot_f8_avx512(n: usize, w: &[u8], a: &[u8]) -> f32 {
    dot::<Acc>(n, w, a)
}

/// F8_E4M3 · F32 for several weight rows, four per pass (the bits of [`dot_f8_avx512`]).
#[target_feature(enable = "avx512f,avx512bw,avx512dq")]
unsafe fn dot_f8_avx512_rows(n: usize, rs: &[&[u8]], a: &[u8], out: &mut [f32]) {
    rows::<Acc>(n, rs, a, out)
}

/// F8_E4M3 · F32 for one weight row and several activations, eight per pass (the bits of
/// [`dot_f8_avx512`]).
#[target_feature(enable = "avx512f,avx512bw,avx512dq")]
unsafe fn dot_f8_avx512_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    multi::<Acc>(n, w, acts, out)
}
