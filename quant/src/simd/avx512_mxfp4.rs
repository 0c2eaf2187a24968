//! AVX-512 multi-row and multi-column MXFP4 · Q8_0 kernels (decode's matvec and prompt
//! chunks for FP4 experts; the multi-column kernel swaps the roles of rows and columns, see
//! [`dot_mxfp4_avx512_multi`]).
//!
//! Four weight rows share one 512-bit register: 128-bit lane r holds row r's 16 code bytes
//! of the current block. One `vpermb` each turns the low nibbles (elements 0..15) and the
//! 16-bit-shifted high ones (16..31) into the E2M1 values (a table repeated every 16 bytes,
//! so the bits above the nibble need no mask), stored
//! as `value + 12` so that they are unsigned for `vpdpbusd`; the activation halves are
//! broadcast to all four lanes and `vpdpbusd` starts from −12·Σ₄y (formed once per block for
//! the four rows), so each 32-bit lane is the exact 4-element sum of the reference's
//! [`crate::dot::dot_mxfp4`] lane. Its lanes 0..3 come from the low half and 4..7 from the
//! high half; the FMAs by `dy·2^(e−128)` run in the reference's two accumulators (even and odd
//! blocks), then its lane sum, [`crate::dot::hsum8`] and scalar last odd block: the
//! reference's bits. The scales of eight blocks of the four rows are formed together in
//! vectors ([`dx8`]; in cache 2.20–2.54 → 1.67–1.93 µs per four 4096-element rows against
//! per-block scalar scales, three alternating pairs).

use super::f16c;
use crate::blocks::{view, BlockMXFP4, BlockQ8_0};
use crate::grids::KVALUES_MXFP4;
use crate::scalar::e8m0_to_f32_half;
use std::arch::x86_64::*;

super::entry!(rows dot_mxfp4_avx512_rows_entry => dot_mxfp4_avx512_rows);
super::entry!(multi dot_mxfp4_avx512_multi_entry => dot_mxfp4_avx512_multi);

/// The MXFP4 values plus 12 (0..=24), so that `vpdpbusd` can take them as unsigned bytes.
static KVALUES_MXFP4_U12: [u8; 16] = {
    let mut t = [0u8; 16];
    let mut i = 0;
    while i < 16 {
        t[i] = (KVALUES_MXFP4[i] + 12) as u8;
        i += 1;
    }
    t
};

/// The kernels' constants, in registers.
struct Fp4 {
    table: __m512i,
    twelve: __m512i,
}

