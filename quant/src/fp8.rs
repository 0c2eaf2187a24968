//! DeepSeek-V4 checkpoint formats (spec §11): FP8 E4M3 ("e4m3fn"), E5M2, E8M0 (UE8M0) and
//! E2M1 decoding; dense FP8 weights with 128×128 block scales; FP4 experts stored as
//! `[N, K/2]` bytes (two adjacent columns per byte, low nibble = even column) with one E8M0
//! scale per 32 columns, and their lossless conversion to ggml MXFP4 blocks.

use crate::blocks::BlockMXFP4;
use crate::error::QuantError;
use crate::DType;

/// FP8 E4M3 (OCP "e4m3fn": bias 7, no infinities, only S.1111.111 is NaN) → f32: a
/// lookup in [`e4m3_table`] (the definition is `e4m3_decode`; the dequantizers, the
/// reference dot and the kernels' tails call this per element).
#[inline]
pub fn e4m3_to_f32(b: u8) -> f32 {
    e4m3_table()[b as usize]
}

/// The definition of an E4M3 code's value, computed (what [`e4m3_table`] holds).
fn e4m3_decode(b: u8) -> f32 {
    let sign = if b & 0x80 != 0 { -1.0f32 } else { 1.0 };
    let e = ((b >> 3) & 0xF) as i32;
    let m = (b & 7) as f32;
    if e == 15 && b & 7 == 7 {
        return f32::NAN;
    }
    if e == 0 {
        sign * (m / 8.0) * 2f32.powi(-6)
    } else {
        sign * (1.0 + m / 8.0) * 2f32.powi(e - 7)
    }
}

/// Every E4M3 code's value, by code.
pub fn e4m3_table() -> &'static [f32; 256] {
    static T: std::sync::OnceLock<[f32; 256]> = std::sync::OnceLock::new();
    T.get_or_init(|| std::array::from_fn(|b| e4m3_decode(b as u8)))
}

/// FP8 E5M2 (IEEE-like: bias 15, infinities and NaNs) → f32.
pub fn e5m2_to_f32(b: u8) -> f32 {
    crate::scalar::f16_to_f32((b as u16) << 8)
}

/// E8M0 scale byte → 2^(b−127), with 0xFF = NaN (OCP / torch `float8_e8m0fnu`).
pub fn e8m0_to_f32(b: u8) -> f32 {
    if b == 0xFF {
        f32::NAN
    } else {
        crate::scalar::e8m0_to_f32_ggml(b)
    }
}

/// E2M1 code (low 4 bits) → f32: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives.
pub fn e2m1_to_f32(code: u8) -> f32 {
    const V: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
    let v = V[(code & 7) as usize];
    if code & 8 != 0 {
        -v
    } else {
        v
    }
}

/// f32 → FP8 E4M3, round to nearest even, after clamping to ±448 (DeepSeek's `act_quant`
/// clamps first, so there is no overflow); NaN → 0x7F.
pub fn f32_to_e4m3(v: f32) -> u8 {
    if v.is_nan() {
        return 0x7F;
    }
    let sign = if v.is_sign_negative() { 0x80u8 } else { 0 };
    let a = v.abs().min(448.0);
    // Pick the nearest representable magnitude by scanning codes 0..=0x7E (126 values):
    // exact and simple; this is a reference, not a kernel.
    let mut best = 0u8;
    let mut best_err = f32::INFINITY;
    for c in 0u8..=0x7E {
        let err = (e4m3_to_f32(c) - a).abs();
        if err < best_err || (err == best_err && c & 1 == 0) {
            best = c;
            best_err = err;
        }
    }
    sign | best
}

/// Block scale of a 128-element activation block the DeepSeek way (`scale_fmt = "ue8m0"`):
/// `2^ceil(log2(max(amax, 1e-4) / 448))`, computed on the f32 bit pattern. Returns the
/// E8M0 byte.
pub fn act_scale_ue8m0(amax: f32) -> u8 {
    let r = amax.max(1e-4) / 448.0;
    let bits = r.to_bits();
    let mut e = ((bits >> 23) & 0xFF) as i32;
    if bits & 0x7F_FFFF != 0 {
        e += 1;
    }
    e.clamp(0, 254) as u8
}

/// Quantize an activation row to FP8 E4M3 in 1×128 blocks with power-of-two (UE8M0) scales,
/// as DeepSeek's `act_quant` does. Returns (codes, scale bytes).
pub fn act_quant_fp8(x: &[f32]) -> (Vec<u8>, Vec<u8>) {
    let mut codes = Vec::with_capacity(x.len());
    let mut scales = Vec::with_capacity(x.len().div_ceil(128));
    for blk in x.chunks(128) {
        let amax = blk.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let e = act_scale_ue8m0(amax);
        let s = crate::scalar::e8m0_to_f32_ggml(e);
        scales.push(e);
        codes.extend(
            blk.iter()
                .map(|&v| f32_to_e4m3((v / s).clamp(-448.0, 448.0))),
        );
    }
    (codes, scales)
}

