//! ADD, MUL and DIV: element-wise f32 `a ∘ b` where `b` broadcasts over `a` (each `ne[i]` of `b`
//! divides `a`'s, ggml `can_repeat`). Output has `a`'s shape, contiguous.

use super::{want_srcs, Access, OpDef};
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;
use quant::DType;

fn infer_binary(name: &'static str, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
    want_srcs(name, srcs, 2)?;
    let (a, b) = (srcs[0], srcs[1]);
    if a.dtype != DType::F32 || b.dtype != DType::F32 {
        return Err(shape_err(
            name,
            format!("f32 only, got {} and {}", a.shape_str(), b.shape_str()),
        ));
    }
    if (0..4).any(|i| b.ne[i] == 0 || a.ne[i] % b.ne[i] != 0) {
        return Err(shape_err(
            name,
            format!(
                "{} does not broadcast over {}",
                b.shape_str(),
                a.shape_str()
            ),
        ));
    }
    TensorDesc::f32(&a.ne)
}

macro_rules! binary_op {
    ($(#[$m:meta])* $t:ident, $name:literal, $fn:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone)]
        pub struct $t;
        impl OpDef for $t {
            const NAME: &'static str = $name;
            fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
                infer_binary(Self::NAME, srcs)
            }
            fn access(&self) -> Access {
                Access::RowWise
            }
        }
        impl Graph {
            #[doc = concat!("`", $name, "(a, b)` with `b` broadcast over `a`.")]
            pub fn $fn(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
                self.op($t, &[a, b])
            }
        }
    };
}

binary_op!(/// `a + b`.
    Add, "ADD", add);
binary_op!(/// `a · b`.
    Mul, "MUL", mul);
binary_op!(/// `a / b`.
    Div, "DIV", div);
