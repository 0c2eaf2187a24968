//! Q6_K · Q8_K with AVX-512 (VNNI): one row, several rows, several columns.

use crate::blocks::{view, BlockQ6K, BlockQ8K};
use crate::simd::{entry, f16c};
use std::arch::x86_64::*;

entry!(multi dot_q6_k_avx512_multi_entry => dot_q6_k_avx512_multi);
entry!(rows dot_q6_k_avx512_rows_entry => dot_q6_k_avx512_rows);
entry!(dot_q6_k_avx512_entry => dot_q6_k_avx512);

/// Q6_K · Q8_K with AVX-512: a 128-element half of a super-block is two registers — its
/// 64 `ql` bytes give the low nibbles of both, its 32 `qh` bytes (broadcast to both halves of
/// a register, shifted per half by `vpsrlvw`) the two high bits — and each lines up with 64
/// consecutive activation codes. `vpmaddubsw` forms pair sums of the unsigned 6-bit codes,
/// `vpdpwssd` multiplies them by each 16-element sub-block's scale and accumulates, and the
/// −32 code offset is Σ scale·bsum (`vpmaddwd`). Exact integer arithmetic and the
/// reference's float combine: the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma,f16c")]
unsafe fn dot_q6_k_avx512(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: same features as this function.
    let k = unsafe { Q6k::new() };
    let mut s = 0f32;
    for (x, y) in view::<BlockQ6K>(w).iter().zip(view::<BlockQ8K>(a)) {
        // SAFETY: same features as this function.
        s += unsafe { k.block(x, y) };
    }
    s
}

/// Q6_K · Q8_K for several weight rows against one activation row, four rows per pass:
/// [`dot_q6_k_avx512`]'s super-block step for each row in turn, so four running sums and
/// four weight streams are in flight. Per row the operations and their order are the one-row
/// kernel's: the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma,f16c")]
unsafe fn dot_q6_k_avx512_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: same features as this function.
    let k = unsafe { Q6k::new() };
    let ys = view::<BlockQ8K>(a);
    for (rows, out) in rows.chunks(4).zip(out.chunks_mut(4)) {
        let (xs, nb) = crate::simd::row_views::<BlockQ6K>(rows, ys.len());
        let xs = &xs[..rows.len()];
        let mut s = [0f32; 4];
        let pd = crate::simd::PREFETCH_DISTANCE;
        for (b, y) in ys[..nb].iter().enumerate() {
            for (x, sr) in xs.iter().zip(s.iter_mut()) {
                crate::simd::prefetch_ahead(
                    std::ptr::from_ref(&x[b]).cast(),
                    size_of::<BlockQ6K>(),
                    pd,
                );
                // SAFETY: same features as this function.
                *sr += unsafe { k.block(&x[b], y) };
            }
        }
        out.copy_from_slice(&s[..out.len()]);
    }
}

/// The constants of the Q6_K kernels, in registers.
struct Q6k {
    m4: __m512i,
    m3: __m512i,
    sh01: __m512i,
    sh23: __m512i,
    pick: [__m512i; 4],
}

impl Q6k {
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma,f16c")]
    #[inline]
    unsafe fn new() -> Self {
        Q6k {
            m4: _mm512_set1_epi8(0x0F),
            m3: _mm512_set1_epi8(0x03),
            // per 16-bit lane: shift of the high-bit pair for the register's lower / upper 32
            // bytes
            sh01: _mm512_inserti64x4::<1>(_mm512_set1_epi16(0), _mm256_set1_epi16(2)),
            sh23: _mm512_inserti64x4::<1>(_mm512_set1_epi16(4), _mm256_set1_epi16(6)),
            // i16 pair lane i of a register covers elements 2i, 2i+1: sub-block i / 8 of its
            // four
            pick: std::array::from_fn(|r| {
                let v: [i16; 32] = std::array::from_fn(|i| (4 * r + i / 8) as i16);
                // SAFETY: 64 readable bytes (unaligned load).
                unsafe { _mm512_loadu_si512(v.as_ptr().cast()) }
            }),
        }
    }

