//! AVX-512 kernels for the byte-aligned formats: Q2_0 (one row, several rows, several
//! columns), a multi-column Q8_0 and Q6_K (need AVX-512 F/BW/VL/DQ, VBMI and VNNI; the Q2_0
//! decode kernels GFNI too, all checked by `avx512_iq::has_features`). The Q2_0
//! notes:
//!
//! The multi-column kernel (and the `tile_q2` tiles) hold a whole 64-element block in
//! element order: the 16 code bytes are spread so that qword i holds the 16 code bits of
//! elements 8i..8i+7, and `vpmultishiftqb` cuts out each element's two bits ([`CUT`]).
//! The one- and multi-row kernels (decode) work on eight blocks at a
//! time, one block per qword: two `vpermt2b` and two masked `vpermb` split the eight
//! blocks' code bytes into two step registers ([`Q2_SPLIT`]) and one `vgf2p8affineqb` per
//! step cuts one code out of every byte ([`CODE_PICK`]: shift and mask in one operation).
//! The matching activations are gathered once per 16-block segment into a transposed
//! layout ([`Q2Act`]) and reused for every row of a batch of up to [`super::DOT_BATCH`]
//! rows, so a block costs under one shuffle-port operation and no horizontal reduction.
//! `vpdpbusd` forms Σ c·y (from −Σ y: Σ (c − 1)·y) per 32-element half. Exact integer
//! arithmetic and the reference's float combine: the reference's bits.
//!
//! Every Q2_0 kernel here also runs on Q2_0_X rows (a const generic `X`): the load-time
//! layout whose 144 bytes per eight blocks already hold the two step registers and the
//! eight scales side by side, so the decode kernel's split and scale shuffles disappear; the
//! multi-column and tile kernels take each block's code bytes back from it ([`q2_block`]).

use super::{entry, f16c, f16x8, tree4};
use crate::blocks::{view, BlockQ2_0, BlockQ6K, BlockQ8K, BlockQ8_0};
use bytemuck::Zeroable;
use std::arch::x86_64::*;

entry!(multi dot_q2_0_avx512_multi_entry => dot_q2_0_avx512_multi, dot_q2_0_x_avx512_multi_entry => dot_q2_0_x_avx512_multi, dot_q8_0_avx512_multi_entry => dot_q8_0_avx512_multi, dot_q6_k_avx512_multi_entry => dot_q6_k_avx512_multi);
entry!(rows dot_q8_0_avx512_rows_entry => dot_q8_0_avx512_rows, dot_q2_0_avx512_rows_entry => dot_q2_0_avx512_rows, dot_q2_0_x_avx512_rows_entry => dot_q2_0_x_avx512_rows, dot_q6_k_avx512_rows_entry => dot_q6_k_avx512_rows);

entry!(
    dot_q2_0_avx512_entry => dot_q2_0_avx512,
    dot_q2_0_x_avx512_entry => dot_q2_0_x_avx512,
    dot_q6_k_avx512_entry => dot_q6_k_avx512,
);

/// `vpmultishiftqb` control: byte j of qword i takes bits (16i + 2j) mod 64 of its qword.
pub(super) static CUT: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut e = 0;
    while e < 64 {
        t[e] = ((16 * (e / 8) + 2 * (e % 8)) % 64) as u8;
        e += 1;
    }
    t
};

/// `vgf2p8affineqb` bit matrices of the decode kernels, one per code position k (0..3):
/// every byte becomes its code k (bits 2k, 2k + 1 moved to bits 0, 1; the rest cleared).
const CODE_PICK: [i64; 4] = [
    super::gf_move2(0, 0),
    super::gf_move2(2, 0),
    super::gf_move2(4, 0),
    super::gf_move2(6, 0),
];

/// `vpermt2b` indices of the activation transpose, one per code position k: destination
/// byte i of every dword takes byte k of the same dword of the first source (i even) or
/// the second (i odd).
static CODE_T: [[u8; 64]; 4] = {
    let mut t = [[0u8; 64]; 4];
    let mut k = 0;
    while k < 4 {
        let mut e = 0;
        while e < 64 {
            t[k][e] = (64 * (e % 2) + 4 * (e / 4) + k) as u8;
            e += 1;
        }
        k += 1;
    }
    t
};

/// Byte indices that gather the code bytes of eight consecutive Q2_0 blocks (144 bytes)
/// into the two step registers of the decode kernels: register r, qword k holds code bytes
/// 4r..4r+3 of block k's first half (its bytes 4r..) and then of its second (bytes
/// 8 + 4r..). Qwords 0–6 index the first 128 bytes (`vpermt2b`); qword 7 indexes the 64
/// bytes from byte 80 (`vpermb`, which reads the low six bits).
static Q2_SPLIT: [[u8; 64]; 2] = {
    let mut t = [[0u8; 64]; 2];
    let mut r = 0;
    while r < 2 {
        let mut e = 0;
        while e < 64 {
            let (k, m) = (e / 8, e % 8);
            let at = 18 * k + 2 + 4 * r + m % 4 + 8 * (m / 4);
            t[r][e] = if k < 7 { at } else { at - 80 } as u8;
            e += 1;
        }
        r += 1;
    }
    t
};

/// `vpermt2b` indices that pick the f16 scales of eight consecutive Q2_0 blocks (18 bytes
/// apart, so all within the first 128 bytes) in the order of [`q2_0_pair`]'s lanes: word
/// 4l + j is block 2l + j mod 2's `d`; the upper 32 bytes are unused.
static DX_PICK: [u8; 64] = {
    let mut t = [0u8; 64];
    let mut i = 0;
    while i < 32 {
        let w = i / 2;
        t[i] = (18 * (2 * (w / 4) + w % 2) + i % 2) as u8;
        i += 1;
    }
    t
};

