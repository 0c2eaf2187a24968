//! Element-wise f32 unary ops: SCALE (`x·s + b`), CLAMP, SILU (`x·σ(x)`), SIGMOID, SOFTPLUS
//! (`ln(1+eˣ)`, `x` for `x > 20` as PyTorch and ggml; spec §4.0), SQRT. Any input strides;
//! contiguous f32 output of the same shape.

use super::{want_srcs, Access, OpDef};
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;
use quant::DType;

fn infer_unary(name: &'static str, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
    want_srcs(name, srcs, 1)?;
    if srcs[0].dtype != DType::F32 {
        return Err(shape_err(
            name,
            format!("f32 only, got {}", srcs[0].shape_str()),
        ));
    }
    TensorDesc::f32(&srcs[0].ne)
}

macro_rules! unary_op {
    ($(#[$m:meta])* $t:ident { $($(#[$fm:meta])* $f:ident : $ft:ty),* }, $name:literal, $fn:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone)]
        pub struct $t { $($(#[$fm])* pub $f: $ft),* }
        impl OpDef for $t {
            const NAME: &'static str = $name;
            fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
                infer_unary(Self::NAME, srcs)
            }
            fn access(&self) -> Access {
                Access::RowWise
            }
        }
        impl Graph {
            #[doc = concat!("`", $name, "` of `a`.")]
            pub fn $fn(&mut self, a: TensorId $(, $f: $ft)*) -> Result<TensorId, GraphError> {
                self.op($t { $($f),* }, &[a])
            }
        }
    };
}

unary_op!(/// `x·scale + bias` (ggml `scale_bias`).
    Scale { /// multiplier
    scale: f32, /// added after scaling
    bias: f32 }, "SCALE", scale);
unary_op!(/// `clamp(x, min, max)`.
    Clamp { /// lower bound
    min: f32, /// upper bound
    max: f32 }, "CLAMP", clamp);
unary_op!(/// `x·σ(x)`.
    Silu {}, "SILU", silu);
unary_op!(/// `1/(1+e^−x)`.
    Sigmoid {}, "SIGMOID", sigmoid);
unary_op!(/// `ln(1+eˣ)`, `x` when `x > 20`.
    Softplus {}, "SOFTPLUS", softplus);
unary_op!(/// `√x`.
    Sqrt {}, "SQRT", sqrt);
