//! AVX-512 multi-row and multi-column MXFP4 · Q8_0 kernels (decode's matvec and prompt
//! chunks for FP4 experts; the multi-column kernel swaps the roles of rows and columns, see
//! [`dot_mxfp4_avx512_multi`]).
//!
//! Both unpack 16 code bytes per 128-bit lane: one `vpermb` each turns the low nibbles
//! (elements 0..15) and the 16-bit-shifted high ones (16..31) into the E2M1 values (a table
//! repeated every 16 bytes, so the bits above the nibble need no mask), stored as
//! `value + 12` so that they are unsigned for `vpdpbusd`; each `vpdpbusd` chain starts from
//! −12·Σ₄y of its activation bytes, so each 32-bit lane is the exact 4-element sum of the
//! reference's [`crate::dot::dot_mxfp4`] lane (0..3 from the low half, 4..7 from the high
//! half). The FMAs by `dy·2^(e−128)` run in the reference's two accumulators (even and odd
//! blocks), then its lane sum, [`crate::dot::hsum8`] and scalar last odd block: the
//! reference's bits.
//!
//! The multi-row kernel ([`dot_mxfp4_avx512_rows`]) holds two rows by two blocks per
//! register, cut out of one 64-byte load per row by one `vpermt2b`, against activations
//! prepared once per call ([`MxAct`]); the scales of eight blocks of four rows are formed
//! together in vectors ([`dxy8`]). In cache (one thread, 64 rows of 4096) it runs at
//! 17.1–17.4 GB/s against 10.4 for the kernel before it, which put one row per lane and one
//! block per register (three inserts and two more `vpdpbusd` per block and four rows).

use super::fp4_row::{Fp4Row, SplitRow};
use crate::blocks::{view, BlockMXFP4, BlockQ8_0};
use crate::grids::KVALUES_MXFP4;
use crate::scalar::e8m0_to_f32_half;
use std::arch::x86_64::*;
use std::mem::MaybeUninit;

crate::simd::entry!(rows dot_mxfp4_avx512_rows_entry => dot_mxfp4_avx512_rows);
crate::simd::entry!(multi dot_mxfp4_avx512_multi_entry => dot_mxfp4_avx512_multi);

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

    /// The stored values (+12) of the codes `q`, per 128-bit lane: elements 0..15, then
    /// 16..31 of the lane's block.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    #[inline]
    fn values<R: Fp4Row>(&self, q: __m512i) -> (__m512i, __m512i) {
        // `vpermb` reads an index's low six bits and the table repeats every 16 bytes, so
        // neither nibble needs a mask: bits 4–5 pick an identical copy, 6–7 are ignored
        let lo = _mm512_permutexvar_epi8(q, self.table);
        let hi = _mm512_permutexvar_epi8(_mm512_srli_epi16(q, 4), self.table);
        if R::OFFICIAL {
            // official order: `lo` holds the even elements, `hi` the odd ones
            (_mm512_unpacklo_epi8(lo, hi), _mm512_unpackhi_epi8(lo, hi))
        } else {
            (lo, hi)
        }
    }

    /// One block's exact 4-element sums in f32, per 128-bit lane: the codes `q` (16 bytes
    /// per lane) against the activation halves `ylo` (elements 0..15) and `yhi` (16..31) of
    /// the same lane; `vpdpbusd` starts from −12·Σ₄y, the offset of the stored values.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,avx512dq,avx2,fma,f16c"
    )]
    #[inline]
    fn lanes<R: Fp4Row>(&self, q: __m512i, ylo: __m512i, yhi: __m512i) -> (__m512, __m512) {
        let zero = _mm512_setzero_si512();
        let neg_lo = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, self.twelve, ylo));
        let neg_hi = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, self.twelve, yhi));
        let (lo, hi) = self.values::<R>(q);
        (
            _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(neg_lo, lo, ylo)),
            _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(neg_hi, hi, yhi)),
        )
    }

    /// The pair's exact 4-element sums in f32 of one two-rows-by-two-blocks register `q`
    /// (see [`dot_mxfp4_avx512_rows`]) against the pair's prepared activations: low nibbles
    /// (lanes 0..3 of the reference) and high nibbles (4..7), each `vpdpbusd` chain
    /// starting at the prepared −12·Σ₄y.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,avx512dq,avx2,fma,f16c"
    )]
    #[inline]
    fn pair<R: Fp4Row>(&self, q: __m512i, act: &MxAct) -> (__m512, __m512) {
        let (lo, hi) = self.values::<R>(q);
        (
            _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(act.nlo, lo, act.ylo)),
            _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(act.nhi, hi, act.yhi)),
        )
    }
}

