//! The AVX2 multi-row (decode) kernels of the grid types IQ1_S, IQ1_S_X, IQ1_M, IQ1_M_X and
//! IQ2_XXS_X: a child of `iq::avx2`.
//!
//! They share one driver ([`grid_rows`]): per batch of up to [`crate::simd::DOT_BATCH`] rows
//! and segment of [`SEG`] super-blocks, the activation side prepared once
//! ([`GridRows::Act`]), then four-row passes, each row prefetched
//! [`crate::simd::PREFETCH_DISTANCE`] bytes ahead (the one-row path has no software
//! prefetch). Per super-block each row gives eight i32 lanes that add up to the block's exact
//! integer T; four rows' lanes are reduced together and the products `(f32(d)·dy)·(T·inner)`
//! formed four rows per operation and added in block order, each sum times `outer` at the
//! end: the reference's operations (inner and outer are 1 or 1/8, exact), so each row gets
//! the reference's bits.
//!
//! The IQ1 types write T = 8·sumi + sumi1 (|T| < 2²⁴, so f32(T)·0.125 = sumi + sumi1/8
//! exactly) as 8·Σ ls·Σ l·y + Σ ls·(σ − 8)·Σ y, with the level l = v + 1 (0, 1 or 2: an
//! unsigned `vpmaddubsw` operand) and the group's scale ls = 2·s + 1 and delta sign σ: the
//! second term (the offset of the levels and the delta) is one multiply of the eight group
//! coefficients by the activation's group sums.
//!
//! **IQ1_S** ([`BlockIQ1S`]). The one-row AVX2 kernel forms every grid index in scalar code
//! (a shift, a mask, a shift and an `or` each, 32 a super-block), joins each group's four
//! grid rows with `_mm256_set_epi64x` (three shuffle-port uops) and broadcasts each group's
//! scale through a general register; at about 25 ns a super-block it read 15% of the DRAM
//! bandwidth. Here the indices are formed in vectors, eight at a time (two groups: the `qs`
//! bytes zero-extended to dwords, one `vpsrlvd` of the two groups' `qh` words broadcast,
//! lane 4h + k shifted right by 16h + 3k, masked and shifted to bits 8–10); one
//! `vpgatherdq` from [`IQ1S_LEVELS`] fetches a group's four grid rows in element order, so
//! the activations are used as they are; a group then costs a `vpmaddubsw`, a `vpshufb` of
//! its scale, a `vpmaddwd` and an add.
//!
//! **IQ1_S_X** ([`BlockIQ1SX`], `--repack iq1_s`): its level codes are stored, half-major
//! (byte 4m + r, bits 2p.., holds element 16m + 4p + r), so there is no lookup at all. The
//! activations are put in that order once per call ([`XAct`]: register (h, p) holds the
//! elements of code position p of half h's bytes), and per half of a super-block four steps
//! of a shift, a mask and a `vpmaddubsw` add up in i16 (|Σ| ≤ 4·2·2·127) before one
//! `vpmaddwd` by the four groups' scales, spread once per block by two `vpermd`.
//!
//! **IQ1_M** ([`BlockIQ1M`]): its scales cover 16-element halves and its delta sign each
//! 8-element sub-group, so the one-row kernel formed a second `vpsignb` product for the delta
//! and built each group from four scalar table reads (10% of the DRAM bandwidth). Here each
//! element's weight is formed whole, W = 8·v + 9 + σ (0..18), by one `vpgatherdq` a group
//! from [`IQ1M_LEVELS`] (the whole `qh` nibble, delta sign included, is bits 8–11 of the
//! index), so T = Σ_h ls_h·(Σ W·y − 9·Σ y): per group a `vpmaddubsw`, a `vpshufb` of the two
//! half scales, a `vpmaddwd` and an add, and per block one `vpmaddwd` of the prepared −9·Σ y
//! of the halves.
//!
//! **IQ1_M_X** ([`BlockIQ1MX`], `--repack iq1_m`): IQ1_S_X's codes and steps
//! ([`x_level_sums`], the scales per half instead of per group); the delta term is Σ over the
//! 32 sub-groups of ls·(σ − 8)·Σ y, whose two choices (−7 and −9 times the sub-group's sum) are
//! prepared once per call ([`MxAct`]) and picked by a mask of the sign bits.
//!
//! **IQ2_XXS_X** (`--repack iq2_xxs`): the one-row kernel's group step (`iq2_xxs`), T the
//! reference's Σ ls·Σ w·y (times 1/8 at the end, as the reference).

