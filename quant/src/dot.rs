//! Reference dot products of every weight type with its activation type (spec §9.3).
//!
//! Integer arithmetic inside a block, one f32 scale product per (sub)block, f32 accumulation
//! across blocks (f64 for the float types) — the definition ggml's kernels implement. Results
//! agree with ggml's `vec_dot` to within f32 summation-order noise (tested at
//! `1e-5 · Σ|w·x|`). Fast kernels are tested against these functions.

use crate::blocks::{
    le_u16, view, BlockIQ1M, BlockIQ1MX, BlockIQ1S, BlockIQ1SX, BlockIQ2XS, BlockIQ2XXS,
    BlockIQ2XXSX, BlockIQ4XS,
};
use crate::blocks::{
    BlockMXFP4, BlockQ1_0, BlockQ2K, BlockQ2_0, BlockQ2_0X, BlockQ4K, BlockQ5K, BlockQ6K,
};
use crate::blocks::{BlockQ8K, BlockQ8_0};
use crate::codec::iquants::{
    grid_byte, iq1m_d, iq1m_d_of, iq1m_index, iq1m_scales, iq1m_scales_of, iq4xs_scale,
};
use crate::codec::kquants::{q6k_codes, scale_min_k4};
use crate::codec::lowbit::{q1_0_bit, q2_0_code};
use crate::codec::repack::q2_0_x_blocks;
use crate::codec::repack::{
    iq1mx_code, iq1mx_neg, iq1sx_code, iq1sx_group, iq2xx_scale, iq2xx_value,
};
use crate::grids::{
    IQ1S_GRID, IQ2XS_GRID, IQ2XXS_GRID, KSIGNS_IQ2XS, KVALUES_IQ4NL, KVALUES_MXFP4,
};
use crate::scalar::{bf16_to_f32, e8m0_to_f32_half, f16_to_f32, le_f16};

/// F32 · F32 (accumulated in f64).
pub fn dot_f32(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f64;
    for (wc, ac) in w.chunks_exact(4).zip(a.chunks_exact(4)).take(n) {
        let wv = f32::from_le_bytes([wc[0], wc[1], wc[2], wc[3]]);
        let av = f32::from_le_bytes([ac[0], ac[1], ac[2], ac[3]]);
        s += (wv * av) as f64;
    }
    s as f32
}

fn dot_half(w: &[u8], a: &[u8], cvt: fn(u16) -> f32) -> f32 {
    let mut s = 0f64;
    for (wc, ac) in w.chunks_exact(2).zip(a.chunks_exact(2)) {
        let wv = cvt(u16::from_le_bytes([wc[0], wc[1]]));
        let av = cvt(u16::from_le_bytes([ac[0], ac[1]]));
        s += (wv * av) as f64;
    }
    s as f32
}

/// F16 · F16.
pub fn dot_f16(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    dot_half(w, a, f16_to_f32)
}

/// BF16 · BF16.
pub fn dot_bf16(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    dot_half(w, a, bf16_to_f32)
}

/// FP8 E4M3 · F32 (each code exactly in f32, products accumulated in f64; block scales are
/// applied to the activations by the caller).
pub fn dot_f8_e4m3(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f64;
    for (&wc, ac) in w.iter().zip(a.chunks_exact(4)).take(n) {
        let av = f32::from_le_bytes([ac[0], ac[1], ac[2], ac[3]]);
        s += (crate::fp8::e4m3_to_f32(wc) * av) as f64;
    }
    s as f32
}

/// ggml's `hsum_float_8`: `(l0+l4 + l2+l6) + (l1+l5 + l3+l7)` in that association.
#[inline]
pub fn hsum8(a: &[f32; 8]) -> f32 {
    let r: [f32; 4] = std::array::from_fn(|i| a[i + 4] + a[i]);
    (r[0] + r[2]) + (r[1] + r[3])
}

/// Lane partials of one 32-element int8 × int8 block as ggml's x86 kernels form them
/// (`maddubs` + `madd`, or `vpdpbusd`): lane k = Σ of elements 4k..4k+3.
#[inline]
fn lanes8(code: impl Fn(usize) -> i32, y: &[i8]) -> [f32; 8] {
    std::array::from_fn(|k| {
        (4 * k..4 * k + 4)
            .map(|j| code(j) * y[j] as i32)
            .sum::<i32>() as f32
    })
}

