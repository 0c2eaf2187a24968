//! AVX2 kernels for the weight types dotted with Q8_0 activations (Q8_0, MXFP4, Q2_0), each
//! in the reference's accumulation order, so each returns the reference's bits.

use super::fp4_row::{Fp4Row, SplitRow};
use crate::blocks::{view, BlockMXFP4, BlockQ2_0, BlockQ8_0};
use crate::dot::hsum8;
use crate::grids::KVALUES_MXFP4;
use crate::scalar::e8m0_to_f32_half;
use crate::simd::{entry, f16c, f16x8, hsum_i32x8};
use std::arch::x86_64::*;

entry!(multi
    dot_q8_0_avx2_multi_entry => dot_q8_0_avx2_multi,
    dot_mxfp4_avx2_multi_entry => dot_mxfp4_avx2_multi,
);
entry!(rows
    dot_q8_0_avx2_rows_entry => dot_q8_0_avx2_rows,
    dot_mxfp4_avx2_rows_entry => dot_mxfp4_avx2_rows,
);

entry!(
    dot_q8_0_avx2_entry => dot_q8_0_avx2,
    dot_mxfp4_avx2_entry => dot_mxfp4_avx2,
    dot_q2_0_avx2_entry => dot_q2_0_avx2,
);

/// 8 lanes of integer partial sums of one 32-element int8 × int8 block (lane k =
/// elements 4k..4k+3), via the sign trick, `vpmaddubsw` and `vpmaddwd`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn lanes(qx: __m256i, qy: __m256i) -> __m256 {
    // SAFETY: same features as this function.
    unsafe { lanes_abs(_mm256_sign_epi8(qx, qx), qx, qy) }
}

/// [`lanes`] with |qx| given (`ax`), for a caller that reuses one weight block for several
/// activation blocks.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn lanes_abs(ax: __m256i, qx: __m256i, qy: __m256i) -> __m256 {
    let sy = _mm256_sign_epi8(qy, qx);
    let p16 = _mm256_maddubs_epi16(ax, sy);
    _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)))
}

/// MXFP4 · Q8_0 with AVX2 in the reference's order: codes → int8 through a 16-entry
/// `vpshufb` table, blocks in pairs into two accumulators ([`mxfp4_pair`]), an odd last block
/// in scalar code ([`mxfp4_finish`]).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_mxfp4_avx2(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (xs, ys) = (view::<BlockMXFP4>(w), view::<BlockQ8_0>(a));
    let nb = xs.len().min(ys.len());
    let mut acc = [_mm256_setzero_ps(); 2];
    let pairs = nb / 2;
    let mut d = [0f32; 8];
    for p in 0..pairs {
        if p % 4 == 0 {
            // SAFETY: same features as this function.
            d = unsafe { mxfp4_dy8(ys, 2 * p, 2 * pairs) };
        }
        // SAFETY: same features as this function.
        unsafe { mxfp4_pair(&xs, 2 * p, &ys[2 * p..2 * p + 2], &d, &mut acc) };
    }
    // SAFETY: same features as this function.
    unsafe { mxfp4_finish(acc, &xs, nb, ys, pairs) }
}

/// MXFP4 · Q8_0 for several weight rows against one activation row, four rows per pass:
/// [`mxfp4_pair`] for each row's next two blocks in turn (four weight streams in flight,
/// each prefetched [`crate::simd::PREFETCH_DISTANCE`] bytes ahead), the activation scales
/// converted once for the four rows. Per row [`dot_mxfp4_avx2`]'s operations and order: the
/// reference's bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_mxfp4_avx2_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    let ys = view::<BlockQ8_0>(a);
    for (rows, out) in rows.chunks(4).zip(out.chunks_mut(4)) {
        let xs: [&[BlockMXFP4]; 4] =
            std::array::from_fn(|r| view::<BlockMXFP4>(rows.get(r).copied().unwrap_or(&[])));
        // SAFETY: same features as this function.
        unsafe { mxfp4_rows_of(&xs[..rows.len()], ys, out) };
    }
}

