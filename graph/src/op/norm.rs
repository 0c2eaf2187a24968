//! RMS_NORM over dimension 0: `y = x / sqrt(mean(x²) + eps)`, optionally fused with the
//! weight multiply `y ⊙ w` (spec §4.0: every DeepSeek-V4 norm, eps inside the sqrt). With a
//! weight `w` (f32, `{ne0}`) it is ggml's `rms_norm` + `mul`; without, the unweighted norm used
//! per q-head and on the flattened HC vector.

use super::{Access, OpDef};
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;
use quant::DType;

/// RMS normalisation of each row, optionally times a weight vector.
#[derive(Debug, Clone)]
pub struct RmsNorm {
    /// Added to the mean square inside the square root.
    pub eps: f32,
}

impl OpDef for RmsNorm {
    const NAME: &'static str = "RMS_NORM";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        if srcs.is_empty() || srcs.len() > 2 {
            return Err(shape_err(Self::NAME, "expects x and an optional weight"));
        }
        let x = srcs[0];
        if x.dtype != DType::F32 {
            return Err(shape_err(
                Self::NAME,
                format!("f32 only, got {}", x.shape_str()),
            ));
        }
        if let Some(w) = srcs.get(1) {
            if w.dtype != DType::F32 || w.ne[0] != x.ne[0] || w.nrows() != 1 {
                return Err(shape_err(
                    Self::NAME,
                    format!(
                        "weight {} does not match rows of {}",
                        w.shape_str(),
                        x.shape_str()
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
    /// Unweighted RMS norm of each row.
    pub fn rms_norm(&mut self, x: TensorId, eps: f32) -> Result<TensorId, GraphError> {
        self.op(RmsNorm { eps }, &[x])
    }
    /// RMS norm of each row times `w` (fused).
    pub fn rms_norm_w(
        &mut self,
        x: TensorId,
        w: TensorId,
        eps: f32,
    ) -> Result<TensorId, GraphError> {
        self.op(RmsNorm { eps }, &[x, w])
    }
}
