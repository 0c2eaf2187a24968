//! Load-time repacked layouts: fathom's own dtypes, made from a GGUF type when a model is
//! loaded and never written to a file (their ids are ≥ [`crate::DType::FIRST_INTERNAL_ID`],
//! which [`crate::DType::from_gguf_id`] rejects).
//!
//! **IQ1_S_X** ([`BlockIQ1SX`], 70 bytes per 256 elements against IQ1_S's 50): IQ1_S with
//! every grid lookup done once, at load. IQ1_S stores each group of eight values as an 11-bit
//! index into a 2048-entry grid of {−1, 0, +1} rows; a decode kernel must look up 32 grid rows
//! per super-block, and on the AVX-512 hosts measured those lookups (gathers) and not memory
//! bounded the matvec (about 4 GiB/s of weights from DRAM against 17 GB/s). IQ1_S_X keeps the
//! values themselves as 2-bit level codes l = v + 1, half-major ([`iq1mx_code_at`]: byte i
//! holds four elements of the 16-element half i/4, so each 2-bit cut of the 64 code bytes
//! has one half per dword and the decode kernel adds the four cuts' sums into one register
//! before it applies the group scales; until 2026-12-04 byte i held elements i, i + 64,
//! i + 128 and i + 192), so unpacking is a shift and a mask.
//! The group scale and delta sign (IQ1_S's top four `qh` bits) become one nibble per group;
//! the index bits are gone. The conversion is lossless: values, scales, deltas and therefore
//! every dot product and dequantized value are IQ1_S's bits.
//!
//! **IQ2_XXS_X** ([`BlockIQ2XXSX`], 102 bytes per 256 elements against IQ2_XXS's 66): IQ2_XXS
//! with its grid and sign lookups done at load. IQ2_XXS stores each group of eight values as
//! an 8-bit index into a 256-entry grid of magnitudes {8, 25, 43} and each group's signs as
//! a 7-bit index into a parity table; its decode kernels spend their time gathering grid
//! rows and cutting sign fields (8–9 GiB/s of weights from DRAM against ~25 GB/s measured).
//! IQ2_XXS_X keeps each magnitude as a 2-bit level code in register order (byte i holds
//! elements i, i + 64, i + 128, i + 192), every sign as one bit (bit e of a 256-bit
//! plane: 64 sign bits are one quarter's negation mask, loaded straight into an AVX-512 mask
//! register) and the eight 4-bit group scales in one u32. Lossless: the values, scales and
//! so every dot product are IQ2_XXS's bits. (Three bit planes — code low bits, high bits,
//! signs — with magnitudes formed by masked blends were tried: 13–16% slower per row.)
//!
//! **IQ1_M_X** ([`BlockIQ1MX`], 76 bytes per 256 elements against IQ1_M's 56): IQ1_M with its
//! grid lookups done at load, as IQ1_S_X is IQ1_S's. IQ1_M shares IQ1_S's 2048-row grid but
//! has a delta sign per eight elements and a 3-bit scale per sixteen; its kernels gathered
//! 32 grid rows per super-block (IQ1_M matvecs ran at 18–29% of the DRAM read). IQ1_M_X
//! keeps the level codes half-major ([`iq1mx_code_at`]: byte i holds four codes of half
//! i/4, so each 2-bit cut of the 64 code bytes has one half per dword and the multi-row
//! kernel's four cuts add into one register before one scale multiply), the 32 delta signs
//! as one u32 (bit k: sub-group k) and IQ1_M's eight scale bytes unchanged (the 3-bit
//! scales and the f16 super-scale in their top nibbles). Lossless: every value, dot
//! product and dequantized element is IQ1_M's.
//!
//! **Q2_0_X** ([`BlockQ2_0X`], 144 bytes per 512 elements: Q2_0's bytes, reordered): eight
//! Q2_0 blocks with their code bytes in the order the AVX-512 decode kernel's two step
//! registers want them (register r, qword k: block k's code bytes 4r..4r + 4 and
//! 8 + 4r..8 + 4r + 4) and the eight f16 scales side by side. On Q2_0's 18-byte blocks that
//! kernel spent two `vpermt2b`, two masked `vpermb` and two more `vpermt2b` for the scales per
//! eight blocks and row: a fifth of its vector operations, all on the shuffle port. The same
//! size as the source and lossless (every value and dot product is Q2_0's); a tensor is
//! converted only when its rows are whole multiples of 512 elements.