/// Q8_0 · Q8_0: `Σ_b dw·dy · Σ qw·qy` in ggml's generic form (`ggml_vec_dot_q8_0_q8_0_generic`):
/// per block the exact integer sum of the 32 products, then `s += Σ · (dw·dy)` (a product and
/// an add, no FMA) in block order. The fixtures' `dot_generic` is these bits exactly
/// (`quant/tests/fixtures.rs`); ggml's x86 kernel keeps eight float lanes per block instead
/// and differs in the last bits. This form lets a prompt tile hold sixteen weight rows in a
/// register's lanes (docs/kernels.md, "Q8_0 in the integer-sum form").
pub fn dot_q8_0(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockQ8_0>(w).iter().zip(view::<BlockQ8_0>(a)) {
        let i = isum32(y, 0, |j| x.qs[j] as i32);
        s += i as f32 * (le_f16(x.d) * le_f16(y.d));
    }
    s
}

/// Integer Σ c_j·y_j over one Q8_0 activation block, with codes from `code(j)`.
#[inline]
fn isum32(y: &BlockQ8_0, off: usize, code: impl Fn(usize) -> i32) -> i32 {
    (0..32).map(|j| code(off + j) * y.qs[j] as i32).sum()
}

/// One Q2_0 block's product with its two activation blocks:
/// `f32(dx)·(f32(dy0)·Σ₀ + f32(dy1)·Σ₁)` with exact integer half sums Σ (c − 1)·y.
#[inline]
fn q2_0_block(x: &BlockQ2_0, y0: &BlockQ8_0, y1: &BlockQ8_0) -> f32 {
    let code = |j| q2_0_code(x, j) as i32 - 1;
    let inner =
        le_f16(y0.d) * isum32(y0, 0, code) as f32 + le_f16(y1.d) * isum32(y1, 32, code) as f32;
    le_f16(x.d) * inner
}

/// Q2_0 · Q8_0 (two activation blocks per weight block).
pub fn dot_q2_0(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let ys = view::<BlockQ8_0>(a);
    let mut s = 0f32;
    for (i, x) in view::<BlockQ2_0>(w).iter().enumerate() {
        s += q2_0_block(x, &ys[2 * i], &ys[2 * i + 1]);
    }
    s
}

/// Q2_0_X · Q8_0: [`dot_q2_0`] over the Q2_0 blocks the row was made from, in their order
/// (the same operations, so Q2_0's bits).
pub fn dot_q2_0_x(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let ys = view::<BlockQ8_0>(a);
    let mut s = 0f32;
    for (g, x) in view::<BlockQ2_0X>(w).iter().enumerate() {
        for (k, b) in q2_0_x_blocks(x).iter().enumerate() {
            let i = 8 * g + k;
            s += q2_0_block(b, &ys[2 * i], &ys[2 * i + 1]);
        }
    }
    s
}

/// Q1_0 · Q8_0 (four activation blocks per weight block).
pub fn dot_q1_0(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let ys = view::<BlockQ8_0>(a);
    let mut s = 0f32;
    for (i, x) in view::<BlockQ1_0>(w).iter().enumerate() {
        let code = |j| if q1_0_bit(x, j) { 1 } else { -1 };
        let mut inner = 0f32;
        for k in 0..4 {
            let y = &ys[4 * i + k];
            inner += le_f16(y.d) * isum32(y, 32 * k, code) as f32;
        }
        s += le_f16(x.d) * inner;
    }
    s
}