/// Groups of eight Q2_0 blocks whose activation side the decode kernels prepare at once
/// (10 KiB of [`Q2Act`] on the stack: 8192 elements, a whole row of most matrices).
const Q2_SEG: usize = 16;

/// Weight rows per segment pass of the multi-row Q2_0 kernel: the prepared activations are
/// used by up to this many rows (callers hand over up to [`super::DOT_BATCH`]).
const Q2_BATCH: usize = super::DOT_BATCH;

/// The activation side of eight Q2_0 blocks (sixteen Q8_0 blocks) for the decode kernels,
/// formed once per segment of a batch and used by every row of the batch: lane b of each
/// register belongs to activation block b, which lines up with half b mod 2 of weight block
/// b / 2. `y[g]` holds code dword
/// g of each activation block (a transpose of the row), `nsy` the negated sums −Σ y of each
/// block (every row's `vpdpbusd` chain starts there) and `dy` their scales in f32. Within
/// each lane `y` is transposed once more, into the order the weight codes are cut
/// ([`CODE_PICK`]): byte i of `y[4r + k]` is byte k of code dword 4r + i (element
/// 16r + 4i + k).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Q2Act {
    y: [__m512i; 8],
    nsy: __m512i,
    dy: __m512,
}

/// Gathers the [`Q2Act`] of sixteen activation blocks.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni")]
#[inline]
unsafe fn q2_0_act(yc: &[BlockQ8_0; 16]) -> Q2Act {
    let base = yc.as_ptr().cast::<u8>();
    let lanes = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32(size_of::<BlockQ8_0>() as i32),
    );
    // SAFETY: every gathered dword lies inside the sixteen blocks (544 bytes): block b's
    // scale (and first two code bytes) at 34b, its code dword g at 34b + 2 + 4g.
    let (y, dh): ([__m512i; 8], __m512i) = unsafe {
        (
            std::array::from_fn(|g| {
                let at = _mm512_add_epi32(lanes, _mm512_set1_epi32(2 + 4 * g as i32));
                _mm512_i32gather_epi32::<1>(at, base.cast())
            }),
            _mm512_i32gather_epi32::<1>(lanes, base.cast()),
        )
    };
    let ones = _mm512_set1_epi8(1);
    let mut sy = _mm512_setzero_si512();
    for yg in &y {
        sy = _mm512_dpbusd_epi32(sy, ones, *yg);
    }
    // SAFETY: every table has 64 bytes (unaligned loads).
    let ct: [__m512i; 4] =
        std::array::from_fn(|k| unsafe { _mm512_loadu_si512(CODE_T[k].as_ptr().cast()) });
    // bytes 0, 1 of each dword from dwords 4r, 4r + 1; bytes 2, 3 from 4r + 2, 4r + 3
    let yt = std::array::from_fn(|j| {
        let (r, k) = (j / 4, j % 4);
        let lo = _mm512_permutex2var_epi8(y[4 * r], ct[k], y[4 * r + 1]);
        let hi = _mm512_permutex2var_epi8(y[4 * r + 2], ct[k], y[4 * r + 3]);
        _mm512_mask_blend_epi16(0xAAAA_AAAA, lo, hi)
    });
    Q2Act {
        y: yt,
        nsy: _mm512_sub_epi32(_mm512_setzero_si512(), sy),
        dy: _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dh)),
    }
}

/// The constant registers of the decode kernels.
struct Q2Consts {
    pick: [__m512i; 4],
    split: [__m512i; 2],
    dxi: __m512i,
}

impl Q2Consts {
    #[target_feature(enable = "avx512f")]
    fn load() -> Self {
        // SAFETY: every table has 64 bytes (unaligned loads).
        unsafe {
            Self {
                pick: std::array::from_fn(|c| _mm512_set1_epi64(CODE_PICK[c])),
                split: std::array::from_fn(|r| _mm512_loadu_si512(Q2_SPLIT[r].as_ptr().cast())),
                dxi: _mm512_loadu_si512(DX_PICK.as_ptr().cast()),
            }
        }
    }
}

/// Eight Q2_0 blocks of one row (the 144 bytes at `x`; with `X` one Q2_0_X block, whose
/// code bytes are already in step-register order) against their prepared activations:
/// lane 2k + h of the first result is block k's exact half sum Σ (c − 1)·y of half h; the
/// other two are the first two 64-byte loads (whose bytes hold the scales). The code bytes
/// are split into two step registers ([`Q2_SPLIT`]); each of eight steps cuts one code of every byte out of them
/// (one `vgf2p8affineqb`, [`CODE_PICK`]) and `vpdpbusd` adds its products with the step's
/// transposed activations, in two chains, so the 16 lanes end as the exact half sums
/// Σ (c − 1)·y with no horizontal reduction.
///
/// # Safety
/// The CPU must have the enabled features and `x` must point to 144 readable bytes.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,gfni,f16c")]
#[inline]
unsafe fn q2_0_sums<const X: bool>(
    x: *const u8,
    act: &Q2Act,
    k: &Q2Consts,
) -> (__m512i, __m512i, __m512i) {
    // SAFETY: the caller guarantees bytes 0..144 (the loads cover 0..128 and, for Q2_0,
    // 80..144).
    let (l0, l1) = unsafe {
        (
            _mm512_loadu_si512(x.cast()),
            _mm512_loadu_si512(x.add(64).cast()),
        )
    };
    let a = if X {
        // Q2_0_X: the two step registers as stored
        [l0, l1]
    } else {
        // SAFETY: as above.
        let l2 = unsafe { _mm512_loadu_si512(x.add(80).cast()) };
        let step = |r: usize| {
            let v = _mm512_permutex2var_epi8(l0, k.split[r], l1);
            _mm512_mask_permutexvar_epi8(v, 0xFF << 56, k.split[r], l2)
        };
        [step(0), step(1)]
    };
    let (mut even, mut odd) = (act.nsy, _mm512_setzero_si512());
    for g in (0..8).step_by(2) {
        let c0 = _mm512_gf2p8affine_epi64_epi8::<0>(a[g / 4], k.pick[g % 4]);
        let c1 = _mm512_gf2p8affine_epi64_epi8::<0>(a[g / 4], k.pick[g % 4 + 1]);
        even = _mm512_dpbusd_epi32(even, c0, act.y[g]);
        odd = _mm512_dpbusd_epi32(odd, c1, act.y[g + 1]);
    }
    // every lane is Σ (c − 1)·y over 32 elements, exact in i32
    (_mm512_add_epi32(even, odd), l0, l1)
}