use crate::blocks::{
    le_u16, view, BlockIQ1M, BlockIQ1MX, BlockIQ1S, BlockIQ1SX, BlockIQ2XXS, BlockIQ2XXSX,
    BlockQ2_0, BlockQ2_0X,
};
use crate::codec::iquants::{iq1m_d_of, iq1m_index, iq1m_scales_of, IQ1_DELTA};
use crate::grids::{IQ1S_LEVELS, IQ2XXS_GRID, KSIGNS_IQ2XS};
use crate::scalar::le_f16;
use crate::DType;

/// A load-time repack: converts whole blocks of its source type (`src`) into its layout
/// (`dst`): as many blocks, or for a layout with larger blocks (Q2_0_X: eight Q2_0 blocks)
/// the elements' worth of them.
pub type RepackFn = fn(src: &[u8], dst: &mut [u8]);

/// The GGUF type the repacked layout `to` is made from and its converter; `None` for a type
/// that is not a repacked layout.
pub fn repack_source(to: DType) -> Option<(DType, RepackFn)> {
    match to {
        DType::IQ1_S_X => Some((DType::IQ1_S, repack_iq1_s_x)),
        DType::IQ2_XXS_X => Some((DType::IQ2_XXS, repack_iq2_xxs_x)),
        DType::IQ1_M_X => Some((DType::IQ1_M, repack_iq1_m_x)),
        DType::Q2_0_X => Some((DType::Q2_0, repack_q2_0_x)),
        _ => None,
    }
}

/// Bit position of group `g`'s nibble in [`BlockIQ1SX::sc`] (as a little-endian u32).
#[inline]
pub fn iq1sx_nibble_shift(g: usize) -> u32 {
    4 * g as u32
}

/// Group `g`'s scale `2·s + 1` and delta sign (`true`: the delta is −1/8).
#[inline]
pub fn iq1sx_group(x: &BlockIQ1SX, g: usize) -> (i32, bool) {
    let nib = (u32::from_le_bytes(x.sc) >> iq1sx_nibble_shift(g)) & 0xF;
    (2 * (nib & 7) as i32 + 1, nib & 8 != 0)
}

/// The 2-bit level code of element `e` (0..256) in IQ2_XXS_X's code bytes (byte i, bits
/// 2p..2p+2 hold element 64p + i; IQ1_S_X and IQ1_M_X are half-major, [`iq1mx_code_at`]).
#[inline]
pub fn level_code(qs: &[u8; 64], e: usize) -> u8 {
    (qs[e % 64] >> (2 * (e / 64))) & 3
}

/// The level code l = v + 1 (0..=3; 0..=2 in a repacked block) of element `e` (0..256),
/// half-major as IQ1_M_X's ([`iq1mx_code_at`]).
#[inline]
pub fn iq1sx_code(x: &BlockIQ1SX, e: usize) -> u8 {
    let (byte, shift) = iq1mx_code_at(e);
    (x.qs[byte] >> shift) & 3
}

/// Writes the eight level codes of grid row `row` (a byte each) as elements `e0 .. e0 + 8`
/// of half-major code bytes ([`iq1mx_code_at`]).
#[inline]
fn put_levels_half_major(qs: &mut [u8; 64], e0: usize, row: u64) {
    for (j, l) in row.to_le_bytes().into_iter().enumerate() {
        let (byte, shift) = iq1mx_code_at(e0 + j);
        qs[byte] |= l << shift;
    }
}

/// Per IQ2_XXS grid row: byte j holds the level code (0: 8, 1: 25, 2: 43) of its element j.
static IQ2XXS_LEVEL_ROWS: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut j = 0;
        while j < 8 {
            let v = (IQ2XXS_GRID[i] >> (8 * j)) as u8;
            let l = if v == IQ2X_LEVELS[0] {
                0
            } else if v == IQ2X_LEVELS[1] {
                1
            } else if v == IQ2X_LEVELS[2] {
                2
            } else {
                panic!("IQ2XXS_GRID holds only 8, 25 and 43")
            };
            t[i] |= l << (8 * j);
            j += 1;
        }
        i += 1;
    }
    t
};