/// Block pairs whose activation side the multi-row kernel prepares at once ([`MxAct`], 20 KiB
/// on the stack: 4096 elements, a whole row of V4-Flash's expert matrices).
const MX_SEG: usize = 64;

/// The activation side of blocks b and b + 1 for the multi-row kernel's registers, whose
/// 128-bit lanes are (row i, b), (row i + 1, b), (row i, b + 1), (row i + 1, b + 1):
/// prepared once per call and used by every four-row pass.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct MxAct {
    /// Codes 0..15 of each lane's activation block.
    ylo: __m512i,
    /// Codes 16..31 of each lane's activation block.
    yhi: __m512i,
    /// −12·Σ₄y of `ylo`, where the `vpdpbusd` chains start (the table's +12 offset).
    nlo: __m512i,
    /// −12·Σ₄y of `yhi`.
    nhi: __m512i,
}

/// `vpermt2b` of two rows' 64 bytes from block b into lanes (i, b), (i + 1, b), (i, b + 1),
/// (i + 1, b + 1): byte 16·l + j takes source l % 2 at offset 1 + 17·(l / 2) + j.
static CODE_PICK: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        let (l, j) = (i / 16, i % 16);
        t[i] = (64 * (l % 2) + 1 + 17 * (l / 2) + j) as u8;
        i += 1;
    }
    t
};

/// `vpermt2b` of two activation blocks' 68 bytes into [`MxAct::ylo`] (`at` 0) or `yhi`
/// (`at` 16): block b + 1 begins 34 bytes after block b, its codes 2 bytes later.
const fn y_pick(at: usize) -> [u8; 64] {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        t[i] = (2 + at + 34 * (i / 32) + i % 16) as u8;
        i += 1;
    }
    t
}

/// The two [`y_pick`]s.
static Y_PICK: [[u8; 64]; 2] = [y_pick(0), y_pick(16)];

/// `vpermps` of [`dxy8`]'s row pair for the pair of blocks at 2k..2k + 1 of the group: lane
/// l takes row l / 4 % 2 of the pair, block 2k + l / 8.
static SCALE_PICK: [[u32; 16]; 4] = {
    let mut t = [[0u32; 16]; 4];
    let mut k = 0;
    while k < 4 {
        let mut l = 0;
        while l < 16 {
            t[k][l] = (8 * (l / 4 % 2) + 2 * k + l / 8) as u32;
            l += 1;
        }
        k += 1;
    }
    t
};

/// The multi-row kernel's constant permutes, in registers.
struct MxPicks {
    /// [`CODE_PICK`].
    codes: __m512i,
    /// [`Y_PICK`].
    ylo: __m512i,
    yhi: __m512i,
    /// [`SCALE_PICK`].
    scale: [__m512i; 4],
}

impl MxPicks {
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn new() -> MxPicks {
        // SAFETY: every table row is 64 bytes (unaligned loads).
        unsafe {
            MxPicks {
                codes: _mm512_loadu_si512(CODE_PICK.as_ptr().cast()),
                ylo: _mm512_loadu_si512(Y_PICK[0].as_ptr().cast()),
                yhi: _mm512_loadu_si512(Y_PICK[1].as_ptr().cast()),
                scale: SCALE_PICK.map(|t| _mm512_loadu_si512(t.as_ptr().cast())),
            }
        }
    }
}

/// The [`MxAct`] of activation blocks `y[0..2]`.
///
/// # Safety
/// The CPU must have the enabled features.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,avx512dq,avx2,fma,f16c")]
#[inline]
unsafe fn mx_act(y: &[BlockQ8_0], k: &Fp4, picks: &MxPicks) -> MxAct {
    let y: &[BlockQ8_0; 2] = y.try_into().expect("a pair of activation blocks");
    let p = y.as_ptr().cast::<u8>();
    // SAFETY: the two blocks are 68 bytes: a 64-byte load and a masked load of the last four.
    let (a, b) = unsafe {
        (
            _mm512_loadu_si512(p.cast()),
            _mm512_maskz_loadu_epi8(0xF, p.add(64).cast()),
        )
    };
    let ylo = _mm512_permutex2var_epi8(a, picks.ylo, b);
    let yhi = _mm512_permutex2var_epi8(a, picks.yhi, b);
    let zero = _mm512_setzero_si512();
    MxAct {
        ylo,
        yhi,
        nlo: _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, k.twelve, ylo)),
        nhi: _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, k.twelve, yhi)),
    }
}