use super::iq1_s_group_scales;
use crate::blocks::{view, BlockIQ1M, BlockIQ1MX, BlockIQ1S, BlockIQ1SX, BlockIQ2XXSX, BlockQ8K};
use crate::codec::iquants::iq1m_d_bits;
use crate::grids::{IQ1M_LEVELS, IQ1S_LEVELS};
use crate::simd::entry;
use crate::simd::q8::tile_x16::x86::transpose_chunks;
use std::arch::x86_64::*;

entry!(rows
    dot_iq1_s_avx2_rows_entry => dot_iq1_s_avx2_rows,
    dot_iq1_s_x_avx2_rows_entry => dot_iq1_s_x_avx2_rows,
    dot_iq1_m_avx2_rows_entry => dot_iq1_m_avx2_rows,
    dot_iq1_m_x_avx2_rows_entry => dot_iq1_m_x_avx2_rows,
    dot_iq2_xxs_x_avx2_rows_entry => dot_iq2_xxs_x_avx2_rows,
);

/// Super-blocks whose activation side is prepared at once (8192 elements, a whole row of
/// most matrices; about 10 KiB of [`XAct`] on the stack).
const SEG: usize = 32;

/// `vpshufb` controls: every word of both 128-bit lanes takes word g of its lane.
static WORD_BCAST: [[u8; 32]; 8] = {
    let mut t = [[0u8; 32]; 8];
    let mut g = 0;
    while g < 8 {
        let mut b = 0;
        while b < 32 {
            t[g][b] = (2 * g + b % 2) as u8;
            b += 1;
        }
        g += 1;
    }
    t
};

/// A grid layout as [`grid_rows`] takes it.
pub(super) trait GridRows: bytemuck::Pod {
    /// The factor of each block's T inside the product (1 or 1/8).
    const INNER: f32;
    /// The factor of each row's sum at the end (1 or 1/8).
    const OUTER: f32;
    /// The activation side of one super-block, prepared once per call.
    type Act: Copy;
    /// Prepares `y`.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C.
    unsafe fn prepare(y: &BlockQ8K) -> Self::Act;
    /// Eight i32 lanes adding up to this block's T against `y`, prepared as `act` (see the
    /// module docs).
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C.
    unsafe fn sums(&self, y: &BlockQ8K, act: &Self::Act) -> __m256i;
    /// The f16 super-block scale's bits.
    fn d(&self) -> i16;
}

/// The eight group sums Σ y of `y` (pairs of its `bsums`), as i32 lanes.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn group_sums(y: &BlockQ8K) -> __m256i {
    // SAFETY: `bsums` is 32 bytes (unaligned load).
    let bs = unsafe { _mm256_loadu_si256(y.bsums.as_ptr().cast()) };
    _mm256_madd_epi16(bs, _mm256_set1_epi16(1))
}

/// The grid indices of groups 2j (lanes 0–3) and 2j + 1 (lanes 4–7) of an IQ1 block, eight
/// at a time: its `qs` bytes 8j.. zero-extended to dwords, or'd at bits 8.. with `qh` dword
/// j shifted right by `shifts` (each lane's sub-group's bits) and masked by `mask` (IQ1_S:
/// three index bits; IQ1_M: the whole nibble, delta sign included).
#[target_feature(enable = "avx2")]
#[inline]
fn grid_indices(qs: &[u8; 32], qh: &[u8; 16], j: usize, shifts: __m256i, mask: __m256i) -> __m256i {
    assert!(j < 4, "two groups of eight");
    // SAFETY: `qs` bytes 8j..8j + 8 and `qh` bytes 4j..4j + 4 lie in the block (j < 4;
    // unaligned loads).
    let (q, h) = unsafe {
        (
            _mm256_cvtepu8_epi32(_mm_loadl_epi64(qs.as_ptr().add(8 * j).cast())),
            _mm256_set1_epi32(std::ptr::read_unaligned(
                qh.as_ptr().add(4 * j).cast::<i32>(),
            )),
        )
    };
    let hi = _mm256_and_si256(_mm256_srlv_epi32(h, shifts), mask);
    _mm256_or_si256(q, _mm256_slli_epi32::<8>(hi))
}

