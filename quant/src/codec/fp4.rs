//! MXFP4 (ggml type 39): 32 E2M1 codes with a shared E8M0 exponent, spec §7.

use crate::blocks::{view, view_mut, BlockMXFP4};
use crate::grids::KVALUES_MXFP4;
use crate::scalar::e8m0_to_f32_half;

/// MXFP4 → f32: `kvalues_mxfp4[code] · 2^(e−128)`.
pub fn dequant_mxfp4(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockMXFP4>(src).iter().zip(dst.chunks_exact_mut(32)) {
        let d = e8m0_to_f32_half(b.e);
        for j in 0..16 {
            y[j] = KVALUES_MXFP4[(b.qs[j] & 0xF) as usize] as f32 * d;
            y[j + 16] = KVALUES_MXFP4[(b.qs[j] >> 4) as usize] as f32 * d;
        }
    }
}

fn best_index_mxfp4(x: f32, e: f32) -> u8 {
    let mut best = 0u8;
    let mut best_err = (KVALUES_MXFP4[0] as f32 * e - x).abs();
    for (i, &k) in KVALUES_MXFP4.iter().enumerate().skip(1) {
        let err = (k as f32 * e - x).abs();
        if err < best_err {
            best = i as u8;
            best_err = err;
        }
    }
    best
}

/// Reference MXFP4 quantizer: `e = floor(log2(amax)) − 2 + 127`, nearest code (first wins).
pub fn quant_mxfp4(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(32).zip(view_mut::<BlockMXFP4>(dst)) {
        let amax = x
            .iter()
            .fold(0.0f32, |m, v| if m < v.abs() { v.abs() } else { m });
        let e = if amax > 0.0 {
            (amax.log2().floor() - 2.0 + 127.0) as u8
        } else {
            0
        };
        let d = e8m0_to_f32_half(e);
        b.e = e;
        for j in 0..16 {
            b.qs[j] = best_index_mxfp4(x[j], d) | (best_index_mxfp4(x[j + 16], d) << 4);
        }
    }
}