/// Eight Q2_0 blocks (with `X`, one Q2_0_X block) of two rows (144 bytes each at `x0`,
/// `x1`) against their prepared
/// activations: lane 4l + j of the result is row j / 2's product of block 2l + j mod 2,
/// `f32(dx)·(f32(dy0)·Σ₀ + f32(dy1)·Σ₁)`, the reference's operations (the two rows share
/// the pairing shuffles, the scale conversion and the last multiply).
///
/// # Safety
/// The CPU must have the enabled features and `x0`, `x1` must point to 144 readable bytes.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,gfni,f16c")]
#[inline]
unsafe fn q2_0_pair<const X: bool>(
    x0: *const u8,
    x1: *const u8,
    act: &Q2Act,
    k: &Q2Consts,
) -> __m512 {
    // SAFETY: the caller's guarantee.
    let ((t0, a0, b0), (t1, a1, b1)) =
        unsafe { (q2_0_sums::<X>(x0, act, k), q2_0_sums::<X>(x1, act, k)) };
    let p0 = _mm512_mul_ps(act.dy, _mm512_cvtepi32_ps(t0));
    let p1 = _mm512_mul_ps(act.dy, _mm512_cvtepi32_ps(t1));
    // 128-bit lane l: blocks 2l, 2l + 1 of row 0, then of row 1; first halves + second
    let inner = _mm512_add_ps(
        _mm512_shuffle_ps::<0b10_00_10_00>(p0, p1),
        _mm512_shuffle_ps::<0b11_01_11_01>(p0, p1),
    );
    let d = if X {
        // SAFETY: the caller's guarantee (the scales are bytes 128..144).
        let (s0, s1) = unsafe {
            (
                _mm256_castsi128_si256(_mm_loadu_si128(x0.add(128).cast())),
                _mm256_castsi128_si256(_mm_loadu_si128(x1.add(128).cast())),
            )
        };
        // dword 2l: row 0's blocks 2l, 2l + 1; dword 2l + 1: row 1's
        _mm256_permutex2var_epi32(s0, _mm256_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11), s1)
    } else {
        _mm512_castsi512_si256(_mm512_mask_blend_epi16(
            0xCCCC_CCCC,
            _mm512_permutex2var_epi8(a0, k.dxi, b0),
            _mm512_permutex2var_epi8(a1, k.dxi, b1),
        ))
    };
    _mm512_mul_ps(_mm512_cvtph_ps(d), inner)
}

/// Adds the first `cnt` block products of four rows (two [`q2_0_pair`] results: rows 0, 1
/// and rows 2, 3) to the rows' running sums `s` (lane r: row r), block by block in order:
/// the reference's additions, four rows per `vaddps`. Lanes of rows beyond the pass's are
/// computed and not used.
#[target_feature(enable = "avx512f,avx512dq")]
#[inline]
fn add_rows8(s: &mut __m128, w: &[__m512; 2], cnt: usize) {
    // 128-bit lane j: block 2j (x) and 2j + 1 (y) of rows 0–3
    let x = _mm512_shuffle_ps::<0b10_00_10_00>(w[0], w[1]);
    let y = _mm512_shuffle_ps::<0b11_01_11_01>(w[0], w[1]);
    let v = [
        _mm512_castps512_ps128(x),
        _mm512_castps512_ps128(y),
        _mm512_extractf32x4_ps::<1>(x),
        _mm512_extractf32x4_ps::<1>(y),
        _mm512_extractf32x4_ps::<2>(x),
        _mm512_extractf32x4_ps::<2>(y),
        _mm512_extractf32x4_ps::<3>(x),
        _mm512_extractf32x4_ps::<3>(y),
    ];
    if cnt == 8 {
        // straight-line in registers (a variable-length loop goes through the stack)
        for vk in &v {
            *s = _mm_add_ps(*s, *vk);
        }
    } else {
        for vk in &v[..cnt] {
            *s = _mm_add_ps(*s, *vk);
        }
    }
}

/// Q2_0 · Q8_0 with AVX-512 for one row and column: the multi-column kernel with one column
/// (the multi-row kernel's activation side, prepared per call, would cost more than the
/// row: 1.9 GB/s in cache against this path's ~6).
#[target_feature(
    enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx512vnni,gfni,avx2,fma,f16c"
)]
unsafe fn dot_q2_0_avx512(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut o = [0f32];
    // SAFETY: same features as this function.
    unsafe { dot_q2_0_avx512_multi(n, w, &[a], &mut o) };
    o[0]
}

/// Q2_0 · Q8_0 for several weight rows against one activation row (decode). The activation
/// side is prepared once per [`Q2_SEG`] groups of eight blocks ([`q2_0_act`]) and used by
/// up to [`Q2_BATCH`] rows, four rows per pass: each row's eight-block products from
/// [`q2_0_pair`], added in block order four rows at a time ([`add_rows8`]). The last 1–7
/// blocks are padded with zero blocks whose products are not added. Per row the arithmetic
/// is the reference's: its bits.
#[target_feature(
    enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx512vnni,gfni,avx2,fma,f16c"
)]
unsafe fn dot_q2_0_avx512_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: same features as this function.
    unsafe { q2_rows::<false>(rows, a, out) }
}