/// [`dot_mxfp4_avx2_rows`] on rows in the official FP4 layout (`(codes, scales)` pairs: see
/// [`crate::simd::SplitRowsDotFn`]): the same steps, each block's even and odd values
/// interleaved back into element order ([`mxfp4_decode`]); per row the reference's bits on
/// the row converted to MXFP4.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_fp4_split_avx2_rows(_n: usize, rows: &[(&[u8], &[u8])], a: &[u8], out: &mut [f32]) {
    let ys = view::<BlockQ8_0>(a);
    for (rows, out) in rows.chunks(4).zip(out.chunks_mut(4)) {
        let xs: [SplitRow; 4] =
            std::array::from_fn(|r| rows.get(r).copied().unwrap_or((&[], &[])).into());
        // SAFETY: same features as this function.
        unsafe { mxfp4_rows_of(&xs[..rows.len()], ys, out) };
    }
}

/// [`dot_mxfp4_avx2_multi`] on one row in the official FP4 layout (see
/// [`dot_fp4_split_avx2_rows`]).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_fp4_split_avx2_multi(
    _n: usize,
    codes: &[u8],
    scales: &[u8],
    acts: &[&[u8]],
    out: &mut [f32],
) {
    // SAFETY: same features as this function.
    unsafe { mxfp4_multi_of(SplitRow { codes, scales }, acts, out) }
}

crate::simd::entry!(split_rows dot_fp4_split_avx2_rows_entry => dot_fp4_split_avx2_rows);
crate::simd::entry!(split_multi dot_fp4_split_avx2_multi_entry => dot_fp4_split_avx2_multi);

/// The multi-row kernel on up to four rows `xs` (see [`dot_mxfp4_avx2_rows`]).
///
/// # Safety
/// The CPU must have the enabled features.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn mxfp4_rows_of<R: Fp4Row>(xs: &[R], ys: &[BlockQ8_0], out: &mut [f32]) {
    let pd = crate::simd::PREFETCH_DISTANCE;
    let nb = xs.iter().fold(ys.len(), |n, x| n.min(x.nb()));
    let mut acc = [[_mm256_setzero_ps(); 2]; 4];
    let pairs = nb / 2;
    let mut d = [0f32; 8];
    for p in 0..pairs {
        if p % 4 == 0 {
            // SAFETY: same features as this function.
            d = unsafe { mxfp4_dy8(ys, 2 * p, 2 * pairs) };
        }
        for (x, acc) in xs.iter().zip(acc.iter_mut()) {
            crate::simd::prefetch_ahead(x.codes_at(2 * p), 2 * R::CODE_BYTES, pd);
            // SAFETY: same features as this function.
            unsafe { mxfp4_pair(x, 2 * p, &ys[2 * p..2 * p + 2], &d, acc) };
        }
    }
    for ((x, acc), o) in xs.iter().zip(acc).zip(out.iter_mut()) {
        // SAFETY: same features as this function.
        *o = unsafe { mxfp4_finish(acc, x, nb, ys, pairs) };
    }
}

/// MXFP4 · Q8_0 for several activation columns: each pair of weight blocks is decoded once
/// for up to eight columns, which then take [`mxfp4_pair`]'s steps on it — per column
/// [`dot_mxfp4_avx2`]'s operations and order, the reference's bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_mxfp4_avx2_multi(_n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features as this function.
    unsafe { mxfp4_multi_of(view::<BlockMXFP4>(w), acts, out) }
}

/// The multi-column kernel on row `x` (see [`dot_mxfp4_avx2_multi`]).
///
/// # Safety
/// The CPU must have the enabled features.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn mxfp4_multi_of<R: Fp4Row>(x: R, acts: &[&[u8]], out: &mut [f32]) {
    let nb = x.nb();
    for r in crate::simd::column_split(acts.len(), 8) {
        let (acts, out) = (&acts[r.clone()], &mut out[r]);
        let mut ys: [&[BlockQ8_0]; 8] = [&[]; 8];
        for (y, a) in ys.iter_mut().zip(acts) {
            *y = view::<BlockQ8_0>(a);
            assert!(y.len() >= nb, "activation row shorter than the weight row");
        }
        let ys = &ys[..acts.len()];
        let mut acc = [[_mm256_setzero_ps(); 2]; 8];
        let pairs = nb / 2;
        for p in 0..pairs {
            let ib = 2 * p;
            // SAFETY: same features as this function.
            let codes = unsafe { [mxfp4_decode(&x, ib), mxfp4_decode(&x, ib + 1)] };
            // |codes| once for all columns
            let abs = codes.map(|c| _mm256_sign_epi8(c, c));
            let (e0, e1) = (
                e8m0_to_f32_half(x.scale(ib)),
                e8m0_to_f32_half(x.scale(ib + 1)),
            );
            for (y, acc) in ys.iter().zip(acc.iter_mut()) {
                for (k, ((w, a), e)) in codes.iter().zip(abs).zip([e0, e1]).enumerate() {
                    let yb = &y[ib + k];
                    // SAFETY: 32 activation code bytes per block (unaligned load).
                    let qy = unsafe { _mm256_loadu_si256(yb.qs.as_ptr().cast()) };
                    // SAFETY: same features as this function.
                    let l = unsafe { lanes_abs(a, *w, qy) };
                    let dk = _mm256_set1_ps(f16c!(yb.d) * e);
                    acc[k] = _mm256_fmadd_ps(dk, l, acc[k]);
                }
            }
        }
        for ((y, acc), o) in ys.iter().zip(acc).zip(out.iter_mut()) {
            // SAFETY: same features as this function.
            *o = unsafe { mxfp4_finish(acc, &x, nb, y, pairs) };
        }
    }
}

