//! How one checkpoint tensor becomes the graph's bytes, in two halves: from the headers
//! ([`SafetensorsWeights::recipe`]: the dtype, the shape and the scale tensor beside it,
//! all checked, and what the conversion makes) and from the bytes ([`Recipe::convert`]: the
//! weight's and its scale's bytes, wherever they were read from — a shard's map at load, or
//! the expert cache's reads of a paged expert). One conversion for both paths, so a paged
//! expert is bit for bit the expert that loading into memory makes.

use super::{reversed, unsupported, Data, Decoded, SafetensorsWeights};
use crate::safetensors::{StDtype, TensorInfo};
use crate::weights::policy::{Fp4Policy, Fp8Policy, HalfPolicy};
use crate::weights::ForwardError;
use quant::fp8::{dequant_fp4_ds, dequant_fp8_blocked, fp4_ds_to_mxfp4, Fp8Scale};
use quant::DType;

/// What a conversion does.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// The bytes as they are (F32, or F16/BF16 matrices in place).
    Copy,
    /// F16 / BF16 widened to F32.
    HalfToF32(DType),
    /// FP8 E4M3 `[n, k]` with 128×128 tile scales (E8M0 bytes, or f32) → F32, or Q8_0.
    Fp8 {
        n: usize,
        k: usize,
        scale_f32: bool,
        q8: bool,
    },
    /// FP4 e2m1 `[n, k]` with per-32 E8M0 scales → MXFP4, or F32.
    Fp4 { n: usize, k: usize, f32: bool },
}

/// A checked conversion of one checkpoint tensor (and its scale tensor) into a graph
/// tensor of `dtype` and shape `ne` (GGUF order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Recipe {
    kind: Kind,
    /// The graph tensor's type.
    pub dtype: DType,
    /// The graph tensor's shape, GGUF order.
    pub ne: Vec<usize>,
    /// The scale tensor's name (for messages).
    scale: Option<String>,
}

impl Recipe {
    /// Bytes of the graph tensor.
    pub fn out_len(&self) -> Result<usize, String> {
        let n = self.ne.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let n = n.ok_or("tensor size overflows")?;
        quant::bytes_for(self.dtype, n).map_err(|e| e.to_string())
    }

    /// Converts `parts` (the weight's bytes, then its scale's where it has one) into `out`
    /// ([`Recipe::out_len`] bytes).
    pub fn convert(&self, parts: &[&[u8]], out: &mut [u8]) -> Result<(), String> {
        let want = 1 + usize::from(self.scale.is_some());
        if parts.len() != want {
            return Err(format!("{} parts read, {want} expected", parts.len()));
        }
        let out_len = self.out_len()?;
        if out.len() != out_len {
            return Err(format!("{} bytes of output, {out_len} expected", out.len()));
        }
        let (w, scale) = (parts[0], parts.get(1).copied().unwrap_or(&[]));
        let e = |e: quant::QuantError| e.to_string();
        match self.kind {
            Kind::Copy => {
                if w.len() != out.len() {
                    return Err(format!("{} bytes, {} expected", w.len(), out.len()));
                }
                out.copy_from_slice(w);
            }
            Kind::HalfToF32(dt) => {
                let mut f = vec![0f32; out.len() / 4];
                quant::dequantize_row(dt, w, &mut f).map_err(e)?;
                out.copy_from_slice(bytemuck::cast_slice(&f));
            }
            Kind::Fp8 {
                n,
                k,
                scale_f32,
                q8,
            } => {
                let s = if scale_f32 {
                    Fp8Scale::F32(scale)
                } else {
                    Fp8Scale::E8M0(self.e8m0(scale)?)
                };
                let mut f = vec![0f32; n * k];
                dequant_fp8_blocked(w, s, n, k, &mut f).map_err(e)?;
                if q8 {
                    quant::quantize_row(DType::Q8_0, &f, out).map_err(e)?;
                } else {
                    out.copy_from_slice(bytemuck::cast_slice(&f));
                }
            }
            Kind::Fp4 { n, k, f32 } => {
                let s = self.e8m0(scale)?;
                if f32 {
                    let mut f = vec![0f32; n * k];
                    dequant_fp4_ds(w, s, n, k, &mut f).map_err(e)?;
                    out.copy_from_slice(bytemuck::cast_slice(&f));
                } else {
                    out.copy_from_slice(&fp4_ds_to_mxfp4(w, s, n, k).map_err(e)?);
                }
            }
        }
        Ok(())
    }