/// The eight groups' grid rows of an IQ1 block from `table`, element j of group g in byte j
/// of register g: per two groups the [`grid_indices`] (`qh` bits by `shifts`, `bits` of
/// them) and one `vpgatherdq` a group.
///
/// # Panics
/// If an index of `bits` high bits can fall outside `table` (a caller's bug).
#[target_feature(enable = "avx2")]
#[inline]
fn gather_groups(
    qs: &[u8; 32],
    qh: &[u8; 16],
    shifts: __m256i,
    bits: u32,
    table: &'static [u64],
) -> [__m256i; 8] {
    assert!(
        (0xFF | ((1usize << bits) - 1) << 8) < table.len(),
        "gather table too short"
    );
    let mask = _mm256_set1_epi32((1 << bits) - 1);
    let mut w = [_mm256_setzero_si256(); 8];
    for j in 0..4 {
        let idx = grid_indices(qs, qh, j, shifts, mask);
        // SAFETY: every index is a `qs` byte or'd with `bits` bits at 8.., inside the table
        // (checked above; 8-byte rows).
        unsafe {
            let base = table.as_ptr().cast();
            w[2 * j] = _mm256_i32gather_epi64::<8>(base, _mm256_castsi256_si128(idx));
            w[2 * j + 1] = _mm256_i32gather_epi64::<8>(base, _mm256_extracti128_si256::<1>(idx));
        }
    }
    w
}

/// The levels l = v + 1 (0..2) of an IQ1_S block's eight groups from [`IQ1S_LEVELS`]
/// (sub-group 4g + k's three index bits: bits 3k of `qh` word g).
#[target_feature(enable = "avx2")]
#[inline]
pub(super) fn iq1_s_levels(x: &BlockIQ1S) -> [__m256i; 8] {
    let shifts = _mm256_setr_epi32(0, 3, 6, 9, 16, 19, 22, 25);
    gather_groups(&x.qs, &x.qh, shifts, 3, &IQ1S_LEVELS)
}

/// Σ over an IQ1 block's eight groups of `vpmaddwd(vpmaddubsw(w[g], y's group g), scale)`,
/// the scale word g of each 128-bit lane of `sc` spread over the lane (one in-lane `vpshufb`
/// by [`WORD_BCAST`]), as eight i32 lanes.
#[target_feature(enable = "avx2")]
#[inline]
fn group_dots(w: &[__m256i; 8], y: &BlockQ8K, sc: __m256i) -> __m256i {
    let mut acc = _mm256_setzero_si256();
    for (g, &wg) in w.iter().enumerate() {
        // SAFETY: `y.qs` bytes 32g..32g + 32 lie in the block (g < 8) and the control is 32
        // bytes (unaligned loads).
        let (yv, bc) = unsafe {
            (
                _mm256_loadu_si256(y.qs.as_ptr().add(32 * g).cast()),
                _mm256_loadu_si256(WORD_BCAST[g].as_ptr().cast()),
            )
        };
        let m = _mm256_maddubs_epi16(wg, yv);
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(m, _mm256_shuffle_epi8(sc, bc)));
    }
    acc
}

impl GridRows for BlockIQ1S {
    const INNER: f32 = 0.125;
    const OUTER: f32 = 1.0;
    /// The eight group sums Σ y as i16.
    type Act = __m128i;

    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn prepare(y: &BlockQ8K) -> __m128i {
        let g32 = group_sums(y);
        let g16 = _mm256_permute4x64_epi64::<0b00_00_10_00>(_mm256_packs_epi32(g32, g32));
        _mm256_castsi256_si128(g16)
    }