/// How the per-tile scale of an FP8 weight is stored.
#[derive(Clone, Copy, Debug)]
pub enum Fp8Scale<'a> {
    /// One E8M0 byte per tile (DeepSeek-V4 `….scale`).
    E8M0(&'a [u8]),
    /// One f32 per tile (DeepSeek-V3 `….weight_scale_inv`, little-endian bytes).
    F32(&'a [u8]),
}

/// Dequantize a dense FP8 E4M3 weight `[n, k]` (row-major, out × in) with 128×128 tile scales
/// `[ceil(n/128), ceil(k/128)]` into `out` (`n·k` floats). Edge tiles are partial.
pub fn dequant_fp8_blocked(
    w: &[u8],
    scale: Fp8Scale<'_>,
    n: usize,
    k: usize,
    out: &mut [f32],
) -> Result<(), QuantError> {
    let (tn, tk) = (n.div_ceil(128), k.div_ceil(128));
    let total = n.checked_mul(k).ok_or(QuantError::Overflow)?;
    let len_err = |what, got, expected| QuantError::Length {
        dtype: DType::F32,
        what,
        got,
        expected,
    };
    if w.len() != total {
        return Err(len_err("fp8 weight", w.len(), total));
    }
    if out.len() != total {
        return Err(len_err("output", out.len(), total));
    }
    let tiles = tn * tk;
    let scale_at: Box<dyn Fn(usize) -> f32 + '_> = match scale {
        Fp8Scale::E8M0(s) => {
            if s.len() != tiles {
                return Err(len_err("e8m0 scale", s.len(), tiles));
            }
            Box::new(move |i| e8m0_to_f32(s[i]))
        }
        Fp8Scale::F32(s) => {
            if s.len() != tiles * 4 {
                return Err(len_err("f32 scale", s.len(), tiles * 4));
            }
            Box::new(move |i| {
                f32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]])
            })
        }
    };
    for r in 0..n {
        for c in 0..k {
            out[r * k + c] = e4m3_to_f32(w[r * k + c]) * scale_at((r / 128) * tk + c / 128);
        }
    }
    Ok(())
}

fn check_fp4(packed: &[u8], scale: &[u8], n: usize, k: usize) -> Result<(), QuantError> {
    let len_err = |what, got, expected| QuantError::Length {
        dtype: DType::MXFP4,
        what,
        got,
        expected,
    };
    if !k.is_multiple_of(32) {
        return Err(QuantError::RowNotMultiple {
            dtype: DType::MXFP4,
            n: k as u64,
            block: 32,
        });
    }
    let codes = n.checked_mul(k / 2).ok_or(QuantError::Overflow)?;
    if packed.len() != codes {
        return Err(len_err("fp4 packed", packed.len(), codes));
    }
    if scale.len() != n * (k / 32) {
        return Err(len_err("fp4 scale", scale.len(), n * (k / 32)));
    }
    Ok(())
}

/// Dequantize DeepSeek FP4 experts: `packed [n, k/2]` (byte i of a row = column 2i in the low
/// nibble, 2i+1 in the high nibble), `scale [n, k/32]` E8M0: `w = e2m1(code) · 2^(s−127)`.
pub fn dequant_fp4_ds(
    packed: &[u8],
    scale: &[u8],
    n: usize,
    k: usize,
    out: &mut [f32],
) -> Result<(), QuantError> {
    check_fp4(packed, scale, n, k)?;
    if out.len() != n * k {
        return Err(QuantError::Length {
            dtype: DType::MXFP4,
            what: "output",
            got: out.len(),
            expected: n * k,
        });
    }
    for r in 0..n {
        for c in 0..k {
            let b = packed[r * (k / 2) + c / 2];
            let code = if c % 2 == 0 { b & 0xF } else { b >> 4 };
            out[r * k + c] = e2m1_to_f32(code) * e8m0_to_f32(scale[r * (k / 32) + c / 32]);
        }
    }
    Ok(())
}

/// Convert DeepSeek FP4 experts to ggml MXFP4 blocks, losslessly: the scale byte is kept, the
/// codes are kept, only the nibble placement changes (ggml: byte j = element j | element j+16).
/// Returns `n · k/32` blocks as bytes (a GGUF `MXFP4` tensor of shape `[k, n]`).
pub fn fp4_ds_to_mxfp4(
    packed: &[u8],
    scale: &[u8],
    n: usize,
    k: usize,
) -> Result<Vec<u8>, QuantError> {
    check_fp4(packed, scale, n, k)?;
    let mut out = vec![0u8; scale.len() * size_of::<BlockMXFP4>()];
    fp4_ds_blocks_to_mxfp4(packed, scale, &mut out);
    Ok(out)
}

