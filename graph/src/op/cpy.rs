//! CPY: copy `srcs[0]` (any strides, F32/F16/BF16) into a new contiguous tensor of `dtype` —
//! ggml `cpy`/`cont` (f32 ↔ f16 conversion rounds to nearest even).

use super::{want_srcs, Access, OpDef};
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;
use quant::DType;

/// Dense copy with type conversion.
#[derive(Debug, Clone)]
pub struct Cpy {
    /// Output element type (F32, F16 or BF16).
    pub dtype: DType,
}

fn float_type(t: DType) -> bool {
    matches!(t, DType::F32 | DType::F16 | DType::BF16)
}

impl OpDef for Cpy {
    const NAME: &'static str = "CPY";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        want_srcs(Self::NAME, srcs, 1)?;
        if !float_type(srcs[0].dtype) || !float_type(self.dtype) {
            return Err(shape_err(
                Self::NAME,
                format!("{} → {} not supported", srcs[0].dtype, self.dtype),
            ));
        }
        TensorDesc::new(self.dtype, &srcs[0].ne)
    }
    fn access(&self) -> Access {
        Access::RowWise
    }
}

impl Graph {
    /// Contiguous copy of `a` converted to `dtype`.
    pub fn cpy(&mut self, a: TensorId, dtype: DType) -> Result<TensorId, GraphError> {
        self.op(Cpy { dtype }, &[a])
    }
    /// Contiguous copy of `a` in its own type.
    pub fn cont(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        let t = self.desc(a).dtype;
        self.cpy(a, t)
    }
}