    /// The gathers and scales of the module docs.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn sums(&self, y: &BlockQ8K, ysum: &__m128i) -> __m256i {
        let x = self;
        // ls and ls·σ, then ls·(σ − 8)
        let (ls, signed) = iq1_s_group_scales(x);
        let coef = _mm_sub_epi16(signed, _mm_slli_epi16::<3>(ls));
        let delta = _mm_madd_epi16(coef, *ysum);
        // each group's scale in word g of both lanes; |pair sums| ≤ 2·2·128
        let acc = group_dots(&iq1_s_levels(x), y, _mm256_broadcastsi128_si256(ls));
        _mm256_add_epi32(_mm256_slli_epi32::<3>(acc), _mm256_zextsi128_si256(delta))
    }

    fn d(&self) -> i16 {
        i16::from_le_bytes(self.d)
    }
}

/// An IQ1_S_X super-block's activation side: `y[h][p]` byte 4m + r holds element 128h +
/// 16m + 4p + r (the elements of code position p of the block's code bytes 32h..32h + 32),
/// `gsum` the eight group sums Σ y as i32.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
pub(super) struct XAct {
    y: [[__m256i; 4]; 2],
    gsum: __m256i,
}

/// `r[k]` dword m holds dword k of the m-th of the eight 16-byte chunks at `p`
/// ([`transpose_chunks`] on two chunks a register).
///
/// # Safety
/// The CPU must have AVX2 and `p` must point to 128 readable bytes.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn chunk_dwords(p: *const u8) -> [__m256i; 4] {
    // SAFETY: the caller's guarantee (unaligned loads inside the 128 bytes).
    let b: [__m256i; 4] = std::array::from_fn(|k| unsafe {
        _mm256_loadu2_m128i(p.add(16 * (k + 4)).cast(), p.add(16 * k).cast())
    });
    transpose_chunks(b)
}

impl GridRows for BlockIQ1SX {
    const INNER: f32 = 0.125;
    const OUTER: f32 = 1.0;
    type Act = XAct;

    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn prepare(y: &BlockQ8K) -> XAct {
        XAct {
            // SAFETY: same features as this function.
            y: unsafe { x_order(y) },
            gsum: group_sums(y),
        }
    }

    /// The stored codes' steps of the module docs.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn sums(&self, _y: &BlockQ8K, act: &XAct) -> __m256i {
        let x = self;
        // the eight group nibbles (3-bit scale, delta sign) in dword lanes
        let nib = _mm256_srlv_epi32(
            _mm256_set1_epi32(i32::from_le_bytes(x.sc)),
            _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28),
        );
        let ls = _mm256_or_si256(
            _mm256_slli_epi32::<1>(_mm256_and_si256(nib, _mm256_set1_epi32(7))),
            _mm256_set1_epi32(1),
        );
        // ls·(σ − 8): ±ls by the delta bit (xor and subtract of its mask), minus 8·ls
        let neg = _mm256_cmpeq_epi32(
            _mm256_and_si256(nib, _mm256_set1_epi32(8)),
            _mm256_set1_epi32(8),
        );
        let signed = _mm256_sub_epi32(_mm256_xor_si256(ls, neg), neg);
        let coef = _mm256_sub_epi32(signed, _mm256_slli_epi32::<3>(ls));
        let delta = _mm256_mullo_epi32(coef, act.gsum);
        // both i16 halves of dword g hold ls_g; half h's scales: word l ↦ group 4h + l/4
        let dup = _mm256_or_si256(ls, _mm256_slli_epi32::<16>(ls));
        let sc = [
            _mm256_permutevar8x32_epi32(dup, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3)),
            _mm256_permutevar8x32_epi32(dup, _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7)),
        ];
        _mm256_add_epi32(delta, x_level_sums(&x.qs, &act.y, &sc))
    }

    fn d(&self) -> i16 {
        i16::from_le_bytes(self.d)
    }
}

