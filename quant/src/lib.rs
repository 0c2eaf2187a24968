//! fathom-quant: GGML block formats, byte for byte.
//!
//! This crate is the leaf of the workspace. It owns
//! - the type table ([`DType`], [`TypeInfo`]): every GGUF type id 0…42 with block geometry and,
//!   where supported, its codecs and dot product;
//! - `#[repr(C)]` block structs ([`blocks`]), all `bytemuck::Pod` with alignment 1 and their
//!   size asserted at compile time, so a GGUF tensor slice can be viewed as blocks at any offset;
//! - the **scalar reference layer** ([`codec`], [`dot`]): dequantizers bit-exact with ggml's
//!   `to_float`, reference quantizers bit-exact with `ggml_quantize_chunk` (no importance
//!   matrix), the activation quantizers (Q8_0 with both ggml rounding rules, Q8_K with bsums)
//!   and reference dot products of every weight type with its activation type;
//! - DeepSeek's checkpoint formats ([`fp8`]): FP8 E4M3, E8M0 and E2M1 decoding, 128×128
//!   block-scaled FP8 weights and the 1×32-scaled FP4 expert layout.
//!
//! SIMD kernels (AVX2 / AVX-512, chosen at run time) will live beside the reference and are
//! always tested against it (issue 5). The spec for every byte is `shared/spec/quants.md`.
//!
//! Slices of bytes are the interchange type: a weight row is `&[u8]` holding whole blocks.

// The reference layer mirrors ggml's index arithmetic on purpose (it is what makes it easy to
// cross-read with the spec), so indexed loops are the clearest form here.
#![allow(clippy::needless_range_loop)]

pub mod blocks;
pub mod codec;
pub mod dot;
mod dtype;
mod error;
pub mod fp8;
pub mod grids;
pub mod scalar;
pub mod simd;

pub use dtype::{DType, DequantFn, DotFn, QuantizeFn, TypeInfo};
pub use error::QuantError;

fn check_len(
    dtype: DType,
    what: &'static str,
    got: usize,
    expected: usize,
) -> Result<(), QuantError> {
    if got != expected {
        return Err(QuantError::Length {
            dtype,
            what,
            got,
            expected,
        });
    }
    Ok(())
}

/// Bytes needed for `n` elements of `dtype` (checked).
pub fn bytes_for(dtype: DType, n: usize) -> Result<usize, QuantError> {
    let b = dtype.row_bytes(n as u64)?;
    usize::try_from(b).map_err(|_| QuantError::Overflow)
}

/// Dequantize a row of whole blocks `src` into `dst` (`dst.len()` elements), bit-exact with
/// ggml's `to_float`.
pub fn dequantize_row(dtype: DType, src: &[u8], dst: &mut [f32]) -> Result<(), QuantError> {
    let f = dtype.info().dequantize.ok_or(QuantError::Unsupported {
        dtype,
        what: "dequantize",
    })?;
    check_len(dtype, "source", src.len(), bytes_for(dtype, dst.len())?)?;
    f(src, dst);
    Ok(())
}

/// Quantize `src` into whole blocks `dst` with ggml's reference (storage) quantizer, no
/// importance matrix — what `ggml_quantize_chunk` writes into a GGUF.
pub fn quantize_row(dtype: DType, src: &[f32], dst: &mut [u8]) -> Result<(), QuantError> {
    let f = dtype.info().quantize.ok_or(QuantError::Unsupported {
        dtype,
        what: "quantize",
    })?;
    check_len(
        dtype,
        "destination",
        dst.len(),
        bytes_for(dtype, src.len())?,
    )?;
    f(src, dst);
    Ok(())
}

/// Quantize an activation row into `dtype` (a dot type: F32, F16, BF16, Q8_0, Q8_K) the way
/// ggml-cpu's `from_float` does on x86 (Q8_0: round half to even with `id = 127/amax`).
pub fn quantize_activation(dtype: DType, src: &[f32], dst: &mut [u8]) -> Result<(), QuantError> {
    let f = dtype
        .info()
        .quantize_activation
        .ok_or(QuantError::Unsupported {
            dtype,
            what: "activation quantize",
        })?;
    check_len(
        dtype,
        "destination",
        dst.len(),
        bytes_for(dtype, src.len())?,
    )?;
    f(src, dst);
    mark_nonfinite(dtype, src, dst);
    Ok(())
}

/// Give every block of an activation row `dst` (already converted to `dtype` from `src`)
/// whose f32 source holds a NaN or an infinity a NaN scale, so that every dot product with
/// it comes out NaN. The 8-bit quantizers, like ggml's, turn NaN into code 0 and drop it from
/// the block's maximum: without this a NaN anywhere upstream would come out as finite, wrong
/// numbers (all-zero logits). The float types carry NaN and infinity by themselves.
///
/// One vectorized pass over `src` for the common all-finite row; blocks are only written
/// where a non-finite value is found: the bits of finite rows are untouched (ggml's).
pub fn mark_nonfinite(dtype: DType, src: &[f32], dst: &mut [u8]) {
    // (block elements, block bytes, offsets of the f16 / f32 scales to poison)
    let (blk, bytes, f16_at, f32_at): (usize, usize, &[usize], &[usize]) = match dtype {
        DType::Q8_0 => (32, 34, &[0], &[]),
        DType::Q8_1 => (32, 36, &[0, 2], &[]),
        DType::Q8_K => (256, 292, &[], &[0]),
        _ => return,
    };
    // the common case, a row with no NaN or infinity, in one pass without early exits (a
    // max of the exponent bits, which vectorizes; the per-block `all` below does not, and
    // took ~1% of a prompt's time)
    if src.iter().fold(0, |m, v| m.max(v.to_bits() & 0x7F80_0000)) != 0x7F80_0000 {
        return;
    }
    for (x, b) in src.chunks_exact(blk).zip(dst.chunks_exact_mut(bytes)) {
        if x.iter().all(|v| v.is_finite()) {
            continue;
        }
        for &o in f16_at {
            b[o..o + 2].copy_from_slice(&0x7E00u16.to_le_bytes());
        }
        for &o in f32_at {
            b[o..o + 4].copy_from_slice(&f32::NAN.to_le_bytes());
        }
    }
}

/// Reference dot product of a weight row `w` (type `dtype`) with an activation row `a` already
/// in `dtype`'s dot type, over `n` elements.
pub fn vec_dot(dtype: DType, n: usize, w: &[u8], a: &[u8]) -> Result<f32, QuantError> {
    let info = dtype.info();
    let (f, dt) = match (info.vec_dot, info.dot_type) {
        (Some(f), Some(dt)) => (f, dt),
        _ => return Err(QuantError::Unsupported { dtype, what: "dot" }),
    };
    check_len(dtype, "weight", w.len(), bytes_for(dtype, n)?)?;
    check_len(dt, "activation", a.len(), bytes_for(dt, n)?)?;
    Ok(f(n, w, a))
}
