//! Q8_0 · Q8_0 with AVX-512 (VNNI): the multi-column and the decode (multi-row) kernels.
//! (Its one-row kernel is the AVX2 one: `q8::avx2`.)

use crate::blocks::{view, BlockQ8_0};
use crate::simd::{entry, f16x8};
use std::arch::x86_64::*;

entry!(multi dot_q8_0_avx512_multi_entry => dot_q8_0_avx512_multi);
entry!(rows dot_q8_0_avx512_rows_entry => dot_q8_0_avx512_rows);

/// Q8_0 · Q8_0 against several activation columns, two columns per 512-bit register (lanes
/// 0..8 the first, 8..16 the second) and up to eight per pass: each weight block is loaded,
/// its |x| and sign mask formed once; `vpdpbusd` gives each column eight 4-element integer
/// lane sums, and eight blocks at a time [`combine_pair`] forms the exact block sums and the
/// reference's float combine, so every column gets the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma,f16c")]
unsafe fn dot_q8_0_avx512_multi(_n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    let xs = view::<BlockQ8_0>(w);
    for r in crate::simd::column_split(acts.len(), 8) {
        let (acts, out) = (&acts[r.clone()], &mut out[r]);
        let pairs = acts.len().div_ceil(2);
        let mut ys: [&[BlockQ8_0]; 8] = [&[]; 8];
        for (y, a) in ys.iter_mut().zip(acts) {
            *y = view::<BlockQ8_0>(a);
        }
        // an odd last column is paired with itself; its second half is discarded
        if acts.len() % 2 == 1 {
            ys[acts.len()] = ys[acts.len() - 1];
        }
        let mut s = [0f32; 8];
        for (g, xc) in xs.chunks(8).enumerate() {
            let mut hx = [0u16; 8];
            for (k, x) in xc.iter().enumerate() {
                hx[k] = u16::from_le_bytes(x.d);
            }
            // SAFETY: F16C/AVX are enabled for this function.
            let dx = unsafe { f16x8(&hx) };
            // per pair: the sixteen scale products dw·dy (first column, then second)
            let mut dp = [_mm512_setzero_ps(); 4];
            for (p, d) in dp.iter_mut().enumerate().take(pairs) {
                let half = |y: &[BlockQ8_0]| {
                    let mut hy = [0u16; 8];
                    for (k, yb) in y[8 * g..8 * g + xc.len()].iter().enumerate() {
                        hy[k] = u16::from_le_bytes(yb.d);
                    }
                    // SAFETY: F16C/AVX are enabled for this function.
                    _mm256_mul_ps(dx, unsafe { f16x8(&hy) })
                };
                *d = _mm512_insertf32x8::<1>(
                    _mm512_castps256_ps512(half(ys[2 * p])),
                    half(ys[2 * p + 1]),
                );
            }
            let mut l = [[_mm512_setzero_si512(); 8]; 4];
            for (k, x) in xc.iter().enumerate() {
                // SAFETY: a block's 32 code bytes are readable (unaligned load).
                let qx = unsafe { _mm256_loadu_si256(x.qs.as_ptr().cast()) };
                let xz = _mm512_broadcast_i64x4(qx);
                let ax = _mm512_abs_epi8(xz); // |x| as unsigned (x = −128 → 128)
                let neg = _mm512_movepi8_mask(xz);
                for (p, lp) in l.iter_mut().enumerate().take(pairs) {
                    let b = 8 * g + k;
                    // SAFETY: as above, for the two activation blocks.
                    let yz = unsafe {
                        _mm512_inserti64x4::<1>(
                            _mm512_castsi256_si512(_mm256_loadu_si256(
                                ys[2 * p][b].qs.as_ptr().cast(),
                            )),
                            _mm256_loadu_si256(ys[2 * p + 1][b].qs.as_ptr().cast()),
                        )
                    };
                    // y·sign(x) (where x = 0 the product is 0 either way)
                    let sy = _mm512_mask_sub_epi8(yz, neg, _mm512_setzero_si512(), yz);
                    lp[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ax, sy);
                }
            }
            for p in 0..pairs {
                let (lo, hi) = s.split_at_mut(2 * p + 1);
                combine_pair(&l[p], dp[p], xc.len(), &mut lo[2 * p], &mut hi[0]);
            }
        }
        out.copy_from_slice(&s[..out.len()]);
    }
}

