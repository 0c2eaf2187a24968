//! AVX2 kernels for the K-quants against Q8_K activations (Q4_K, Q5_K, Q6_K). Each computes
//! the reference's exact integer sub-block sums with `vpmaddubsw`/`vpmaddwd` and then runs
//! the reference's scalar float combine, so its result is the reference's bits.

use crate::blocks::{view, BlockQ4K, BlockQ5K, BlockQ6K, BlockQ8K};
use crate::codec::kquants::scale_min_k4;
use crate::simd::{entry, f16c, hsum_i32};
use std::arch::x86_64::*;

entry!(rows
    dot_q4_k_avx2_rows_entry => dot_q4_k_avx2_rows,
    dot_q5_k_avx2_rows_entry => dot_q5_k_avx2_rows,
    dot_q6_k_avx2_rows_entry => dot_q6_k_avx2_rows,
);
entry!(
    dot_q4_k_avx2_entry => dot_q4_k_avx2,
    dot_q5_k_avx2_entry => dot_q5_k_avx2,
    dot_q6_k_avx2_entry => dot_q6_k_avx2,
);

/// The shared Q4_K / Q5_K integer sums of one super-block: (Σ_j scale_j·Σ q·y over
/// sub-block j, Σ_j min_j·(bsum(2j) + bsum(2j+1))). `codes(c)` gives chunk c's 64 unsigned
/// codes as (sub-block 2c, sub-block 2c+1); `vpmaddubsw` forms the pair sums (codes ≤ 31:
/// |pair| ≤ 2·31·127) and `vpmaddwd` multiplies them by the sub-block scale in vector lanes.
/// Exact integer arithmetic: the reference's sums.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn k4_sums(
    scales: &[u8; 12],
    codes: impl Fn(usize) -> (__m256i, __m256i),
    y: &BlockQ8K,
) -> (i32, i32) {
    let mut sc = [0i16; 8];
    let mut imin = 0i32;
    for (j, scj) in sc.iter_mut().enumerate() {
        let (s, m) = scale_min_k4(j, scales);
        *scj = s as i16;
        imin += m as i32 * (y.bsum(2 * j) as i32 + y.bsum(2 * j + 1) as i32);
    }
    let mut acc = _mm256_setzero_si256();
    for c in 0..4 {
        let (lo, hi) = codes(c);
        // SAFETY: 64 activation bytes per chunk are inside the block (unaligned loads).
        let (ylo, yhi) = unsafe {
            (
                _mm256_loadu_si256(y.qs.as_ptr().add(64 * c).cast()),
                _mm256_loadu_si256(y.qs.as_ptr().add(64 * c + 32).cast()),
            )
        };
        let a = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, ylo), _mm256_set1_epi16(sc[2 * c]));
        let b = _mm256_madd_epi16(
            _mm256_maddubs_epi16(hi, yhi),
            _mm256_set1_epi16(sc[2 * c + 1]),
        );
        acc = _mm256_add_epi32(acc, _mm256_add_epi32(a, b));
    }
    // SAFETY: AVX2 is enabled for this function.
    (unsafe { hsum_i32(acc) }, imin)
}

/// Q4_K · Q8_K with AVX2: [`q4_k_block`] per super-block, so the result is the reference's
/// bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q4_k_avx2(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockQ4K>(w).iter().zip(view::<BlockQ8K>(a)) {
        // SAFETY: same features as this function.
        s += unsafe { q4_k_block(x, y) };
    }
    s
}

/// One Q4_K super-block's float product: [`k4_sums`] with the nibbles as codes, then the
/// reference's float combine.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn q4_k_block(x: &BlockQ4K, y: &BlockQ8K) -> f32 {
    // SAFETY: the features of this function cover the helpers.
    let (isc, imin) = unsafe { k4_sums(&x.scales, |c| q4_k_codes(x, c), y) };
    let dy = y.d();
    dy * (f16c!(x.d) * isc as f32) - dy * (f16c!(x.dmin) * imin as f32)
}

/// Q4_K · Q8_K for several weight rows against one activation row, four rows per pass (the
/// scheme of [`dot_q5_k_avx2_rows`]): per row the one-row kernel's bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q4_k_avx2_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: same features as this function.
    k_rows(rows, a, out, |x, y| unsafe { q4_k_block(x, y) });
}