/// The 32 codes of block `b` of `x` as int8 values (elements 0..15, then 16..31): the low and
/// high nibbles through the value table, and for the official layout (low nibble = even
/// element) interleaved back into element order.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn mxfp4_decode<R: Fp4Row>(x: &R, b: usize) -> __m256i {
    // SAFETY: KVALUES_MXFP4 has 16 bytes, a block 16 code bytes (unaligned loads).
    let (table, q) = unsafe {
        (
            _mm_loadu_si128(KVALUES_MXFP4.as_ptr().cast()),
            _mm_loadu_si128(x.codes16(b).as_ptr().cast()),
        )
    };
    let m4 = _mm_set1_epi8(0x0F);
    let lo = _mm_shuffle_epi8(table, _mm_and_si128(q, m4));
    let hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(q, 4), m4));
    if R::OFFICIAL {
        _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi))
    } else {
        _mm256_set_m128i(hi, lo)
    }
}

/// The activation scales of blocks `at..min(at + 8, end)` as f32 (the rest 0), converted
/// together.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn mxfp4_dy8(ys: &[BlockQ8_0], at: usize, end: usize) -> [f32; 8] {
    let mut hy = [0u16; 8];
    for (h, y) in hy.iter_mut().zip(&ys[at..(at + 8).min(end)]) {
        *h = u16::from_le_bytes(y.d);
    }
    let mut d = [0f32; 8];
    // SAFETY: F16C/AVX are enabled for this function; `d` has room for 8 f32.
    unsafe { _mm256_storeu_ps(d.as_mut_ptr(), f16x8(&hy)) };
    d
}

/// Blocks `ib` and `ib + 1` of row `x` (`ys`: the activation pair) into the two
/// accumulators: lane sums of the codes by the activations, times `dy·2^(e−128)` (`d`: the
/// scales of the eight blocks from a multiple of eight containing `ib`), fused into
/// accumulator `k` for block `ib + k`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn mxfp4_pair<R: Fp4Row>(
    x: &R,
    ib: usize,
    ys: &[BlockQ8_0],
    d: &[f32; 8],
    acc: &mut [__m256; 2],
) {
    for (k, y) in ys.iter().enumerate().take(2) {
        // SAFETY: 32 activation code bytes per block (unaligned load); the features of this
        // function cover the helpers.
        let l = unsafe {
            lanes(
                mxfp4_decode(x, ib + k),
                _mm256_loadu_si256(y.qs.as_ptr().cast()),
            )
        };
        let dk = _mm256_set1_ps(d[(ib + k) % 8] * e8m0_to_f32_half(x.scale(ib + k)));
        acc[k] = _mm256_fmadd_ps(dk, l, acc[k]);
    }
}

/// The reference's end: the two accumulators' lanes added, then in the fixed tree, then the
/// odd last block of the row's first `nb` (`2·pairs..nb`) in scalar code.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn mxfp4_finish<R: Fp4Row>(
    acc: [__m256; 2],
    x: &R,
    nb: usize,
    ys: &[BlockQ8_0],
    pairs: usize,
) -> f32 {
    let mut l1 = [0f32; 8];
    let mut l2 = [0f32; 8];
    // SAFETY: room for 8 f32 each.
    unsafe {
        _mm256_storeu_ps(l1.as_mut_ptr(), acc[0]);
        _mm256_storeu_ps(l2.as_mut_ptr(), acc[1]);
    }
    let sum: [f32; 8] = std::array::from_fn(|k| l1[k] + l2[k]);
    let mut s = hsum8(&sum);
    for ib in 2 * pairs..nb {
        s += crate::dot::mxfp4_block(&x.block(ib), &ys[ib]);
    }
    s
}