/// The activations of `y` in the half-major order of the repacked codes: `[h][p]` byte 4m +
/// r holds element 128h + 16m + 4p + r (dword p of the 16-byte chunk 8h + m, byte r).
///
/// # Safety
/// The CPU must have AVX2.
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn x_order(y: &BlockQ8K) -> [[__m256i; 4]; 2] {
    // SAFETY: the 256 codes are 128 bytes per half.
    unsafe {
        [
            chunk_dwords(y.qs.as_ptr().cast()),
            chunk_dwords(y.qs.as_ptr().add(128).cast()),
        ]
    }
}

/// 8·Σ ls·Σ l·y of a repacked IQ1 block (IQ1_S_X, IQ1_M_X: the same half-major codes `qs`)
/// against its activations in [`x_order`], as eight i32 lanes: per half h of the block, four
/// steps of a shift, a mask and a `vpmaddubsw` add up in i16 (|Σ| ≤ 4·2·2·127 < 2¹⁵), then
/// one `vpmaddwd` by `sc[h]`, whose dword m holds (in both words) the scale of elements
/// 128h + 16m.. 16 further.
#[target_feature(enable = "avx2")]
#[inline]
fn x_level_sums(qs: &[u8; 64], y: &[[__m256i; 4]; 2], sc: &[__m256i; 2]) -> __m256i {
    let m3 = _mm256_set1_epi8(3);
    let mut acc = _mm256_setzero_si256();
    for h in 0..2 {
        // SAFETY: code bytes 32h..32h + 32 lie in the block (unaligned load).
        let c = unsafe { _mm256_loadu_si256(qs.as_ptr().add(32 * h).cast()) };
        let cut = [
            c,
            _mm256_srli_epi16::<2>(c),
            _mm256_srli_epi16::<4>(c),
            _mm256_srli_epi16::<6>(c),
        ];
        let mut s16 = _mm256_setzero_si256();
        for p in 0..4 {
            let l = _mm256_and_si256(cut[p], m3);
            s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(l, y[h][p]));
        }
        // ×8 for T's first term
        let part = _mm256_madd_epi16(s16, sc[h]);
        acc = _mm256_add_epi32(acc, _mm256_slli_epi32::<3>(part));
    }
    acc
}

// ---- IQ1_M, IQ1_M_X -----------------------------------------------------------------------

/// `vpshufb` control, both 128-bit lanes: the lane's even words, then its odd ones.
static EVEN_ODD_WORDS: [u8; 32] = {
    let mut t = [0u8; 32];
    let mut b = 0;
    while b < 32 {
        let w = (b % 16) / 2;
        let src = if w < 4 { 2 * w } else { 2 * (w - 4) + 1 };
        t[b] = (2 * src + b % 2) as u8;
        b += 1;
    }
    t
};

/// The sixteen half scales ls = 2·s + 1 of IQ1_M's packed `scales` (half h: bits 3·(h mod 4)
/// of word h/4) as i16, the even halves in the low 128-bit lane and the odd ones in the high
/// one: word g of the lanes is then the scale of group g's first and second half, which one
/// in-lane `vpshufb` ([`WORD_BCAST`]) spreads over the group's elements.
#[target_feature(enable = "avx2")]
#[inline]
fn iq1m_half_scales(scales: &[u8; 8]) -> __m256i {
    // dwords 0–3: words 0, 1 (halves 0–7), dwords 4–7: words 2, 3 (halves 8–15)
    // SAFETY: 8 bytes (unaligned load).
    let q = unsafe { _mm_loadl_epi64(scales.as_ptr().cast()) };
    let v = _mm256_permutevar8x32_epi32(
        _mm256_castsi128_si256(q),
        _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1),
    );
    let m7 = _mm256_set1_epi32(7);
    // even halves 0, 2, 4, 6 | 8, 10, 12, 14 and the odd ones
    let even = _mm256_and_si256(
        _mm256_srlv_epi32(v, _mm256_setr_epi32(0, 6, 16, 22, 0, 6, 16, 22)),
        m7,
    );
    let odd = _mm256_and_si256(
        _mm256_srlv_epi32(v, _mm256_setr_epi32(3, 9, 19, 25, 3, 9, 19, 25)),
        m7,
    );
    // packing interleaves the 64-bit quarters: even 0–3, odd 0–3 | even 4–7, odd 4–7
    let s = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packs_epi32(even, odd));
    _mm256_or_si256(_mm256_slli_epi16::<1>(s), _mm256_set1_epi16(1))
}

