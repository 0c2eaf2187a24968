//! Q8_0 (weights and activations) and Q8_K (activations), spec §3 and §9.

use crate::blocks::{view, view_mut, BlockQ8K, BlockQ8_0};
use crate::scalar::{f32_to_f16, le_f16, nearest_int};

/// Q8_0 → f32: `d · q`.
pub fn dequant_q8_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockQ8_0>(src).iter().zip(dst.chunks_exact_mut(32)) {
        let d = le_f16(b.d);
        for (o, &q) in y.iter_mut().zip(&b.qs) {
            *o = q as f32 * d;
        }
    }
}

fn amax32(x: &[f32]) -> f32 {
    x.iter().fold(0.0f32, |m, v| m.max(v.abs()))
}

/// Storage / reference Q8_0 quantizer (`quantize_row_q8_0_ref`): `id = 1/d`, round half away
/// from zero.
pub fn quant_q8_0_ref(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(32).zip(view_mut::<BlockQ8_0>(dst)) {
        let amax = amax32(x);
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        b.d = f32_to_f16(d).to_le_bytes();
        for (q, &v) in b.qs.iter_mut().zip(x) {
            *q = (v * id).round() as i8;
        }
    }
}

/// x86 activation Q8_0 quantizer (ggml-cpu `quantize_row_q8_0` on AVX/AVX2/AVX-512):
/// `id = 127/amax`, round half to even, saturating to int8.
pub fn quant_q8_0_x86(src: &[f32], dst: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if crate::simd::quantize_q8_0_fast(src, dst) {
        return;
    }
    quant_q8_0_x86_scalar(src, dst);
}

/// The scalar form of [`quant_q8_0_x86`] (the reference its AVX-512 form is tested against).
pub fn quant_q8_0_x86_scalar(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(32).zip(view_mut::<BlockQ8_0>(dst)) {
        let amax = amax32(x);
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        b.d = f32_to_f16(d).to_le_bytes();
        for (q, &v) in b.qs.iter_mut().zip(x) {
            *q = (v * id).round_ties_even().clamp(-128.0, 127.0) as i8;
        }
    }
}

/// Q8_K → f32: `d · q`.
pub fn dequant_q8_k(src: &[u8], dst: &mut [f32]) {
    for (b, y) in view::<BlockQ8K>(src).iter().zip(dst.chunks_exact_mut(256)) {
        let d = b.d();
        for (o, &q) in y.iter_mut().zip(&b.qs) {
            *o = d * q as f32;
        }
    }
}

/// Q8_K quantizer (`quantize_row_q8_K_ref`, also what x86 uses): `iscale = −127/max`, ties to
/// even, bsums over 16. An all-zero block gets zero bsums (ggml leaves them unwritten).
/// AVX-512 where the CPU has it, else [`quant_q8_k_scalar`] (the same bytes).
pub fn quant_q8_k(src: &[f32], dst: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if crate::simd::quantize_q8_k_fast(src, dst) {
        return;
    }
    quant_q8_k_scalar(src, dst);
}

/// The scalar form of [`quant_q8_k`] (the reference its AVX-512 form is tested against).
pub fn quant_q8_k_scalar(src: &[f32], dst: &mut [u8]) {
    for (x, b) in src.chunks_exact(256).zip(view_mut::<BlockQ8K>(dst)) {
        let (mut max, mut amax) = (0.0f32, 0.0f32);
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax == 0.0 {
            *b = bytemuck::Zeroable::zeroed();
            continue;
        }
        let iscale = -127.0f32 / max;
        for (q, &v) in b.qs.iter_mut().zip(x) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for j in 0..16 {
            let s: i32 = b.qs[16 * j..16 * j + 16].iter().map(|&q| q as i32).sum();
            b.bsums[2 * j..2 * j + 2].copy_from_slice(&(s as i16).to_le_bytes());
        }
        b.d = (1.0f32 / iscale).to_le_bytes();
    }
}