/// The reference's combine of up to eight Q8_0 blocks: `p[k]` holds block k's eight 4-element
/// integer lane sums and `d` its scale products dw·dy; the exact block sums (one transposing
/// `vphaddd` tree, [`hsum_i32x8`]) are converted, multiplied by `d` and added to `s` in block
/// order, `s += Σ_k·d_k` for k < `m`: the reference's operations, so its bits.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn combine8(p: &[__m256i; 8], d: __m256, m: usize, s: &mut f32) {
    let t = _mm256_mul_ps(_mm256_cvtepi32_ps(hsum_i32x8(p)), d);
    let mut tv = [0f32; 8];
    // SAFETY: `tv` has room for 8 f32 (unaligned store).
    unsafe { _mm256_storeu_ps(tv.as_mut_ptr(), t) };
    for &v in &tv[..m] {
        *s += v;
    }
}

/// 8 lanes of integer 4-element sums of a Q8_0 weight block against an activation block (sign
/// trick, `vpmaddubsw`, `vpmaddwd`), with |x| given.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn q8_lanes(ax: __m256i, qx: __m256i, qy: __m256i) -> __m256i {
    let p16 = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(qy, qx)); // pairs, ≤ 2·128·127 < 2^15
    _mm256_madd_epi16(p16, _mm256_set1_epi16(1)) // lane k = Σ bytes 4k..4k+3
}

/// Q8_0 · Q8_0 with AVX2: per block the 8 lanes of 4-byte integer partial sums (sign trick +
/// `vpmaddubsw` + `vpmaddwd`); eight blocks at a time their exact sums and the reference's
/// float combine ([`combine8`]): the reference's bits exactly.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q8_0_avx2(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let xs = view::<BlockQ8_0>(w);
    let ys = view::<BlockQ8_0>(a);
    let mut s = 0f32;
    for (xc, yc) in xs.chunks(8).zip(ys.chunks(8)) {
        // the eight blocks' scale products dw·dy, converted together
        let (mut hx, mut hy) = ([0u16; 8], [0u16; 8]);
        for (k, (x, y)) in xc.iter().zip(yc).enumerate() {
            hx[k] = u16::from_le_bytes(x.d);
            hy[k] = u16::from_le_bytes(y.d);
        }
        // SAFETY: F16C/AVX are enabled for this function.
        let d = unsafe { _mm256_mul_ps(f16x8(&hx), f16x8(&hy)) };
        let mut p = [_mm256_setzero_si256(); 8];
        for ((x, y), pk) in xc.iter().zip(yc).zip(p.iter_mut()) {
            // SAFETY: each block's 32 code bytes are readable (blocks are 34 bytes, alignment
            // 1; unaligned loads).
            let (qx, qy) = unsafe {
                (
                    _mm256_loadu_si256(x.qs.as_ptr().cast()),
                    _mm256_loadu_si256(y.qs.as_ptr().cast()),
                )
            };
            // |x| as unsigned (x = −128 → 128)
            *pk = q8_lanes(_mm256_sign_epi8(qx, qx), qx, qy);
        }
        combine8(&p, d, xc.len(), &mut s);
    }
    s
}