    /// E8M0 scale bytes, rejecting the NaN byte 0xFF.
    fn e8m0<'b>(&self, b: &'b [u8]) -> Result<&'b [u8], String> {
        match b.iter().position(|&x| x == 0xFF) {
            Some(i) => Err(format!(
                "scale entry {i} of '{}' is the E8M0 NaN byte 0xFF",
                self.scale.as_deref().unwrap_or("?")
            )),
            None => Ok(b),
        }
    }
}

impl SafetensorsWeights {
    /// The conversion of a weight matrix `t` (GGUF name `gguf`) under this provider's
    /// options, and the tensors it reads (the weight, then its scale), checked from the
    /// headers: dtypes, shapes, scale grids.
    pub(super) fn recipe<'s>(
        &'s self,
        gguf: &str,
        t: &'s TensorInfo,
    ) -> Result<(Recipe, Vec<&'s TensorInfo>), ForwardError> {
        let dtype = Self::known_dtype(gguf, t)?;
        let plain = |kind, dtype| {
            let r = Recipe {
                kind,
                dtype,
                ne: reversed(&t.shape),
                scale: None,
            };
            Ok((r, vec![t]))
        };
        match dtype {
            StDtype::F32 => plain(Kind::Copy, DType::F32),
            StDtype::F16 | StDtype::BF16 => {
                let dt = if dtype == StDtype::F16 {
                    DType::F16
                } else {
                    DType::BF16
                };
                if t.shape.len() <= 1 || self.opts.half == HalfPolicy::F32 {
                    plain(Kind::HalfToF32(dt), DType::F32)
                } else {
                    plain(Kind::Copy, dt)
                }
            }
            StDtype::F8_E4M3 => self.fp8_recipe(gguf, t),
            StDtype::I8 | StDtype::U8 | StDtype::F4 => self.fp4_recipe(gguf, t, dtype),
            d => Err(unsupported(
                gguf,
                &t.name,
                format_args!("dtype {d} is not a weight type this model uses"),
            )),
        }
    }

    /// FP8 E4M3 `[n, k]` used in place (`{k, n}` codes from the map) with its tile scales
    /// as f32 ([`Fp8Policy::InPlace`]). The codes are checked once for the NaN code
    /// (S.1111.111), which the kernels do not decode, and the scales for NaN.
    pub(super) fn fp8_in_place(&self, gguf: &str, t: &TensorInfo) -> Result<Decoded, ForwardError> {
        let (r, parts) = self.fp8_recipe(gguf, t)?;
        let Kind::Fp8 {
            n, k, scale_f32, ..
        } = r.kind
        else {
            unreachable!("an FP8 recipe")
        };
        let codes = self.bytes(t);
        if let Some(i) = codes.iter().position(|&b| b & 0x7F == 0x7F) {
            return Err(unsupported(
                gguf,
                &t.name,
                format_args!("element {i} is the FP8 E4M3 NaN code 0x{:02X}", codes[i]),
            ));
        }
        let s = self.bytes(parts[1]);
        let values: Vec<f32> = if scale_f32 {
            s.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        } else {
            let s = r.e8m0(s).map_err(|e| unsupported(gguf, &t.name, e))?;
            s.iter().map(|&b| quant::fp8::e8m0_to_f32(b)).collect()
        };
        if let Some(i) = values.iter().position(|v| !v.is_finite()) {
            return Err(unsupported(
                gguf,
                &parts[1].name,
                format_args!("scale entry {i} is not finite"),
            ));
        }
        let scales = graph::BlockScales {
            rows: 128,
            cols: 128,
            per_row: k.div_ceil(128),
            values,
        };
        debug_assert_eq!(scales.values.len(), n.div_ceil(128) * scales.per_row);
        Ok(Decoded {
            dtype: DType::F8_E4M3,
            ne: vec![k, n],
            data: Data::Mapped {
                shard: t.shard,
                offset: t.file_offset as usize,
                len: t.byte_len() as usize,
            },
            scales: Some(std::sync::Arc::new(scales)),
        })
    }

    /// FP8 E4M3 `[n, k]` + 128×128 tile scales → F32 or Q8_0 `{k, n}`.
    fn fp8_recipe<'s>(
        &'s self,
        gguf: &str,
        t: &'s TensorInfo,
    ) -> Result<(Recipe, Vec<&'s TensorInfo>), ForwardError> {
        let [n, k] = t.shape[..] else {
            return Err(unsupported(
                gguf,
                &t.name,
                format_args!(
                    "F8_E4M3 tensor of rank {} (only 2-D block-scaled weights)",
                    t.shape.len()
                ),
            ));
        };
        let (n, k) = (n as usize, k as usize);
        let s = self
            .scale_of(&t.name, &["scale", "weight_scale_inv"])
            .ok_or_else(|| {
                ForwardError::Missing(format!(
                    "{}.scale (block scales of FP8 weight '{}' for '{gguf}')",
                    t.name.strip_suffix(".weight").unwrap_or(&t.name),
                    t.name
                ))
            })?;
        Self::check_scale_shape(gguf, s, [n.div_ceil(128), k.div_ceil(128)])?;
        let scale_f32 = match Self::known_dtype(gguf, s)? {
            StDtype::F8_E8M0 | StDtype::U8 => false,
            StDtype::F32 => true,
            d => {
                return Err(unsupported(
                    gguf,
                    &s.name,
                    format_args!("FP8 scale dtype {d} (expected F8_E8M0, U8 or F32)"),
                ))
            }
        };
        let q8 = self.opts.fp8 == Fp8Policy::Q8_0 && k % 32 == 0;
        let r = Recipe {
            kind: Kind::Fp8 {
                n,
                k,
                scale_f32,
                q8,
            },
            dtype: if q8 { DType::Q8_0 } else { DType::F32 },
            ne: vec![k, n],
            scale: Some(s.name.clone()),
        };
        Ok((r, vec![t, s]))
    }

    /// FP4 e2m1 `[n, k]` (I8/U8 `[n, k/2]` or F4 `[n, k]`) + E8M0 `[n, k/32]` → MXFP4 or
    /// F32 `{k, n}`.
    fn fp4_recipe<'s>(
        &'s self,
        gguf: &str,
        t: &'s TensorInfo,
        dtype: StDtype,
    ) -> Result<(Recipe, Vec<&'s TensorInfo>), ForwardError> {
        let [n, w] = t.shape[..] else {
            return Err(unsupported(
                gguf,
                &t.name,
                format_args!(
                    "{dtype} tensor of rank {} (only 2-D FP4 weights)",
                    t.shape.len()
                ),
            ));
        };
        let (n, k) = if dtype == StDtype::F4 {
            (n as usize, w as usize)
        } else {
            (n as usize, 2 * w as usize)
        };
        let s = self.scale_of(&t.name, &["scale"]).ok_or_else(|| {
            unsupported(
                gguf,
                &t.name,
                format_args!(
                    "{dtype} tensor without a '.scale' (only packed FP4 weights with E8M0 scales are supported)"
                ),
            )
        })?;
        if k % 32 != 0 {
            return Err(unsupported(
                gguf,
                &t.name,
                format_args!("FP4 row of {k} values is not a whole number of 32-blocks"),
            ));
        }
        Self::check_scale_shape(gguf, s, [n, k / 32])?;
        match Self::known_dtype(gguf, s)? {
            StDtype::F8_E8M0 | StDtype::U8 => {}
            d => {
                return Err(unsupported(
                    gguf,
                    &s.name,
                    format_args!("FP4 scale dtype {d} (expected F8_E8M0 or U8)"),
                ))
            }
        }
        let f32 = self.opts.fp4 == Fp4Policy::F32;
        let r = Recipe {
            kind: Kind::Fp4 { n, k, f32 },
            dtype: if f32 { DType::F32 } else { DType::MXFP4 },
            ne: vec![k, n],
            scale: Some(s.name.clone()),
        };
        Ok((r, vec![t, s]))
    }
}