/// The reference's combine of up to eight Q8_0 blocks for the two rows (or columns) of a
/// register pair: `l[k]` holds block k's eight 4-element integer lane sums of the first
/// (lanes 0..8) and the second (lanes 8..16), `d` the scale products dw·dy of blocks 0..8 of
/// the first, then of the second. One transposing tree forms all sixteen exact block sums
/// (lanes 4j..4j+4 of each 128-bit quarter, then the quarters; 21 operations), which are
/// converted, multiplied by `d` and added in block order, `s += Σ_k·d_k` for k < `m`: the
/// reference's operations, so its bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
#[inline]
fn combine_pair(l: &[__m512i; 8], d: __m512, m: usize, s0: &mut f32, s1: &mut f32) {
    // per 128-bit quarter of a and b: [a0 + a2, b0 + b2, a1 + a3, b1 + b3]
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn pairs32(a: __m512i, b: __m512i) -> __m512i {
        _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b))
    }
    // per quarter: the four sources' quarter sums, in order
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn quads(a: __m512i, b: __m512i) -> __m512i {
        _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b))
    }
    let lo = quads(pairs32(l[0], l[1]), pairs32(l[2], l[3]));
    let hi = quads(pairs32(l[4], l[5]), pairs32(l[6], l[7]));
    // [first: blocks 0..4, second: 0..4, first: 4..8, second: 4..8]
    let sums = _mm512_add_epi32(
        _mm512_shuffle_i32x4::<0b10_00_10_00>(lo, hi),
        _mm512_shuffle_i32x4::<0b11_01_11_01>(lo, hi),
    );
    let idx = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15);
    let t = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_permutexvar_epi32(idx, sums)), d);
    let mut tv = [0f32; 16];
    // SAFETY: `tv` has room for 16 f32 (unaligned store).
    unsafe { _mm512_storeu_ps(tv.as_mut_ptr(), t) };
    for k in 0..m {
        *s0 += tv[k];
        *s1 += tv[8 + k];
    }
}

/// The scales of eight consecutive Q8_0 blocks starting at `p` (272 readable bytes) as eight
/// f16 words: the scale of block k is word 17k, so two `vpermt2w` over the group's first
/// and second 128 bytes pick four each, and one blend joins them.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
#[inline]
unsafe fn q8_0_scales8(p: *const u8) -> __m128i {
    const LO: [i16; 32] = {
        let mut t = [0i16; 32];
        let mut k = 0;
        while k < 4 {
            t[k] = 17 * k as i16; // words 0, 17, 34, 51 of bytes 0..128
            t[k + 4] = 17 * (k as i16 + 4) - 64; // words 68, 85, 102, 119, of bytes 128..256
            k += 1;
        }
        t
    };
    // SAFETY: the caller guarantees 272 readable bytes at `p` (unaligned loads); the index
    // table is 64 readable bytes.
    unsafe {
        let idx = _mm512_loadu_si512(LO.as_ptr().cast());
        let a = _mm512_permutex2var_epi16(
            _mm512_loadu_si512(p.cast()),
            idx,
            _mm512_loadu_si512(p.add(64).cast()),
        );
        let b = _mm512_permutex2var_epi16(
            _mm512_loadu_si512(p.add(128).cast()),
            idx,
            _mm512_loadu_si512(p.add(192).cast()),
        );
        _mm_blend_epi16::<0xF0>(_mm512_castsi512_si128(a), _mm512_castsi512_si128(b))
    }
}

