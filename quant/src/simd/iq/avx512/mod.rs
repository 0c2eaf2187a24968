//! AVX-512 kernels of the grid types · Q8_K (AVX-512 F/BW/VL, VBMI, BITALG, VNNI and
//! GFNI: the kernel table's `avx512-vnni` level). This module holds what they share: the
//! level-code and index tables, the register-table helpers, and the `four!` / `grid_one!`
//! passes of the one-column kernels. One child per type, each holding its one-column,
//! multi-column and tile-expander kernels:
//! - `iq2_xxs`: IQ2_XXS; its decode (multi-row) kernel, which looks up a pair of
//!   super-blocks' codes at once ([`LevelTables`]) instead of gathering, is `iq2_xxs_rows`;
//! - `iq2_xxs_x`: the repacked IQ2_XXS_X;
//! - `iq1_s`: IQ1_S, and the multi-column and expander bodies IQ1_S_X shares ([`Iq1Layout`]);
//! - `iq1_s_x`: the repacked IQ1_S_X's one-row and decode kernels (and the half-major code
//!   helpers IQ1_M_X shares);
//! - `iq1_m`: IQ1_M and the repacked IQ1_M_X;
//! - `iq1_rows`: the decode kernels of raw IQ1_S and IQ1_M, which gather in group order
//!   against activations prepared once per call;
//! - `passes`: the four-rows-by-four-super-blocks passes every decode kernel uses.
//!
//! IQ2_XXS: each grid row's eight values are one of {8, 25, 43}, so a row packs into a
//! 16-bit code of eight 2-bit levels, and the 256-entry code table sits in eight registers,
//! searched by four `vpermt2w` and two blends. `vpmultishiftqb` unpacks the levels to bytes
//! and `vpshufb` maps them to grid values. The 7-bit sign indices are cut out by
//! `vpmultishiftqb` too, their parity bit (the table `KSIGNS_IQ2XS` holds
//! `i | parity(i) << 7`) comes from `vpopcntb`, and `vptestmb` turns them into a byte mask
//! that negates activations. `vpdpbusd` forms the integer sums. All of it is exact integer
//! arithmetic, and the float combine is the reference's, so the result is the reference's
//! bits. The one-column IQ2_XXS kernel gathers the 8-byte grid rows instead (`vpgatherdq`,
//! 2 KiB table): fewer shuffle-port operations per super-block, 1.3–1.5× faster measured.
//!
//! IQ1_S's 2048-entry grid is too large for registers; its kernels gather each grid row's
//! eight level bytes from a 16 KiB table (`vpgatherdq`, eight rows per instruction, so a
//! quarter arrives in element order; gathering 2-bit codes from a 4 KiB table and placing
//! them with byte permutes was 1.6–2× slower for decode, and 32 scalar table reads slower
//! still). IQ1_S_X stores IQ1_S's level codes themselves (see `codec::repack`), so its
//! kernels shift and mask instead of looking anything up.

use crate::blocks::{view, BlockIQ1S, BlockIQ1SX, BlockIQ2XXS, BlockIQ2XXSX, BlockQ8K};
use crate::grids::{IQ1S_LEVELS, IQ2XXS_GRID};
use crate::simd::{
    entry, f16c, fold_pairs, packed_pick, pair_pick, scale_pairs, sums4, table64, tables64, tree4,
};
use std::arch::x86_64::*;

#[macro_use]
mod passes;
use iq1_s_x::iq1sx_codes;
pub(in crate::simd) use iq1_s_x::{cut_order, half_major_quarters};
use passes::{products4, products4x4};

/// Activation columns per unpacked weight block in the multi-column kernels (the most
/// [`crate::simd::MultiDotFn`]'s callers pass).
const COLS: usize = 8;

