//! QUANTIZE: convert f32 activation rows to a matmul dot type (Q8_0, Q8_K, Q8_1, F16, BF16)
//! with ggml-cpu's `from_float` rounding (x86 rules, see `fathom-quant`). The graph inserts it
//! automatically in [`Graph::mul_mat`] / [`Graph::mul_mat_id`] and **reuses** it: every matmul
//! that reads the same activation with the same dot type (gate/up, q_a/kv/compressor, …)
//! shares one conversion (issue 3: the activation-quantization cache).

use super::{want_srcs, Access, OpDef};
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;
use quant::DType;

/// Row-wise conversion of f32 rows to `dtype`.
#[derive(Debug, Clone)]
pub struct Quantize {
    /// Target type (must have an activation quantizer).
    pub dtype: DType,
}

impl OpDef for Quantize {
    const NAME: &'static str = "QUANTIZE";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        want_srcs(Self::NAME, srcs, 1)?;
        let x = srcs[0];
        if x.dtype != DType::F32 || !x.rows_contiguous() {
            return Err(shape_err(
                Self::NAME,
                format!("f32 rows expected, got {}", x.shape_str()),
            ));
        }
        if self.dtype.info().quantize_activation.is_none() {
            return Err(shape_err(
                Self::NAME,
                format!("{} has no activation quantizer", self.dtype),
            ));
        }
        TensorDesc::new(self.dtype, &x.ne)
    }
    fn access(&self) -> Access {
        Access::RowWise
    }
}

impl Graph {
    /// `x` converted to `dtype` — one shared node per `(x, dtype)` (cached in the graph).
    pub fn quantize(&mut self, x: TensorId, dtype: DType) -> Result<TensorId, GraphError> {
        if let Some(id) = self.cached_quantize(x, dtype) {
            return Ok(id);
        }
        let id = self.op(Quantize { dtype }, &[x])?;
        self.cache_quantize(x, dtype, id);
        Ok(id)
    }

    /// The activation `x` as a matmul against weight `w` reads it: converted to `w`'s dot type
    /// (shared), or `x` itself when the dot type is f32 or `x` is already converted.
    pub fn activation_for(&mut self, w: TensorId, x: TensorId) -> Result<TensorId, GraphError> {
        let (wd, xd) = (*self.desc(w), *self.desc(x));
        match wd.dtype.info().dot_type {
            Some(dt) if dt != DType::F32 && xd.dtype == DType::F32 && xd.rows_contiguous() => {
                self.quantize(x, dt)
            }
            _ => Ok(x),
        }
    }
}