/// The activation scales of up to eight blocks `y` in f32, twice: lanes k and 8 + k hold
/// block k's (the lane order of [`dxy8`]'s registers); lanes past `y` are 0.
#[target_feature(enable = "avx512f,avx512dq,avx2,fma,f16c")]
#[inline]
fn dy8(y: &[BlockQ8_0]) -> __m512 {
    let mut h = [0u16; 8];
    for (h, y) in h.iter_mut().zip(y) {
        *h = u16::from_le_bytes(y.d);
    }
    // SAFETY: same features as this function (`f16x8`'s are among them).
    let v = unsafe { crate::simd::f16x8(&h) };
    _mm512_insertf32x8::<1>(_mm512_castps256_ps512(v), v)
}

/// MXFP4 · Q8_0 for several weight rows against one activation row (decode).
///
/// A register holds two rows by two blocks: one `vpermt2b` cuts the 16 code bytes of
/// blocks b and b + 1 out of one 64-byte load per row, so four rows cost two permutes per
/// pair of blocks where single-block lanes cost three inserts per block. The activation side
/// of each pair ([`MxAct`]: its codes in the same lane order, the −12·Σ₄y the `vpdpbusd`
/// chains start at) and each group of eight blocks' scales dy ([`dy8`]) are prepared once
/// per [`MX_SEG`] pairs and used by every four-row pass of up to [`crate::simd::DOT_BATCH`] rows.
/// The products d = dy·2^(e−128) of a group's eight blocks and four rows are formed
/// together ([`dxy8`]) and picked by one `vpermps` per register and pair. Each lane keeps
/// the reference's accumulator: even blocks (acc1) in lanes of block b, odd blocks (acc2) in
/// lanes of block b + 1, low and high nibbles in two registers, so the FMAs, lane sums,
/// [`crate::dot::hsum8`] and scalar last odd block give per row the reference's bits. A
/// pass of fewer than four rows repeats its last row in the other lanes and does not store
/// them.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,avx512dq,avx2,fma,f16c")]
unsafe fn dot_mxfp4_avx512_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    const BATCH: usize = crate::simd::DOT_BATCH;
    for (rows, out) in rows.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
        let xs: [&[BlockMXFP4]; BATCH] =
            std::array::from_fn(|r| view::<BlockMXFP4>(rows.get(r).copied().unwrap_or(&[])));
        // SAFETY: same features as this function.
        unsafe { rows_of(&xs[..rows.len()], view::<BlockQ8_0>(a), out) };
    }
}

/// [`dot_mxfp4_avx512_rows`] on rows in the official FP4 layout (an official checkpoint's
/// experts used in place): `rows[r]` is row r's codes (column 2i in the low nibble of byte
/// i) and E8M0 bytes. The same registers, with the codes' 128-bit lanes
/// put in place by one `vpermt2q` per pair of rows and the unpacked values interleaved back
/// into element order by two `vpunpck*bw`: per row the bits of the reference on the row
/// converted to MXFP4 ([`crate::fp8::fp4_ds_to_mxfp4`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,avx512dq,avx2,fma,f16c")]
unsafe fn dot_fp4_split_avx512_rows(_n: usize, rows: &[(&[u8], &[u8])], a: &[u8], out: &mut [f32]) {
    const BATCH: usize = crate::simd::DOT_BATCH;
    for (rows, out) in rows.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
        let xs: [SplitRow; BATCH] =
            std::array::from_fn(|r| rows.get(r).copied().unwrap_or((&[], &[])).into());
        // SAFETY: same features as this function.
        unsafe { rows_of(&xs[..rows.len()], view::<BlockQ8_0>(a), out) };
    }
}

crate::simd::entry!(split_rows dot_fp4_split_avx512_rows_entry => dot_fp4_split_avx512_rows);