impl Fp4 {
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,avx512dq,avx2,fma,f16c"
    )]
    #[inline]
    fn new() -> Fp4 {
        // SAFETY: the table is 16 bytes (unaligned load).
        let t = unsafe { _mm_loadu_si128(KVALUES_MXFP4_U12.as_ptr().cast()) };
        Fp4 {
            table: _mm512_broadcast_i32x4(t),
            twelve: _mm512_set1_epi8(12),
        }
    }

    /// One block's exact 4-element sums in f32, per 128-bit lane: the codes `q` (16 bytes
    /// per lane) against the activation halves `ylo` (elements 0..15) and `yhi` (16..31) of
    /// the same lane; `vpdpbusd` starts from −12·Σ₄y, the offset of the stored values.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,avx512dq,avx2,fma,f16c"
    )]
    #[inline]
    fn lanes(&self, q: __m512i, ylo: __m512i, yhi: __m512i) -> (__m512, __m512) {
        let zero = _mm512_setzero_si512();
        let neg_lo = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, self.twelve, ylo));
        let neg_hi = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, self.twelve, yhi));
        // `vpermb` reads an index's low six bits and the table repeats every 16 bytes, so
        // neither nibble needs a mask: bits 4–5 pick an identical copy, 6–7 are ignored
        let lo = _mm512_permutexvar_epi8(q, self.table);
        let hi = _mm512_permutexvar_epi8(_mm512_srli_epi16(q, 4), self.table);
        (
            _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(neg_lo, lo, ylo)),
            _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(neg_hi, hi, yhi)),
        )
    }

    /// Block `b` of four rows (`xs`, one per 128-bit lane) against activation block `y`:
    /// the per-lane scales `d_r = dy·2^(e−128)` (from the group's [`dx8`] registers `sc.0`
    /// with the pick indices `sc.1` for blocks below `sc.2`, else in scalar) and the two
    /// halves' exact 4-element sums from [`Self::lanes`].
    ///
    /// # Safety
    /// The CPU must have the enabled features; every row must have block `b`.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,avx512dq,avx2,fma,f16c"
    )]
    #[inline]
    unsafe fn block(
        &self,
        xs: &[&[BlockMXFP4]; 4],
        y: &BlockQ8_0,
        b: usize,
        sc: (&[__m512; 2], &[__m512i; 8], usize),
    ) -> (__m512, __m512, __m512) {
        let (dx, pick, grouped) = sc;
        // SAFETY: 32 activation code bytes, 16 per half, and 16 code bytes per weight block
        // (unaligned loads).
        let (ylo, yhi, q) = unsafe {
            let q = _mm512_castsi128_si512(_mm_loadu_si128(xs[0][b].qs.as_ptr().cast()));
            let q = _mm512_inserti32x4::<1>(q, _mm_loadu_si128(xs[1][b].qs.as_ptr().cast()));
            let q = _mm512_inserti32x4::<2>(q, _mm_loadu_si128(xs[2][b].qs.as_ptr().cast()));
            (
                _mm512_broadcast_i32x4(_mm_loadu_si128(y.qs.as_ptr().cast())),
                _mm512_broadcast_i32x4(_mm_loadu_si128(y.qs[16..].as_ptr().cast())),
                _mm512_inserti32x4::<3>(q, _mm_loadu_si128(xs[3][b].qs.as_ptr().cast())),
            )
        };
        let (l_lo, l_hi) = self.lanes(q, ylo, yhi);
        let dy = f16c!(y.d);
        // d_r = dy·2^(e−128): the reference's one f32 product either way
        let d = if b < grouped {
            _mm512_mul_ps(
                _mm512_permutex2var_ps(dx[0], pick[b % 8], dx[1]),
                _mm512_set1_ps(dy),
            )
        } else {
            let d4 = _mm_setr_ps(
                dy * e8m0_to_f32_half(xs[0][b].e),
                dy * e8m0_to_f32_half(xs[1][b].e),
                dy * e8m0_to_f32_half(xs[2][b].e),
                dy * e8m0_to_f32_half(xs[3][b].e),
            );
            // 128-bit lane r of the four per-row scales: lane r's four floats are d_r
            let spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
            _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(d4))
        };
        (d, l_lo, l_hi)
    }
}

/// The reference's eight lane sums `acc1[k] + acc2[k]` of 128-bit lane `g` from the two
/// accumulator pairs (even and odd blocks; low half: lanes 0..3, high half: 4..7).
fn lane_sums(lanes: &[[[f32; 16]; 2]; 2], g: usize) -> [f32; 8] {
    std::array::from_fn(|k| {
        let (h, e) = (k / 4, 4 * g + k % 4);
        lanes[0][h][e] + lanes[1][h][e]
    })
}

/// Stores the accumulators for [`lane_sums`].
#[target_feature(enable = "avx512f")]
#[inline]
fn store_acc(acc: &[[__m512; 2]; 2]) -> [[[f32; 16]; 2]; 2] {
    let mut lanes = [[[0f32; 16]; 2]; 2];
    for (lp, ap) in lanes.iter_mut().zip(acc) {
        for (l, a) in lp.iter_mut().zip(ap) {
            // SAFETY: `l` holds 16 f32 (unaligned store).
            unsafe { _mm512_storeu_ps(l.as_mut_ptr(), *a) };
        }
    }
    lanes
}