    /// The unsigned 6-bit codes of half h (elements 128h..128h + 128) as two registers in
    /// element order: the 64 `ql` bytes give the low nibbles of both, the 32 `qh` bytes
    /// (broadcast to both halves of a register, shifted per half by `vpsrlvw`) the high bits.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma,f16c")]
    #[inline]
    unsafe fn codes(&self, x: &BlockQ6K, h: usize) -> [__m512i; 2] {
        let (m4, m3) = (self.m4, self.m3);
        // SAFETY: 64 `ql` and 32 `qh` bytes of this half (unaligned).
        let (ql, qh) = unsafe {
            (
                _mm512_loadu_si512(x.ql.as_ptr().add(64 * h).cast()),
                _mm512_broadcast_i64x4(_mm256_loadu_si256(x.qh.as_ptr().add(32 * h).cast())),
            )
        };
        let hi =
            |sh: __m512i| _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, sh), m3), 4);
        [
            _mm512_or_si512(_mm512_and_si512(ql, m4), hi(self.sh01)),
            _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                hi(self.sh23),
            ),
        ]
    }

    /// One super-block's `dy·f32(dx)·Σ` (the reference's float product).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma,f16c")]
    #[inline]
    unsafe fn block(&self, x: &BlockQ6K, y: &BlockQ8K) -> f32 {
        // SAFETY: 16 scale bytes and the 32 bsum bytes of the blocks (unaligned loads).
        let (sc, bs) = unsafe {
            (
                _mm256_cvtepi8_epi16(_mm_loadu_si128(x.scales.as_ptr().cast())),
                _mm256_loadu_si256(y.bsums.as_ptr().cast()),
            )
        };
        let sc512 = _mm512_castsi256_si512(sc);
        let mut acc = _mm512_setzero_si512();
        for h in 0..2 {
            // SAFETY: 128 activation bytes of this half (unaligned).
            let (y0, y1) = unsafe {
                (
                    _mm512_loadu_si512(y.qs.as_ptr().add(128 * h).cast()),
                    _mm512_loadu_si512(y.qs.as_ptr().add(128 * h + 64).cast()),
                )
            };
            // SAFETY: same features as this function.
            let [u01, u23] = unsafe { self.codes(x, h) };
            let s01 = _mm512_permutexvar_epi16(self.pick[2 * h], sc512);
            let s23 = _mm512_permutexvar_epi16(self.pick[2 * h + 1], sc512);
            acc = crate::simd::dpwssd(acc, _mm512_maddubs_epi16(u01, y0), s01);
            acc = crate::simd::dpwssd(acc, _mm512_maddubs_epi16(u23, y1), s23);
        }
        // Σ scale·bsum over the 16 sub-blocks
        let off = {
            let v = _mm256_madd_epi16(sc, bs);
            let t = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
            let t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0b01_00_11_10));
            let t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0b10_11_00_01));
            _mm_cvtsi128_si32(t)
        };
        let isc = _mm512_reduce_add_epi32(acc) - 32 * off;
        y.d() * f16c!(x.d) * isc as f32
    }
}

/// [`crate::simd::packed_pick`] for Q6_K's 16 sub-block scales (words 0..16): in the
/// packed sums of half h's two code registers, lane j of register 2h is sub-block 8h + j,
/// of register 2h + 1 sub-block 8h + 4 + j.
static Q6_PAIRS: [[u16; 32]; 2] = crate::simd::packed_pick(8, 4, 2, 1, 0);

/// Q6_K · Q8_K against several activation columns, four per pass (prompt chunks, experts
/// with several tokens): each super-block's codes ([`Q6k::codes`]) and scales are unpacked
/// once; per column one `vpdpbusd` per code register (|Σ| ≤ 4·63·128, so two registers'
/// sums pack to words), [`crate::simd::scale_pairs`] and the offset term Σ scale·bsum
/// (`vpmaddwd`); the four columns' sums are reduced at once ([`crate::simd::sums4`]) and the
/// reference's `dy·f32(dx)·(Σ − 32·off)` runs in four f32 lanes, one per column, with the
/// running sums: per column the reference's bits. Passes come from `column_split` (5 → 3 +
/// 2); a pass of two or three columns leaves the other lanes 0 and does not store them; a
/// call of one column runs the one-row kernel.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma,f16c")]
unsafe fn dot_q6_k_avx512_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features as this function.
    let k = unsafe { Q6k::new() };
    let pick = crate::simd::tables64(&Q6_PAIRS);
    // SAFETY: same features as this function (the closure runs inside it).
    let one = |a: &[u8]| unsafe { dot_q6_k_avx512(n, w, a) };
    crate::simd::kquants::avx512::column_passes(w, acts, out, one, |x: &BlockQ6K, ys, cnt| {
        // SAFETY: same features as this function.
        let [[c0, c1], [c2, c3]] = unsafe { [k.codes(x, 0), k.codes(x, 1)] };
        // SAFETY: the 16 scale bytes (unaligned load).
        let sc = _mm256_cvtepi8_epi16(unsafe { _mm_loadu_si128(x.scales.as_ptr().cast()) });
        let sv = pick.map(|t| _mm512_permutexvar_epi16(t, _mm512_castsi256_si512(sc)));
        let (acc, off, dy) =
            crate::simd::kquants::avx512::column_sums(&[c0, c1, c2, c3], ys, cnt, &sv, sc);
        // lane c: column c's Σ − 32·off (exact)
        let isc = _mm_sub_epi32(acc, _mm_slli_epi32(off, 5));
        _mm_mul_ps(
            _mm_mul_ps(dy, _mm_set1_ps(f16c!(x.d))),
            _mm_cvtepi32_ps(isc),
        )
    });
}
