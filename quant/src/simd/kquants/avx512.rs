//! AVX-512 kernels for Q4_K and Q5_K against Q8_K activations (one row, and four rows for
//! decode's matvecs).
//!
//! A super-block's 128 code bytes are two 64-byte loads; each, masked to its low nibbles and
//! shifted-then-masked to its high nibbles, gives two code registers (low: sub-blocks 4p and
//! 4p + 2, high: 4p + 1 and 4p + 3), and the activations are put in that order once per
//! super-block for all rows of a pass ([`ky`]). Q5_K adds its fifth bits with one `vptestmb`
//! against the register's two bit masks and a masked add of 16. `vpdpbusd` forms each
//! register's four-element sums (codes ≤ 31: |Σ| ≤ 4·31·128), two registers' sums are packed
//! to words by one `vpackssdw`, and one `vpdpwssd` multiplies them by their sub-blocks'
//! scales (one `vpermw` per register pair, [`PAIR_SCALE`]) and accumulates: per register
//! one multiply instead of `vpmaddubsw` + `vpdpwssd`. The eight
//! 6-bit scales and mins are unpacked with 32-bit scalar masks (ggml's `utmp` steps), the
//! mins' term Σ m_j·(bsum(2j) + bsum(2j+1)) is one `vpmaddwd` against the `bsums`. Exact
//! integers, then the reference's scalar float combine: the reference's bits.

use crate::blocks::{view, BlockQ4K, BlockQ5K, BlockQ8K};
use crate::simd::f16c;
use std::arch::x86_64::*;

