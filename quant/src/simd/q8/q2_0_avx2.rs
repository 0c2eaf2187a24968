//! Q2_0 · Q8_0 decode (multi-row) kernels for AVX2 CPUs, with and without AVX-VNNI.
//!
//! The one-row AVX2 kernel spends per 32-element half a code shuffle, a shift, a mask, an
//! activation shuffle, two `vpmaddubsw` (Σ c·y and Σ y), a subtraction and a `vpmaddwd`, and
//! then a horizontal reduction of every half's eight lanes. These kernels work on eight
//! blocks at a time with one block per dword lane, as the AVX-512 decode kernel does
//! (`q2_0`), so no reduction is left:
//!
//! - **Activations prepared once per call** ([`Act`]) for up to [`crate::simd::DOT_BATCH`]
//!   rows: register `y[h][4r + p]`, lane k, byte i holds element 16r + 4i + p of activation
//!   block 2k + h (half h of weight block k), so it lines up with code position p of code
//!   byte 4r + i of that half. `nsy` holds −Σ y of each activation block (every row's sum
//!   starts there, which turns Σ c·y into the reference's Σ (c − 1)·y) and `dy` their scales.
//! - **Weights**: the eight blocks' code bytes are loaded two blocks a register and put one
//!   block a lane by eight unpacks: `r[h][j]` lane k holds code dword 2h + j of block k
//!   (bytes 8h + 4j.. of its codes). Per step (four code positions of each) one shift and
//!   one mask cut a code out of every byte, and one `vpmaddubsw` (AVX2; the i16 pair sums
//!   add up over the half's eight steps, |Σ| ≤ 8·2·3·128, before one `vpmaddwd`) or one
//!   `vpdpbusd` (AVX-VNNI) adds its products.
//! - **Float combine**: per lane `f32(dx)·(f32(dy₀)·Σ₀ + f32(dy₁)·Σ₁)`, the reference's
//!   operations, eight blocks at once; four rows' products are transposed so that they are
//!   added in block order four rows per `vaddps`, the reference's additions.
//!
//! Every sum is the exact integer and every float operation the reference's: each row gets
//! the reference's bits.

use super::tile_x16::x86::{transpose8x8, transpose_chunks};
use crate::blocks::{view, BlockQ2_0, BlockQ8_0};
use crate::simd::entry;
use bytemuck::Zeroable;
use std::arch::x86_64::*;

entry!(rows
    dot_q2_0_avx2_rows_entry => dot_q2_0_avx2_rows,
    dot_q2_0_avx_vnni_rows_entry => dot_q2_0_avx_vnni_rows,
);

/// Groups of eight blocks whose activation side is prepared at once (10 KiB of [`Act`] on
/// the stack: 8192 elements, a whole row of most matrices).
const SEG: usize = 16;

/// The activation side of eight Q2_0 blocks (sixteen Q8_0 blocks), see the module docs.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct Act {
    /// `y[h][4r + p]`: lane k, byte i = element 16r + 4i + p of activation block 2k + h.
    y: [[__m256i; 8]; 2],
    /// `nsy[h]`: lane k = −Σ y of activation block 2k + h.
    nsy: [__m256i; 2],
    /// `dy[h]`: lane k = the f32 scale of activation block 2k + h.
    dy: [__m256; 2],
}

/// Within each 128-bit lane, dword p takes bytes p, p + 4, p + 8, p + 12.
const BYTE_T: [i8; 16] = [0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15];

