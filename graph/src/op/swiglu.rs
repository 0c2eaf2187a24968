//! SWIGLU: DeepSeek-V4's clamped SwiGLU (spec §4.9, §7 `ggml_swiglu_clamp`):
//!
//! `out = silu(min(g, limit)) · clamp(u, −limit, limit)`, `silu(x) = x / (1 + e^−x)`
//!
//! The gate is clamped (from above only) **before** the SiLU; the up value is clamped on both
//! sides. V4 uses `limit = 10` for the routed and the shared experts. Without a limit it is the
//! plain SwiGLU `silu(g) · u` (ggml `swiglu_split`). `g` and `u` are two f32 sources of the same
//! shape (any strides); the output is contiguous f32 of that shape.

use super::{want_srcs, Access, OpDef};
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;
use quant::DType;

/// Clamped SwiGLU of a gate and an up tensor.
#[derive(Debug, Clone)]
pub struct Swiglu {
    /// Clamp limit (`≥ 0`); `None` = plain SwiGLU without clamping.
    pub limit: Option<f32>,
}

impl OpDef for Swiglu {
    const NAME: &'static str = "SWIGLU";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        want_srcs(Self::NAME, srcs, 2)?;
        let (g, u) = (srcs[0], srcs[1]);
        if g.dtype != DType::F32 || u.dtype != DType::F32 || !g.same_shape(u) {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "gate {} and up {} must be f32 of the same shape",
                    g.shape_str(),
                    u.shape_str()
                ),
            ));
        }
        if let Some(l) = self.limit {
            if l.is_nan() || l < 0.0 {
                return Err(shape_err(Self::NAME, format!("limit {l} must be ≥ 0")));
            }
        }
        TensorDesc::f32(&g.ne)
    }
    fn access(&self) -> Access {
        Access::RowWise
    }
}

impl Graph {
    /// `silu(min(g, limit)) · clamp(u, −limit, limit)`; `limit = None` for plain SwiGLU.
    pub fn swiglu(
        &mut self,
        g: TensorId,
        u: TensorId,
        limit: Option<f32>,
    ) -> Result<TensorId, GraphError> {
        self.op(Swiglu { limit }, &[g, u])
    }
}
