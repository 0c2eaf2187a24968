//! CONCAT: `a` and `b` joined along dimension `dim` (ggml `concat`; spec §7 lists
//! `ggml_concat`, used e.g. to append compressed keys to the window keys, §4.8). All other
//! dimensions must match: `out.ne[dim] = a.ne[dim] + b.ne[dim]`, and
//! `out[…, i, …] = a[…, i, …]` for `i < a.ne[dim]`, else `b[…, i − a.ne[dim], …]`.
//! Both sources share one non-quantized dtype (f32, f16, bf16, i32, …) and may have any
//! strides; the output is contiguous of that dtype.

use super::{want_srcs, Access, OpDef};
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;

/// Concatenation of two tensors along one dimension.
#[derive(Debug, Clone)]
pub struct Concat {
    /// The dimension to join along (0..=3).
    pub dim: usize,
}

impl OpDef for Concat {
    const NAME: &'static str = "CONCAT";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        want_srcs(Self::NAME, srcs, 2)?;
        let (a, b) = (srcs[0], srcs[1]);
        if self.dim > 3 {
            return Err(shape_err(
                Self::NAME,
                format!("dim {} is not 0 to 3", self.dim),
            ));
        }
        if a.dtype != b.dtype || a.dtype.is_quantized() {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "sources {} and {} must share one non-quantized type",
                    a.shape_str(),
                    b.shape_str()
                ),
            ));
        }
        if (0..4).any(|i| i != self.dim && a.ne[i] != b.ne[i]) {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "{} and {} differ outside dim {}",
                    a.shape_str(),
                    b.shape_str(),
                    self.dim
                ),
            ));
        }
        let mut ne = a.ne;
        ne[self.dim] += b.ne[self.dim];
        TensorDesc::new(a.dtype, &ne)
    }
    fn access(&self) -> Access {
        // joining rows: output row r is made of row r of each source
        if self.dim == 0 {
            Access::RowWise
        } else {
            Access::Global
        }
    }
}

impl Graph {
    /// `a` and `b` concatenated along `dim`.
    pub fn concat(&mut self, a: TensorId, b: TensorId, dim: usize) -> Result<TensorId, GraphError> {
        self.op(Concat { dim }, &[a, b])
    }
}
