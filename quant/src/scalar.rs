//! Scalar building blocks shared by every codec: f16/bf16 conversions, E8M0 scales and ggml's
//! rounding helpers (spec §2). Everything here is exact and branch-for-branch ggml's rule.

/// IEEE binary16 bits → f32 (exact, subnormals kept).
#[inline]
pub fn f16_to_f32(bits: u16) -> f32 {
    half::f16::from_bits(bits).to_f32()
}

/// f32 → IEEE binary16 bits, round to nearest even, overflow to ±inf (ggml / F16C rule).
#[inline]
pub fn f32_to_f16(v: f32) -> u16 {
    half::f16::from_f32(v).to_bits()
}

/// bf16 bits → f32 (`bits << 16`).
#[inline]
pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

/// f32 → bf16 bits with ggml's rule: NaN → quiet NaN `(bits >> 16) | 0x40`; otherwise round
/// to nearest even; subnormals are not flushed.
#[inline]
pub fn f32_to_bf16(v: f32) -> u16 {
    let u = v.to_bits();
    if (u & 0x7fff_ffff) > 0x7f80_0000 {
        return ((u >> 16) | 64) as u16;
    }
    ((u.wrapping_add(0x7fff + ((u >> 16) & 1))) >> 16) as u16
}

/// Little-endian f16 field → f32.
#[inline]
pub fn le_f16(b: [u8; 2]) -> f32 {
    f16_to_f32(u16::from_le_bytes(b))
}

/// E8M0 scale byte as ggml's plain decoder does: 2^(e−127); e = 0 gives 2^−127 (subnormal),
/// e = 255 gives +inf (OCP / torch say NaN — see [`crate::fp8::e8m0_to_f32`]).
#[inline]
pub fn e8m0_to_f32_ggml(e: u8) -> f32 {
    let bits: u32 = if e == 0 {
        0x0040_0000
    } else {
        (e as u32) << 23
    };
    f32::from_bits(bits)
}

/// E8M0 "half" decoder used by MXFP4: 2^(e−128) (e = 0, 1 are f32 subnormals).
#[inline]
pub fn e8m0_to_f32_half(e: u8) -> f32 {
    let bits: u32 = if e < 2 {
        0x0020_0000u32 << e
    } else {
        ((e as u32) - 1) << 23
    };
    f32::from_bits(bits)
}

/// ggml's `nearest_int`: round to nearest, ties to even, via the 1.5·2^23 trick. Valid for
/// |v| ≤ 2^22 (as in ggml; larger inputs give wrapped results rather than UB).
#[inline]
pub fn nearest_int(v: f32) -> i32 {
    let val = v + 12_582_912.0f32;
    ((val.to_bits() & 0x007f_ffff) as i32) - 0x0040_0000
}

/// C `roundf`: round half away from zero.
#[inline]
pub fn roundf(v: f32) -> f32 {
    v.round()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_ties_to_even() {
        assert_eq!(nearest_int(0.5), 0);
        assert_eq!(nearest_int(1.5), 2);
        assert_eq!(nearest_int(2.5), 2);
        assert_eq!(nearest_int(-2.5), -2);
        assert_eq!(nearest_int(-3.5), -4);
        assert_eq!(nearest_int(126.7), 127);
    }

    #[test]
    fn bf16_rounding() {
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        // exactly halfway between 0x3f80 and 0x3f81 → even (0x3f80)
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8000)), 0x3f80);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f81_8000)), 0x3f82);
        assert_eq!(f32_to_bf16(f32::NAN) & 0x7fc0, 0x7fc0);
        assert_eq!(bf16_to_f32(0x4049), f32::from_bits(0x4049_0000));
    }

    #[test]
    fn e8m0_variants() {
        assert_eq!(e8m0_to_f32_ggml(127), 1.0);
        assert_eq!(e8m0_to_f32_ggml(0), 2f32.powi(-127));
        assert_eq!(e8m0_to_f32_half(128), 1.0);
        assert_eq!(e8m0_to_f32_half(0), 2f32.powi(-128));
        assert_eq!(e8m0_to_f32_half(1), 2f32.powi(-127));
        assert_eq!(e8m0_to_f32_half(255), 2f32.powi(127));
    }
}