/// Q8_0 · Q8_0 against several activation columns, four at a time: each weight block is
/// loaded, its |x| formed and its scale converted once for all four columns. Per column the
/// operations and their order are [`dot_q8_0_avx2`]'s, so each result is the reference's bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q8_0_avx2_multi(_n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    let xs = view::<BlockQ8_0>(w);
    for r in crate::simd::column_split(acts.len(), 4) {
        let (acts, out) = (&acts[r.clone()], &mut out[r]);
        let mut ys: [&[BlockQ8_0]; 4] = [&[]; 4];
        for (y, a) in ys.iter_mut().zip(acts) {
            *y = view::<BlockQ8_0>(a);
        }
        let ys = &ys[..acts.len()];
        let mut s = [0f32; 4];
        for (g, xc) in xs.chunks(8).enumerate() {
            let mut hx = [0u16; 8];
            for (k, x) in xc.iter().enumerate() {
                hx[k] = u16::from_le_bytes(x.d);
            }
            // SAFETY: F16C/AVX are enabled for this function.
            let dx = unsafe { f16x8(&hx) };
            let mut p = [[_mm256_setzero_si256(); 8]; 4];
            for (k, x) in xc.iter().enumerate() {
                // SAFETY: a block's 32 code bytes are readable (unaligned load).
                let qx = unsafe { _mm256_loadu_si256(x.qs.as_ptr().cast()) };
                let ax = _mm256_sign_epi8(qx, qx);
                for (c, y) in ys.iter().enumerate() {
                    // SAFETY: as above, for the activation block.
                    let qy = unsafe { _mm256_loadu_si256(y[8 * g + k].qs.as_ptr().cast()) };
                    p[c][k] = q8_lanes(ax, qx, qy);
                }
            }
            for (c, y) in ys.iter().enumerate() {
                let mut hy = [0u16; 8];
                for (k, yb) in y[8 * g..8 * g + xc.len()].iter().enumerate() {
                    hy[k] = u16::from_le_bytes(yb.d);
                }
                // SAFETY: as above.
                let d = _mm256_mul_ps(dx, unsafe { f16x8(&hy) });
                combine8(&p[c], d, xc.len(), &mut s[c]);
            }
        }
        out.copy_from_slice(&s[..out.len()]);
    }
}

/// Q8_0 · Q8_0 for several weight rows against one activation row, four rows at a time:
/// each activation block is loaded and its scale converted once for all four rows, and the
/// four rows' chains are independent, so four weight streams are in flight (a one-row
/// matvec waits on one stream and one chain; four run at the read bandwidth). Per row the
/// operations and their order are [`dot_q8_0_avx2`]'s, so each result is the reference's bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q8_0_avx2_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    let ys = view::<BlockQ8_0>(a);
    for (rows, out) in rows.chunks(4).zip(out.chunks_mut(4)) {
        let mut xs: [&[BlockQ8_0]; 4] = [&[]; 4];
        for (x, w) in xs.iter_mut().zip(rows) {
            *x = view::<BlockQ8_0>(w);
        }
        let xs = &xs[..rows.len()];
        let mut s = [0f32; 4];
        let pd = crate::simd::PREFETCH_DISTANCE;
        for (g, yc) in ys.chunks(8).enumerate() {
            for x in xs {
                crate::simd::prefetch_ahead(
                    x.as_ptr().wrapping_add(8 * g).cast(),
                    8 * size_of::<BlockQ8_0>(),
                    pd,
                );
            }
            let mut hy = [0u16; 8];
            for (k, y) in yc.iter().enumerate() {
                hy[k] = u16::from_le_bytes(y.d);
            }
            // SAFETY: F16C/AVX are enabled for this function.
            let dy = unsafe { f16x8(&hy) };
            let mut p = [[_mm256_setzero_si256(); 8]; 4];
            for (k, y) in yc.iter().enumerate() {
                // SAFETY: a block's 32 code bytes are readable (unaligned load).
                let qy = unsafe { _mm256_loadu_si256(y.qs.as_ptr().cast()) };
                for (r, x) in xs.iter().enumerate() {
                    // SAFETY: as above, for the weight block.
                    let qx = unsafe { _mm256_loadu_si256(x[8 * g + k].qs.as_ptr().cast()) };
                    p[r][k] = q8_lanes(_mm256_sign_epi8(qx, qx), qx, qy);
                }
            }
            for (r, x) in xs.iter().enumerate() {
                let mut hx = [0u16; 8];
                for (k, xb) in x[8 * g..8 * g + yc.len()].iter().enumerate() {
                    hx[k] = u16::from_le_bytes(xb.d);
                }
                // SAFETY: as above.
                let d = _mm256_mul_ps(unsafe { f16x8(&hx) }, dy);
                combine8(&p[r], d, yc.len(), &mut s[r]);
            }
        }
        out.copy_from_slice(&s[..out.len()]);
    }
}