/// [`fp4_ds_to_mxfp4`] of consecutive 32-value blocks into `out`, without allocating: block
/// b's scale is `scale[b]`, its codes `packed[16b..16b + 16]` (rows of a matrix follow each
/// other, so whole rows convert at once); MXFP4 block b is `out[17b..17b + 17]`. Converts
/// `min(scale.len(), packed.len() / 16, out.len() / 17)` blocks. MUL_MAT_ID calls this on a
/// few rows at a time of FP4 experts used in place from a checkpoint's map.
pub fn fp4_ds_blocks_to_mxfp4(packed: &[u8], scale: &[u8], out: &mut [u8]) {
    let nb = scale.len().min(packed.len() / 16).min(out.len() / 17);
    #[cfg(target_arch = "x86_64")]
    for ((c, &s), o) in packed
        .chunks_exact(16)
        .zip(scale)
        .zip(out.chunks_exact_mut(17))
        .take(nb)
    {
        use std::arch::x86_64::*;
        o[0] = s;
        // SSE2 is part of x86_64. Bytes 0..7 of the codes hold elements 0..15 (low nibble =
        // even), 8..15 hold 16..31: split the nibbles, interleave them back into element
        // order (one element per byte), and put element j + 16 above element j.
        // SAFETY: `c` is 16 bytes and `o[1..]` 16 bytes (unaligned load and store).
        unsafe {
            let q = _mm_loadu_si128(c.as_ptr().cast());
            let m = _mm_set1_epi8(0x0F);
            let lo = _mm_and_si128(q, m);
            let hi = _mm_and_si128(_mm_srli_epi16::<4>(q), m);
            let e0 = _mm_unpacklo_epi8(lo, hi);
            let e1 = _mm_unpackhi_epi8(lo, hi);
            let v = _mm_or_si128(e0, _mm_slli_epi16::<4>(e1));
            _mm_storeu_si128(o[1..].as_mut_ptr().cast(), v);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    for ((c, &s), o) in packed
        .chunks_exact(16)
        .zip(scale)
        .zip(out.chunks_exact_mut(17))
        .take(nb)
    {
        fp4_ds_block_to_mxfp4(c, s, o);
    }
}

/// The definition of one block's conversion (what [`fp4_ds_blocks_to_mxfp4`] computes): `out`
/// is the scale byte, then byte j = code of element j | code of element j + 16 above it.
pub fn fp4_ds_block_to_mxfp4(codes: &[u8], scale: u8, out: &mut [u8]) {
    let code = |e: usize| {
        if e.is_multiple_of(2) {
            codes[e / 2] & 0xF
        } else {
            codes[e / 2] >> 4
        }
    };
    out[0] = scale;
    for j in 0..16 {
        out[1 + j] = code(j) | (code(j + 16) << 4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block converter equals the definition on random bytes, for every count of
    /// blocks up to 9 (and ignores what lies past the shortest of its three slices).
    #[test]
    fn fp4_blocks_match_the_definition() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut byte = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        };
        for nb in 0..10 {
            let codes: Vec<u8> = (0..16 * nb + 5).map(|_| byte()).collect();
            let scale: Vec<u8> = (0..nb).map(|_| byte()).collect();
            let mut out = vec![0xAAu8; 17 * nb + 3];
            fp4_ds_blocks_to_mxfp4(&codes, &scale, &mut out);
            let mut want = vec![0xAAu8; 17 * nb + 3];
            for b in 0..nb {
                fp4_ds_block_to_mxfp4(&codes[16 * b..], scale[b], &mut want[17 * b..]);
            }
            assert_eq!(out, want, "{nb} blocks");
        }
    }

    /// Dequantizing the converted blocks as MXFP4 gives the FP4 values.
    #[test]
    fn converted_blocks_keep_the_values() {
        let (n, k) = (3, 64);
        let packed: Vec<u8> = (0..n * k / 2).map(|i| (i * 37 + 11) as u8).collect();
        let scale: Vec<u8> = (0..n * k / 32).map(|i| 120 + i as u8).collect();
        let mx = fp4_ds_to_mxfp4(&packed, &scale, n, k).expect("shapes");
        let mut want = vec![0f32; n * k];
        dequant_fp4_ds(&packed, &scale, n, k, &mut want).expect("shapes");
        let mut got = vec![0f32; n * k];
        crate::dequantize_row(DType::MXFP4, &mx, &mut got).expect("mxfp4");
        assert_eq!(got, want);
    }
}