/// MXFP4 · Q8_0, in ggml's x86 order: blocks in pairs into two 8-lane accumulators
/// (`fma(dy·2^(e−128), lane, acc)`), summed with [`hsum8`]; an odd last block is added in
/// scalar code.
pub fn dot_mxfp4(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let xs = view::<BlockMXFP4>(w);
    let ys = view::<BlockQ8_0>(a);
    let code = |x: &BlockMXFP4, j: usize| {
        let q = if j < 16 {
            x.qs[j] & 0xF
        } else {
            x.qs[j - 16] >> 4
        };
        KVALUES_MXFP4[q as usize] as i32
    };
    let (mut acc1, mut acc2) = ([0f32; 8], [0f32; 8]);
    let pairs = xs.len() / 2;
    for p in 0..pairs {
        for (acc, ib) in [(&mut acc1, 2 * p), (&mut acc2, 2 * p + 1)] {
            let (x, y) = (&xs[ib], &ys[ib]);
            let d = le_f16(y.d) * e8m0_to_f32_half(x.e);
            let l = lanes8(|j| code(x, j), &y.qs);
            for k in 0..8 {
                acc[k] = d.mul_add(l[k], acc[k]);
            }
        }
    }
    let sum: [f32; 8] = std::array::from_fn(|k| acc1[k] + acc2[k]);
    let mut s = hsum8(&sum);
    for ib in 2 * pairs..xs.len() {
        s += mxfp4_block(&xs[ib], &ys[ib]);
    }
    s
}

/// One MXFP4 block's product `dy·2^(e−128) · Σ q·y` in scalar code: [`dot_mxfp4`]'s odd last
/// block (the SIMD kernels call it for theirs).
pub(crate) fn mxfp4_block(x: &BlockMXFP4, y: &BlockQ8_0) -> f32 {
    let d = le_f16(y.d) * e8m0_to_f32_half(x.e);
    let mut sumi = 0i32;
    for j in 0..16 {
        sumi += KVALUES_MXFP4[(x.qs[j] & 0xF) as usize] as i32 * y.qs[j] as i32;
        sumi += KVALUES_MXFP4[(x.qs[j] >> 4) as usize] as i32 * y.qs[j + 16] as i32;
    }
    d * sumi as f32
}

/// Σ q·y of 16 or 32 codes `q` against activation codes `y`.
#[inline]
fn isum(q: impl Iterator<Item = i32>, y: &[i8]) -> i32 {
    q.zip(y).map(|(a, &b)| a * b as i32).sum()
}

/// Q2_K · Q8_K.
pub fn dot_q2_k(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockQ2K>(w).iter().zip(view::<BlockQ8K>(a)) {
        let (mut summs, mut isc) = (0i32, 0i32);
        for sb in 0..16 {
            summs += (x.scales[sb] >> 4) as i32 * y.bsum(sb) as i32;
            let (h, j, l0) = (sb / 8, (sb % 8) / 2, 16 * (sb % 2));
            let q = (0..16).map(|l| ((x.qs[32 * h + l0 + l] >> (2 * j)) & 3) as i32);
            isc += (x.scales[sb] & 0xF) as i32 * isum(q, &y.qs[16 * sb..16 * sb + 16]);
        }
        let dy = y.d();
        s += dy * le_f16(x.d) * isc as f32 - dy * le_f16(x.dmin) * summs as f32;
    }
    s
}

/// Shared Q4_K / Q5_K dot: `code(j)` gives the unsigned code of element j of the block.
fn dot_k4(d: f32, dmin: f32, scales: &[u8; 12], y: &BlockQ8K, code: impl Fn(usize) -> i32) -> f32 {
    let (mut isc, mut imin) = (0i32, 0i32);
    for j in 0..8 {
        let (sc, m) = scale_min_k4(j, scales);
        imin += m as i32 * (y.bsum(2 * j) as i32 + y.bsum(2 * j + 1) as i32);
        let q = (0..32).map(|l| code(32 * j + l));
        isc += sc as i32 * isum(q, &y.qs[32 * j..32 * j + 32]);
    }
    let dy = y.d();
    dy * (d * isc as f32) - dy * (dmin * imin as f32)
}

/// Q4_K · Q8_K.
pub fn dot_q4_k(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockQ4K>(w).iter().zip(view::<BlockQ8K>(a)) {
        let code = |i: usize| {
            let (c, r) = (i / 64, i % 64);
            let b = x.qs[32 * c + r % 32];
            (if r < 32 { b & 0xF } else { b >> 4 }) as i32
        };
        s += dot_k4(le_f16(x.d), le_f16(x.dmin), &x.scales, y, code);
    }
    s
}

