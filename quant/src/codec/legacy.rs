//! The legacy 32-element formats llama-quantize falls back to for rows that are not a
//! multiple of 256 (e.g. DeepSeek-V4's small expert dims): Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL,
//! and the Q8_1 activation type of Q4_1/Q5_1 (ggml `ggml-quants.c`). Dequantization follows
//! ggml's float order (`x·d` or `x·d + m`, no FMA).

use crate::blocks::{
    view, view_mut, BlockIQ4NL, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_1,
};
use crate::grids::KVALUES_IQ4NL;
use crate::scalar::{f32_to_f16, le_f16};

/// Q4_0 codes (offset removed) of element `j` and `j + 16`.
#[inline]
pub fn q4_0_pair(b: &BlockQ4_0, j: usize) -> (i32, i32) {
    ((b.qs[j] & 0xF) as i32 - 8, (b.qs[j] >> 4) as i32 - 8)
}

/// The 5-bit codes (no offset) of elements `j` and `j + 16` from `qs` and `qh`.
#[inline]
pub fn q5_pair(qs: &[u8; 16], qh: [u8; 4], j: usize) -> (i32, i32) {
    let h = u32::from_le_bytes(qh);
    let xh0 = ((h >> j) << 4) & 0x10;
    let xh1 = (h >> (j + 12)) & 0x10;
    (
        ((qs[j] & 0xF) as u32 | xh0) as i32,
        ((qs[j] >> 4) as u32 | xh1) as i32,
    )
}

/// Q4_0 → f32.
pub fn dequant_q4_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockQ4_0>(src).iter().zip(dst.chunks_exact_mut(32)) {
        let d = le_f16(b.d);
        for j in 0..16 {
            let (x0, x1) = q4_0_pair(b, j);
            y[j] = x0 as f32 * d;
            y[j + 16] = x1 as f32 * d;
        }
    }
}

/// Q4_1 → f32.
pub fn dequant_q4_1(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockQ4_1>(src).iter().zip(dst.chunks_exact_mut(32)) {
        let (d, m) = (le_f16(b.d), le_f16(b.m));
        for j in 0..16 {
            y[j] = (b.qs[j] & 0xF) as f32 * d + m;
            y[j + 16] = (b.qs[j] >> 4) as f32 * d + m;
        }
    }
}

/// Q5_0 → f32.
pub fn dequant_q5_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockQ5_0>(src).iter().zip(dst.chunks_exact_mut(32)) {
        let d = le_f16(b.d);
        for j in 0..16 {
            let (x0, x1) = q5_pair(&b.qs, b.qh, j);
            y[j] = (x0 - 16) as f32 * d;
            y[j + 16] = (x1 - 16) as f32 * d;
        }
    }
}

/// Q5_1 → f32.
pub fn dequant_q5_1(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockQ5_1>(src).iter().zip(dst.chunks_exact_mut(32)) {
        let (d, m) = (le_f16(b.d), le_f16(b.m));
        for j in 0..16 {
            let (x0, x1) = q5_pair(&b.qs, b.qh, j);
            y[j] = x0 as f32 * d + m;
            y[j + 16] = x1 as f32 * d + m;
        }
    }
}

/// IQ4_NL → f32.
pub fn dequant_iq4_nl(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockIQ4NL>(src).iter().zip(dst.chunks_exact_mut(32)) {
        let d = le_f16(b.d);
        for j in 0..16 {
            y[j] = d * KVALUES_IQ4NL[(b.qs[j] & 0xF) as usize] as f32;
            y[j + 16] = d * KVALUES_IQ4NL[(b.qs[j] >> 4) as usize] as f32;
        }
    }
}

/// Q8_1 → f32: `d · q`.
pub fn dequant_q8_1(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockQ8_1>(src).iter().zip(dst.chunks_exact_mut(32)) {
        let d = le_f16(b.d);
        for (o, &q) in y.iter_mut().zip(&b.qs) {
            *o = q as f32 * d;
        }
    }
}

/// x86 activation Q8_1 quantizer (ggml-cpu `quantize_row_q8_1`): as Q8_0's (`id = 127/amax`,
/// ties to even) plus `s = f16(d · Σq)`.
pub fn quant_q8_1_x86(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(32).zip(view_mut::<BlockQ8_1>(dst)) {
        let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        b.d = f32_to_f16(d).to_le_bytes();
        let mut sum = 0i32;
        for (q, &v) in b.qs.iter_mut().zip(x) {
            *q = (v * id).round_ties_even().clamp(-128.0, 127.0) as i8;
            sum += *q as i32;
        }
        b.s = f32_to_f16(d * sum as f32).to_le_bytes();
    }
}