/// `IQ2XXS_GRID[i]` as eight 2-bit levels (0: 8, 1: 25, 2: 43), element `j` at bits 2j.
static LEVELS: [u16; 256] = {
    let mut t = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let g = IQ2XXS_GRID[i];
        let mut c = 0u16;
        let mut j = 0;
        while j < 8 {
            let lv = match (g >> (8 * j)) as u8 {
                8 => 0,
                25 => 1,
                43 => 2,
                _ => panic!("IQ2XXS_GRID value outside 8, 25, 43"),
            };
            c |= lv << (2 * j);
            j += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// Low bytes of [`LEVELS`] (levels of elements 0..3) and high bytes (elements 4..7): two
/// 256-byte tables for `vpermt2b`.
static LEVELS_LO: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = LEVELS[i] as u8;
        i += 1;
    }
    t
};
static LEVELS_HI: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = (LEVELS[i] >> 8) as u8;
        i += 1;
    }
    t
};

/// Control bytes, built at compile time: `f(i)` for i in 0..64.
macro_rules! bytes64 {
    (|$i:ident| $e:expr) => {{
        let mut t = [0u8; 64];
        let mut $i = 0;
        while $i < 64 {
            t[$i] = $e;
            $i += 1;
        }
        t
    }};
}

/// `vpmultishiftqb` control: byte j of each qword takes bits 2j.. (the level of element j).
static UNPACK: [u8; 64] = bytes64!(|i| (2 * (i % 8)) as u8);
/// `vpmultishiftqb` control: bytes 0..3 of qword g take the 7-bit sign fields at bits
/// 32 + 7k of qword g (the block's `a1` word of group g).
static FIELDS: [u8; 64] = bytes64!(|i| if i % 8 < 4 {
    (32 + 7 * (i % 8)) as u8
} else {
    0
});
/// `vpermb` control: byte i (0..32) takes grid index i of the block (byte 8·(i/4) + i%4 of
/// the code bytes: group i/4, sub-group i%4).
static IDX: [u8; 64] = bytes64!(|i| (8 * ((i % 32) / 4) + i % 4) as u8);
/// `vpermb` controls per quarter p, for zero-masking with [`GATHER_MASK`]: byte 0 of dword j
/// (j < 8) takes grid index 8p + j (see [`IDX`]), so the low 256 bits are quarter p's eight
/// `vpgatherdq` indices, zero-extended, in one instruction.
static GATHER_IDX: [[u8; 64]; 4] = [
    bytes64!(|i| gather_idx(0, i)),
    bytes64!(|i| gather_idx(1, i)),
    bytes64!(|i| gather_idx(2, i)),
    bytes64!(|i| gather_idx(3, i)),
];
const fn gather_idx(p: usize, i: usize) -> u8 {
    let g = 8 * p + (i / 4) % 8;
    (8 * (g / 4) + g % 4) as u8
}
/// Byte 0 of each of the low eight dwords (the zero-masking of [`GATHER_IDX`]).
const GATHER_MASK: u64 = 0x1111_1111;
/// `vpermt2b` control per quarter p: qword j gets the low level byte (from the first
/// source) and the high level byte (second source, +64) of sub-group 8p + j.
static PLACE: [[u8; 64]; 4] = [
    bytes64!(|i| place(0, i)),
    bytes64!(|i| place(1, i)),
    bytes64!(|i| place(2, i)),
    bytes64!(|i| place(3, i)),
];
const fn place(p: usize, i: usize) -> u8 {
    match i % 8 {
        0 => (8 * p + i / 8) as u8,
        1 => (64 + 8 * p + i / 8) as u8,
        _ => 0,
    }
}
/// `vpermb` control: qword p takes the four sign bytes of group 2p and the four of group
/// 2p + 1 (bytes 0..3 of qwords 2p and 2p+1) — as a u64, the negation mask of quarter p.
static MASKS: [u8; 64] = bytes64!(|i| ((2 * ((i / 8) % 4) + (i % 8) / 4) * 8 + i % 4) as u8);
/// Level → grid value, per 128-bit lane (for `vpshufb`).
static VALUES: [u8; 64] = bytes64!(|e| match e % 16 {
    0 => 8,
    1 => 25,
    2 => 43,
    _ => 0,
});

/// [`pair_pick`] for scales in word 4g ([`Iq2Block::ls`]).
static IQ2_PAIRS: [[u16; 32]; 2] = pair_pick(4, 0);

/// [`pair_pick`] for IQ2_XXS's code words, whose word 4g + 3 holds group g's scale.
static IQ2_TOP_PAIRS: [[u16; 32]; 2] = pair_pick(4, 3);

