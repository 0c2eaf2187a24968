//! IQ types (grid codebooks, super-blocks of 256): IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M, IQ4_XS
//! dequantization (spec §6). Their ggml quantizers need an importance matrix and neighbour
//! searches; fathom reads these types, it does not write them.

use crate::blocks::{le_u16, view, BlockIQ1M, BlockIQ1S, BlockIQ2XS, BlockIQ2XXS, BlockIQ4XS};
use crate::grids::{IQ1S_GRID, IQ2XS_GRID, IQ2XXS_GRID, KSIGNS_IQ2XS, KVALUES_IQ4NL};
use crate::scalar::{f16_to_f32, le_f16};

/// IQ1_S / IQ1_M delta added to every grid value.
pub const IQ1_DELTA: f32 = 0.125;

/// Byte `j` of a grid entry.
#[inline]
pub fn grid_byte(entry: u64, j: usize) -> u8 {
    (entry >> (8 * j)) as u8
}

/// Sign (+1/−1) of element `j` given an 8-bit sign mask.
#[inline]
fn sign(mask: u8, j: usize) -> f32 {
    if mask & (1 << j) != 0 {
        -1.0
    } else {
        1.0
    }
}

/// IQ2_XXS → f32.
pub fn dequant_iq2_xxs(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockIQ2XXS>(src)
        .iter()
        .zip(dst.chunks_exact_mut(256))
    {
        let d = le_f16(b.d);
        for g in 0..8 {
            let q = &b.qs[8 * g..8 * g + 8];
            let a1 = u32::from_le_bytes([q[4], q[5], q[6], q[7]]);
            let db = d * (0.5 + (a1 >> 28) as f32) * 0.25;
            for k in 0..4 {
                let grid = IQ2XXS_GRID[q[k] as usize];
                let signs = KSIGNS_IQ2XS[((a1 >> (7 * k)) & 127) as usize];
                for j in 0..8 {
                    y[32 * g + 8 * k + j] = db * grid_byte(grid, j) as f32 * sign(signs, j);
                }
            }
        }
    }
}

/// IQ2_XS → f32.
pub fn dequant_iq2_xs(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockIQ2XS>(src)
        .iter()
        .zip(dst.chunks_exact_mut(256))
    {
        let d = le_f16(b.d);
        for g in 0..8 {
            let db = [
                d * (0.5 + (b.scales[g] & 0xF) as f32) * 0.25,
                d * (0.5 + (b.scales[g] >> 4) as f32) * 0.25,
            ];
            for k in 0..4 {
                let q = le_u16(&b.qs, 4 * g + k);
                let grid = IQ2XS_GRID[(q & 511) as usize];
                let signs = KSIGNS_IQ2XS[(q >> 9) as usize];
                for j in 0..8 {
                    y[32 * g + 8 * k + j] = db[k / 2] * grid_byte(grid, j) as f32 * sign(signs, j);
                }
            }
        }
    }
}

/// IQ1_S → f32.
pub fn dequant_iq1_s(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockIQ1S>(src).iter().zip(dst.chunks_exact_mut(256)) {
        let d = le_f16(b.d);
        for g in 0..8 {
            let h = le_u16(&b.qh, g);
            let dl = d * (2 * ((h >> 12) & 7) + 1) as f32;
            let delta = if h & 0x8000 != 0 {
                -IQ1_DELTA
            } else {
                IQ1_DELTA
            };
            for k in 0..4 {
                let idx = b.qs[4 * g + k] as usize | ((((h >> (3 * k)) & 7) as usize) << 8);
                let grid = IQ1S_GRID[idx];
                for j in 0..8 {
                    y[32 * g + 8 * k + j] = dl * (grid_byte(grid, j) as i8 as f32 + delta);
                }
            }
        }
    }
}

/// The f16 super-scale of an IQ1_M block, spread over the top nibbles of its scale words.
#[inline]
pub fn iq1m_d(b: &BlockIQ1M) -> f32 {
    iq1m_d_of(&b.scales)
}