/// The multi-row kernel on up to [`crate::simd::DOT_BATCH`] rows `xs` (see
/// [`dot_mxfp4_avx512_rows`]).
///
/// # Safety
/// The CPU must have the enabled features.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,avx512dq,avx2,fma,f16c")]
unsafe fn rows_of<R: Fp4Row>(xs: &[R], ys: &[BlockQ8_0], out: &mut [f32]) {
    const BATCH: usize = crate::simd::DOT_BATCH;
    let k4 = Fp4::new();
    let picks = MxPicks::new();
    let pd = crate::simd::PREFETCH_DISTANCE;
    let mut acts = [const { MaybeUninit::<MxAct>::uninit() }; MX_SEG];
    let mut dys = [_mm512_setzero_ps(); MX_SEG / 4];
    let nr = xs.len();
    if nr == 0 {
        return;
    }
    let nb = xs.iter().fold(ys.len(), |n, x| n.min(x.nb()));
    let pairs = nb / 2;
    // per four-row pass: [low, high] nibbles of rows (i, i + 1), then of (i + 2, i + 3)
    let mut acc = [[_mm512_setzero_ps(); 4]; BATCH / 4];
    for seg in (0..pairs).step_by(MX_SEG) {
        let segn = (pairs - seg).min(MX_SEG);
        for (i, act) in acts[..segn].iter_mut().enumerate() {
            let b = 2 * (seg + i);
            // SAFETY: same features as this function.
            act.write(unsafe { mx_act(&ys[b..b + 2], &k4, &picks) });
        }
        // the groups of eight blocks (the last may hold fewer)
        let (b0, b1) = (2 * seg, 2 * (seg + segn));
        for (i, dy) in dys[..segn.div_ceil(4)].iter_mut().enumerate() {
            let g = b0 + 8 * i;
            *dy = dy8(&ys[g..(g + 8).min(b1)]);
        }
        // SAFETY: the first `segn` entries were written just above.
        let acts = unsafe { std::slice::from_raw_parts(acts.as_ptr().cast::<MxAct>(), segn) };
        for (r, acc) in (0..nr).step_by(4).zip(acc.iter_mut()) {
            let x4: [R; 4] = std::array::from_fn(|j| xs[(r + j).min(nr - 1)].cut(nb));
            let pass = Pass {
                xs: &x4,
                distinct: (nr - r).min(4),
                pd,
            };
            // SAFETY: same features as this function; every row has `nb` blocks.
            unsafe { pass.run(2 * seg, acts, &dys, acc, &k4, &picks) };
        }
    }
    for ((r, o), acc) in (0..nr).step_by(4).zip(out.chunks_mut(4)).zip(&acc) {
        let mut lanes = [[0f32; 16]; 4];
        for (l, a) in lanes.iter_mut().zip(acc) {
            // SAFETY: `l` holds 16 f32 (unaligned store).
            unsafe { _mm512_storeu_ps(l.as_mut_ptr(), *a) };
        }
        for (j, o) in o.iter_mut().enumerate().take(nr - r) {
            // row j's lanes: even blocks at 4·(j % 2), odd blocks 8 further on
            let (lo, hi) = (&lanes[2 * (j / 2)], &lanes[2 * (j / 2) + 1]);
            let e = 4 * (j % 2);
            let sum: [f32; 8] = std::array::from_fn(|k| {
                let v = if k < 4 { lo } else { hi };
                v[e + k % 4] + v[8 + e + k % 4]
            });
            let mut s = crate::dot::hsum8(&sum);
            if nb % 2 == 1 {
                s += crate::dot::mxfp4_block(&xs[r + j].block(nb - 1), &ys[nb - 1]);
            }
            *o = s;
        }
    }
}

/// One four-row pass of [`dot_mxfp4_avx512_rows`] over a segment of prepared pairs.
struct Pass<'a, R> {
    /// The four rows, each cut to the blocks every row and the activation have.
    xs: &'a [R; 4],
    /// How many of them are distinct (the rest repeat the last; not prefetched again).
    distinct: usize,
    /// Software prefetch distance in bytes.
    pd: usize,
}