/// [`pair_pick`] for scales in word g (IQ1_S's scale words, in every 128-bit lane).
static IQ1_PAIRS: [[u16; 32]; 2] = pair_pick(1, 0);

/// [`pair_pick`] for scales in dword g ([`Iq1Block::ls32`]).
static IQ1_DWORD_PAIRS: [[u16; 32]; 2] = pair_pick(2, 0);

/// `$f` (a `group`) on super-blocks `c..c + 4` of `$xs` and `$ys`, or, where fewer than four
/// are left before `nb`, on copies padded with zero blocks (whose products the callers do
/// not add). A macro so that the closure's body expands inside the `#[target_feature]`
/// kernel.
macro_rules! four {
    ($xs:expr, $ys:expr, $c:expr, $nb:expr, |$x:ident, $y:ident| $body:expr) => {{
        let (xs, ys, c, nb) = ($xs, $ys, $c, $nb);
        if c + 4 <= nb {
            let ($x, $y) = (
                xs[c..c + 4].try_into().unwrap(),
                ys[c..c + 4].try_into().unwrap(),
            );
            $body
        } else {
            let (mut px, mut py) = (
                [bytemuck::Zeroable::zeroed(); 4],
                [bytemuck::Zeroable::zeroed(); 4],
            );
            px[..nb - c].copy_from_slice(&xs[c..nb]);
            py[..nb - c].copy_from_slice(&ys[c..nb]);
            let ($x, $y) = (&px, &py);
            $body
        }
    }};
}

/// The body of the one-column gather kernels: `$k.group` over four super-blocks at a time,
/// their products added in block order; the row's sum. A macro so that it expands inside each
/// `#[target_feature]` kernel.
macro_rules! grid_one {
    ($k:ident, $block:ty, $w:ident, $a:ident) => {{
        let (xs, ys) = (view::<$block>($w), view::<BlockQ8K>($a));
        let nb = xs.len().min(ys.len());
        let mut s = 0f32;
        for c in (0..nb).step_by(4) {
            let cnt = (nb - c).min(4);
            // SAFETY: the kernel expanding this has the features of `group`.
            let v = four!(xs, ys, c, nb, |x, y| unsafe { $k.group(x, y) });
            add_lanes(&mut s, v, cnt);
        }
        s
    }};
}

mod iq1_m;
mod iq1_rows;
mod iq1_s;
mod iq1_s_x;
mod iq2_xxs;
mod iq2_xxs_rows;
mod iq2_xxs_x;
pub(in crate::simd) use iq1_m::{
    dot_iq1_m_avx512_entry, dot_iq1_m_avx512_multi_entry, dot_iq1_m_x_avx512_entry,
    dot_iq1_m_x_avx512_multi_entry, dot_iq1_m_x_avx512_rows_entry,
};
pub(in crate::simd) use iq1_rows::{
    dot_iq1_m_avx512_prepared_entry, dot_iq1_s_avx512_prepared_entry,
};
use iq1_s::*;
pub(in crate::simd) use iq1_s::{
    dot_iq1_s_avx512_entry, dot_iq1_s_avx512_multi_entry, dot_iq1_s_x_avx512_multi_entry,
    expand_iq1_s_avx512, expand_iq1_s_x_avx512,
};
pub(in crate::simd) use iq1_s_x::{dot_iq1_s_x_avx512_entry, dot_iq1_s_x_avx512_rows_entry};
use iq1_s_x::{IQ1X_HALF_OFF, IQ1X_LUT};
use iq2_xxs::*;
pub(in crate::simd) use iq2_xxs::{
    dot_iq2_xxs_avx512_entry, dot_iq2_xxs_avx512_multi_entry, expand_iq2_xxs_avx512, group_iq2,
};
pub(in crate::simd) use iq2_xxs_rows::dot_iq2_xxs_avx512_pairs_entry;
pub(in crate::simd) use iq2_xxs_x::{
    dot_iq2_xxs_x_avx512_entry, dot_iq2_xxs_x_avx512_multi_entry, dot_iq2_xxs_x_avx512_rows_entry,
    expand_iq2_xxs_x_avx512,
};