/// The body of the K-quant multi-row kernels: for four rows at a time, `block` for each
/// row's super-block in turn (so four running sums and four weight streams are in flight),
/// each stream prefetched [`crate::simd::PREFETCH_DISTANCE`] bytes ahead.
#[inline(always)]
fn k_rows<B: bytemuck::Pod>(
    rows: &[&[u8]],
    a: &[u8],
    out: &mut [f32],
    block: impl Fn(&B, &BlockQ8K) -> f32,
) {
    let ys = view::<BlockQ8K>(a);
    let pd = crate::simd::PREFETCH_DISTANCE;
    for (rows, out) in rows.chunks(4).zip(out.chunks_mut(4)) {
        let (xs, nb) = crate::simd::row_views::<B>(rows, ys.len());
        let xs = &xs[..rows.len()];
        let mut s = [0f32; 4];
        for (b, y) in ys[..nb].iter().enumerate() {
            for (x, sr) in xs.iter().zip(s.iter_mut()) {
                crate::simd::prefetch_ahead(std::ptr::from_ref(&x[b]).cast(), size_of::<B>(), pd);
                *sr += block(&x[b], y);
            }
        }
        out.copy_from_slice(&s[..out.len()]);
    }
}

/// Q6_K · Q8_K with AVX2: [`q6_k_block`] per super-block, so the result is the reference's
/// bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q6_k_avx2(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockQ6K>(w).iter().zip(view::<BlockQ8K>(a)) {
        // SAFETY: same features as this function.
        s += unsafe { q6_k_block(x, y) };
    }
    s
}

/// Q6_K · Q8_K for several weight rows against one activation row, four rows per pass
/// ([`k_rows`]): per row the one-row kernel's operations and order, the reference's bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q6_k_avx2_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: same features as this function.
    k_rows(rows, a, out, |x, y| unsafe { q6_k_block(x, y) });
}

/// One Q6_K super-block's float product: the 6-bit codes are rebuilt unsigned (0..63), the
/// 16-element sub-block sums Σ u·y come from `vpmaddubsw`/`vpmaddwd`, Σ q·y = Σ u·y −
/// 32·Σ scale·bsum, and the float combine is the reference's.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn q6_k_block(x: &BlockQ6K, y: &BlockQ8K) -> f32 {
    // Σ_sub scale·Σ u·y, kept in vector lanes: `vpmaddwd` multiplies the pair sums of each
    // 16-element sub-block by its scale (|pair| ≤ 2·63·127, |lane| < 2^23, no overflow)
    let mut acc = _mm256_setzero_si256();
    for h in 0..2 {
        let u = q6_k_codes(x, h);
        for (k, uk) in u.iter().enumerate() {
            // SAFETY: 32 activation bytes at 128h + 32k.
            let yk = unsafe { _mm256_loadu_si256(y.qs.as_ptr().add(128 * h + 32 * k).cast()) };
            let sub = 8 * h + 2 * k;
            let sc = _mm256_set_m128i(
                _mm_set1_epi16(x.scales[sub + 1] as i16),
                _mm_set1_epi16(x.scales[sub] as i16),
            );
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(*uk, yk), sc));
        }
    }
    // the codes' −32 offset: Σ_sub scale·32·bsum, one `vpmaddwd` of the block sums by the
    // scales widened to i16
    // SAFETY: the 16 scale bytes and the 32 bytes of block sums are readable (unaligned).
    let (sc, bs) = unsafe {
        (
            _mm256_cvtepi8_epi16(_mm_loadu_si128(x.scales.as_ptr().cast())),
            _mm256_loadu_si256(y.bsums.as_ptr().cast()),
        )
    };
    // SAFETY: AVX2 is enabled for this function.
    let (sum, off) = unsafe { (hsum_i32(acc), hsum_i32(_mm256_madd_epi16(sc, bs))) };
    let isc = sum - 32 * off;
    y.d() * f16c!(x.d) * isc as f32
}

/// Q5_K · Q8_K with AVX2: as Q4_K, with the fifth bit of sub-block `j` taken from bit `j`
/// of `qh[l]` by a compare against a one-bit mask (codes 0..31 stay unsigned for
/// `vpmaddubsw`); the float combine is the reference's, so the result is the reference's bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q5_k_avx2(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockQ5K>(w).iter().zip(view::<BlockQ8K>(a)) {
        // SAFETY: same features as this function.
        s += unsafe { q5_k_block(x, y) };
    }
    s
}