/// [`iq1m_d`] from the scale words alone (IQ1_M's and IQ1_M_X's `scales`).
#[inline]
pub fn iq1m_d_of(scales: &[u8; 8]) -> f32 {
    f16_to_f32(iq1m_d_bits(scales))
}

/// The f16 bits of the super-scale in IQ1_M's (and IQ1_M_X's) four little-endian scale
/// words: the top nibble of word i is bits 4i..4i+4 (the reference and every kernel read it
/// here).
#[inline]
pub fn iq1m_d_bits(scales: &[u8; 8]) -> u16 {
    let sc = u64::from_le_bytes(*scales);
    ((sc >> 12) & 0xF | (sc >> 24) & 0xF0 | (sc >> 36) & 0xF00 | (sc >> 48) & 0xF000) as u16
}

/// IQ1_M grid index and delta of sub-group `k` (8 elements) of group `g`.
#[inline]
pub fn iq1m_index(b: &BlockIQ1M, g: usize, k: usize) -> (usize, f32) {
    let n = (b.qh[2 * g + k / 2] >> (4 * (k % 2))) & 15;
    let idx = b.qs[4 * g + k] as usize | (((n & 7) as usize) << 8);
    (idx, if n & 8 != 0 { -IQ1_DELTA } else { IQ1_DELTA })
}

/// IQ1_M 3-bit scales of group `g`: (first 16 elements, last 16).
#[inline]
pub fn iq1m_scales(b: &BlockIQ1M, g: usize) -> (u16, u16) {
    iq1m_scales_of(&b.scales, g)
}

/// [`iq1m_scales`] from the scale words alone (IQ1_M's and IQ1_M_X's `scales`).
#[inline]
pub fn iq1m_scales_of(scales: &[u8; 8], g: usize) -> (u16, u16) {
    let w = le_u16(scales, g / 2);
    let t = 6 * (g % 2);
    ((w >> t) & 7, (w >> (t + 3)) & 7)
}

/// IQ1_M → f32.
pub fn dequant_iq1_m(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockIQ1M>(src).iter().zip(dst.chunks_exact_mut(256)) {
        let d = iq1m_d(b);
        for g in 0..8 {
            let (s1, s2) = iq1m_scales(b, g);
            let dl = [d * (2 * s1 + 1) as f32, d * (2 * s2 + 1) as f32];
            for k in 0..4 {
                let (idx, delta) = iq1m_index(b, g, k);
                let grid = IQ1S_GRID[idx];
                for j in 0..8 {
                    y[32 * g + 8 * k + j] = dl[k / 2] * (grid_byte(grid, j) as i8 as f32 + delta);
                }
            }
        }
    }
}

/// The 6-bit scale (offset 32 removed) of group `g` of an IQ4_XS block.
#[inline]
pub fn iq4xs_scale(b: &BlockIQ4XS, g: usize) -> i32 {
    let sh = u16::from_le_bytes(b.scales_h);
    let ls =
        ((b.scales_l[g / 2] >> (4 * (g % 2))) & 0xF) as i32 | ((((sh >> (2 * g)) & 3) as i32) << 4);
    ls - 32
}

/// IQ4_XS → f32.
pub fn dequant_iq4_xs(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockIQ4XS>(src)
        .iter()
        .zip(dst.chunks_exact_mut(256))
    {
        let d = le_f16(b.d);
        for g in 0..8 {
            let dl = d * iq4xs_scale(b, g) as f32;
            let qs = &b.qs[16 * g..16 * g + 16];
            for j in 0..16 {
                y[32 * g + j] = dl * KVALUES_IQ4NL[(qs[j] & 0xF) as usize] as f32;
                y[32 * g + 16 + j] = dl * KVALUES_IQ4NL[(qs[j] >> 4) as usize] as f32;
            }
        }
    }
}
