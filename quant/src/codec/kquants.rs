//! K-quants (super-blocks of 256): Q2_K, Q4_K, Q5_K, Q6_K dequantization and the reference
//! quantizers for Q4_K, Q5_K and Q6_K without importance matrix (spec §4, §10).

use crate::blocks::{view, view_mut, BlockQ2K, BlockQ4K, BlockQ5K, BlockQ6K};
use crate::scalar::{f32_to_f16, le_f16, nearest_int};

/// Unpack the 6-bit scale and min of sub-block `j` from the 12-byte Q4_K/Q5_K packing.
#[inline]
pub fn scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// Q2_K → f32.
pub fn dequant_q2_k(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockQ2K>(src).iter().zip(dst.chunks_exact_mut(256)) {
        let d = le_f16(b.d);
        let min = le_f16(b.dmin);
        let mut out = 0;
        let mut is = 0;
        for n in 0..2 {
            let q = &b.qs[32 * n..32 * n + 32];
            for shift in (0..8).step_by(2) {
                for half in 0..2 {
                    let sc = b.scales[is];
                    is += 1;
                    let dl = d * (sc & 0xF) as f32;
                    let ml = min * (sc >> 4) as f32;
                    for l in 0..16 {
                        y[out] = dl * ((q[l + 16 * half] >> shift) & 3) as f32 - ml;
                        out += 1;
                    }
                }
            }
        }
    }
}

/// Q4_K → f32.
pub fn dequant_q4_k(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockQ4K>(src).iter().zip(dst.chunks_exact_mut(256)) {
        let d = le_f16(b.d);
        let min = le_f16(b.dmin);
        for c in 0..4 {
            let q = &b.qs[32 * c..32 * c + 32];
            let (sc1, m1) = scale_min_k4(2 * c, &b.scales);
            let (sc2, m2) = scale_min_k4(2 * c + 1, &b.scales);
            let (d1, m1) = (d * sc1 as f32, min * m1 as f32);
            let (d2, m2) = (d * sc2 as f32, min * m2 as f32);
            let y = &mut y[64 * c..64 * c + 64];
            for l in 0..32 {
                y[l] = d1 * (q[l] & 0xF) as f32 - m1;
                y[l + 32] = d2 * (q[l] >> 4) as f32 - m2;
            }
        }
    }
}

/// Q5_K → f32.
pub fn dequant_q5_k(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockQ5K>(src).iter().zip(dst.chunks_exact_mut(256)) {
        let d = le_f16(b.d);
        let min = le_f16(b.dmin);
        for c in 0..4 {
            let q = &b.qs[32 * c..32 * c + 32];
            let (u1, u2) = (1u8 << (2 * c), 2u8 << (2 * c));
            let (sc1, m1) = scale_min_k4(2 * c, &b.scales);
            let (sc2, m2) = scale_min_k4(2 * c + 1, &b.scales);
            let (d1, m1) = (d * sc1 as f32, min * m1 as f32);
            let (d2, m2) = (d * sc2 as f32, min * m2 as f32);
            let y = &mut y[64 * c..64 * c + 64];
            for l in 0..32 {
                let h1 = if b.qh[l] & u1 != 0 { 16 } else { 0 };
                let h2 = if b.qh[l] & u2 != 0 { 16 } else { 0 };
                y[l] = d1 * ((q[l] & 0xF) + h1) as f32 - m1;
                y[l + 32] = d2 * ((q[l] >> 4) + h2) as f32 - m2;
            }
        }
    }
}

/// The four 6-bit codes (offset removed) at position `l` of half `h` of a Q6_K block.
#[inline]
pub fn q6k_codes(b: &BlockQ6K, h: usize, l: usize) -> [i8; 4] {
    let ql = &b.ql[64 * h..];
    let qh = b.qh[32 * h + l];
    [
        ((ql[l] & 0xF) | ((qh & 3) << 4)) as i8 - 32,
        ((ql[l + 32] & 0xF) | (((qh >> 2) & 3) << 4)) as i8 - 32,
        ((ql[l] >> 4) | (((qh >> 4) & 3) << 4)) as i8 - 32,
        ((ql[l + 32] >> 4) | (((qh >> 6) & 3) << 4)) as i8 - 32,
    ]
}