/// Q2_0_X · Q8_0 for several weight rows against one activation row: [`dot_q2_0_avx512_rows`]
/// on the repacked layout (no code split, the scales side by side); Q2_0's bits.
#[target_feature(
    enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx512vnni,gfni,avx2,fma,f16c"
)]
unsafe fn dot_q2_0_x_avx512_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: same features as this function.
    unsafe { q2_rows::<true>(rows, a, out) }
}

/// The multi-row kernel on Q2_0 rows or (`X`) Q2_0_X rows: eight Q2_0 blocks and one Q2_0_X
/// block are both 144 bytes, so the rows are walked as Q2_0-sized blocks in either case (a
/// Q2_0_X row always holds whole groups of eight; only Q2_0 rows reach the tail padding).
///
/// # Safety
/// The CPU must have the enabled features.
#[target_feature(
    enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi,avx512vnni,gfni,avx2,fma,f16c"
)]
unsafe fn q2_rows<const X: bool>(rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    let ys = view::<BlockQ8_0>(a);
    let k = Q2Consts::load();
    let pd = super::PREFETCH_DISTANCE;
    let zero = Q2Act {
        y: [_mm512_setzero_si512(); 8],
        nsy: _mm512_setzero_si512(),
        dy: _mm512_setzero_ps(),
    };
    let mut acts = [zero; Q2_SEG];
    for (rows, out) in rows.chunks(Q2_BATCH).zip(out.chunks_mut(Q2_BATCH)) {
        let mut xs: [&[BlockQ2_0]; Q2_BATCH] = [&[]; Q2_BATCH];
        let mut nb = ys.len() / 2;
        for (x, w) in xs.iter_mut().zip(rows) {
            *x = view::<BlockQ2_0>(w);
            nb = nb.min(x.len());
        }
        let nr = rows.len();
        // One four-row pass at a time, each row read to its end (`dot_rows`' quarter order),
        // prefetched `pd` bytes ahead in its own stream: past a row's end that is the next
        // row of its quarter, which the next pass reads. (Until 2026-12-04 two passes ran
        // side by side, rows i and i + 1 of each quarter, and rows longer than `pd` had to
        // prefetch whole row pairs ahead; alternating `bench --matvec q2_0,q2_0_x` runs of
        // the two forms, 1024- to 8192-wide rows, differed by less than this host's
        // round-to-round spread, in cache one pass was no slower, and in seed decode
        // profiles the Q2_0_X matvecs took 12.7–13.3 ms per token against 14.8–15.1.)
        let (full, rem) = (nb / 8, nb % 8);
        debug_assert!(
            !X || rem == 0,
            "Q2_0_X rows hold whole groups of eight blocks"
        );
        // row r (a short pass repeats its last row; those lanes are not used)
        let row = |r: usize| xs[r.min(nr - 1)];
        let mut s = [_mm_setzero_ps(); Q2_BATCH / 4];
        let groups = nb.div_ceil(8);
        for seg in (0..groups).step_by(Q2_SEG) {
            let segn = (groups - seg).min(Q2_SEG);
            for (i, act) in acts[..segn].iter_mut().enumerate() {
                let b = 8 * (seg + i);
                let mut py = [BlockQ8_0::zeroed(); 16];
                let yc: &[BlockQ8_0; 16] = match ys.get(2 * b..2 * b + 16) {
                    Some(yc) if b + 8 <= nb => yc.try_into().unwrap(),
                    _ => {
                        py[..2 * (nb - b)].copy_from_slice(&ys[2 * b..2 * nb]);
                        &py
                    }
                };
                // SAFETY: same features as this function.
                *act = unsafe { q2_0_act(yc) };
            }
            // four-row passes; a short pass repeats its last row (those lanes are not used),
            // so all four products stay in registers
            for (r, sp) in (0..nr).step_by(4).zip(s.iter_mut()) {
                for (i, act) in acts[..segn].iter().enumerate() {
                    let g = seg + i;
                    let cnt = if g < full { 8 } else { rem };
                    // the last 1–7 blocks: padded copies with zero blocks
                    let pad: [[BlockQ2_0; 8]; 4];
                    let p: [*const u8; 4] = if cnt == 8 {
                        std::array::from_fn(|j| {
                            let x = &row(r + j)[8 * g..8 * g + 8];
                            super::prefetch_ahead(x.as_ptr().cast(), 144, pd);
                            x.as_ptr().cast()
                        })
                    } else {
                        pad = std::array::from_fn(|j| {
                            let mut t = [BlockQ2_0::zeroed(); 8];
                            t[..rem].copy_from_slice(&row(r + j)[8 * full..nb]);
                            t
                        });
                        pad.each_ref().map(|t| t.as_ptr().cast())
                    };
                    // SAFETY: same features as this function; each `p` points to
                    // eight blocks (144 bytes).
                    let w = unsafe {
                        [
                            q2_0_pair::<X>(p[0], p[1], act, &k),
                            q2_0_pair::<X>(p[2], p[3], act, &k),
                        ]
                    };
                    add_rows8(sp, &w, cnt);
                }
            }
        }
        for (o, sp) in out.chunks_mut(4).zip(&s) {
            let mut v = [0f32; 4];
            // SAFETY: `v` holds four f32 (unaligned store).
            unsafe { _mm_storeu_ps(v.as_mut_ptr(), *sp) };
            o.copy_from_slice(&v[..o.len()]);
        }
    }
}