/// Q2_0 · Q8_0 with AVX2. Byte `b` of a block holds the 2-bit codes of elements 4b..4b+3.
/// For each 32-element half, `vpshufb` copies bytes so that 32-bit lane `k` holds four code
/// bytes, `vpsrlvd` shifts lane `k` by 2k and a mask keeps codes 0..3 (unsigned for
/// `vpmaddubsw`); the activations get the matching 4×4 byte transpose. Σ (c−1)·y is then
/// exact integer arithmetic and the float combine is the reference's: the reference's bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q2_0_avx2(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let ys = view::<BlockQ8_0>(a);
    let ones16 = _mm256_set1_epi16(1);
    let ones8 = _mm256_set1_epi8(1);
    let m2 = _mm256_set1_epi8(3);
    let shifts = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
    let sel = |h: usize| {
        // lane 0: bytes 8h..8h+4 four times; lane 1: bytes 8h+4..8h+8 four times
        let idx: [u8; 32] = std::array::from_fn(|i| (8 * h + 4 * (i / 16) + i % 4) as u8);
        // SAFETY: 32 readable bytes (unaligned load).
        unsafe { _mm256_loadu_si256(idx.as_ptr().cast()) }
    };
    let sel = [sel(0), sel(1)];
    let transpose = _mm256_setr_epi8(
        0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10,
        14, 3, 7, 11, 15,
    );
    let xs = view::<BlockQ2_0>(w);
    let mut s = 0f32;
    for (xc, yc) in xs.chunks(8).zip(ys.chunks(16)) {
        // the scales of up to eight weight blocks and their sixteen activation blocks
        let (mut hx, mut hy0, mut hy1) = ([0u16; 8], [0u16; 8], [0u16; 8]);
        for (k, x) in xc.iter().enumerate() {
            hx[k] = u16::from_le_bytes(x.d);
            hy0[k] = u16::from_le_bytes(yc[2 * k].d);
            hy1[k] = u16::from_le_bytes(yc[2 * k + 1].d);
        }
        let (mut dx, mut dy0, mut dy1) = ([0f32; 8], [0f32; 8], [0f32; 8]);
        // SAFETY: F16C/AVX are enabled for this function; each array has room for 8 f32.
        unsafe {
            _mm256_storeu_ps(dx.as_mut_ptr(), f16x8(&hx));
            _mm256_storeu_ps(dy0.as_mut_ptr(), f16x8(&hy0));
            _mm256_storeu_ps(dy1.as_mut_ptr(), f16x8(&hy1));
        }
        // Σ (c − 1)·y of each 32-element half, as 8 lanes per half, then reduced 8 at a time
        let mut lanes = [_mm256_setzero_si256(); 16];
        for (k, (x, y)) in xc.iter().zip(yc.chunks_exact(2)).enumerate() {
            // SAFETY: a block has 16 code bytes (unaligned load).
            let q = _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(x.qs.as_ptr().cast()) });
            for h in 0..2 {
                let c = _mm256_and_si256(
                    _mm256_srlv_epi32(_mm256_shuffle_epi8(q, sel[h]), shifts),
                    m2,
                );
                // SAFETY: an activation block has 32 code bytes (unaligned load).
                let yv = unsafe { _mm256_loadu_si256(y[h].qs.as_ptr().cast()) };
                let yt = _mm256_shuffle_epi8(yv, transpose);
                // (c − 1)·y summed in pairs: |pair| ≤ 2·2·128, no i16 overflow
                let p =
                    _mm256_sub_epi16(_mm256_maddubs_epi16(c, yt), _mm256_maddubs_epi16(ones8, yt));
                lanes[8 * h + k] = _mm256_madd_epi16(p, ones16);
            }
        }
        // per block dx·(dy0·Σ0 + dy1·Σ1), eight blocks at once with the reference's separate
        // roundings (no FMA), then summed in block order like the reference
        // SAFETY: AVX2/F16C are enabled for this function; the arrays hold 8 values each.
        let v = unsafe {
            let i0 = _mm256_cvtepi32_ps(hsum_i32x8(lanes[..8].try_into().expect("8 vectors")));
            let i1 = _mm256_cvtepi32_ps(hsum_i32x8(lanes[8..].try_into().expect("8 vectors")));
            let inner = _mm256_add_ps(
                _mm256_mul_ps(_mm256_loadu_ps(dy0.as_ptr()), i0),
                _mm256_mul_ps(_mm256_loadu_ps(dy1.as_ptr()), i1),
            );
            let mut v = [0f32; 8];
            _mm256_storeu_ps(
                v.as_mut_ptr(),
                _mm256_mul_ps(_mm256_loadu_ps(dx.as_ptr()), inner),
            );
            v
        };
        for vk in &v[..xc.len()] {
            s += vk;
        }
    }
    s
}
