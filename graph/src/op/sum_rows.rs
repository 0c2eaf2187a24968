//! SUM_ROWS: the sum of each row, `out[0, i1, i2, i3] = Σ_i x[i, i1, i2, i3]` (ggml
//! `sum_rows`; spec §7 lists it among the primitive ops of the unfused HC path). f32 `x`
//! `{n, ne1, ne2, ne3}` with any strides → contiguous f32 `{1, ne1, ne2, ne3}`. The sum is
//! accumulated in f64 in index order and rounded once (as ggml's `ggml_vec_sum_f32`, whose
//! `ggml_float` accumulator is a double).

use super::{want_srcs, Access, OpDef};
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;
use quant::DType;

/// Sum of each row.
#[derive(Debug, Clone)]
pub struct SumRows;

impl OpDef for SumRows {
    const NAME: &'static str = "SUM_ROWS";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        want_srcs(Self::NAME, srcs, 1)?;
        let x = srcs[0];
        if x.dtype != DType::F32 {
            return Err(shape_err(
                Self::NAME,
                format!("f32 only, got {}", x.shape_str()),
            ));
        }
        TensorDesc::f32(&[1, x.ne[1], x.ne[2], x.ne[3]])
    }
    fn access(&self) -> Access {
        Access::RowWise
    }
}

impl Graph {
    /// Sum of each row (`{n, …}` → `{1, …}`).
    pub fn sum_rows(&mut self, x: TensorId) -> Result<TensorId, GraphError> {
        self.op(SumRows, &[x])
    }
}