/// Prepares the [`Act`] of sixteen activation blocks (one group of eight weight blocks).
#[target_feature(enable = "avx2,fma,f16c")]
fn prepare(yc: &[BlockQ8_0; 16]) -> Act {
    // SAFETY: the table is 16 bytes (unaligned load).
    let t = _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(BYTE_T.as_ptr().cast()) });
    let ones8 = _mm256_set1_epi8(1);
    let ones16 = _mm256_set1_epi16(1);
    let half = |h: usize| {
        // block k's codes with dword 4r + p = the bytes of (r, p) (see `Act::y`)
        let v: [__m256i; 8] = std::array::from_fn(|k| {
            // SAFETY: an activation block has 32 code bytes (unaligned load).
            let q = unsafe { _mm256_loadu_si256(yc[2 * k + h].qs.as_ptr().cast()) };
            _mm256_shuffle_epi8(q, t)
        });
        let y = transpose8x8(v);
        // Σ y per lane: pairs by `vpmaddubsw` (|Σ| ≤ 8·2·128 in i16), then `vpmaddwd`
        let s16 = y.iter().fold(_mm256_setzero_si256(), |s, &v| {
            _mm256_add_epi16(s, _mm256_maddubs_epi16(ones8, v))
        });
        let sy = _mm256_madd_epi16(s16, ones16);
        let d: [u16; 8] = std::array::from_fn(|k| u16::from_le_bytes(yc[2 * k + h].d));
        // SAFETY: `d` is 16 bytes (unaligned load).
        let dy = _mm256_cvtph_ps(unsafe { _mm_loadu_si128(d.as_ptr().cast()) });
        (y, _mm256_sub_epi32(_mm256_setzero_si256(), sy), dy)
    };
    let (y0, n0, d0) = half(0);
    let (y1, n1, d1) = half(1);
    Act {
        y: [y0, y1],
        nsy: [n0, n1],
        dy: [d0, d1],
    }
}

/// Eight Q2_0 blocks of one row (the 144 bytes at `x`) against their prepared activations:
/// lane k is block k's product `f32(dx)·(f32(dy₀)·Σ₀ + f32(dy₁)·Σ₁)` (see the module docs;
/// `VNNI` picks `vpdpbusd` for the multiplies).
///
/// # Safety
/// Only called from kernels compiled with AVX2, FMA and F16C (and AVX-VNNI with `VNNI`),
/// into which it is always inlined; `x` must point to 144 readable bytes.
#[inline(always)]
unsafe fn products<const VNNI: bool>(x: *const u8, act: &Act) -> __m256 {
    // SAFETY: the caller's guarantees: the CPU features of every intrinsic below; block k's
    // code bytes are x + 18k + 2..x + 18k + 18 and its scale x + 18k.., k < 8 (unaligned
    // loads; the gather's dwords lie in bytes 0..130).
    unsafe {
        let ld = |k: usize| (x.add(18 * (k + 4) + 2).cast(), x.add(18 * k + 2).cast());
        let (h0, l0) = ld(0);
        let (h1, l1) = ld(1);
        let (h2, l2) = ld(2);
        let (h3, l3) = ld(3);
        let b = [
            _mm256_loadu2_m128i(h0, l0),
            _mm256_loadu2_m128i(h1, l1),
            _mm256_loadu2_m128i(h2, l2),
            _mm256_loadu2_m128i(h3, l3),
        ];
        // lane k of r[h][j]: code dword 2h + j of block k
        let [e0, e1, o0, o1] = transpose_chunks(b);
        let r = [[e0, e1], [o0, o1]];
        let mut sums = [_mm256_setzero_si256(); 2];
        for h in 0..2 {
            if VNNI {
                let mut acc = act.nsy[h];
                for j in 0..2 {
                    for p in 0..4 {
                        let c = code(r[h][j], p);
                        acc = _mm256_dpbusd_avx_epi32(acc, c, act.y[h][4 * j + p]);
                    }
                }
                sums[h] = acc;
            } else {
                // i16 pair sums: |Σ| ≤ 8 steps · 2 · 3 · 128 < 2¹⁵
                let mut acc = _mm256_setzero_si256();
                for j in 0..2 {
                    for p in 0..4 {
                        let m = _mm256_maddubs_epi16(code(r[h][j], p), act.y[h][4 * j + p]);
                        acc = _mm256_add_epi16(acc, m);
                    }
                }
                let one = _mm256_set1_epi16(1);
                sums[h] = _mm256_add_epi32(_mm256_madd_epi16(acc, one), act.nsy[h]);
            }
        }
        let inner = _mm256_add_ps(
            _mm256_mul_ps(act.dy[0], _mm256_cvtepi32_ps(sums[0])),
            _mm256_mul_ps(act.dy[1], _mm256_cvtepi32_ps(sums[1])),
        );
        // the eight f16 scales: dword k read at block k's start (its low word is `d`)
        let at = _mm256_setr_epi32(0, 18, 36, 54, 72, 90, 108, 126);
        let g = _mm256_i32gather_epi32::<1>(x.cast(), at);
        let low_words = _mm256_setr_epi8(
            0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4, 5, 8, 9, 12, 13, -1,
            -1, -1, -1, -1, -1, -1, -1,
        );
        let d = _mm256_permute4x64_epi64::<0b00_00_10_00>(_mm256_shuffle_epi8(g, low_words));
        _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(d)), inner)
    }
}

