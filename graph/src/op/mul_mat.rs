//! MUL_MAT: `y = W·x` in ggml's convention — `mul_mat(w: {K, N, B2, B3}, x: {K, T, b2, b3})
//! → {N, T, b2, b3}`: every output element is the dot product of a weight row with an
//! activation row, `y[n, t] = Σ_k w[k, n]·x[k, t]` (spec §0 shape conventions). `w` may be any
//! dtype with a dot product; `x` is f32 and is converted once per row to `w`'s dot type
//! (Q8_0, Q8_K, F16, BF16, F32). `x` may also arrive already converted (a contiguous tensor of
//! the dot type from QUANTIZE); [`Graph::mul_mat`] inserts that shared conversion itself. Weight batches broadcast over activation batches
//! (`b2 % B2 == 0`, `b3 % B3 == 0`).

use super::OpDef;
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;
use quant::DType;

/// Matrix product with weights first.
#[derive(Debug, Clone)]
pub struct MulMat;

impl OpDef for MulMat {
    const NAME: &'static str = "MUL_MAT";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        if srcs.len() != 2 && srcs.len() != 3 {
            return Err(shape_err(
                Self::NAME,
                "expects w, x and an optional row mask",
            ));
        }
        let (w, x) = (srcs[0], srcs[1]);
        if w.dtype.info().vec_dot.is_none() {
            return Err(shape_err(
                Self::NAME,
                format!("no dot product for weight type {}", w.dtype),
            ));
        }
        let dot = w.dtype.info().dot_type;
        let preconverted = Some(x.dtype) == dot && x.dtype != DType::F32 && x.is_contiguous();
        if !(x.dtype == DType::F32 || preconverted) || !x.rows_contiguous() {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "activations must be f32 with contiguous rows, got {}",
                    x.shape_str()
                ),
            ));
        }
        if !w.rows_contiguous() {
            return Err(shape_err(Self::NAME, "weight rows must be contiguous"));
        }
        if w.ne[0] != x.ne[0] || x.ne[2] % w.ne[2] != 0 || x.ne[3] % w.ne[3] != 0 {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "w {} · x {}: shapes do not match",
                    w.shape_str(),
                    x.shape_str()
                ),
            ));
        }
        let out = TensorDesc::f32(&[w.ne[1], x.ne[1], x.ne[2], x.ne[3]])?;
        check_row_mask(Self::NAME, srcs.get(2).copied(), &out)?;
        Ok(out)
    }
}

/// Check the optional row mask of a (masked) matmul: f32, the output's shape, rows
/// contiguous. Shared by MUL_MAT and MUL_MAT_ID.
pub(crate) fn check_row_mask(
    op: &'static str,
    mask: Option<&TensorDesc>,
    out: &TensorDesc,
) -> Result<(), GraphError> {
    match mask {
        Some(m) if m.dtype != DType::F32 || m.ne != out.ne || !m.rows_contiguous() => {
            Err(shape_err(
                op,
                format!(
                    "row mask must be f32 {}, got {}",
                    out.shape_str(),
                    m.shape_str()
                ),
            ))
        }
        _ => Ok(()),
    }
}

impl Graph {
    /// `W·x` (see the module doc for shapes).
    pub fn mul_mat(&mut self, w: TensorId, x: TensorId) -> Result<TensorId, GraphError> {
        let x = self.activation_for(w, x)?;
        self.op(MulMat, &[w, x])
    }
    /// `W·x` computing only the output elements whose `mask` entry is non-zero (the others are
    /// 0 and their weight rows are not read): gate-first SwiGLU row skipping.
    pub fn mul_mat_masked(
        &mut self,
        w: TensorId,
        x: TensorId,
        mask: TensorId,
    ) -> Result<TensorId, GraphError> {
        let x = self.activation_for(w, x)?;
        self.op(MulMat, &[w, x, mask])
    }
}