/// Q5_K · Q8_K.
pub fn dot_q5_k(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockQ5K>(w).iter().zip(view::<BlockQ8K>(a)) {
        let code = |i: usize| {
            let (c, r) = (i / 64, i % 64);
            let b = x.qs[32 * c + r % 32];
            let lo = if r < 32 { b & 0xF } else { b >> 4 };
            let bit = (x.qh[r % 32] >> (2 * c + usize::from(r >= 32))) & 1;
            (lo + 16 * bit) as i32
        };
        s += dot_k4(le_f16(x.d), le_f16(x.dmin), &x.scales, y, code);
    }
    s
}

/// Q6_K · Q8_K.
pub fn dot_q6_k(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockQ6K>(w).iter().zip(view::<BlockQ8K>(a)) {
        let mut q = [0i32; 256];
        for h in 0..2 {
            for l in 0..32 {
                for (k, c) in q6k_codes(x, h, l).into_iter().enumerate() {
                    q[128 * h + 32 * k + l] = c as i32;
                }
            }
        }
        let mut isc = 0i32;
        for sb in 0..16 {
            let r = 16 * sb..16 * sb + 16;
            isc += x.scales[sb] as i32 * isum(q[r.clone()].iter().copied(), &y.qs[r]);
        }
        s += y.d() * le_f16(x.d) * isc as f32;
    }
    s
}

/// Σ grid·sign·y over 8 elements.
#[inline]
fn grid8(grid: u64, signs: u8, y: &[i8]) -> i32 {
    (0..8)
        .map(|j| {
            let g = grid_byte(grid, j) as i32;
            let v = if signs & (1 << j) != 0 { -g } else { g };
            v * y[j] as i32
        })
        .sum()
}

/// IQ2_XXS · Q8_K (note the final ×0.125).
pub fn dot_iq2_xxs(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockIQ2XXS>(w).iter().zip(view::<BlockQ8K>(a)) {
        let mut bsum = 0i32;
        for g in 0..8 {
            let q = &x.qs[8 * g..8 * g + 8];
            let a1 = u32::from_le_bytes([q[4], q[5], q[6], q[7]]);
            let ls = (2 * (a1 >> 28) + 1) as i32;
            let mut sumi = 0i32;
            for k in 0..4 {
                let signs = KSIGNS_IQ2XS[((a1 >> (7 * k)) & 127) as usize];
                sumi += grid8(IQ2XXS_GRID[q[k] as usize], signs, &y.qs[32 * g + 8 * k..]);
            }
            bsum += sumi * ls;
        }
        s += le_f16(x.d) * y.d() * bsum as f32;
    }
    0.125 * s
}

/// IQ2_XS · Q8_K (final ×0.125).
pub fn dot_iq2_xs(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockIQ2XS>(w).iter().zip(view::<BlockQ8K>(a)) {
        let mut bsum = 0i32;
        for g in 0..8 {
            let ls = [
                (2 * (x.scales[g] & 0xF) + 1) as i32,
                (2 * (x.scales[g] >> 4) + 1) as i32,
            ];
            for half in 0..2 {
                let mut sumi = 0i32;
                for k in 2 * half..2 * half + 2 {
                    let q = le_u16(&x.qs, 4 * g + k);
                    let signs = KSIGNS_IQ2XS[(q >> 9) as usize];
                    sumi += grid8(
                        IQ2XS_GRID[(q & 511) as usize],
                        signs,
                        &y.qs[32 * g + 8 * k..],
                    );
                }
                bsum += sumi * ls[half];
            }
        }
        s += le_f16(x.d) * y.d() * bsum as f32;
    }
    0.125 * s
}

/// Σ grid·y over 8 elements of the signed IQ1 grid.
#[inline]
fn grid8_signed(grid: u64, y: &[i8]) -> i32 {
    (0..8)
        .map(|j| grid_byte(grid, j) as i8 as i32 * y[j] as i32)
        .sum()
}

