//! AVX-512 kernels for Q4_K and Q5_K against Q8_K activations (one row, and four rows for
//! decode's matvecs).
//!
//! A 64-element chunk of a super-block is one register in element order: its 32 code bytes
//! and the same bytes shifted right by four, side by side (`vinserti64x4`), masked to
//! nibbles — the low nibbles are sub-block 2c, the high ones 2c + 1, exactly the activation's
//! elements 64c..64c + 64, so the activations need no shuffle. Q5_K adds its fifth bits with
//! one `vptestmb` against the chunk's two bit masks and a masked add of 16. `vpmaddubsw`
//! forms the pair sums (codes ≤ 31: no saturation) and `vpdpwssd` multiplies them by the
//! sub-block scale (lanes 0..15: scale 2c, 16..31: scale 2c + 1) and accumulates. The eight
//! 6-bit scales and mins are unpacked with 32-bit scalar masks (ggml's `utmp` steps), the
//! mins' term Σ m_j·(bsum(2j) + bsum(2j+1)) is one `vpmaddwd` against the `bsums`. Exact
//! integers, then the reference's scalar float combine: the reference's bits.

use super::f16c;
use crate::blocks::{view, BlockQ4K, BlockQ5K, BlockQ8K};
use std::arch::x86_64::*;

super::entry!(
    dot_q4_k_avx512_entry => dot_q4_k_avx512,
    dot_q5_k_avx512_entry => dot_q5_k_avx512,
);
super::entry!(rows
    dot_q4_k_avx512_rows_entry => dot_q4_k_avx512_rows,
    dot_q5_k_avx512_rows_entry => dot_q5_k_avx512_rows,
);

/// The eight scales (bytes 0..8) and eight mins (bytes 8..16) of a K-quant super-block's
/// 12 packed scale bytes, as `scale_min_k4` gives them, by 32-bit masks.
#[inline(always)]
fn unpack_scales(q: &[u8; 12]) -> [u32; 4] {
    let w = |i: usize| u32::from_le_bytes([q[4 * i], q[4 * i + 1], q[4 * i + 2], q[4 * i + 3]]);
    let (u0, u1, u2) = (w(0), w(1), w(2));
    const LOW6: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const TOP2: u32 = 0x0303_0303;
    [
        u0 & LOW6,
        (u2 & LOW4) | (((u0 >> 6) & TOP2) << 4),
        u1 & LOW6,
        ((u2 >> 4) & LOW4) | (((u1 >> 6) & TOP2) << 4),
    ]
}

/// Per-chunk `vpermw` indices: lanes 0..15 take scale 2c, lanes 16..31 scale 2c + 1.
static CHUNK_SCALE: [[u16; 32]; 4] = {
    let mut t = [[0u16; 32]; 4];
    let mut c = 0;
    while c < 4 {
        let mut l = 0;
        while l < 32 {
            t[c][l] = (2 * c + l / 16) as u16;
            l += 1;
        }
        c += 1;
    }
    t
};

/// The constants of the kernels, in registers.
struct K4 {
    m4: __m512i,
    pick: [__m512i; 4],
    /// i16 lane 2j and 2j + 1: min j (bytes 8 + j of the unpacked scales)
    mins: __m256i,
    /// Q5_K's fifth-bit masks per chunk: bit 2c in the low half, 2c + 1 in the high half
    bit: [__m512i; 4],
    sixteen: __m512i,
}

impl K4 {
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    #[inline]
    unsafe fn new() -> K4 {
        K4 {
            m4: _mm512_set1_epi8(0x0F),
            // SAFETY: each CHUNK_SCALE row is 64 readable bytes (unaligned load).
            pick: std::array::from_fn(|c| unsafe {
                _mm512_loadu_si512(CHUNK_SCALE[c].as_ptr().cast())
            }),
            mins: _mm256_setr_epi16(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15),
            bit: std::array::from_fn(|c| {
                _mm512_inserti64x4::<1>(
                    _mm512_set1_epi8(1 << (2 * c)),
                    _mm256_set1_epi8((1u8 << (2 * c + 1)) as i8),
                )
            }),
            sixteen: _mm512_set1_epi8(16),
        }
    }

