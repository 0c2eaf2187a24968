//! Q2_0 · Q8_0 with AVX-512 (VBMI, VNNI and GFNI): one row, several rows, several columns.
//!
//! The multi-column kernel (and the `tile_q2` tiles) hold a whole 64-element block in
//! element order: the 16 code bytes are spread so that qword i holds the 16 code bits of
//! elements 8i..8i+7, and `vpmultishiftqb` cuts out each element's two bits ([`CUT`]).
//! The one- and multi-row kernels (decode) work on eight blocks at a
//! time, one block per qword: two `vpermt2b` and two masked `vpermb` split the eight
//! blocks' code bytes into two step registers ([`Q2_SPLIT`]) and one `vgf2p8affineqb` per
//! step cuts one code out of every byte ([`CODE_PICK`]: shift and mask in one operation).
//! The matching activations are gathered once per 16-block segment into a transposed
//! layout ([`Q2Act`]) and reused for every row of a batch of up to
//! [`crate::simd::DOT_BATCH`] rows, so a block costs under one shuffle-port operation and no
//! horizontal reduction. `vpdpbusd` forms Σ c·y (from −Σ y: Σ (c − 1)·y) per 32-element
//! half. Exact integer arithmetic and the reference's float combine: the reference's bits.
//!
//! Every Q2_0 kernel here also runs on Q2_0_X rows (a const generic `X`): the load-time
//! layout whose 144 bytes per eight blocks already hold the two step registers and the
//! eight scales side by side, so the decode kernel's split and scale shuffles disappear; the
//! multi-column and tile kernels take each block's code bytes back from it ([`q2_block`]).

use crate::blocks::{view, BlockQ2_0, BlockQ8_0};
use crate::simd::{entry, f16x8, tree4};
use bytemuck::Zeroable;
use std::arch::x86_64::*;

entry!(multi dot_q2_0_avx512_multi_entry => dot_q2_0_avx512_multi, dot_q2_0_x_avx512_multi_entry => dot_q2_0_x_avx512_multi);
entry!(rows dot_q2_0_avx512_rows_entry => dot_q2_0_avx512_rows, dot_q2_0_x_avx512_rows_entry => dot_q2_0_x_avx512_rows);
entry!(
    dot_q2_0_avx512_entry => dot_q2_0_avx512,
    dot_q2_0_x_avx512_entry => dot_q2_0_x_avx512,
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
    crate::simd::gf_move2(0, 0),
    crate::simd::gf_move2(2, 0),
    crate::simd::gf_move2(4, 0),
    crate::simd::gf_move2(6, 0),
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
/// used by up to this many rows (callers hand over up to [`crate::simd::DOT_BATCH`]).
const Q2_BATCH: usize = crate::simd::DOT_BATCH;

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
    let k = Q2Consts::load();
    let zero = Q2Act {
        y: [_mm512_setzero_si512(); 8],
        nsy: _mm512_setzero_si512(),
        dy: _mm512_setzero_ps(),
    };
    let mut acts = [zero; Q2_SEG];
    // Each four-row pass reads its rows to their end (`dot_rows`' quarter order), each
    // prefetched in its own stream: past a row's end that is the next row of its quarter,
    // which the next pass reads. (Until 2026-12-04 two passes ran side by side, rows i and
    // i + 1 of each quarter, and rows longer than the prefetch distance had to prefetch
    // whole row pairs ahead; alternating `bench --matvec q2_0,q2_0_x` runs of the two forms,
    // 1024- to 8192-wide rows, differed by less than this host's round-to-round spread, in
    // cache one pass was no slower, and in seed decode profiles the Q2_0_X matvecs took
    // 12.7–13.3 ms per token against 14.8–15.1.)
    q2_segments!(
        rows,
        a,
        out,
        Q2_BATCH,
        Q2_SEG,
        acts,
        // SAFETY: same features as this function.
        |yc| unsafe { q2_0_act(yc) },
        |sp, p, act, cnt| {
            // SAFETY: same features as this function; each `p` points to eight blocks
            // (144 bytes).
            let w = unsafe {
                [
                    q2_0_pair::<X>(p[0], p[1], act, &k),
                    q2_0_pair::<X>(p[2], p[3], act, &k),
                ]
            };
            add_rows8(sp, &w, cnt);
        }
    );
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