crate::simd::entry!(
    dot_q4_k_avx512_entry => dot_q4_k_avx512,
    dot_q5_k_avx512_entry => dot_q5_k_avx512,
);
crate::simd::entry!(rows
    dot_q4_k_avx512_rows_entry => dot_q4_k_avx512_rows,
    dot_q5_k_avx512_rows_entry => dot_q5_k_avx512_rows,
);
crate::simd::entry!(multi
    dot_q4_k_avx512_multi_entry => dot_q4_k_avx512_multi,
    dot_q5_k_avx512_multi_entry => dot_q5_k_avx512_multi,
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

/// Per pair q of code registers (r = 2q + h, h = 0, 1; see [`K4::codes`]) the `vpermw`
/// indices for their packed four-element sums (`vpackssdw`): in 128-bit lane j, words 0–3
/// are register 2q's elements 16j..16j + 16 and words 4–7 register 2q + 1's, which belong
/// to sub-block 4q + h (j < 2) or 4q + 2 + h (j ≥ 2).
static PAIR_SCALE: [[u16; 32]; 2] = crate::simd::packed_pick(4, 1, 2, 0, 0);

/// The constants of the kernels, in registers.
struct K4 {
    m4: __m512i,
    pick: [__m512i; 2],
    /// i16 lane 2j and 2j + 1: min j (bytes 8 + j of the unpacked scales)
    mins: __m256i,
    /// Q5_K's fifth-bit masks per code register r = 2p + h: bit 4p + h in the low half,
    /// 4p + 2 + h in the high half
    bit: [__m512i; 4],
    sixteen: __m512i,
    /// The multi-column kernels' chunk registers ([`Self::chunk`]): the `vpsrlvw` counts (0
    /// in the low 256 bits, 4 in the high), the scale picks of chunk pairs
    /// ([`CHUNK_PAIRS`]) and Q5_K's fifth-bit masks per chunk p (bit 2p low, 2p + 1 high)
    shift: __m512i,
    chunk_pick: [__m512i; 2],
    chunk_bit: [__m512i; 4],
}

impl K4 {
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    #[inline]
    unsafe fn new() -> K4 {
        K4 {
            m4: _mm512_set1_epi8(0x0F),
            pick: crate::simd::tables64(&PAIR_SCALE),
            mins: _mm256_setr_epi16(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15),
            bit: std::array::from_fn(|r| {
                let j = 4 * (r / 2) + r % 2;
                _mm512_inserti64x4::<1>(
                    _mm512_set1_epi8((1u8 << j) as i8),
                    _mm256_set1_epi8((1u8 << (j + 2)) as i8),
                )
            }),
            sixteen: _mm512_set1_epi8(16),
            shift: _mm512_inserti64x4::<1>(_mm512_setzero_si512(), _mm256_set1_epi16(4)),
            chunk_pick: crate::simd::tables64(&CHUNK_PAIRS),
            chunk_bit: std::array::from_fn(|p| {
                _mm512_inserti64x4::<1>(
                    _mm512_set1_epi8((1u8 << (2 * p)) as i8),
                    _mm256_set1_epi8((1u8 << (2 * p + 1)) as i8),
                )
            }),
        }
    }

    /// One super-block's integer sums: 16 lanes that add up to Σ_j scale_j·Σ q·y, and 8
    /// lanes that add up to Σ_j min_j·(bsum(2j) + bsum(2j+1)); `codes(r)` gives code
    /// register r ([`Self::codes`]) and `ky` the matching activations ([`ky`]).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    #[inline]
    unsafe fn sums(
        &self,
        scales: &[u8; 12],
        codes: impl Fn(usize) -> __m512i,
        ky: &[__m512i; 4],
        y: &BlockQ8K,
    ) -> (__m512i, __m256i) {
        let u = unpack_scales(scales);
        // SAFETY: `u` is 16 bytes (unaligned load).
        let s16 = _mm256_cvtepu8_epi16(unsafe { _mm_loadu_si128(u.as_ptr().cast()) });
        let s512 = _mm512_castsi256_si512(s16);
        let z = _mm512_setzero_si512();
        let d: [__m512i; 4] = std::array::from_fn(|r| _mm512_dpbusd_epi32(z, codes(r), ky[r]));
        // four-element sums |Σ| ≤ 4·31·128 fit in 16 bits: two registers' per `vpackssdw`
        let mut acc = z;
        for q in 0..2 {
            let sc = _mm512_permutexvar_epi16(self.pick[q], s512);
            let pair = _mm512_packs_epi32(d[2 * q], d[2 * q + 1]);
            acc = crate::simd::dpwssd(acc, pair, sc);
        }
        // SAFETY: the 32 `bsums` bytes (unaligned load).
        let bs = unsafe { _mm256_loadu_si256(y.bsums.as_ptr().cast()) };
        (
            acc,
            _mm256_madd_epi16(bs, _mm256_permutexvar_epi16(self.mins, s16)),
        )
    }

    /// One super-block's float product from its [`Self::sums`]: the reference's combine.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    #[inline]
    unsafe fn combine(d: [u8; 2], dmin: [u8; 2], (acc, mins): (__m512i, __m256i), dy: f32) -> f32 {
        let isc = _mm512_reduce_add_epi32(acc);
        let imin = _mm512_reduce_add_epi32(_mm512_zextsi256_si512(mins));
        dy * (f16c!(d) * isc as f32) - dy * (f16c!(dmin) * imin as f32)
    }

    /// Code register r = 2p + h of a super-block's 128 code bytes `qs`: bytes 64p..64p + 64
    /// (chunks 2p and 2p + 1), their low nibbles (h = 0: sub-blocks 4p, 4p + 2) or high
    /// nibbles (h = 1: sub-blocks 4p + 1, 4p + 3).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    #[inline]
    unsafe fn codes(&self, qs: &[u8; 128], r: usize) -> __m512i {
        // SAFETY: 64 code bytes at 64p (unaligned load).
        let q = unsafe { _mm512_loadu_si512(qs.as_ptr().add(64 * (r / 2)).cast()) };
        let q = if r % 2 == 1 {
            _mm512_srli_epi16(q, 4)
        } else {
            q
        };
        _mm512_and_si512(q, self.m4)
    }

    /// Q5_K's code register r: [`Self::codes`] with 16 added where its sub-blocks' bit of
    /// `qh` (broadcast to both halves in `qh2`) is set.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    #[inline]
    unsafe fn q5_codes(&self, x: &BlockQ5K, qh2: __m512i, r: usize) -> __m512i {
        // SAFETY: same features as this function.
        self.fifth(unsafe { self.codes(&x.qs, r) }, qh2, self.bit[r])
    }

    /// Q5_K's codes `lo` plus 16 where `qh2`'s bit selected by `bit` is set.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    #[inline]
    fn fifth(&self, lo: __m512i, qh2: __m512i, bit: __m512i) -> __m512i {
        let k = _mm512_test_epi8_mask(qh2, bit);
        _mm512_mask_add_epi8(lo, k, lo, self.sixteen)
    }

    /// A Q4_K super-block's [`Self::sums`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    #[inline]
    unsafe fn q4(&self, x: &BlockQ4K, ky: &[__m512i; 4], y: &BlockQ8K) -> (__m512i, __m256i) {
        // SAFETY: same features as this function.
        unsafe { self.sums(&x.scales, |r| self.codes(&x.qs, r), ky, y) }
    }

    /// A Q5_K super-block's [`Self::sums`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    #[inline]
    unsafe fn q5(&self, x: &BlockQ5K, ky: &[__m512i; 4], y: &BlockQ8K) -> (__m512i, __m256i) {
        // SAFETY: the 32 `qh` bytes (unaligned load).
        let qh = unsafe { _mm256_loadu_si256(x.qh.as_ptr().cast()) };
        let qh2 = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(qh), qh);
        // SAFETY: same features as this function.
        unsafe { self.sums(&x.scales, |r| self.q5_codes(x, qh2, r), ky, y) }
    }
}