/// Q5_K · Q8_K for several weight rows against one activation row, four rows per pass:
/// [`dot_q5_k_avx2`]'s super-block step for each row in turn, so four running sums and four
/// weight streams are in flight ([`k_rows`]). Per row the operations and their order are the
/// one-row kernel's: the reference's bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q5_k_avx2_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: same features as this function.
    k_rows(rows, a, out, |x, y| unsafe { q5_k_block(x, y) });
}

/// One Q5_K super-block's float product (see [`dot_q5_k_avx2`]).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn q5_k_block(x: &BlockQ5K, y: &BlockQ8K) -> f32 {
    // SAFETY: the features of this function cover the helpers.
    let (isc, imin) = unsafe { k4_sums(&x.scales, |c| q5_k_codes(x, c), y) };
    let dy = y.d();
    dy * (f16c!(x.d) * isc as f32) - dy * (f16c!(x.dmin) * imin as f32)
}

/// Chunk `c` (0..4) of a Q4_K super-block as unsigned codes: (sub-block 2c, sub-block 2c + 1).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn q4_k_codes(x: &BlockQ4K, c: usize) -> (__m256i, __m256i) {
    let m4 = _mm256_set1_epi8(0x0F);
    let q = &x.qs[32 * c..32 * c + 32];
    // SAFETY: `q` is 32 bytes (unaligned load).
    let q = unsafe { _mm256_loadu_si256(q.as_ptr().cast()) };
    (
        _mm256_and_si256(q, m4),
        _mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
    )
}

/// Chunk `c` (0..4) of a Q5_K super-block as unsigned codes 0..31: [`q4_k_codes`]' nibbles
/// with the fifth bit of sub-block `j` taken from bit `j` of `qh` by a compare against a
/// one-bit mask.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn q5_k_codes(x: &BlockQ5K, c: usize) -> (__m256i, __m256i) {
    let m4 = _mm256_set1_epi8(0x0F);
    let sixteen = _mm256_set1_epi8(16);
    // SAFETY: `qh` has 32 bytes (unaligned load).
    let qh = unsafe { _mm256_loadu_si256(x.qh.as_ptr().cast()) };
    let high = |bit: usize| -> __m256i {
        let m = _mm256_set1_epi8((1u8 << bit) as i8);
        _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, m), m), sixteen)
    };
    let q = &x.qs[32 * c..32 * c + 32];
    // SAFETY: `q` is 32 bytes (unaligned load).
    let q = unsafe { _mm256_loadu_si256(q.as_ptr().cast()) };
    (
        _mm256_or_si256(_mm256_and_si256(q, m4), high(2 * c)),
        _mm256_or_si256(
            _mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
            high(2 * c + 1),
        ),
    )
}

/// Half `h` (0, 1) of a Q6_K super-block as unsigned codes 0..63, elements 128h + 32k.. in
/// register k: the low nibbles of `ql` with the two high bits of `qh` shifted in.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn q6_k_codes(x: &BlockQ6K, h: usize) -> [__m256i; 4] {
    let m4 = _mm256_set1_epi8(0x0F);
    let m2 = _mm256_set1_epi8(0x03);
    let (ql, qh) = (&x.ql[64 * h..64 * h + 64], &x.qh[32 * h..32 * h + 32]);
    // SAFETY: 64 `ql` and 32 `qh` bytes (unaligned loads).
    let (ql0, ql1, qh) = unsafe {
        (
            _mm256_loadu_si256(ql.as_ptr().cast()),
            _mm256_loadu_si256(ql[32..].as_ptr().cast()),
            _mm256_loadu_si256(qh.as_ptr().cast()),
        )
    };
    let hi = |shift: i32| -> __m256i {
        let v = match shift {
            0 => qh,
            2 => _mm256_srli_epi16(qh, 2),
            4 => _mm256_srli_epi16(qh, 4),
            _ => _mm256_srli_epi16(qh, 6),
        };
        _mm256_slli_epi16(_mm256_and_si256(v, m2), 4)
    };
    [
        _mm256_or_si256(_mm256_and_si256(ql0, m4), hi(0)),
        _mm256_or_si256(_mm256_and_si256(ql1, m4), hi(2)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), hi(4)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), hi(6)),
    ]
}