/// Q2_0 · Q8_0 against several activation columns: each block's codes are cut out once per
/// eight-block chunk and used for every column (see the module docs); each result is the
/// reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,avx2,fma,f16c")]
unsafe fn dot_q2_0_avx512_multi(_n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features as this function.
    unsafe { q2_multi::<false>(w, acts, out) }
}

/// Q2_0_X · Q8_0 against several activation columns: [`dot_q2_0_avx512_multi`] on the
/// repacked layout (each block's 16 code bytes gathered back from the two step-register
/// halves); Q2_0's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,avx2,fma,f16c")]
unsafe fn dot_q2_0_x_avx512_multi(_n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features as this function.
    unsafe { q2_multi::<true>(w, acts, out) }
}

/// Q2_0_X · Q8_0 with AVX-512 for one row and column: the multi-column kernel with one column.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,avx2,fma,f16c")]
unsafe fn dot_q2_0_x_avx512(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut o = [0f32];
    // SAFETY: same features as this function.
    unsafe { q2_multi::<true>(w, &[a], &mut o) };
    o[0]
}

/// Block `k` (0..8) of a 144-byte chunk of a Q2_0 row (`X` false: eight blocks, or fewer at
/// the row's end) or of one Q2_0_X block: its 16 code bytes in Q2_0's order and its f16
/// scale bits.
///
/// # Panics
/// If the chunk does not hold block `k`.
#[target_feature(enable = "avx512f,avx512vl")]
#[inline]
pub(super) fn q2_block<const X: bool>(c: &[u8], k: usize) -> (__m128i, u16) {
    if X {
        let (q0, q1) = (&c[8 * k..8 * k + 8], &c[64 + 8 * k..72 + 8 * k]);
        // SAFETY: each slice holds the eight bytes loaded.
        let (q0, q1) = unsafe {
            (
                _mm_loadl_epi64(q0.as_ptr().cast()),
                _mm_loadl_epi64(q1.as_ptr().cast()),
            )
        };
        // dwords: bytes 0..4, 8..12 (register 0), then 4..8, 12..16 (register 1)
        let q = _mm_shuffle_epi32::<0b11_01_10_00>(_mm_unpacklo_epi64(q0, q1));
        (q, u16::from_le_bytes([c[128 + 2 * k], c[129 + 2 * k]]))
    } else {
        let b = &c[18 * k..18 * k + 18];
        // SAFETY: 16 code bytes after the scale (unaligned load).
        let q = unsafe { _mm_loadu_si128(b[2..].as_ptr().cast()) };
        (q, u16::from_le_bytes([b[0], b[1]]))
    }
}

/// The multi-column kernel on Q2_0 or (`X`) Q2_0_X rows, eight blocks (144 bytes) per step.
///
/// # Safety
/// The CPU must have the enabled features.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni,avx2,fma,f16c")]
unsafe fn q2_multi<const X: bool>(w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: CUT has 64 bytes (unaligned load).
    let cut = unsafe { _mm512_loadu_si512(CUT.as_ptr().cast()) };
    let spread = _mm512_setr_epi64(0, 0, 0, 0, 1, 1, 1, 1);
    let pick = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
    let m2 = _mm512_set1_epi8(3);
    let ones = _mm512_set1_epi8(1);
    out.fill(0.0);
    for (ci, xc) in w.chunks(144).enumerate() {
        let nk = xc.len() / 18;
        let mut hx = [0u16; 8];
        let mut codes = [_mm512_setzero_si512(); 8];
        for (k, h) in hx[..nk].iter_mut().enumerate() {
            let (q, d) = q2_block::<X>(xc, k);
            *h = d;
            let q = _mm512_permutexvar_epi64(spread, _mm512_castsi128_si512(q));
            codes[k] = _mm512_and_si512(_mm512_multishift_epi64_epi8(cut, q), m2);
        }
        // SAFETY: F16C is enabled for this function.
        let dx = unsafe { f16x8(&hx) };
        for (a, o) in acts.iter().zip(out.iter_mut()) {
            let yc = &view::<BlockQ8_0>(a)[16 * ci..16 * ci + 2 * nk];
            let (mut hy0, mut hy1) = ([0u16; 8], [0u16; 8]);
            let mut v = [_mm512_setzero_si512(); 8];
            for (k, y) in yc.chunks_exact(2).enumerate() {
                hy0[k] = u16::from_le_bytes(y[0].d);
                hy1[k] = u16::from_le_bytes(y[1].d);
                // SAFETY: 32 code bytes per activation block (unaligned loads).
                let (y0, y1) = unsafe {
                    (
                        _mm256_loadu_si256(y[0].qs.as_ptr().cast()),
                        _mm256_loadu_si256(y[1].qs.as_ptr().cast()),
                    )
                };
                let yv = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(y0), y1);
                let z = _mm512_setzero_si512();
                v[k] = _mm512_sub_epi32(
                    _mm512_dpbusd_epi32(z, codes[k], yv),
                    _mm512_dpbusd_epi32(z, ones, yv),
                );
            }
            // SAFETY: the features of this function cover the helpers; `vals` holds 8 f32.
            let vals = unsafe {
                let x = tree4(v[0], v[1], v[2], v[3]);
                let y = tree4(v[4], v[5], v[6], v[7]);
                let x = _mm512_add_epi32(x, _mm512_shuffle_i64x2::<0b10_11_00_01>(x, x));
                let y = _mm512_add_epi32(y, _mm512_shuffle_i64x2::<0b10_11_00_01>(y, y));
                let r = _mm512_permutex2var_epi64(x, pick, y);
                let i0 = _mm256_cvtepi32_ps(_mm512_castsi512_si256(r));
                let i1 = _mm256_cvtepi32_ps(_mm512_extracti64x4_epi64::<1>(r));
                let inner = _mm256_add_ps(
                    _mm256_mul_ps(f16x8(&hy0), i0),
                    _mm256_mul_ps(f16x8(&hy1), i1),
                );
                let mut vals = [0f32; 8];
                _mm256_storeu_ps(vals.as_mut_ptr(), _mm256_mul_ps(dx, inner));
                vals
            };
            for vk in &vals[..nk] {
                *o += vk;
            }
        }
    }
}