/// MXFP4 · Q8_0 for several weight rows against one activation row, four rows per pass (see
/// the module docs). A pass of fewer than four rows repeats its first row in the other lanes
/// and does not store them. Per row the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,avx512dq,avx2,fma,f16c")]
unsafe fn dot_mxfp4_avx512_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    let ys = view::<BlockQ8_0>(a);
    let k4 = Fp4::new();
    // block k of a group of eight: lane 4r..4r+3 takes row r's scale from [`dx8`]'s pair
    let pick: [__m512i; 8] = std::array::from_fn(|k| {
        let v: [i32; 16] = std::array::from_fn(|l| (16 * (l / 8) + 8 * (l / 4 % 2) + k) as i32);
        // SAFETY: 64 readable bytes (unaligned load).
        unsafe { _mm512_loadu_si512(v.as_ptr().cast()) }
    });
    let pd = super::prefetch_distance();
    for (rows, out) in rows.chunks(4).zip(out.chunks_mut(4)) {
        let mut xs: [&[BlockMXFP4]; 4] = [&[]; 4];
        let mut nb = ys.len();
        for (x, w) in xs.iter_mut().zip(rows) {
            *x = view::<BlockMXFP4>(w);
            nb = nb.min(x.len());
        }
        for r in rows.len()..4 {
            xs[r] = xs[0];
        }
        // [parity][half]: even / odd blocks (the reference's acc1 / acc2), lanes 0..3 / 4..7
        let paired = nb / 2 * 2;
        // blocks in whole groups of eight take their scales from `dx8`, the rest in scalar
        let grouped = paired / 8 * 8;
        let mut dx = [_mm512_setzero_ps(); 2];
        // two blocks per step, so that both parities' accumulators stay in registers
        let (mut e_lo, mut e_hi, mut o_lo, mut o_hi) = (
            _mm512_setzero_ps(),
            _mm512_setzero_ps(),
            _mm512_setzero_ps(),
            _mm512_setzero_ps(),
        );
        for b in (0..paired).step_by(2) {
            if b % 8 == 0 && b < grouped {
                // SAFETY: same features as this function; every row has blocks b..b + 8.
                dx = unsafe { dx8(&xs, b) };
            }
            if b % 4 == 0 {
                for x in &xs[..rows.len()] {
                    super::prefetch_ahead(x[b..].as_ptr().cast(), 4 * size_of::<BlockMXFP4>(), pd);
                }
            }
            let sc = (&dx, &pick, grouped);
            // SAFETY: same features as this function; every row has blocks b and b + 1.
            let (d, l_lo, l_hi) = unsafe { k4.block(&xs, &ys[b], b, sc) };
            e_lo = _mm512_fmadd_ps(d, l_lo, e_lo);
            e_hi = _mm512_fmadd_ps(d, l_hi, e_hi);
            // SAFETY: as above.
            let (d, l_lo, l_hi) = unsafe { k4.block(&xs, &ys[b + 1], b + 1, sc) };
            o_lo = _mm512_fmadd_ps(d, l_lo, o_lo);
            o_hi = _mm512_fmadd_ps(d, l_hi, o_hi);
        }
        let acc = [[e_lo, e_hi], [o_lo, o_hi]];
        let lanes = store_acc(&acc);
        for (r, o) in out.iter_mut().enumerate() {
            let mut s = crate::dot::hsum8(&lane_sums(&lanes, r));
            if nb % 2 == 1 {
                s += crate::dot::mxfp4_block(&xs[r][nb - 1], &ys[nb - 1]);
            }
            *o = s;
        }
    }
}

/// `vpermt2b` indices of the E8M0 bytes of eight consecutive blocks (17 bytes apart, all
/// within the first 128 bytes) into bytes 0..8.
static E_PICK: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut k = 0;
    while k < 8 {
        t[k] = (17 * k) as u8;
        k += 1;
    }
    t
};

/// The E8M0 scales `2^(e−128)` (as [`e8m0_to_f32_half`], subnormal cases included) of blocks
/// `g..g + 8` of the four rows: lane `8·(r % 2) + k` of register `r / 2` is row r's block
/// g + k. Per row two 64-byte loads and one `vpermt2b`; the bits are formed in vectors.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512dq")]
#[inline]
unsafe fn dx8(xs: &[&[BlockMXFP4]; 4], g: usize) -> [__m512; 2] {
    // SAFETY: E_PICK has 64 bytes (unaligned load).
    let idx = unsafe { _mm512_loadu_si512(E_PICK.as_ptr().cast()) };
    let e: [__m512i; 4] = std::array::from_fn(|r| {
        let p = xs[r][g..g + 8].as_ptr().cast::<u8>();
        // SAFETY: the eight blocks are 136 bytes; the two loads read the first 128.
        let (lo, hi) = unsafe {
            (
                _mm512_loadu_si512(p.cast()),
                _mm512_loadu_si512(p.add(64).cast()),
            )
        };
        _mm512_permutex2var_epi8(lo, idx, hi)
    });
    let pair = |a: __m512i, b: __m512i| {
        let e = _mm512_cvtepu8_epi32(_mm512_castsi512_si128(_mm512_unpacklo_epi64(a, b)));
        let normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
        let small = _mm512_sllv_epi32(_mm512_set1_epi32(0x0020_0000), e);
        let m = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
        _mm512_castsi512_ps(_mm512_mask_blend_epi32(m, normal, small))
    };
    [pair(e[0], e[1]), pair(e[2], e[3])]
}

