//! FLASH_ATTN_EXT: fused DeepSeek-V4 attention with **one shared K = V head** and per-head
//! sinks (spec §4.4 steps 6–9, §4.8; the `build_attn_mha` flash path of llama.cpp).
//!
//! Sources (optional ones by position, see [`FlashAttnExt::has_mask`],
//! [`FlashAttnExt::has_sinks`] and [`FlashAttnExt::has_kv2`]): `q` f32 `{D, H, T}` (contiguous
//! rows, any row strides), `kv` f32 or f16 `{D, n_kv}` (contiguous rows, any row stride: a view
//! of a cache; the same rows are the keys and the values, RoPE'd dims included), optional
//! `mask` f32 or f16 `{n_kv, T}` (any strides; 0 or −∞ for DS4, shared by all heads), optional
//! `sinks` f32 `{H}`, optional `kv2` `{D, n_kv2}` of `kv`'s type: more key/value rows, read
//! in place after `kv`'s (keys `n_kv..n_kv + n_kv2`; the mask is then `{n_kv + n_kv2, T}`).
//! With `kv2` a cached V4 layer attends over its window and its compressed-entry cache
//! without first copying the whole cache into one tensor (at 32k context that copy was
//! 16 MiB per CSA layer and decode step, for the 512 entries the indexer picks); the result
//! is the same, bit for bit, as over the two parts concatenated.
//! Output f32 `{D, H, T}`:
//!
//! `z_{h,t,k} = scale·(q_{h,t}·kv_k) + mask_{k,t}`,
//! `P_{h,t,k} = exp(z_{h,t,k}) / (Σ_k' exp(z_{h,t,k'}) + exp(sink_h))`,
//! `o_{h,t} = Σ_k P_{h,t,k}·kv_k` (scale is `1/sqrt(512)` for DS4).
//!
//! A separate V tensor is not supported (DS4 never needs one). With `n_kv = 0`, or when every
//! key of a row is masked (`−∞`), the output row is all zeros — the value of the empty sum,
//! with or without a sink — identically in the reference and the fast kernel.

use super::OpDef;
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;
use quant::DType;

/// Attention over a shared K = V set with optional mask and sinks.
#[derive(Debug, Clone, PartialEq)]
pub struct FlashAttnExt {
    /// Multiplies `q·k` before the mask is added.
    pub scale: f32,
    /// `srcs[2]` is the mask.
    pub has_mask: bool,
    /// The source after the mask is the sinks vector.
    pub has_sinks: bool,
    /// The last source is a second part of the key/value rows (`kv2`, after `kv`'s).
    pub has_kv2: bool,
}

impl FlashAttnExt {
    /// Index of the mask source, if any.
    pub fn mask_src(&self) -> Option<usize> {
        self.has_mask.then_some(2)
    }
    /// Index of the sinks source, if any.
    pub fn sinks_src(&self) -> Option<usize> {
        self.has_sinks.then_some(2 + usize::from(self.has_mask))
    }
    /// Index of the second key/value part, if any.
    pub fn kv2_src(&self) -> Option<usize> {
        self.has_kv2
            .then_some(2 + usize::from(self.has_mask) + usize::from(self.has_sinks))
    }
}

impl OpDef for FlashAttnExt {
    const NAME: &'static str = "FLASH_ATTN_EXT";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        let want = 2
            + usize::from(self.has_mask)
            + usize::from(self.has_sinks)
            + usize::from(self.has_kv2);
        if srcs.len() != want {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "expects {want} sources (q, kv{}{}{}), got {}",
                    if self.has_mask { ", mask" } else { "" },
                    if self.has_sinks { ", sinks" } else { "" },
                    if self.has_kv2 { ", kv2" } else { "" },
                    srcs.len()
                ),
            ));
        }
        let (q, kv) = (srcs[0], srcs[1]);
        if q.dtype != DType::F32 || !q.rows_contiguous() || q.ne[3] != 1 || q.ne[0] == 0 {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "q must be f32 {{D > 0, H, T}} with contiguous rows, got {}",
                    q.shape_str()
                ),
            ));
        }
        if !matches!(kv.dtype, DType::F32 | DType::F16)
            || !kv.rows_contiguous()
            || kv.ne[0] != q.ne[0]
            || kv.ne[2] != 1
            || kv.ne[3] != 1
        {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "kv must be f32/f16 {{{}, n_kv}} with contiguous rows, got {}",
                    q.ne[0],
                    kv.shape_str()
                ),
            ));
        }
        if !self.scale.is_finite() {
            return Err(shape_err(Self::NAME, "scale must be finite"));
        }
        let mut n_kv = kv.ne[1];
        if let Some(i) = self.kv2_src() {
            let kv2 = srcs[i];
            if kv2.dtype != kv.dtype
                || !kv2.rows_contiguous()
                || kv2.ne[0] != kv.ne[0]
                || kv2.ne[2] != 1
                || kv2.ne[3] != 1
            {
                return Err(shape_err(
                    Self::NAME,
                    format!(
                        "kv2 must be {} {{{}, n_kv2}} with contiguous rows, like kv, got {} {}",
                        kv.dtype,
                        q.ne[0],
                        kv2.dtype,
                        kv2.shape_str()
                    ),
                ));
            }
            n_kv += kv2.ne[1];
        }
        if let Some(i) = self.mask_src() {
            let m = srcs[i];
            if !matches!(m.dtype, DType::F32 | DType::F16) || m.ne != [n_kv, q.ne[2], 1, 1] {
                return Err(shape_err(
                    Self::NAME,
                    format!(
                        "mask must be f32/f16 {{n_kv = {}, T = {}}}, got {}",
                        n_kv,
                        q.ne[2],
                        m.shape_str()
                    ),
                ));
            }
        }
        if let Some(i) = self.sinks_src() {
            let s = srcs[i];
            if s.dtype != DType::F32 || s.ne[0] != q.ne[1] || s.nrows() != 1 {
                return Err(shape_err(
                    Self::NAME,
                    format!(
                        "sinks must be f32 {{H = {}}}, got {}",
                        q.ne[1],
                        s.shape_str()
                    ),
                ));
            }
        }
        TensorDesc::f32(&q.ne)
    }
}

impl Graph {
    /// Attention of `q {D, H, T}` over the shared key/value rows `kv {D, n_kv}` (module doc).
    pub fn flash_attn_ext(
        &mut self,
        q: TensorId,
        kv: TensorId,
        mask: Option<TensorId>,
        sinks: Option<TensorId>,
        scale: f32,
    ) -> Result<TensorId, GraphError> {
        self.flash_attn_parts(q, kv, None, mask, sinks, scale)
    }

    /// [`Graph::flash_attn_ext`] over the rows of `kv` followed by those of `kv2`, each read
    /// in place (module doc).
    pub fn flash_attn_parts(
        &mut self,
        q: TensorId,
        kv: TensorId,
        kv2: Option<TensorId>,
        mask: Option<TensorId>,
        sinks: Option<TensorId>,
        scale: f32,
    ) -> Result<TensorId, GraphError> {
        let op = FlashAttnExt {
            scale,
            has_mask: mask.is_some(),
            has_sinks: sinks.is_some(),
            has_kv2: kv2.is_some(),
        };
        let srcs: Vec<TensorId> = [q, kv]
            .into_iter()
            .chain(mask)
            .chain(sinks)
            .chain(kv2)
            .collect();
        self.op(op, &srcs)
    }
}