impl<R: Fp4Row> Pass<'_, R> {
    /// Adds the pairs `acts` (from block `b0`, a multiple of eight) into `acc`, a group of
    /// eight blocks (four pairs) per step: its scales from [`dxy8`], its prefetches, and the
    /// pairs without a bounds check where two more blocks follow the group (so that every
    /// 64-byte load stays in its row), else with [`Fp4Row::load`]'s check.
    ///
    /// # Safety
    /// The CPU must have the enabled features; every row has the blocks of `acts`.
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,avx512dq,avx2,fma,f16c"
    )]
    #[inline]
    unsafe fn run(
        &self,
        b0: usize,
        acts: &[MxAct],
        dys: &[__m512],
        acc: &mut [__m512; 4],
        k4: &Fp4,
        picks: &MxPicks,
    ) {
        let xs = self.xs;
        let nb = xs[0].nb();
        for (g, acts) in acts.chunks(4).enumerate() {
            let b = b0 + 8 * g;
            let e: [__m128i; 4] = if b + 8 <= nb {
                // SAFETY: same features as this function; every row has blocks b..b + 8.
                std::array::from_fn(|r| unsafe { xs[r].e8(b) })
            } else {
                // the last 2–7 blocks: padded (their lanes are not used)
                std::array::from_fn(|r| {
                    let mut t = [0u8; 16];
                    for (i, t) in t[..nb - b].iter_mut().enumerate() {
                        *t = xs[r].scale(b + i);
                    }
                    // SAFETY: `t` is 16 bytes (unaligned load).
                    unsafe { _mm_loadu_si128(t.as_ptr().cast()) }
                })
            };
            let dx = dxy8(e, dys[g]);
            for x in &xs[..self.distinct] {
                crate::simd::prefetch_ahead(x.codes_at(b), 8 * R::CODE_BYTES, self.pd);
            }
            if b + 10 <= nb {
                for (k, act) in acts.iter().enumerate() {
                    // SAFETY: same features; blocks b + 2k .. b + 2k + 4 are in every row.
                    unsafe { self.pair::<false>(b + 2 * k, act, &dx, acc, k4, picks) };
                }
            } else {
                for (k, act) in acts.iter().enumerate() {
                    // SAFETY: same features; blocks b + 2k and b + 2k + 1 are in every row.
                    unsafe { self.pair::<true>(b + 2 * k, act, &dx, acc, k4, picks) };
                }
            }
        }
    }

    /// One pair of blocks `b`, `b + 1` of the four rows into `acc`, with scales from the
    /// group's `dx`.
    ///
    /// # Safety
    /// As [`Fp4Row::load`].
    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,avx512dq,avx2,fma,f16c"
    )]
    #[inline]
    unsafe fn pair<const CHECK: bool>(
        &self,
        b: usize,
        act: &MxAct,
        dx: &[__m512; 2],
        acc: &mut [__m512; 4],
        k4: &Fp4,
        picks: &MxPicks,
    ) {
        let xs = self.xs;
        // SAFETY: the caller's contract.
        let (q01, q23) = unsafe {
            (
                R::combine(xs[0].load::<CHECK>(b), xs[1].load::<CHECK>(b), picks.codes),
                R::combine(xs[2].load::<CHECK>(b), xs[3].load::<CHECK>(b), picks.codes),
            )
        };
        let pick = picks.scale[b % 8 / 2];
        let d01 = _mm512_permutexvar_ps(pick, dx[0]);
        let d23 = _mm512_permutexvar_ps(pick, dx[1]);
        let (l, h) = k4.pair::<R>(q01, act);
        acc[0] = _mm512_fmadd_ps(d01, l, acc[0]);
        acc[1] = _mm512_fmadd_ps(d01, h, acc[1]);
        let (l, h) = k4.pair::<R>(q23, act);
        acc[2] = _mm512_fmadd_ps(d23, l, acc[2]);
        acc[3] = _mm512_fmadd_ps(d23, h, acc[3]);
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

/// The scales d = dy·2^(e−128) of a group of eight blocks of the four rows, from their E8M0
/// bytes `e` (row r's in the low 64 bits of `e[r]`, [`Fp4Row::e8`]) and `dy` the blocks'
/// activation scales ([`dy8`]): lane `8·(r % 2) + k` of register `r / 2` is row r's block
/// k of the group. One `vscalefps` per register forms the products: dy·2^(e−128) rounded
/// once, as the reference's product of dy and the exact power of two
/// [`e8m0_to_f32_half`] (subnormal results included).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq")]
#[inline]
fn dxy8(e: [__m128i; 4], dy: __m512) -> [__m512; 2] {
    let mut d = [_mm512_setzero_ps(); 2];
    for (d, e) in d.iter_mut().zip(e.chunks_exact(2)) {
        let e = _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(e[0], e[1]));
        let k = _mm512_cvtepi32_ps(_mm512_sub_epi32(e, _mm512_set1_epi32(128)));
        *d = _mm512_scalef_ps(dy, k);
    }
    d
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
    // a call of one column: the one-row kernel (the same bits) costs less than a four-lane
    // pass (its AVX2/FMA/F16C features are among this function's)
    let one = |a: &[u8]| crate::simd::q8::avx2::dot_mxfp4_avx2_entry(n, w, a);
    // SAFETY: same features as this function.
    unsafe { multi_of(view::<BlockMXFP4>(w), acts, out, one) }
}