/// Q8_0 · Q8_0 against several activation columns, two columns per 512-bit register (lanes
/// 0..8 the first, 8..16 the second) and up to eight per pass: each weight block is loaded,
/// its |x| and sign mask formed once; `vpdpbusd` gives each column the same eight 4-element
/// lane sums as the AVX2 kernel and each lane's FMA chain runs in the reference's block
/// order, so every column gets the reference's bits.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma,f16c")]
unsafe fn dot_q8_0_avx512_multi(_n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    let xs = view::<BlockQ8_0>(w);
    // per block k of a group of eight: lanes 0..8 take the first column's scale (index k),
    // lanes 8..16 the second's (index 8 + k)
    let sel: [__m512i; 8] = std::array::from_fn(|k| {
        let v: [i32; 16] = std::array::from_fn(|l| (k + 8 * (l / 8)) as i32);
        // SAFETY: 64 readable bytes (unaligned load).
        unsafe { _mm512_loadu_si512(v.as_ptr().cast()) }
    });
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
        let mut acc = [_mm512_setzero_ps(); 4];
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
            for (k, x) in xc.iter().enumerate() {
                // SAFETY: a block's 32 code bytes are readable (unaligned load).
                let qx = unsafe { _mm256_loadu_si256(x.qs.as_ptr().cast()) };
                let xz = _mm512_broadcast_i64x4(qx);
                let ax = _mm512_abs_epi8(xz); // |x| as unsigned (x = −128 → 128)
                let neg = _mm512_movepi8_mask(xz);
                for p in 0..pairs {
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
                    let l = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), ax, sy));
                    let d = _mm512_permutexvar_ps(sel[k], dp[p]);
                    acc[p] = _mm512_fmadd_ps(d, l, acc[p]);
                }
            }
        }
        for (c, o) in out.iter_mut().enumerate() {
            let mut lanes = [0f32; 16];
            // SAFETY: `lanes` has room for 16 f32.
            unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), acc[c / 2]) };
            let h: [f32; 8] = std::array::from_fn(|i| lanes[8 * (c % 2) + i]);
            *o = crate::dot::hsum8(&h);
        }
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
///   `dw·dy` per block is one `vpermps` away;
/// - per row the FMA chain runs in the reference's block order, then the reference's
///   horizontal sum: each result has the reference's bits. An odd last row is paired with
///   itself and its copy discarded.
///
/// About two vector operations per block and row, against five for the AVX2 kernel: the
/// weights stream at read bandwidth rather than at the kernel's speed.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma,f16c")]
unsafe fn dot_q8_0_avx512_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    let ys = view::<BlockQ8_0>(a);
    let nb = ys.len();
    let k80 = _mm512_set1_epi8(0x80u8 as i8);
    let zero = _mm512_setzero_si512();
    // per block k of a group: lanes 0..8 take the first row's dw·dy (index k), lanes 8..16
    // the second's (index 8 + k)
    let sel: [__m512i; 8] = std::array::from_fn(|k| {
        let v: [i32; 16] = std::array::from_fn(|l| (k + 8 * (l / 8)) as i32);
        // SAFETY: 64 readable bytes (unaligned load).
        unsafe { _mm512_loadu_si512(v.as_ptr().cast()) }
    });
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
        let mut acc = [_mm512_setzero_ps(); 2];
        let pd = super::PREFETCH_DISTANCE;
        for g in (0..nb).step_by(8) {
            let m = (nb - g).min(8);
            for x in &xs[..rows.len()] {
                super::prefetch_ahead(x[g..].as_ptr().cast(), 8 * size_of::<BlockQ8_0>(), pd);
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
            for k in 0..m {
                let b = g + k;
                // SAFETY: a block's 32 code bytes are readable (unaligned load).
                let yv =
                    _mm512_broadcast_i64x4(unsafe { _mm256_loadu_si256(ys[b].qs.as_ptr().cast()) });
                // −128·Σ₄y: the offset's contribution, removed by starting from it
                let negc = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, k80, yv));
                for p in 0..pairs {
                    // SAFETY: as above, for the two rows' weight blocks.
                    let xv = unsafe {
                        _mm512_inserti64x4::<1>(
                            _mm512_castsi256_si512(_mm256_loadu_si256(
                                xs[2 * p][b].qs.as_ptr().cast(),
                            )),
                            _mm256_loadu_si256(xs[2 * p + 1][b].qs.as_ptr().cast()),
                        )
                    };
                    let l = _mm512_dpbusd_epi32(negc, _mm512_xor_si512(xv, k80), yv);
                    let d = _mm512_permutexvar_ps(sel[k], dd[p]);
                    acc[p] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(l), acc[p]);
                }
            }
        }
        for (r, o) in out.iter_mut().enumerate() {
            let mut lanes = [0f32; 16];
            // SAFETY: `lanes` has room for 16 f32.
            unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), acc[r / 2]) };
            let h: [f32; 8] = std::array::from_fn(|i| lanes[8 * (r % 2) + i]);
            *o = crate::dot::hsum8(&h);
        }
    }
}

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
        let (xs, nb) = super::row_views::<BlockQ6K>(rows, ys.len());
        let xs = &xs[..rows.len()];
        let mut s = [0f32; 4];
        let pd = super::PREFETCH_DISTANCE;
        for (b, y) in ys[..nb].iter().enumerate() {
            for (x, sr) in xs.iter().zip(s.iter_mut()) {
                super::prefetch_ahead(std::ptr::from_ref(&x[b]).cast(), size_of::<BlockQ6K>(), pd);
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
            acc = super::dpwssd(acc, _mm512_maddubs_epi16(u01, y0), s01);
            acc = super::dpwssd(acc, _mm512_maddubs_epi16(u23, y1), s23);
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

/// [`super::avx512_iq::packed_pick`] for Q6_K's 16 sub-block scales (words 0..16): in the
/// packed sums of half h's two code registers, lane j of register 2h is sub-block 8h + j,
/// of register 2h + 1 sub-block 8h + 4 + j.
static Q6_PAIRS: [[u16; 32]; 2] = super::avx512_iq::packed_pick(8, 4, 2, 1, 0);

/// Q6_K · Q8_K against several activation columns, four per pass (prompt chunks, experts
/// with several tokens): each super-block's codes ([`Q6k::codes`]) and scales are unpacked
/// once; per column one `vpdpbusd` per code register (|Σ| ≤ 4·63·128, so two registers'
/// sums pack to words), [`super::avx512_iq::scale_pairs`] and the offset term Σ scale·bsum
/// (`vpmaddwd`); the four columns' sums are reduced at once ([`super::sums4`]) and the
/// reference's `dy·f32(dx)·(Σ − 32·off)` runs in four f32 lanes, one per column, with the
/// running sums: per column the reference's bits. Passes come from `column_split` (5 → 3 +
/// 2); a pass of two or three columns leaves the other lanes 0 and does not store them; a
/// call of one column runs the one-row kernel.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma,f16c")]
unsafe fn dot_q6_k_avx512_multi(n: usize, w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
    // SAFETY: same features as this function.
    let k = unsafe { Q6k::new() };
    let pick = super::avx512_iq::tables64(&Q6_PAIRS);
    // SAFETY: same features as this function (the closure runs inside it).
    let one = |a: &[u8]| unsafe { dot_q6_k_avx512(n, w, a) };
    super::avx512_k::column_passes(w, acts, out, one, |x: &BlockQ6K, ys, cnt| {
        // SAFETY: same features as this function.
        let [[c0, c1], [c2, c3]] = unsafe { [k.codes(x, 0), k.codes(x, 1)] };
        // SAFETY: the 16 scale bytes (unaligned load).
        let sc = _mm256_cvtepi8_epi16(unsafe { _mm_loadu_si128(x.scales.as_ptr().cast()) });
        let sv = pick.map(|t| _mm512_permutexvar_epi16(t, _mm512_castsi256_si512(sc)));
        let (acc, off, dy) = super::avx512_k::column_sums(&[c0, c1, c2, c3], ys, cnt, &sv, sc);
        // lane c: column c's Σ − 32·off (exact)
        let isc = _mm_sub_epi32(acc, _mm_slli_epi32(off, 5));
        _mm_mul_ps(
            _mm_mul_ps(dy, _mm_set1_ps(f16c!(x.d))),
            _mm_cvtepi32_ps(isc),
        )
    });
}

/// Whether the activation quantizers may use AVX-512 (F/BW and F16C: the
/// [`super::CpuLevel::Avx512`] level). Their results are the scalar quantizers' bytes, so the
/// choice is made here, once, and not by the kernel table.
fn quantizers_ok() -> bool {
    super::CpuLevel::detect() >= super::CpuLevel::Avx512
}

/// The activation Q8_0 quantizer (`codec::q8::quant_q8_0_x86`) with AVX-512 when the CPU
/// has AVX-512F/BW and F16C: true if it ran, false if the caller must use the scalar one.
pub fn quantize_q8_0_fast(src: &[f32], dst: &mut [u8]) -> bool {
    let ok = quantizers_ok();
    if ok {
        // SAFETY: the features were checked just above.
        unsafe { quantize_q8_0_avx512(src, dst) };
    }
    ok
}

/// Per 32-element block, the scalar quantizer's operations in vectors: `amax` (a `vmaxps`
/// fold that, like `f32::max`, drops NaN lanes), `d = amax/127` and `id = 127/amax` as scalar
/// divisions, `d` to f16 by F16C (round to nearest even, as the software conversion),
/// `round_ties_even(v·id)` by `vcvtps2dq` in the default rounding mode after clamping to
/// [−128, 127], NaN lanes set to 0 (Rust's `NaN as i8`): the same bytes.
#[target_feature(enable = "avx512f,avx512bw,f16c")]
unsafe fn quantize_q8_0_avx512(src: &[f32], dst: &mut [u8]) {
    let abs = _mm512_set1_epi32(0x7FFF_FFFF);
    for (x, b) in src
        .chunks_exact(32)
        .zip(crate::blocks::view_mut::<BlockQ8_0>(dst))
    {
        // SAFETY: each chunk holds 32 f32 (unaligned loads).
        let (v0, v1) = unsafe {
            (
                _mm512_loadu_ps(x.as_ptr()),
                _mm512_loadu_ps(x.as_ptr().add(16)),
            )
        };
        let a0 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v0), abs));
        let a1 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v1), abs));
        // vmaxps returns its second operand when either is NaN: NaN lanes keep the fold's value
        let m = _mm512_max_ps(a1, _mm512_max_ps(a0, _mm512_setzero_ps()));
        let m = _mm256_max_ps(
            _mm512_castps512_ps256(m),
            _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(m))),
        );
        let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        let m = _mm_max_ss(m, _mm_shuffle_ps::<1>(m, m));
        let amax = _mm_cvtss_f32(m);
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        b.d = (_mm_extract_epi16::<0>(_mm_cvtps_ph::<0>(_mm_set_ss(d))) as u16).to_le_bytes();
        let idv = _mm512_set1_ps(id);
        let q = |v: __m512| {
            let p = _mm512_mul_ps(v, idv);
            let ordered = _mm512_cmp_ps_mask::<_CMP_ORD_Q>(p, p);
            // ±∞ (an overflowing 127/amax) would convert to i32::MIN: clamp first, which
            // commutes with rounding to nearest on [−128, 127]
            let p = _mm512_min_ps(
                _mm512_max_ps(p, _mm512_set1_ps(-128.0)),
                _mm512_set1_ps(127.0),
            );
            _mm512_cvtsepi32_epi8(_mm512_maskz_cvtps_epi32(ordered, p))
        };
        let (q0, q1) = (q(v0), q(v1));
        // SAFETY: a block's 32 code bytes (unaligned stores of 16 + 16).
        unsafe {
            _mm_storeu_si128(b.qs.as_mut_ptr().cast(), q0);
            _mm_storeu_si128(b.qs.as_mut_ptr().add(16).cast(), q1);
        }
    }
}