/// The unsigned weights W = 8·v + 9 + σ (0..18) of an IQ1_M block's eight groups, element j
/// of group g in byte j of register g, from [`IQ1M_LEVELS`] ([`gather_groups`]): the index
/// takes the whole `qh` nibble (three index bits and the delta sign; sub-group 8j + t's is
/// bits 4t of `qh` dword j) at bits 8–11.
#[target_feature(enable = "avx2")]
#[inline]
pub(super) fn iq1m_weights(x: &BlockIQ1M) -> [__m256i; 8] {
    let shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    gather_groups(&x.qs, &x.qh, shifts, 4, &IQ1M_LEVELS)
}

impl GridRows for BlockIQ1M {
    const INNER: f32 = 0.125;
    const OUTER: f32 = 1.0;
    /// −9·Σ y of the sixteen halves as i16, in [`iq1m_half_scales`]'s order.
    type Act = __m256i;

    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn prepare(y: &BlockQ8K) -> __m256i {
        // SAFETY: `bsums` is 32 bytes and so is the control (unaligned loads).
        let (bs, ctl) = unsafe {
            (
                _mm256_loadu_si256(y.bsums.as_ptr().cast()),
                _mm256_loadu_si256(EVEN_ODD_WORDS.as_ptr().cast()),
            )
        };
        // |9·Σ| ≤ 9·16·128 < 2¹⁵
        let eo = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_shuffle_epi8(bs, ctl));
        _mm256_mullo_epi16(eo, _mm256_set1_epi16(-9))
    }

    /// T = Σ_h ls_h·(Σ W·y − 9·Σ y) over the sixteen halves h, with W = 8·v + 9 + σ the
    /// unsigned weights of [`iq1m_weights`].
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn sums(&self, y: &BlockQ8K, bs9: &__m256i) -> __m256i {
        let x = self;
        let ls = iq1m_half_scales(&x.scales);
        // |pair sums| ≤ 2·18·128 < 2¹⁵
        let dots = group_dots(&iq1m_weights(x), y, ls);
        _mm256_add_epi32(_mm256_madd_epi16(*bs9, ls), dots)
    }

    fn d(&self) -> i16 {
        iq1m_d_bits(&self.scales) as i16
    }
}

/// An IQ1_M_X super-block's activation side: `y` in [`x_order`]; `s7[h]`, `s9[h]` word i:
/// −7 and −9 times Σ y of sub-group 16h + i (eight elements), the delta term's two choices.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
pub(super) struct MxAct {
    y: [[__m256i; 4]; 2],
    s7: [__m256i; 2],
    s9: [__m256i; 2],
}

/// The 32 eight-element sums of `y`'s codes as i16, sub-group 16h + i in word i of
/// register h.
#[target_feature(enable = "avx2")]
#[inline]
fn sub_group_sums(y: &BlockQ8K) -> [__m256i; 2] {
    let ones8 = _mm256_set1_epi8(1);
    let ones16 = _mm256_set1_epi16(1);
    // dword q of register r: Σ y of elements 32r + 4q..
    let quads: [__m256i; 8] = std::array::from_fn(|r| {
        // SAFETY: `y.qs` bytes 32r..32r + 32 lie in the block (unaligned load).
        let v = unsafe { _mm256_loadu_si256(y.qs.as_ptr().add(32 * r).cast()) };
        _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, v), ones16)
    });
    // dword k of pair c: sub-group 8c + k (the adds leave 4c, 4c+1, 4c+4, 4c+5 | 4c+2, ...)
    let subs: [__m256i; 4] = std::array::from_fn(|c| {
        _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_hadd_epi32(quads[2 * c], quads[2 * c + 1]))
    });
    // |Σ| ≤ 8·128: packed to i16 (the pack interleaves the 64-bit quarters back)
    std::array::from_fn(|h| {
        _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packs_epi32(subs[2 * h], subs[2 * h + 1]))
    })
}