/// IQ1_S · Q8_K (delta term from bsums).
pub fn dot_iq1_s(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockIQ1S>(w).iter().zip(view::<BlockQ8K>(a)) {
        let (mut sumi, mut sumi1) = (0i32, 0i32);
        for g in 0..8 {
            let h = le_u16(&x.qh, g);
            let ls = (2 * ((h >> 12) & 7) + 1) as i32;
            let mut lsum = 0i32;
            for k in 0..4 {
                let idx = x.qs[4 * g + k] as usize | ((((h >> (3 * k)) & 7) as usize) << 8);
                lsum += grid8_signed(IQ1S_GRID[idx], &y.qs[32 * g + 8 * k..]);
            }
            sumi += ls * lsum;
            let sgn = if h & 0x8000 != 0 { -1 } else { 1 };
            sumi1 += ls * sgn * (y.bsum(2 * g) as i32 + y.bsum(2 * g + 1) as i32);
        }
        s += le_f16(x.d) * y.d() * (sumi as f32 + 0.125 * sumi1 as f32);
    }
    s
}

/// IQ1_S_X · Q8_K: [`dot_iq1_s`]'s integer sums and float combine on the repacked values,
/// so a repacked row gives its IQ1_S row's bits.
pub fn dot_iq1_s_x(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockIQ1SX>(w).iter().zip(view::<BlockQ8K>(a)) {
        let (mut sumi, mut sumi1) = (0i32, 0i32);
        for g in 0..8 {
            let (ls, neg) = iq1sx_group(x, g);
            let lsum: i32 = (32 * g..32 * g + 32)
                .map(|e| (iq1sx_code(x, e) as i32 - 1) * y.qs[e] as i32)
                .sum();
            sumi += ls * lsum;
            let sgn = if neg { -1 } else { 1 };
            sumi1 += ls * sgn * (y.bsum(2 * g) as i32 + y.bsum(2 * g + 1) as i32);
        }
        s += le_f16(x.d) * y.d() * (sumi as f32 + 0.125 * sumi1 as f32);
    }
    s
}

/// IQ2_XXS_X · Q8_K: [`dot_iq2_xxs`]'s integer sums and float combine on the repacked
/// values, so its bits.
pub fn dot_iq2_xxs_x(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockIQ2XXSX>(w).iter().zip(view::<BlockQ8K>(a)) {
        let mut bsum = 0i32;
        for g in 0..8 {
            let sumi: i32 = (32 * g..32 * g + 32)
                .map(|e| iq2xx_value(x, e) * y.qs[e] as i32)
                .sum();
            bsum += sumi * iq2xx_scale(x, g);
        }
        s += le_f16(x.d) * y.d() * bsum as f32;
    }
    0.125 * s
}

/// IQ1_M · Q8_K (delta term from 8-element sums).
pub fn dot_iq1_m(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockIQ1M>(w).iter().zip(view::<BlockQ8K>(a)) {
        let (mut sumi, mut sumi1) = (0i32, 0i32);
        for g in 0..8 {
            let (s1, s2) = iq1m_scales(x, g);
            let ls = [(2 * s1 + 1) as i32, (2 * s2 + 1) as i32];
            for k in 0..4 {
                let (idx, delta) = iq1m_index(x, g, k);
                let yk = &y.qs[32 * g + 8 * k..32 * g + 8 * k + 8];
                let sum8: i32 = yk.iter().map(|&v| v as i32).sum();
                sumi += ls[k / 2] * grid8_signed(IQ1S_GRID[idx], yk);
                sumi1 += ls[k / 2] * if delta < 0.0 { -sum8 } else { sum8 };
            }
        }
        s += iq1m_d(x) * y.d() * (sumi as f32 + 0.125 * sumi1 as f32);
    }
    s
}

/// IQ1_M_X · Q8_K: [`dot_iq1_m`]'s integer sums and float combine on the repacked values, so
/// a repacked row gives its IQ1_M row's bits.
pub fn dot_iq1_m_x(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockIQ1MX>(w).iter().zip(view::<BlockQ8K>(a)) {
        let (mut sumi, mut sumi1) = (0i32, 0i32);
        for g in 0..8 {
            let (s1, s2) = iq1m_scales_of(&x.scales, g);
            let ls = [(2 * s1 + 1) as i32, (2 * s2 + 1) as i32];
            for k in 0..4 {
                let e0 = 32 * g + 8 * k;
                let (mut grid, mut sum8) = (0i32, 0i32);
                for e in e0..e0 + 8 {
                    grid += (iq1mx_code(x, e) as i32 - 1) * y.qs[e] as i32;
                    sum8 += y.qs[e] as i32;
                }
                sumi += ls[k / 2] * grid;
                sumi1 += ls[k / 2] * if iq1mx_neg(x, 4 * g + k) { -sum8 } else { sum8 };
            }
        }
        s += iq1m_d_of(&x.scales) * y.d() * (sumi as f32 + 0.125 * sumi1 as f32);
    }
    s
}