/// MXFP4 · Q8_0 against several activation columns, four per pass: the multi-row kernel
/// with rows and columns swapped. A block's 16 code bytes are broadcast to the four 128-bit
/// lanes and unpacked once; lane c holds column c's activation halves, so each lane is
/// column c's exact 4-element sums of the reference, and `d = dx·dy_c` per lane (the
/// reference's one product). The two accumulators, their lane sums, `hsum8` and the scalar
/// last odd block are the reference's: per column its bits. Passes are split by
/// [`crate::simd::column_split`] (5 → 3 + 2); a pass of two or three columns repeats its
/// first column in the other lanes and does not store them; a call of one column runs the
/// one-row kernel.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,avx512dq,avx2,fma,f16c")]
unsafe fn dot_mxfp4_avx512_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    let xs = view::<BlockMXFP4>(w);
    let k4 = Fp4::new();
    // 128-bit lane c of the four per-column scales: lane c's four floats are dy_c
    let spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    // a call of one column: the one-row kernel (the same bits) costs less than a four-lane
    // pass
    // (its AVX2/FMA/F16C features are among this function's)
    let one = super::avx2_q8::dot_mxfp4_avx2_entry;
    for r in crate::simd::column_split(acts.len(), 4) {
        let (acts, out) = (&acts[r.clone()], &mut out[r]);
        if acts.len() == 1 {
            out[0] = one(n, w, acts[0]);
            continue;
        }
        let ys: [&[BlockQ8_0]; 4] =
            std::array::from_fn(|c| view::<BlockQ8_0>(acts[c.min(acts.len() - 1)]));
        let nb = ys.iter().fold(xs.len(), |n, y| n.min(y.len()));
        let mut acc = [[_mm512_setzero_ps(); 2]; 2];
        let paired = nb / 2 * 2;
        for (b, x) in xs[..paired].iter().enumerate() {
            // SAFETY: 16 code bytes per weight block, 32 per activation block (unaligned
            // loads).
            let (q, ylo, yhi) = unsafe {
                let half = |o: usize| {
                    let v =
                        _mm512_castsi128_si512(_mm_loadu_si128(ys[0][b].qs[o..].as_ptr().cast()));
                    let v = _mm512_inserti32x4::<1>(
                        v,
                        _mm_loadu_si128(ys[1][b].qs[o..].as_ptr().cast()),
                    );
                    let v = _mm512_inserti32x4::<2>(
                        v,
                        _mm_loadu_si128(ys[2][b].qs[o..].as_ptr().cast()),
                    );
                    _mm512_inserti32x4::<3>(v, _mm_loadu_si128(ys[3][b].qs[o..].as_ptr().cast()))
                };
                (
                    _mm512_broadcast_i32x4(_mm_loadu_si128(x.qs.as_ptr().cast())),
                    half(0),
                    half(16),
                )
            };
            let (l_lo, l_hi) = k4.lanes(q, ylo, yhi);
            let hy = [ys[0][b].d, ys[1][b].d, ys[2][b].d, ys[3][b].d];
            let hq = hy
                .iter()
                .rev()
                .fold(0u64, |v, h| v << 16 | u64::from(u16::from_le_bytes(*h)));
            let dy4 = _mm_cvtph_ps(_mm_cvtsi64_si128(hq as i64));
            // d_c = dy_c·2^(e−128): the reference's one f32 product
            let d = _mm512_mul_ps(
                _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(dy4)),
                _mm512_set1_ps(e8m0_to_f32_half(x.e)),
            );
            let [a_lo, a_hi] = &mut acc[b % 2];
            *a_lo = _mm512_fmadd_ps(d, l_lo, *a_lo);
            *a_hi = _mm512_fmadd_ps(d, l_hi, *a_hi);
        }
        let lanes = store_acc(&acc);
        for (c, o) in out.iter_mut().enumerate() {
            let mut s = crate::dot::hsum8(&lane_sums(&lanes, c));
            if nb % 2 == 1 {
                s += crate::dot::mxfp4_block(&xs[nb - 1], &ys[c][nb - 1]);
            }
            *o = s;
        }
    }
}