/// Q6_K → f32.
pub fn dequant_q6_k(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockQ6K>(src).iter().zip(dst.chunks_exact_mut(256)) {
        let d = le_f16(b.d);
        for h in 0..2 {
            let sc = &b.scales[8 * h..];
            let y = &mut y[128 * h..128 * h + 128];
            for l in 0..32 {
                let is = l / 16;
                let q = q6k_codes(b, h, l);
                for (k, &qk) in q.iter().enumerate() {
                    y[l + 32 * k] = d * sc[is + 2 * k] as f32 * qk as f32;
                }
            }
        }
    }
}

const GROUP_MAX_EPS: f32 = 1e-15;

/// ggml's `make_qx_quants` with `rmse_type = 1` (weights x²) and no importance matrix.
/// Writes codes with offset `nmax` into `l_out` and returns the scale.
fn make_qx_quants(nmax: i32, x: &[f32], l_out: &mut [i8]) -> f32 {
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l_out.fill(0);
        return 0.0;
    }
    let nmaxf = nmax as f32;
    let quant = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    let sums = |iscale: f32| {
        let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
        for &v in x {
            let l = quant(iscale, v);
            let w = v * v;
            sumlx += w * v * l as f32;
            suml2 += w * l as f32 * l as f32;
        }
        (sumlx, suml2)
    };
    let mut iscale = -nmaxf / max;
    for (o, &v) in l_out.iter_mut().zip(x) {
        *o = (quant(iscale, v) + nmax) as i8;
    }
    let (sumlx, suml2) = sums(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmaxf + 0.1f32 * is as f32) / max;
        let (sumlx, suml2) = sums(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (o, &v) in l_out.iter_mut().zip(x) {
                *o = (quant(iscale, v) + nmax) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// ggml's `make_qkx2_quants` (squared error, no MAD). Returns `(scale, min_offset)` where the
/// offset is the non-negative value subtracted at dequantization.
#[allow(clippy::too_many_arguments)]
fn make_qkx2_quants(
    nmax: i32,
    x: &[f32],
    weights: &[f32],
    l_out: &mut [u8],
    l_aux: &mut [u8],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
) -> (f32, f32) {
    let n = x.len();
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l_out.fill(0);
        return (0.0, -min);
    }
    let nmaxf = nmax as f32;
    let mut iscale = nmaxf / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        l_out[i] = l as u8;
        let diff = scale * l as f32 + min - x[i];
        best_error += weights[i] * (diff * diff);
    }
    if nstep < 1 {
        return (scale, -min);
    }
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmaxf) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            l_aux[i] = l as u8;
            let w = weights[i];
            let lf = l as f32;
            sum_l += w * lf;
            sum_l2 += w * lf * lf;
            sum_xl += w * lf * x[i];
        }
        let dd = sum_w * sum_l2 - sum_l * sum_l;
        if dd > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / dd;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / dd;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                let diff = this_scale * l_aux[i] as f32 + this_min - x[i];
                cur_error += weights[i] * (diff * diff);
            }
            if cur_error < best_error {
                l_out[..n].copy_from_slice(&l_aux[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// Shared Q4_K / Q5_K super-block quantization: returns `(d, dmin, packed scales, codes)`.
fn quant_k4_superblock(
    x: &[f32],
    nmax: i32,
    rmin: f32,
    nstep: i32,
) -> ([u8; 2], [u8; 2], [u8; 12], [u8; 256]) {
    let mut l = [0u8; 256];
    let mut laux = [0u8; 32];
    let mut weights = [0f32; 32];
    let mut mins = [0f32; 8];
    let mut scales = [0f32; 8];
    let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
    for j in 0..8 {
        let xs = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0.0f32;
        for &v in xs {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        for (w, &v) in weights.iter_mut().zip(xs) {
            *w = av_x + v.abs();
        }
        let (s, m) = make_qkx2_quants(
            nmax,
            xs,
            &weights,
            &mut l[32 * j..32 * j + 32],
            &mut laux,
            rmin,
            0.1,
            nstep,
        );
        scales[j] = s;
        mins[j] = m;
        if s > max_scale {
            max_scale = s;
        }
        if m > max_min {
            max_min = m;
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut packed = [0u8; 12];
    for j in 0..8 {
        // ggml stores nearest_int into a uint8_t before MIN(63, ·): keep the truncation.
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        if j < 4 {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
            packed[j - 4] |= (ls >> 4) << 6;
            packed[j] |= (lm >> 4) << 6;
        }
    }
    let d = f32_to_f16(max_scale / 63.0).to_le_bytes();
    let dmin = f32_to_f16(max_min / 63.0).to_le_bytes();
    let (df, dminf) = (le_f16(d), le_f16(dmin));
    for j in 0..8 {
        let (sc, m) = scale_min_k4(j, &packed);
        let dd = df * sc as f32;
        if dd == 0.0 {
            continue;
        }
        let dm = dminf * m as f32;
        for ii in 0..32 {
            l[32 * j + ii] = nearest_int((x[32 * j + ii] + dm) / dd).clamp(0, nmax) as u8;
        }
    }
    (d, dmin, packed, l)
}

/// Reference Q4_K quantizer (`quantize_row_q4_K_ref`).
pub fn quant_q4_k(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(256).zip(view_mut::<BlockQ4K>(dst)) {
        let (d, dmin, scales, l) = quant_k4_superblock(x, 15, -1.0, 20);
        b.d = d;
        b.dmin = dmin;
        b.scales = scales;
        for c in 0..4 {
            for j in 0..32 {
                b.qs[32 * c + j] = l[64 * c + j] | (l[64 * c + 32 + j] << 4);
            }
        }
    }
}

/// Reference Q5_K quantizer (`quantize_row_q5_K_ref`).
pub fn quant_q5_k(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(256).zip(view_mut::<BlockQ5K>(dst)) {
        let (d, dmin, scales, l) = quant_k4_superblock(x, 31, -0.5, 15);
        b.d = d;
        b.dmin = dmin;
        b.scales = scales;
        b.qh = [0; 32];
        for c in 0..4 {
            let (m1, m2) = (1u8 << (2 * c), 2u8 << (2 * c));
            for j in 0..32 {
                let mut l1 = l[64 * c + j];
                if l1 > 15 {
                    l1 -= 16;
                    b.qh[j] |= m1;
                }
                let mut l2 = l[64 * c + 32 + j];
                if l2 > 15 {
                    l2 -= 16;
                    b.qh[j] |= m2;
                }
                b.qs[32 * c + j] = l1 | (l2 << 4);
            }
        }
    }
}

/// Reference Q6_K quantizer (`quantize_row_q6_K_ref`).
pub fn quant_q6_k(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(256).zip(view_mut::<BlockQ6K>(dst)) {
        let mut l = [0i8; 256];
        let mut scales = [0f32; 16];
        let (mut max_scale, mut max_abs_scale) = (0.0f32, 0.0f32);
        for ib in 0..16 {
            let s = make_qx_quants(32, &x[16 * ib..16 * ib + 16], &mut l[16 * ib..16 * ib + 16]);
            scales[ib] = s;
            if s.abs() > max_abs_scale {
                max_abs_scale = s.abs();
                max_scale = s;
            }
        }
        if max_abs_scale < GROUP_MAX_EPS {
            *b = bytemuck::Zeroable::zeroed();
            continue;
        }
        let iscale = -128.0f32 / max_scale;
        b.d = f32_to_f16(1.0 / iscale).to_le_bytes();
        for ib in 0..16 {
            b.scales[ib] = nearest_int(iscale * scales[ib]).min(127) as i8;
        }
        let df = le_f16(b.d);
        for j in 0..16 {
            let dd = df * b.scales[j] as f32;
            if dd == 0.0 {
                continue;
            }
            for ii in 0..16 {
                let q = nearest_int(x[16 * j + ii] / dd).clamp(-32, 31);
                l[16 * j + ii] = (q + 32) as i8;
            }
        }
        let l = l.map(|v| v as u8);
        for h in 0..2 {
            let (lo, hi) = (128 * h, 64 * h);
            for i in 0..32 {
                let q1 = l[lo + i] & 0xF;
                let q2 = l[lo + i + 32] & 0xF;
                let q3 = l[lo + i + 64] & 0xF;
                let q4 = l[lo + i + 96] & 0xF;
                b.ql[hi + i] = q1 | (q3 << 4);
                b.ql[hi + i + 32] = q2 | (q4 << 4);
                b.qh[32 * h + i] = (l[lo + i] >> 4)
                    | ((l[lo + i + 32] >> 4) << 2)
                    | ((l[lo + i + 64] >> 4) << 4)
                    | ((l[lo + i + 96] >> 4) << 6);
            }
        }
    }
}