impl GridRows for BlockIQ1MX {
    const INNER: f32 = 0.125;
    const OUTER: f32 = 1.0;
    type Act = MxAct;

    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn prepare(y: &BlockQ8K) -> MxAct {
        let s = sub_group_sums(y);
        // |9·Σ| ≤ 9·8·128 < 2¹⁵
        MxAct {
            // SAFETY: same features as this function.
            y: unsafe { x_order(y) },
            s7: s.map(|v| _mm256_mullo_epi16(v, _mm256_set1_epi16(-7))),
            s9: s.map(|v| _mm256_mullo_epi16(v, _mm256_set1_epi16(-9))),
        }
    }

    /// T = 8·Σ_h ls_h·Σ l·y ([`x_level_sums`]) + Σ_k ls·(σ_k − 8)·Σ y over the 32
    /// sub-groups k: σ − 8 is −9 where the sub-group's sign bit is set, else −7, so its
    /// prepared sums are picked by a mask of the sign bits and one `vpmaddwd` by the
    /// sub-groups' scales applies them.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn sums(&self, _y: &BlockQ8K, act: &MxAct) -> __m256i {
        let x = self;
        let sc = u64::from_le_bytes(x.scales);
        let shifts = _mm256_setr_epi32(0, 3, 6, 9, 16, 19, 22, 25);
        let bits = _mm256_setr_epi16(
            1,
            2,
            4,
            8,
            16,
            32,
            64,
            128,
            256,
            512,
            1024,
            2048,
            4096,
            8192,
            16384,
            i16::MIN,
        );
        let sg = u32::from_le_bytes(x.sg);
        let mut acc = _mm256_setzero_si256();
        let mut dup = [_mm256_setzero_si256(); 2];
        for (h, d) in dup.iter_mut().enumerate() {
            // dword m: the scale of half 8h + m (words 2h, 2h + 1 of `scales`), in both words
            let v = _mm256_set1_epi32((sc >> (32 * h)) as i32);
            let s = _mm256_and_si256(_mm256_srlv_epi32(v, shifts), _mm256_set1_epi32(7));
            let ls = _mm256_or_si256(_mm256_slli_epi32::<1>(s), _mm256_set1_epi32(1));
            *d = _mm256_or_si256(ls, _mm256_slli_epi32::<16>(ls));
            // word i: all ones where sub-group 16h + i has the negative delta
            let m = _mm256_and_si256(_mm256_set1_epi16((sg >> (16 * h)) as i16), bits);
            let neg = _mm256_cmpeq_epi16(m, bits);
            let coef_y = _mm256_blendv_epi8(act.s7[h], act.s9[h], neg);
            // word pair (2m, 2m + 1) of `d` is half 8h + m's scale: sub-groups 16h + 2m, + 1
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(*d, coef_y));
        }
        _mm256_add_epi32(acc, x_level_sums(&x.qs, &act.y, &dup))
    }

    fn d(&self) -> i16 {
        iq1m_d_bits(&self.scales) as i16
    }
}

/// IQ1_S · Q8_K for several weight rows against one activation row (decode), four rows at a
/// time ([`grid_rows`]); each row gets the reference's bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_iq1_s_avx2_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: same features as this function.
    unsafe { grid_rows::<BlockIQ1S>(rows, a, out) }
}

/// IQ1_S_X · Q8_K for several weight rows against one activation row (decode): IQ1_S's
/// bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_iq1_s_x_avx2_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: same features as this function.
    unsafe { grid_rows::<BlockIQ1SX>(rows, a, out) }
}

/// IQ1_M · Q8_K for several weight rows against one activation row (decode), four rows at a
/// time ([`grid_rows`]); each row gets the reference's bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_iq1_m_avx2_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: same features as this function.
    unsafe { grid_rows::<BlockIQ1M>(rows, a, out) }
}

/// IQ1_M_X · Q8_K for several weight rows against one activation row (decode): IQ1_M's
/// bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_iq1_m_x_avx2_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: same features as this function.
    unsafe { grid_rows::<BlockIQ1MX>(rows, a, out) }
}

