//! SOFT_MAX over dimension 0 with optional additive mask and per-head attention sinks
//! (spec §4.4 steps 7–8, §4.8; ggml `soft_max_ext` with `max_bias = 0` and `sinks`).
//!
//! `x` f32 `{n, H, T, B}` (any strides; typically attention logits `{n_kv, H, T}`), optional
//! `mask` f32 or f16 `{n, T, B}` (0 / −∞ for DS4; any strides) **broadcast over H**: row
//! `(h, t, b)` of `x` uses mask row `(t, b)`; optional `sinks` f32 `{H}`: row `(h, ·, ·)` gets
//! the extra logit `sinks[h]`, which joins the max and the denominator but has no output
//! column. Output f32 `{n, H, T, B}` contiguous:
//!
//! `z_i = scale·x_i + mask_i`, `M = max(max_i z_i, sink)`,
//! `y_i = exp(z_i − M) / (Σ_j exp(z_j − M) + exp(sink − M))` (the sink terms only when given).
//!
//! `−∞` logits give probability 0. A row with no finite logit and no finite sink (fully
//! masked, `M = −∞`) is defined as **all zeros** (ggml would produce NaN).
//!
//! Optional sources are passed by position: `[x]`, `[x, mask]`, `[x, sinks]` or
//! `[x, mask, sinks]`, as announced by [`SoftMax::has_mask`] / [`SoftMax::has_sinks`].

use super::{Access, OpDef};
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;
use quant::DType;

/// Masked, scaled softmax of each row with optional sinks.
#[derive(Debug, Clone, PartialEq)]
pub struct SoftMax {
    /// Multiplies `x` before the mask is added.
    pub scale: f32,
    /// `srcs[1]` is the mask.
    pub has_mask: bool,
    /// The last source is the sinks vector.
    pub has_sinks: bool,
}

impl SoftMax {
    /// Index of the mask source, if any.
    pub fn mask_src(&self) -> Option<usize> {
        self.has_mask.then_some(1)
    }
    /// Index of the sinks source, if any.
    pub fn sinks_src(&self) -> Option<usize> {
        self.has_sinks.then_some(1 + usize::from(self.has_mask))
    }
}

impl OpDef for SoftMax {
    const NAME: &'static str = "SOFT_MAX";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        let want = 1 + usize::from(self.has_mask) + usize::from(self.has_sinks);
        if srcs.len() != want {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "expects {want} sources (x{}{}), got {}",
                    if self.has_mask { ", mask" } else { "" },
                    if self.has_sinks { ", sinks" } else { "" },
                    srcs.len()
                ),
            ));
        }
        let x = srcs[0];
        if x.dtype != DType::F32 {
            return Err(shape_err(
                Self::NAME,
                format!("x must be f32, got {}", x.shape_str()),
            ));
        }
        if !self.scale.is_finite() {
            return Err(shape_err(Self::NAME, "scale must be finite"));
        }
        if let Some(i) = self.mask_src() {
            let m = srcs[i];
            if !matches!(m.dtype, DType::F32 | DType::F16)
                || m.ne[0] != x.ne[0]
                || m.ne[1] != x.ne[2]
                || m.ne[2] != x.ne[3]
                || m.ne[3] != 1
            {
                return Err(shape_err(
                    Self::NAME,
                    format!(
                        "mask must be f32/f16 {{{}, {}, {}}} for x {}, got {}",
                        x.ne[0],
                        x.ne[2],
                        x.ne[3],
                        x.shape_str(),
                        m.shape_str()
                    ),
                ));
            }
        }
        if let Some(i) = self.sinks_src() {
            let s = srcs[i];
            if s.dtype != DType::F32 || s.ne[0] != x.ne[1] || s.nrows() != 1 {
                return Err(shape_err(
                    Self::NAME,
                    format!(
                        "sinks must be f32 {{{}}} (one per head) for x {}, got {}",
                        x.ne[1],
                        x.shape_str(),
                        s.shape_str()
                    ),
                ));
            }
        }
        TensorDesc::f32(&x.ne)
    }
    fn access(&self) -> Access {
        Access::RowWise
    }
}

impl Graph {
    /// `softmax(scale·x + mask)` per row with optional sinks (see the module doc).
    pub fn soft_max(
        &mut self,
        x: TensorId,
        mask: Option<TensorId>,
        sinks: Option<TensorId>,
        scale: f32,
    ) -> Result<TensorId, GraphError> {
        let op = SoftMax {
            scale,
            has_mask: mask.is_some(),
            has_sinks: sinks.is_some(),
        };
        let srcs: Vec<TensorId> = std::iter::once(x).chain(mask).chain(sinks).collect();
        self.op(op, &srcs)
    }
}