/// Q8_0 · Q8_0 for several weight rows against one activation row (decode's matvec), four
/// rows per pass, two per 512-bit register (lanes 0..8 the first row, 8..16 the second):
/// - the weight codes are offset to unsigned (`x ⊕ 0x80 = x + 128`) and `vpdpbusd` against
///   the activation block (in both halves) starts from −128·Σ₄y, shared by all rows, so each
///   lane is the exact 4-element sum Σ x·y of the reference;
/// - eight blocks' scales per row are picked by two `vpermt2w` and converted together;
///   the scale products dw·dy of a group are formed together;
/// - eight blocks at a time [`combine_pair`] forms each row's exact block sums and adds
///   `Σ·dw·dy` in the reference's block order: each result has the reference's bits. An odd
///   last row is paired with itself and its copy discarded.
///
/// About four vector operations per block and row: the weights stream at read bandwidth
/// rather than at the kernel's speed.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma,f16c")]
unsafe fn dot_q8_0_avx512_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    let ys = view::<BlockQ8_0>(a);
    let nb = ys.len();
    let k80 = _mm512_set1_epi8(0x80u8 as i8);
    let zero = _mm512_setzero_si512();
    for (rows, out) in rows.chunks(4).zip(out.chunks_mut(4)) {
        let pairs = rows.len().div_ceil(2);
        let mut xs: [&[BlockQ8_0]; 4] = [&[]; 4];
        for (x, w) in xs.iter_mut().zip(rows) {
            *x = &view::<BlockQ8_0>(w)[..nb];
        }
        // an odd last row is paired with itself; its second half is discarded
        if rows.len() % 2 == 1 {
            xs[rows.len()] = xs[rows.len() - 1];
        }
        let mut s = [0f32; 4];
        let pd = crate::simd::PREFETCH_DISTANCE;
        for g in (0..nb).step_by(8) {
            let m = (nb - g).min(8);
            for x in &xs[..rows.len()] {
                crate::simd::prefetch_ahead(x[g..].as_ptr().cast(), 8 * size_of::<BlockQ8_0>(), pd);
            }
            // the group's eight scales of the activation and of each row, as f16 words
            let scales = |b: &[BlockQ8_0]| -> __m128i {
                if m == 8 {
                    // SAFETY: a whole group of eight blocks (272 bytes) follows.
                    unsafe { q8_0_scales8(b[g..g + 8].as_ptr().cast()) }
                } else {
                    let mut h = [0u16; 8];
                    for (k, blk) in b[g..g + m].iter().enumerate() {
                        h[k] = u16::from_le_bytes(blk.d);
                    }
                    // SAFETY: 16 readable bytes (unaligned load).
                    unsafe { _mm_loadu_si128(h.as_ptr().cast()) }
                }
            };
            let hy = scales(ys);
            let dy = _mm512_cvtph_ps(_mm256_inserti128_si256::<1>(_mm256_castsi128_si256(hy), hy));
            let mut dd = [_mm512_setzero_ps(); 2];
            for (p, d) in dd.iter_mut().enumerate().take(pairs) {
                let hx = _mm256_inserti128_si256::<1>(
                    _mm256_castsi128_si256(scales(xs[2 * p])),
                    scales(xs[2 * p + 1]),
                );
                *d = _mm512_mul_ps(_mm512_cvtph_ps(hx), dy);
            }
            let mut l = [[zero; 8]; 2];
            for k in 0..m {
                let b = g + k;
                // SAFETY: a block's 32 code bytes are readable (unaligned load).
                let yv =
                    _mm512_broadcast_i64x4(unsafe { _mm256_loadu_si256(ys[b].qs.as_ptr().cast()) });
                // −128·Σ₄y: the offset's contribution, removed by starting from it
                let negc = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, k80, yv));
                for (p, lp) in l.iter_mut().enumerate().take(pairs) {
                    // SAFETY: as above, for the two rows' weight blocks.
                    let xv = unsafe {
                        _mm512_inserti64x4::<1>(
                            _mm512_castsi256_si512(_mm256_loadu_si256(
                                xs[2 * p][b].qs.as_ptr().cast(),
                            )),
                            _mm256_loadu_si256(xs[2 * p + 1][b].qs.as_ptr().cast()),
                        )
                    };
                    lp[k] = _mm512_dpbusd_epi32(negc, _mm512_xor_si512(xv, k80), yv);
                }
            }
            for p in 0..pairs {
                let (lo, hi) = s.split_at_mut(2 * p + 1);
                combine_pair(&l[p], dd[p], m, &mut lo[2 * p], &mut hi[0]);
            }
        }
        out.copy_from_slice(&s[..out.len()]);
    }
}