/// ORs one grid row's eight level codes (a byte each, from the tables above) into the
/// repacked `qs` as elements `32g + 8k .. +8`: they share quarter `g / 2` (so one shift,
/// `2·(g / 2)`) and are eight consecutive bytes; a code ≤ 3 shifted by ≤ 6 stays in its byte.
#[inline]
fn put_levels(qs: &mut [u8; 64], g: usize, k: usize, row: u64) {
    let at = 32 * (g % 2) + 8 * k;
    let cur = u64::from_le_bytes(qs[at..at + 8].try_into().unwrap());
    qs[at..at + 8].copy_from_slice(&(cur | row << (2 * (g / 2))).to_le_bytes());
}

/// Repacks IQ1_S blocks `src` into IQ1_S_X blocks `dst` (the same number of blocks).
///
/// # Panics
/// If `dst` does not hold as many IQ1_S_X blocks as `src` holds IQ1_S blocks (a caller's bug).
pub fn repack_iq1_s_x(src: &[u8], dst: &mut [u8]) {
    let xs = view::<BlockIQ1S>(src);
    let out: &mut [BlockIQ1SX] = bytemuck::cast_slice_mut(dst);
    assert_eq!(out.len(), xs.len(), "IQ1_S_X repack: block counts differ");
    for (x, o) in xs.iter().zip(out.iter_mut()) {
        let mut sc = 0u32;
        let mut qs = [0u8; 64];
        for g in 0..8 {
            let h = le_u16(&x.qh, g);
            let nib = u32::from((h >> 12) & 7) | u32::from(h >> 15) << 3;
            sc |= nib << iq1sx_nibble_shift(g);
            for k in 0..4 {
                let idx = x.qs[4 * g + k] as usize | ((((h >> (3 * k)) & 7) as usize) << 8);
                put_levels_half_major(&mut qs, 32 * g + 8 * k, IQ1S_LEVELS[idx]);
            }
        }
        *o = BlockIQ1SX {
            d: x.d,
            sc: sc.to_le_bytes(),
            qs,
        };
    }
}

/// Dequantizes IQ1_S_X (IQ1_S's values: `d·ls·(v + delta)`).
pub fn dequant_iq1_s_x(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockIQ1SX>(src)
        .iter()
        .zip(dst.chunks_exact_mut(256))
    {
        let d = le_f16(b.d);
        for g in 0..8 {
            let (ls, neg) = iq1sx_group(b, g);
            let dl = d * ls as f32;
            let delta = if neg { -IQ1_DELTA } else { IQ1_DELTA };
            for e in 32 * g..32 * g + 32 {
                y[e] = dl * ((iq1sx_code(b, e) as i32 - 1) as f32 + delta);
            }
        }
    }
}

/// IQ2_XXS's grid magnitudes by level code (code 3 never occurs in a repacked block; it
/// reads as 0 in every kernel).
pub const IQ2X_LEVELS: [u8; 4] = [8, 25, 43, 0];

/// Group `g`'s scale `2·s + 1` of an IQ2_XXS_X block (IQ2_XXS's `2·(a1 >> 28) + 1`).
#[inline]
pub fn iq2xx_scale(x: &BlockIQ2XXSX, g: usize) -> i32 {
    2 * ((u32::from_le_bytes(x.sc) >> (4 * g)) & 0xF) as i32 + 1
}

/// The signed value (±8, ±25, ±43) of element `e` (0..256) of an IQ2_XXS_X block.
#[inline]
pub fn iq2xx_value(x: &BlockIQ2XXSX, e: usize) -> i32 {
    let v = IQ2X_LEVELS[level_code(&x.qs, e) as usize] as i32;
    if x.sg[e / 8] >> (e % 8) & 1 != 0 {
        -v
    } else {
        v
    }
}