/// The activations of code registers r = 2p + h ([`K4::codes`]): elements 128p + 32h..+32
/// and 128p + 64 + 32h..+32, side by side. Formed once per super-block for all rows.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
#[inline]
unsafe fn ky(y: &BlockQ8K) -> [__m512i; 4] {
    std::array::from_fn(|r| {
        let o = 128 * (r / 2) + 32 * (r % 2);
        // SAFETY: bytes o..o + 32 and o + 64..o + 96 of the 256 activation bytes.
        unsafe {
            _mm512_inserti64x4::<1>(
                _mm512_castsi256_si512(_mm256_loadu_si256(y.qs.as_ptr().add(o).cast())),
                _mm256_loadu_si256(y.qs.as_ptr().add(o + 64).cast()),
            )
        }
    })
}

/// A K-quant super-block with its two f16 scales (`d`, `dmin`) and its 12 packed 6-bit
/// scale and min bytes.
trait KBlock: bytemuck::Pod {
    fn scales(&self) -> ([u8; 2], [u8; 2]);
    fn packed(&self) -> &[u8; 12];
}
impl KBlock for BlockQ4K {
    fn scales(&self) -> ([u8; 2], [u8; 2]) {
        (self.d, self.dmin)
    }
    fn packed(&self) -> &[u8; 12] {
        &self.scales
    }
}
impl KBlock for BlockQ5K {
    fn scales(&self) -> ([u8; 2], [u8; 2]) {
        (self.d, self.dmin)
    }
    fn packed(&self) -> &[u8; 12] {
        &self.scales
    }
}