/// The activation Q8_K quantizer (`codec::q8::quant_q8_k`) with AVX-512 when the CPU has
/// AVX-512F/BW (and F16C, checked with them): true if it ran, false if the caller must use
/// the scalar one.
pub fn quantize_q8_k_fast(src: &[f32], dst: &mut [u8]) -> bool {
    let ok = quantizers_ok();
    if ok {
        // SAFETY: the features were checked just above.
        unsafe { quantize_q8_k_avx512(src, dst) };
    }
    ok
}

/// Per 256-element block, the scalar quantizer's operations in vectors:
/// - `amax` by a `vmaxps` fold that drops NaN lanes (the scalar `|v| > amax` never takes a
///   NaN), and `max` = the first element whose |v| equals it (the scalar loop keeps the
///   first of equal magnitudes);
/// - `iscale = −127/max` and `d = 1/iscale` as scalar divisions;
/// - ggml's `nearest_int` as the same f32 addition of 1.5·2²³ and bit mask, `min(127)` and
///   the truncating `as i8` (`vpmovdb`);
/// - `bsums` by `vpmaddubsw`/`vpmaddwd` against ones and a lane fold (exact integers).
///
/// The same bytes, NaN and ±∞ included.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn quantize_q8_k_avx512(src: &[f32], dst: &mut [u8]) {
    let abs = _mm512_set1_epi32(0x7FFF_FFFF);
    let magic = _mm512_set1_ps(12_582_912.0);
    let mant = _mm512_set1_epi32(0x007F_FFFF);
    let half = _mm512_set1_epi32(0x0040_0000);
    let top = _mm512_set1_epi32(127);
    let ones8 = _mm512_set1_epi8(1);
    let ones16 = _mm512_set1_epi16(1);
    for (x, b) in src
        .chunks_exact(256)
        .zip(crate::blocks::view_mut::<BlockQ8K>(dst))
    {
        // SAFETY: each chunk holds 256 f32 (unaligned loads).
        let v: [__m512; 16] =
            std::array::from_fn(|k| unsafe { _mm512_loadu_ps(x.as_ptr().add(16 * k)) });
        let a: [__m512; 16] = std::array::from_fn(|k| {
            _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v[k]), abs))
        });
        // vmaxps returns its second operand when either is NaN: NaN lanes keep the fold's value
        let mut m = _mm512_setzero_ps();
        for ak in a {
            m = _mm512_max_ps(ak, m);
        }
        let amax = _mm512_reduce_max_ps(m);
        if amax == 0.0 {
            *b = Zeroable::zeroed();
            continue;
        }
        let at = (0..16)
            .find_map(|k| {
                let hit = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(a[k], _mm512_set1_ps(amax));
                (hit != 0).then(|| 16 * k + hit.trailing_zeros() as usize)
            })
            .expect("amax is one of the magnitudes");
        let iscale = -127.0f32 / x[at];
        let isv = _mm512_set1_ps(iscale);
        let q: [__m128i; 16] = std::array::from_fn(|k| {
            let val = _mm512_add_ps(_mm512_mul_ps(isv, v[k]), magic);
            let i = _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(val), mant), half);
            _mm512_cvtepi32_epi8(_mm512_min_epi32(i, top))
        });
        let mut bsums = [0i16; 16];
        for (c, qc) in q.chunks_exact(4).enumerate() {
            let z = _mm512_inserti64x4::<1>(
                _mm512_castsi256_si512(_mm256_set_m128i(qc[1], qc[0])),
                _mm256_set_m128i(qc[3], qc[2]),
            );
            // SAFETY: 64 of the block's 256 code bytes (unaligned store).
            unsafe { _mm512_storeu_si512(b.qs[64 * c..].as_mut_ptr().cast(), z) };
            // lane 4j..4j+3: sub-block j of the four; fold each 128-bit lane to its lane 0
            let t = _mm512_madd_epi16(_mm512_maddubs_epi16(ones8, z), ones16);
            let t = _mm512_add_epi32(t, _mm512_shuffle_epi32::<0b10_11_00_01>(t));
            let t = _mm512_add_epi32(t, _mm512_shuffle_epi32::<0b01_00_11_10>(t));
            let mut lanes = [0i32; 16];
            // SAFETY: `lanes` has room for 16 i32.
            unsafe { _mm512_storeu_si512(lanes.as_mut_ptr().cast(), t) };
            for j in 0..4 {
                bsums[4 * c + j] = lanes[4 * j] as i16;
            }
        }
        for (o, s) in b.bsums.chunks_exact_mut(2).zip(bsums) {
            o.copy_from_slice(&s.to_le_bytes());
        }
        b.d = (1.0f32 / iscale).to_le_bytes();
    }
}
