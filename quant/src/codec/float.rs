//! F32, F16 and BF16 rows (one element per "block").

use crate::scalar::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};

/// F32 bytes → f32.
pub fn dequant_f32(src: &[u8], dst: &mut [f32]) {
    for (d, c) in dst.iter_mut().zip(src.chunks_exact(4)) {
        *d = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
}
/// f32 → F32 bytes.
pub fn quant_f32(src: &[f32], dst: &mut [u8]) {
    for (c, s) in dst.chunks_exact_mut(4).zip(src) {
        c.copy_from_slice(&s.to_le_bytes());
    }
}
/// F16 bytes → f32 (exact).
pub fn dequant_f16(src: &[u8], dst: &mut [f32]) {
    for (d, c) in dst.iter_mut().zip(src.chunks_exact(2)) {
        *d = f16_to_f32(u16::from_le_bytes([c[0], c[1]]));
    }
}
/// f32 → F16 bytes (round to nearest even).
pub fn quant_f16(src: &[f32], dst: &mut [u8]) {
    for (c, s) in dst.chunks_exact_mut(2).zip(src) {
        c.copy_from_slice(&f32_to_f16(*s).to_le_bytes());
    }
}
/// BF16 bytes → f32 (exact).
pub fn dequant_bf16(src: &[u8], dst: &mut [f32]) {
    for (d, c) in dst.iter_mut().zip(src.chunks_exact(2)) {
        *d = bf16_to_f32(u16::from_le_bytes([c[0], c[1]]));
    }
}
/// f32 → BF16 bytes (ggml's round-to-nearest-even rule).
pub fn quant_bf16(src: &[f32], dst: &mut [u8]) {
    for (c, s) in dst.chunks_exact_mut(2).zip(src) {
        c.copy_from_slice(&f32_to_bf16(*s).to_le_bytes());
    }
}

/// FP8 E4M3 bytes → f32 (exact; the NaN codes give NaN). A block-scaled weight's scales are
/// not applied: they live in a tensor of their own.
pub fn dequant_e4m3(src: &[u8], dst: &mut [f32]) {
    for (d, &b) in dst.iter_mut().zip(src) {
        *d = crate::fp8::e4m3_to_f32(b);
    }
}
/// f32 → FP8 E4M3 bytes (round to nearest even after clamping to ±448).
pub fn quant_e4m3(src: &[f32], dst: &mut [u8]) {
    for (d, &v) in dst.iter_mut().zip(src) {
        *d = crate::fp8::f32_to_e4m3(v);
    }
}