/// IQ2_XXS_X · Q8_K for several weight rows against one activation row (decode): IQ2_XXS's
/// bits.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_iq2_xxs_x_avx2_rows(_n: usize, rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    // SAFETY: same features as this function.
    unsafe { grid_rows::<BlockIQ2XXSX>(rows, a, out) }
}

/// The multi-row driver (see the module docs): batches of up to
/// [`crate::simd::DOT_BATCH`] rows, segments of [`SEG`] super-blocks prepared once, four-row
/// passes with each row prefetched [`crate::simd::PREFETCH_DISTANCE`] bytes ahead. A short
/// pass repeats its last row in the other lanes and does not store them.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn grid_rows<B: GridRows>(rows: &[&[u8]], a: &[u8], out: &mut [f32]) {
    const BATCH: usize = crate::simd::DOT_BATCH;
    let ys = view::<BlockQ8K>(a);
    let pd = crate::simd::PREFETCH_DISTANCE;
    let mut acts = [const { std::mem::MaybeUninit::<B::Act>::uninit() }; SEG];
    for (rows, out) in rows.chunks(BATCH).zip(out.chunks_mut(BATCH)) {
        let mut xs: [&[B]; BATCH] = [&[]; BATCH];
        let mut nb = ys.len();
        for (x, w) in xs.iter_mut().zip(rows) {
            *x = view::<B>(w);
            nb = nb.min(x.len());
        }
        let nr = rows.len();
        let mut s = [_mm_setzero_ps(); BATCH / 4];
        for seg in (0..nb).step_by(SEG) {
            let segn = (nb - seg).min(SEG);
            for (act, y) in acts.iter_mut().zip(&ys[seg..seg + segn]) {
                // SAFETY: same features as this function.
                act.write(unsafe { B::prepare(y) });
            }
            // SAFETY: the first `segn` entries were written just above.
            let acts = unsafe { std::slice::from_raw_parts(acts.as_ptr().cast::<B::Act>(), segn) };
            for (r, sp) in (0..nr).step_by(4).zip(s.iter_mut()) {
                let x4: [&[B]; 4] = std::array::from_fn(|j| xs[(r + j).min(nr - 1)]);
                for (i, act) in acts.iter().enumerate() {
                    let b = seg + i;
                    for x in &x4[..(nr - r).min(4)] {
                        crate::simd::prefetch_ahead(x[b..].as_ptr().cast(), size_of::<B>(), pd);
                    }
                    let y = &ys[b];
                    // SAFETY: same features as this function.
                    let t = unsafe {
                        [
                            x4[0][b].sums(y, act),
                            x4[1][b].sums(y, act),
                            x4[2][b].sums(y, act),
                            x4[3][b].sums(y, act),
                        ]
                    };
                    // lane r: row r's T
                    let h = _mm256_hadd_epi32(
                        _mm256_hadd_epi32(t[0], t[1]),
                        _mm256_hadd_epi32(t[2], t[3]),
                    );
                    let tt =
                        _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h));
                    let inner = _mm_mul_ps(_mm_cvtepi32_ps(tt), _mm_set1_ps(B::INNER));
                    let d = _mm_setr_epi16(
                        x4[0][b].d(),
                        x4[1][b].d(),
                        x4[2][b].d(),
                        x4[3][b].d(),
                        0,
                        0,
                        0,
                        0,
                    );
                    let dd = _mm_mul_ps(_mm_cvtph_ps(d), _mm_set1_ps(y.d()));
                    *sp = _mm_add_ps(*sp, _mm_mul_ps(dd, inner));
                }
            }
        }
        for (o, sp) in out.chunks_mut(4).zip(&s) {
            let mut v = [0f32; 4];
            // SAFETY: `v` holds four f32 (unaligned store).
            unsafe { _mm_storeu_ps(v.as_mut_ptr(), _mm_mul_ps(*sp, _mm_set1_ps(B::OUTER))) };
            o.copy_from_slice(&v[..o.len()]);
        }
    }
}