    /// One super-block's float product, `codes(c)` giving chunk c's 64 codes in element
    /// order.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    #[inline]
    unsafe fn block(
        &self,
        scales: &[u8; 12],
        d: [u8; 2],
        dmin: [u8; 2],
        codes: impl Fn(usize) -> __m512i,
        y: &BlockQ8K,
    ) -> f32 {
        let u = unpack_scales(scales);
        // SAFETY: `u` is 16 bytes (unaligned load).
        let s16 = _mm256_cvtepu8_epi16(unsafe { _mm_loadu_si128(u.as_ptr().cast()) });
        let s512 = _mm512_castsi256_si512(s16);
        let mut acc = _mm512_setzero_si512();
        for c in 0..4 {
            // SAFETY: 64 activation bytes of chunk c (unaligned load).
            let yv = unsafe { _mm512_loadu_si512(y.qs.as_ptr().add(64 * c).cast()) };
            let sc = _mm512_permutexvar_epi16(self.pick[c], s512);
            acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(codes(c), yv), sc);
        }
        // SAFETY: the 32 `bsums` bytes (unaligned load).
        let bs = unsafe { _mm256_loadu_si256(y.bsums.as_ptr().cast()) };
        let m = _mm256_permutexvar_epi16(self.mins, s16);
        let mins = _mm256_madd_epi16(bs, m);
        let isc = _mm512_reduce_add_epi32(acc);
        let imin = _mm512_reduce_add_epi32(_mm512_zextsi256_si512(mins));
        let dy = y.d();
        dy * (f16c!(d) * isc as f32) - dy * (f16c!(dmin) * imin as f32)
    }

    /// Chunk c of a Q4_K super-block's codes.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    #[inline]
    unsafe fn q4_codes(&self, x: &BlockQ4K, c: usize) -> __m512i {
        // SAFETY: 32 code bytes of chunk c (unaligned load).
        let q = unsafe { _mm256_loadu_si256(x.qs.as_ptr().add(32 * c).cast()) };
        let both = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4));
        _mm512_and_si512(both, self.m4)
    }

    /// Chunk c of a Q5_K super-block's codes: Q4_K's with 16 added where the chunk's bit of
    /// `qh` (broadcast to both halves in `qh2`) is set.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    #[inline]
    unsafe fn q5_codes(&self, x: &BlockQ5K, qh2: __m512i, c: usize) -> __m512i {
        // SAFETY: 32 code bytes of chunk c (unaligned load).
        let q = unsafe { _mm256_loadu_si256(x.qs.as_ptr().add(32 * c).cast()) };
        let both = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4));
        let lo = _mm512_and_si512(both, self.m4);
        let k = _mm512_test_epi8_mask(qh2, self.bit[c]);
        _mm512_mask_add_epi8(lo, k, lo, self.sixteen)
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    #[inline]
    unsafe fn q4(&self, x: &BlockQ4K, y: &BlockQ8K) -> f32 {
        // SAFETY: same features as this function.
        unsafe { self.block(&x.scales, x.d, x.dmin, |c| self.q4_codes(x, c), y) }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    #[inline]
    unsafe fn q5(&self, x: &BlockQ5K, y: &BlockQ8K) -> f32 {
        // SAFETY: the 32 `qh` bytes (unaligned load).
        let qh = unsafe { _mm256_loadu_si256(x.qh.as_ptr().cast()) };
        let qh2 = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(qh), qh);
        // SAFETY: same features as this function.
        unsafe { self.block(&x.scales, x.d, x.dmin, |c| self.q5_codes(x, qh2, c), y) }
    }
}

/// Q4_K · Q8_K with AVX-512, one row (see the module docs): the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn dot_q4_k_avx512(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: same features as this function.
    let k = unsafe { K4::new() };
    let mut s = 0f32;
    for (x, y) in view::<BlockQ4K>(w).iter().zip(view::<BlockQ8K>(a)) {
        // SAFETY: same features as this function.
        s += unsafe { k.q4(x, y) };
    }
    s
}

/// Q5_K · Q8_K with AVX-512, one row (see the module docs): the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn dot_q5_k_avx512(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: same features as this function.
    let k = unsafe { K4::new() };
    let mut s = 0f32;
    for (x, y) in view::<BlockQ5K>(w).iter().zip(view::<BlockQ8K>(a)) {
        // SAFETY: same features as this function.
        s += unsafe { k.q5(x, y) };
    }
    s
}

/// Q4_K · Q8_K, four rows per pass: the one-row kernel's super-block step for each row in
/// turn, each stream prefetched ahead. Per row the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn dot_q4_k_avx512_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: same features as this function.
    let k = unsafe { K4::new() };
    // SAFETY: same features as this function.
    super::avx2_k::k_rows(rows, a, out, |x, y| unsafe { k.q4(x, y) });
}

/// Q5_K · Q8_K, four rows per pass (as [`dot_q4_k_avx512_rows`]). Per row the reference's
/// bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn dot_q5_k_avx512_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: same features as this function.
    let k = unsafe { K4::new() };
    // SAFETY: same features as this function.
    super::avx2_k::k_rows(rows, a, out, |x, y| unsafe { k.q5(x, y) });
}