/// Repacks IQ2_XXS blocks `src` into IQ2_XXS_X blocks `dst` (the same number of blocks).
///
/// # Panics
/// If `dst` does not hold as many IQ2_XXS_X blocks as `src` holds IQ2_XXS blocks (a caller's
/// bug).
pub fn repack_iq2_xxs_x(src: &[u8], dst: &mut [u8]) {
    let xs = view::<BlockIQ2XXS>(src);
    let out: &mut [BlockIQ2XXSX] = bytemuck::cast_slice_mut(dst);
    assert_eq!(out.len(), xs.len(), "IQ2_XXS_X repack: block counts differ");
    for (x, o) in xs.iter().zip(out.iter_mut()) {
        let (mut sc, mut qs, mut sg) = (0u32, [0u8; 64], [0u8; 32]);
        for g in 0..8 {
            let q = &x.qs[8 * g..8 * g + 8];
            let a1 = u32::from_le_bytes([q[4], q[5], q[6], q[7]]);
            sc |= (a1 >> 28) << (4 * g);
            for k in 0..4 {
                put_levels(&mut qs, g, k, IQ2XXS_LEVEL_ROWS[q[k] as usize]);
                // elements 8·(4g + k) + j, j = 0..8: one sign byte, bit j
                sg[4 * g + k] = KSIGNS_IQ2XS[((a1 >> (7 * k)) & 127) as usize];
            }
        }
        *o = BlockIQ2XXSX {
            d: x.d,
            sc: sc.to_le_bytes(),
            qs,
            sg,
        };
    }
}

/// Dequantizes IQ2_XXS_X (IQ2_XXS's values: `d·(2·s + 1)·v/8`, in IQ2_XXS's float steps).
pub fn dequant_iq2_xxs_x(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockIQ2XXSX>(src)
        .iter()
        .zip(dst.chunks_exact_mut(256))
    {
        let d = le_f16(b.d);
        for g in 0..8 {
            let db = d * (0.5 + ((u32::from_le_bytes(b.sc) >> (4 * g)) & 0xF) as f32) * 0.25;
            for e in 32 * g..32 * g + 32 {
                y[e] = db * iq2xx_value(b, e) as f32;
            }
        }
    }
}

/// `true` where sub-group `k` (elements 8k..8k+8) of an IQ1_M_X block has the delta −1/8.
#[inline]
pub fn iq1mx_neg(x: &BlockIQ1MX, k: usize) -> bool {
    u32::from_le_bytes(x.sg) >> k & 1 != 0
}

/// Where IQ1_M_X keeps element `e`'s level code: byte `4·(e/16) + e % 4`, bits `2p..2p + 2`
/// with `p = (e % 16) / 4` ("half-major": byte i's four codes all belong to half i/4, the
/// 16 elements one scale covers, so the four 2-bit cuts of a 512-bit register line up
/// dword by dword with the halves, see `quant::simd`'s IQ1_M kernels).
#[inline]
pub fn iq1mx_code_at(e: usize) -> (usize, u32) {
    (4 * (e / 16) + e % 4, 2 * ((e % 16) / 4) as u32)
}

/// The level code l = v + 1 (0..=2) of element `e` (0..256) of an IQ1_M_X block.
#[inline]
pub fn iq1mx_code(x: &BlockIQ1MX, e: usize) -> u8 {
    let (byte, shift) = iq1mx_code_at(e);
    (x.qs[byte] >> shift) & 3
}

/// Repacks IQ1_M blocks `src` into IQ1_M_X blocks `dst` (the same number of blocks).
///
/// # Panics
/// If `dst` does not hold as many IQ1_M_X blocks as `src` holds IQ1_M blocks (a caller's bug).
pub fn repack_iq1_m_x(src: &[u8], dst: &mut [u8]) {
    let xs = view::<BlockIQ1M>(src);
    let out: &mut [BlockIQ1MX] = bytemuck::cast_slice_mut(dst);
    assert_eq!(out.len(), xs.len(), "IQ1_M_X repack: block counts differ");
    for (x, o) in xs.iter().zip(out.iter_mut()) {
        let (mut sg, mut qs) = (0u32, [0u8; 64]);
        for g in 0..8 {
            for k in 0..4 {
                let (idx, delta) = iq1m_index(x, g, k);
                put_levels_half_major(&mut qs, 32 * g + 8 * k, IQ1S_LEVELS[idx]);
                sg |= u32::from(delta < 0.0) << (4 * g + k);
            }
        }
        *o = BlockIQ1MX {
            qs,
            sg: sg.to_le_bytes(),
            scales: x.scales,
        };
    }
}