/// Code position `p` (bits 2p, 2p + 1) of every byte of `v`: one shift and one mask.
///
/// # Safety
/// Only called from kernels compiled with AVX2, into which it is always inlined.
#[inline(always)]
unsafe fn code(v: __m256i, p: usize) -> __m256i {
    // SAFETY: the caller's guarantee (AVX2).
    unsafe {
        let v = match p {
            0 => v,
            1 => _mm256_srli_epi16::<2>(v),
            2 => _mm256_srli_epi16::<4>(v),
            _ => _mm256_srli_epi16::<6>(v),
        };
        _mm256_and_si256(v, _mm256_set1_epi8(3))
    }
}

/// Adds the first `cnt` block products of four rows (`w[j]`: row j, lane k = block k) to the
/// rows' running sums (`s`, lane j = row j), block by block in order: the reference's
/// additions, four rows per `vaddps`.
#[target_feature(enable = "avx2")]
#[inline]
fn add_rows(s: &mut __m128, w: &[__m256; 4], cnt: usize) {
    let a = _mm256_unpacklo_ps(w[0], w[1]);
    let b = _mm256_unpackhi_ps(w[0], w[1]);
    let c = _mm256_unpacklo_ps(w[2], w[3]);
    let d = _mm256_unpackhi_ps(w[2], w[3]);
    // q[k]: blocks k (low half) and k + 4 (high half) of rows 0–3
    let q = [
        _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(a), _mm256_castps_pd(c))),
        _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(a), _mm256_castps_pd(c))),
        _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(b), _mm256_castps_pd(d))),
        _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(b), _mm256_castps_pd(d))),
    ];
    let v = [
        _mm256_castps256_ps128(q[0]),
        _mm256_castps256_ps128(q[1]),
        _mm256_castps256_ps128(q[2]),
        _mm256_castps256_ps128(q[3]),
        _mm256_extractf128_ps::<1>(q[0]),
        _mm256_extractf128_ps::<1>(q[1]),
        _mm256_extractf128_ps::<1>(q[2]),
        _mm256_extractf128_ps::<1>(q[3]),
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

/// Q2_0 · Q8_0 for several weight rows against one activation row (decode), AVX2: see the
/// module docs; each row gets the reference's bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q2_0_avx2_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: same features as this function.
    unsafe { q2_rows::<false>(rows, a, out) }
}

/// [`dot_q2_0_avx2_rows`] with `vpdpbusd` (AVX-VNNI) for the multiplies; the same bits.
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
unsafe fn dot_q2_0_avx_vnni_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: same features as this function.
    unsafe { q2_rows::<true>(rows, a, out) }
}

/// The multi-row driver: per batch of up to [`crate::simd::DOT_BATCH`] rows and segment of
/// [`SEG`] groups of eight blocks, the activation side prepared once ([`prepare`]), then
/// four-row passes, each row prefetched [`crate::simd::PREFETCH_DISTANCE`] bytes ahead in its
/// own stream. The last 1–7 blocks run as copies padded with zero blocks whose products are
/// not added. A short pass repeats its last row in the other lanes and does not store them.
///
/// # Safety
/// Only called from kernels compiled with AVX2, FMA and F16C (and AVX-VNNI with `VNNI`),
/// into which it is always inlined.
#[inline(always)]
unsafe fn q2_rows<const VNNI: bool>(rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: the caller's guarantee of the CPU features.
    let zero = unsafe {
        Act {
            y: [[_mm256_setzero_si256(); 8]; 2],
            nsy: [_mm256_setzero_si256(); 2],
            dy: [_mm256_setzero_ps(); 2],
        }
    };
    let mut acts = [zero; SEG];
    q2_segments!(
        rows,
        a,
        out,
        crate::simd::DOT_BATCH,
        SEG,
        acts,
        // SAFETY: the caller's guarantee of the CPU features.
        |yc| unsafe { prepare(yc) },
        |sp, p, act, cnt| {
            // SAFETY: the caller's guarantee of the CPU features; each `p` points to eight
            // blocks (144 bytes).
            unsafe {
                let w = [
                    products::<VNNI>(p[0], act),
                    products::<VNNI>(p[1], act),
                    products::<VNNI>(p[2], act),
                    products::<VNNI>(p[3], act),
                ];
                add_rows(sp, &w, cnt);
            }
        }
    );
}