/// The body of the multi-row kernels: for four rows at a time (a pass of fewer repeats its
/// first row and does not store the others), each super-block's [`K4::sums`] of every
/// row, both reduced for the four rows at once ([`crate::simd::sums4`]), and the reference's float
/// combine `dy·(d·isc) − dy·(dmin·imin)` and running sum in four f32 lanes, one per row: the
/// same IEEE operations per lane as the one-row kernel's scalar ones, so the same bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
#[inline]
unsafe fn rows4<B: KBlock>(
    rows: &[&[u8]],
    a: &[u8],
    out: &mut [f32],
    sums: impl Fn(&B, &[__m512i; 4], &BlockQ8K) -> (__m512i, __m256i),
) {
    let ys = view::<BlockQ8K>(a);
    let pd = crate::simd::PREFETCH_DISTANCE;
    for (rows, out) in rows.chunks(4).zip(out.chunks_mut(4)) {
        let (mut xs, nb) = crate::simd::row_views::<B>(rows, ys.len());
        for r in rows.len()..4 {
            xs[r] = xs[0];
        }
        let mut s = _mm_setzero_ps();
        for (b, y) in ys[..nb].iter().enumerate() {
            let mut acc = [_mm512_setzero_si512(); 4];
            let mut mins = [_mm512_setzero_si512(); 4];
            let mut h = [0u16; 8];
            // SAFETY: same features as this function.
            let kyb = unsafe { ky(y) };
            for r in 0..4 {
                let x = &xs[r][b];
                if r < rows.len() {
                    crate::simd::prefetch_ahead(std::ptr::from_ref(x).cast(), size_of::<B>(), pd);
                }
                let (ac, mn) = sums(x, &kyb, y);
                acc[r] = ac;
                mins[r] = _mm512_zextsi256_si512(mn);
                let (d, dmin) = x.scales();
                h[r] = u16::from_le_bytes(d);
                h[4 + r] = u16::from_le_bytes(dmin);
            }
            // lane r: row r's sums (exact)
            let isc = crate::simd::sums4(acc[0], acc[1], acc[2], acc[3]);
            let imin = crate::simd::sums4(mins[0], mins[1], mins[2], mins[3]);
            // SAFETY: `h` holds eight u16 (unaligned load).
            let hv = unsafe { _mm_loadu_si128(h.as_ptr().cast()) };
            let (d, dmin) = (_mm_cvtph_ps(hv), _mm_cvtph_ps(_mm_unpackhi_epi64(hv, hv)));
            let dy = _mm_set1_ps(y.d());
            let hi = _mm_mul_ps(dy, _mm_mul_ps(d, _mm_cvtepi32_ps(isc)));
            let lo = _mm_mul_ps(dy, _mm_mul_ps(dmin, _mm_cvtepi32_ps(imin)));
            s = _mm_add_ps(s, _mm_sub_ps(hi, lo));
        }
        let mut o = [0f32; 4];
        // SAFETY: `o` holds four f32 (unaligned store).
        unsafe { _mm_storeu_ps(o.as_mut_ptr(), s) };
        out.copy_from_slice(&o[..out.len()]);
    }
}

/// The body of the one-row kernels: per super-block `sums` ([`K4::sums`] of that type) and
/// the reference's scalar float combine, added in block order.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
#[inline]
unsafe fn one_row<B: KBlock>(
    w: &[u8],
    a: &[u8],
    sums: impl Fn(&B, &[__m512i; 4], &BlockQ8K) -> (__m512i, __m256i),
) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<B>(w).iter().zip(view::<BlockQ8K>(a)) {
        let (d, dmin) = x.scales();
        // SAFETY: same features as this function (twice).
        s += unsafe { K4::combine(d, dmin, sums(x, &ky(y), y), y.d()) };
    }
    s
}

/// Q4_K · Q8_K with AVX-512, one row (see the module docs): the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn dot_q4_k_avx512(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: same features as this function.
    let k = unsafe { K4::new() };
    // SAFETY: same features as this function (twice).
    unsafe { one_row(w, a, |x, ky, y| k.q4(x, ky, y)) }
}

/// Q5_K · Q8_K with AVX-512, one row (see the module docs): the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn dot_q5_k_avx512(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    // SAFETY: same features as this function.
    let k = unsafe { K4::new() };
    // SAFETY: same features as this function (twice).
    unsafe { one_row(w, a, |x, ky, y| k.q5(x, ky, y)) }
}

/// Q4_K · Q8_K, four rows per pass ([`rows4`]), each stream prefetched ahead. Per row the
/// reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn dot_q4_k_avx512_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: same features as this function.
    let k = unsafe { K4::new() };
    // SAFETY: same features as this function (twice).
    unsafe { rows4(rows, a, out, |x, ky, y| k.q4(x, ky, y)) };
}

/// Q5_K · Q8_K, four rows per pass (as [`dot_q4_k_avx512_rows`]). Per row the reference's
/// bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn dot_q5_k_avx512_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: same features as this function.
    let k = unsafe { K4::new() };
    // SAFETY: same features as this function (twice).
    unsafe { rows4(rows, a, out, |x, ky, y| k.q5(x, ky, y)) };
}

/// [`crate::simd::pair_pick`] for the eight sub-block scales as words 0..8 (chunk
/// registers in element order: sub-block 2p in the low half of chunk p, 2p + 1 in the high).
static CHUNK_PAIRS: [[u16; 32]; 2] = crate::simd::pair_pick(1, 0);