/// [`dot_mxfp4_avx512_multi`] on one row in the official FP4 layout (`codes`, `scales`; see
/// [`dot_fp4_split_avx512_rows`]): the same registers, the block's values interleaved back
/// into element order; per column the reference's bits on the row converted to MXFP4.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,avx512dq,avx2,fma,f16c")]
unsafe fn dot_fp4_split_avx512_multi(
    _n: usize,
    codes: &[u8],
    scales: &[u8],
    acts: &[&[u8]],
    out: &mut [f32],
) {
    let row = SplitRow { codes, scales };
    let one = |a: &[u8]| {
        let mut o = [0f32];
        // SAFETY: same features as this function.
        unsafe { rows_of(&[row], view::<BlockQ8_0>(a), &mut o) };
        o[0]
    };
    // SAFETY: same features as this function.
    unsafe { multi_of(row, acts, out, one) }
}

crate::simd::entry!(split_multi dot_fp4_split_avx512_multi_entry => dot_fp4_split_avx512_multi);

/// The multi-column kernel on row `x` (see [`dot_mxfp4_avx512_multi`]); `one` computes a
/// call's lone column.
///
/// # Safety
/// The CPU must have the enabled features.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,avx512dq,avx2,fma,f16c")]
unsafe fn multi_of<R: Fp4Row>(x: R, acts: &[&[u8]], out: &mut [f32], one: impl Fn(&[u8]) -> f32) {
    let k4 = Fp4::new();
    // 128-bit lane c of the four per-column scales: lane c's four floats are dy_c
    let spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    for r in crate::simd::column_split(acts.len(), 4) {
        let (acts, out) = (&acts[r.clone()], &mut out[r]);
        if acts.len() == 1 {
            out[0] = one(acts[0]);
            continue;
        }
        let ys: [&[BlockQ8_0]; 4] =
            std::array::from_fn(|c| view::<BlockQ8_0>(acts[c.min(acts.len() - 1)]));
        let nb = ys.iter().fold(x.nb(), |n, y| n.min(y.len()));
        let mut acc = [[_mm512_setzero_ps(); 2]; 2];
        let paired = nb / 2 * 2;
        for b in 0..paired {
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
                    _mm512_broadcast_i32x4(_mm_loadu_si128(x.codes16(b).as_ptr().cast())),
                    half(0),
                    half(16),
                )
            };
            let (l_lo, l_hi) = k4.lanes::<R>(q, ylo, yhi);
            let hy = [ys[0][b].d, ys[1][b].d, ys[2][b].d, ys[3][b].d];
            let hq = hy
                .iter()
                .rev()
                .fold(0u64, |v, h| v << 16 | u64::from(u16::from_le_bytes(*h)));
            let dy4 = _mm_cvtph_ps(_mm_cvtsi64_si128(hq as i64));
            // d_c = dy_c·2^(e−128): the reference's one f32 product
            let d = _mm512_mul_ps(
                _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(dy4)),
                _mm512_set1_ps(e8m0_to_f32_half(x.scale(b))),
            );
            let [a_lo, a_hi] = &mut acc[b % 2];
            *a_lo = _mm512_fmadd_ps(d, l_lo, *a_lo);
            *a_hi = _mm512_fmadd_ps(d, l_hi, *a_hi);
        }
        let lanes = store_acc(&acc);
        for (c, o) in out.iter_mut().enumerate() {
            let mut s = crate::dot::hsum8(&lane_sums(&lanes, c));
            if nb % 2 == 1 {
                s += crate::dot::mxfp4_block(&x.block(nb - 1), &ys[c][nb - 1]);
            }
            *o = s;
        }
    }
}
