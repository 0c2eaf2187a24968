//! Q2_0 (64 elements, codes {−1, 0, 1, 2}·d) and Q1_0 (128 elements, ±d), spec §5.

use crate::blocks::{view, view_mut, BlockQ1_0, BlockQ2_0};
use crate::scalar::{f32_to_f16, le_f16};

/// Q2_0 code of element `j` (0..64).
#[inline]
pub fn q2_0_code(b: &BlockQ2_0, j: usize) -> u8 {
    (b.qs[j / 4] >> (2 * (j % 4))) & 3
}

/// Q2_0 → f32: `(code − 1) · d`.
pub fn dequant_q2_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockQ2_0>(src).iter().zip(dst.chunks_exact_mut(64)) {
        let d = le_f16(b.d);
        for (j, o) in y.iter_mut().enumerate() {
            *o = (q2_0_code(b, j) as i32 - 1) as f32 * d;
        }
    }
}

/// Reference Q2_0 quantizer: `d = max|x|`, `code = clamp(roundf(x·(1/d)) + 1, 0, 3)`.
pub fn quant_q2_0(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(64).zip(view_mut::<BlockQ2_0>(dst)) {
        let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let id = if amax != 0.0 { 1.0 / amax } else { 0.0 };
        b.d = f32_to_f16(amax).to_le_bytes();
        b.qs = [0; 16];
        for (j, &v) in x.iter().enumerate() {
            let code = ((v * id).round() as i32 + 1).clamp(0, 3) as u8;
            b.qs[j / 4] |= code << (2 * (j % 4));
        }
    }
}

/// Q1_0 sign bit of element `j` (0..128): true → `+d`.
#[inline]
pub fn q1_0_bit(b: &BlockQ1_0, j: usize) -> bool {
    (b.qs[j / 8] >> (j % 8)) & 1 != 0
}

/// Q1_0 → f32: `±d`.
pub fn dequant_q1_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockQ1_0>(src).iter().zip(dst.chunks_exact_mut(128)) {
        let d = le_f16(b.d);
        for (j, o) in y.iter_mut().enumerate() {
            *o = if q1_0_bit(b, j) { d } else { -d };
        }
    }
}

/// Reference Q1_0 quantizer: `d = mean|x|`, bit = `x ≥ 0`.
pub fn quant_q1_0(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(128).zip(view_mut::<BlockQ1_0>(dst)) {
        let mut sum = 0.0f32;
        for &v in x {
            sum += v.abs();
        }
        b.d = f32_to_f16(sum / 128.0).to_le_bytes();
        b.qs = [0; 16];
        for (j, &v) in x.iter().enumerate() {
            if v >= 0.0 {
                b.qs[j / 8] |= 1 << (j % 8);
            }
        }
    }
}