/// Dequantizes IQ1_M_X (IQ1_M's values: `d·(2·s + 1)·(v + delta)`, in IQ1_M's float steps).
pub fn dequant_iq1_m_x(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockIQ1MX>(src)
        .iter()
        .zip(dst.chunks_exact_mut(256))
    {
        let d = iq1m_d_of(&b.scales);
        for g in 0..8 {
            let (s1, s2) = iq1m_scales_of(&b.scales, g);
            let dl = [d * (2 * s1 + 1) as f32, d * (2 * s2 + 1) as f32];
            for k in 0..4 {
                let delta = if iq1mx_neg(b, 4 * g + k) {
                    -IQ1_DELTA
                } else {
                    IQ1_DELTA
                };
                for e in 32 * g + 8 * k..32 * g + 8 * k + 8 {
                    y[e] = dl[k / 2] * ((iq1mx_code(b, e) as i32 - 1) as f32 + delta);
                }
            }
        }
    }
}

/// Byte of a Q2_0 block's `qs` that [`BlockQ2_0X::qs`] byte `i` (0..128) holds, and the
/// block (0..8): byte 64r + 8k + 4h + m is block k's byte 8h + 4r + m.
#[inline]
fn q2_0_x_source(i: usize) -> (usize, usize) {
    let (r, k, h, m) = (i / 64, (i / 8) % 8, (i / 4) % 2, i % 4);
    (k, 8 * h + 4 * r + m)
}

/// Repacks Q2_0 blocks `src` (a multiple of eight) into Q2_0_X blocks `dst` (one per eight).
///
/// # Panics
/// If `src` does not hold eight Q2_0 blocks per Q2_0_X block of `dst` (a caller's bug).
pub fn repack_q2_0_x(src: &[u8], dst: &mut [u8]) {
    let xs = view::<BlockQ2_0>(src);
    let out: &mut [BlockQ2_0X] = bytemuck::cast_slice_mut(dst);
    assert_eq!(
        xs.len(),
        8 * out.len(),
        "Q2_0_X repack: block counts differ"
    );
    for (x, o) in xs.chunks_exact(8).zip(out.iter_mut()) {
        for (i, q) in o.qs.iter_mut().enumerate() {
            let (k, j) = q2_0_x_source(i);
            *q = x[k].qs[j];
        }
        for (k, b) in x.iter().enumerate() {
            o.d[2 * k..2 * k + 2].copy_from_slice(&b.d);
        }
    }
}

/// The eight Q2_0 blocks a Q2_0_X block was made from (the inverse of [`repack_q2_0_x`]).
pub fn q2_0_x_blocks(x: &BlockQ2_0X) -> [BlockQ2_0; 8] {
    let mut b = [BlockQ2_0 {
        d: [0; 2],
        qs: [0; 16],
    }; 8];
    for (i, q) in x.qs.iter().enumerate() {
        let (k, j) = q2_0_x_source(i);
        b[k].qs[j] = *q;
    }
    for (k, bk) in b.iter_mut().enumerate() {
        bk.d.copy_from_slice(&x.d[2 * k..2 * k + 2]);
    }
    b
}

/// Dequantizes Q2_0_X (Q2_0's values, block by block).
pub fn dequant_q2_0_x(src: &[u8], dst: &mut [f32]) {
    for (x, y) in view::<BlockQ2_0X>(src)
        .iter()
        .zip(dst.chunks_exact_mut(512))
    {
        let b = q2_0_x_blocks(x);
        crate::codec::lowbit::dequant_q2_0(bytemuck::cast_slice(&b), y);
    }
}