impl K4 {
    /// The codes of chunk p (elements 64p..64p + 64) in element order: code bytes
    /// 32p..32p + 32 broadcast to both halves, the low half's low nibbles and the high
    /// half's high nibbles (one `vpsrlvw` and a mask).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    #[inline]
    unsafe fn chunk(&self, qs: &[u8; 128], p: usize) -> __m512i {
        // SAFETY: code bytes 32p..32p + 32 (unaligned load).
        let q = unsafe { _mm512_broadcast_i64x4(_mm256_loadu_si256(qs[32 * p..].as_ptr().cast())) };
        _mm512_and_si512(_mm512_srlv_epi16(q, self.shift), self.m4)
    }

    /// Q5_K's chunk p: [`Self::chunk`] plus 16 where the element's bit of `qh` (broadcast to
    /// both halves in `qh2`) is set.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    #[inline]
    unsafe fn q5_chunk(&self, x: &BlockQ5K, qh2: __m512i, p: usize) -> __m512i {
        // SAFETY: same features as this function.
        self.fifth(unsafe { self.chunk(&x.qs, p) }, qh2, self.chunk_bit[p])
    }
}

/// The four columns' integer sums against a super-block unpacked in element order (`cr`:
/// four 64-element code registers, codes ≤ 63 so that four-element sums fit in 16 bits),
/// for the columns `c < cnt` of `ys` (the others stay 0): per column Σ scale·Σ code·y by
/// `vpdpbusd` per register and [`crate::simd::scale_pairs`] with the pairs' scales `sc`,
/// and the `bsums` against the per-entry coefficients `m` (`vpmaddwd`, 8 lanes); reduced at
/// once ([`crate::simd::sums4`]). Lane c of the three results: column c's scaled sum, its `bsums`
/// term, and its `dy`. The K-quants' and Q6_K's multi-column step.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
#[inline]
pub(super) fn column_sums(
    cr: &[__m512i; 4],
    ys: &[&BlockQ8K; 4],
    cnt: usize,
    sc: &[__m512i; 2],
    m: __m256i,
) -> (__m128i, __m128i, __m128) {
    let z = _mm512_setzero_si512();
    let (mut acc, mut bsum, mut dy) = ([z; 4], [z; 4], [0f32; 4]);
    for c in 0..cnt {
        let y = ys[c];
        let d: [__m512i; 4] = std::array::from_fn(|p| {
            // SAFETY: activation bytes 64p..64p + 64 (unaligned load).
            let yv = unsafe { _mm512_loadu_si512(y.qs[64 * p..].as_ptr().cast()) };
            _mm512_dpbusd_epi32(z, cr[p], yv)
        });
        // SAFETY: the 32 `bsums` bytes (unaligned load).
        let bs = unsafe { _mm256_loadu_si256(y.bsums.as_ptr().cast()) };
        acc[c] = crate::simd::scale_pairs(z, &d, sc);
        bsum[c] = _mm512_zextsi256_si512(_mm256_madd_epi16(bs, m));
        dy[c] = y.d();
    }
    (
        crate::simd::sums4(acc[0], acc[1], acc[2], acc[3]),
        crate::simd::sums4(bsum[0], bsum[1], bsum[2], bsum[3]),
        // SAFETY: `dy` holds four f32 (unaligned load).
        unsafe { _mm_loadu_ps(dy.as_ptr()) },
    )
}

/// The column loop of the K-quant and Q6_K multi-column kernels: up to four activation
/// columns per pass, split by [`crate::simd::column_split`] (so 5 → 3 + 2; a pass of fewer
/// than four computes only those; a call of one column runs `one`, the one-row kernel: the
/// same bits for less than a pass), and per super-block `block(x, ys, cnt)`, the
/// columns' products in four f32 lanes (lane c: column c), added in block order to the
/// running sums.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
#[inline]
pub(super) fn column_passes<B: bytemuck::Pod>(
    w: &[u8],
    acts: &[&[u8]],
    out: &mut [f32],
    one: impl Fn(&[u8]) -> f32,
    block: impl Fn(&B, &[&BlockQ8K; 4], usize) -> __m128,
) {
    let xs = view::<B>(w);
    for r in crate::simd::column_split(acts.len(), 4) {
        let (acts, out) = (&acts[r.clone()], &mut out[r]);
        if acts.len() == 1 {
            out[0] = one(acts[0]);
            continue;
        }
        let ys: [&[BlockQ8K]; 4] =
            std::array::from_fn(|c| view::<BlockQ8K>(acts[c.min(acts.len() - 1)]));
        let nb = ys.iter().fold(xs.len(), |n, y| n.min(y.len()));
        let mut s = _mm_setzero_ps();
        for (b, x) in xs[..nb].iter().enumerate() {
            s = _mm_add_ps(s, block(x, &ys.map(|y| &y[b]), acts.len()));
        }
        let mut o = [0f32; 4];
        // SAFETY: `o` holds four f32 (unaligned store).
        unsafe { _mm_storeu_ps(o.as_mut_ptr(), s) };
        out.copy_from_slice(&o[..out.len()]);
    }
}