/// IQ4_XS · Q8_K.
pub fn dot_iq4_xs(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockIQ4XS>(w).iter().zip(view::<BlockQ8K>(a)) {
        let d = le_f16(x.d) * y.d();
        for g in 0..8 {
            let qs = &x.qs[16 * g..16 * g + 16];
            let yg = &y.qs[32 * g..32 * g + 32];
            let mut sumi = 0i32;
            for j in 0..16 {
                sumi += KVALUES_IQ4NL[(qs[j] & 0xF) as usize] as i32 * yg[j] as i32;
                sumi += KVALUES_IQ4NL[(qs[j] >> 4) as usize] as i32 * yg[j + 16] as i32;
            }
            s += d * (iq4xs_scale(x, g) * sumi) as f32;
        }
    }
    s
}

use crate::blocks::{BlockIQ4NL, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_1};
use crate::codec::legacy::{q4_0_pair, q5_pair};

/// Q4_0 · Q8_0.
pub fn dot_q4_0(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockQ4_0>(w).iter().zip(view::<BlockQ8_0>(a)) {
        let sumi: i32 = (0..16)
            .map(|j| {
                let (v0, v1) = q4_0_pair(x, j);
                v0 * y.qs[j] as i32 + v1 * y.qs[j + 16] as i32
            })
            .sum();
        s += sumi as f32 * (le_f16(x.d) * le_f16(y.d));
    }
    s
}

/// Q4_1 · Q8_1 (the min term uses the activation block's `s`).
pub fn dot_q4_1(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockQ4_1>(w).iter().zip(view::<BlockQ8_1>(a)) {
        let sumi: i32 = (0..16)
            .map(|j| {
                (x.qs[j] & 0xF) as i32 * y.qs[j] as i32
                    + (x.qs[j] >> 4) as i32 * y.qs[j + 16] as i32
            })
            .sum();
        s += (le_f16(x.d) * le_f16(y.d)) * sumi as f32 + le_f16(x.m) * le_f16(y.s);
    }
    s
}

/// Q5_0 · Q8_0.
pub fn dot_q5_0(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockQ5_0>(w).iter().zip(view::<BlockQ8_0>(a)) {
        let sumi: i32 = (0..16)
            .map(|j| {
                let (v0, v1) = q5_pair(&x.qs, x.qh, j);
                (v0 - 16) * y.qs[j] as i32 + (v1 - 16) * y.qs[j + 16] as i32
            })
            .sum();
        s += sumi as f32 * (le_f16(x.d) * le_f16(y.d));
    }
    s
}

/// Q5_1 · Q8_1.
pub fn dot_q5_1(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockQ5_1>(w).iter().zip(view::<BlockQ8_1>(a)) {
        let sumi: i32 = (0..16)
            .map(|j| {
                let (v0, v1) = q5_pair(&x.qs, x.qh, j);
                v0 * y.qs[j] as i32 + v1 * y.qs[j + 16] as i32
            })
            .sum();
        s += (le_f16(x.d) * le_f16(y.d)) * sumi as f32 + le_f16(x.m) * le_f16(y.s);
    }
    s
}

/// IQ4_NL · Q8_0.
pub fn dot_iq4_nl(_n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut s = 0f32;
    for (x, y) in view::<BlockIQ4NL>(w).iter().zip(view::<BlockQ8_0>(a)) {
        let sumi: i32 = (0..16)
            .map(|j| {
                KVALUES_IQ4NL[(x.qs[j] & 0xF) as usize] as i32 * y.qs[j] as i32
                    + KVALUES_IQ4NL[(x.qs[j] >> 4) as usize] as i32 * y.qs[j + 16] as i32
            })
            .sum();
        s += le_f16(x.d) * le_f16(y.d) * sumi as f32;
    }
    s
}