/// The body of the multi-column kernels ([`column_passes`]): each super-block's codes
/// unpacked once in element order (`codes`, so the activations load as they are) and its
/// scales once; per column `vpdpbusd` per chunk, [`crate::simd::scale_pairs`] and the
/// mins' `vpmaddwd` ([`column_sums`]); the reference's float combine `dy·(d·isc) −
/// dy·(dmin·imin)` and running sums in four f32 lanes, one per column: the same IEEE
/// operations per lane as the one-row kernel's scalar ones, so the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
#[inline]
unsafe fn k_multi<B: KBlock>(
    k: &K4,
    w: &[u8],
    acts: &[&[u8]],
    out: &mut [f32],
    codes: impl Fn(&B) -> [__m512i; 4],
    one: impl Fn(&[u8]) -> f32,
) {
    column_passes(w, acts, out, one, |x: &B, ys, cnt| {
        let cr = codes(x);
        let u = unpack_scales(x.packed());
        // SAFETY: `u` is 16 bytes (unaligned load).
        let s16 = _mm256_cvtepu8_epi16(unsafe { _mm_loadu_si128(u.as_ptr().cast()) });
        let sc = k
            .chunk_pick
            .map(|t| _mm512_permutexvar_epi16(t, _mm512_castsi256_si512(s16)));
        let mv = _mm256_permutexvar_epi16(k.mins, s16);
        // lane c: column c's sums (exact)
        let (isc, imin, dy) = column_sums(&cr, ys, cnt, &sc, mv);
        let (d, dmin) = x.scales();
        let (d, dmin) = (_mm_set1_ps(f16c!(d)), _mm_set1_ps(f16c!(dmin)));
        let hi = _mm_mul_ps(dy, _mm_mul_ps(d, _mm_cvtepi32_ps(isc)));
        let lo = _mm_mul_ps(dy, _mm_mul_ps(dmin, _mm_cvtepi32_ps(imin)));
        _mm_sub_ps(hi, lo)
    });
}

/// Q4_K · Q8_K against several activation columns ([`k_multi`]): per column the reference's
/// bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn dot_q4_k_avx512_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features as this function.
    let k = unsafe { K4::new() };
    // SAFETY: same features as this function (the closure runs inside it).
    let codes = |x: &BlockQ4K| std::array::from_fn(|p| unsafe { k.chunk(&x.qs, p) });
    // SAFETY: same features as this function.
    // SAFETY: same features as this function (the closure runs inside it).
    let one = |a: &[u8]| unsafe { dot_q4_k_avx512(n, w, a) };
    // SAFETY: same features as this function.
    unsafe { k_multi::<BlockQ4K>(&k, w, acts, out, codes, one) };
}

/// Q5_K · Q8_K against several activation columns ([`k_multi`]): per column the reference's
/// bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn dot_q5_k_avx512_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features as this function.
    let k = unsafe { K4::new() };
    let codes = |x: &BlockQ5K| {
        // SAFETY: the 32 `qh` bytes (unaligned load).
        let qh2 = _mm512_broadcast_i64x4(unsafe { _mm256_loadu_si256(x.qh.as_ptr().cast()) });
        // SAFETY: same features as this function (the closure runs inside it).
        std::array::from_fn(|p| unsafe { k.q5_chunk(x, qh2, p) })
    };
    // SAFETY: same features as this function.
    // SAFETY: same features as this function (the closure runs inside it).
    let one = |a: &[u8]| unsafe { dot_q5_k_avx512(n, w, a) };
    // SAFETY: same features as this function.
    unsafe { k_multi::<BlockQ5K>(&k, w, acts, out, codes, one) };
}
