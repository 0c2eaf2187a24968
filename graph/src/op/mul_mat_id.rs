//! MUL_MAT_ID: expert-indexed matrix product (ggml `mul_mat_id`), the routed-expert
//! projections of the MoE block (spec §4.9: `g = W1_e·f`, `u = W3_e·f`, `y_e = W2_e·h` for the
//! selected experts `e = idx_k`; §7 lists `ggml_mul_mat_id`).
//!
//! Shapes: `w {K, N, E}` (a stack of `E` expert matrices of any dtype with a dot product,
//! quantized included), `x` f32 `{K, B, T}`, `ids` I32 `{n_used, T}` → f32 `{N, n_used, T}`:
//!
//! `out[:, u, t] = W[ids[u, t]] · x[:, u mod B, t]`
//!
//! An optional fourth source, an f32 row mask shaped like the output, restricts the work to
//! the rows where it is non-zero (others are 0, their weight rows never read).
//!
//! `B` must divide `n_used` (ggml's broadcast rule): `B = 1` feeds the same activation row to all
//! of a token's experts (gate/up projections), `B = n_used` one row per selected expert (down
//! projection). As in MUL_MAT, activation rows are converted to the weight type's dot type.
//!
//! The ids are read at execution time (they are a per-token input). Deviation from ggml (which
//! asserts `0 ≤ id < E`): `id = −1` means "skip" and yields a zero output row; any other id
//! outside `0..E` yields a NaN row — never an out-of-bounds read.

use super::OpDef;
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;
use quant::DType;

/// Expert-indexed matrix product with weights first.
#[derive(Debug, Clone)]
pub struct MulMatId {
    /// Expert evaluations performed so far: valid `(slot, token)` pairs summed over runs (the
    /// profiler's routed-experts-per-token column reads it; dropped experts do not count).
    pub evaluated: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl MulMatId {
    /// A new node's parameters.
    pub fn new() -> MulMatId {
        MulMatId {
            evaluated: Default::default(),
        }
    }
}

impl Default for MulMatId {
    fn default() -> Self {
        MulMatId::new()
    }
}

impl OpDef for MulMatId {
    const NAME: &'static str = "MUL_MAT_ID";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        if srcs.len() != 3 && srcs.len() != 4 {
            return Err(shape_err(
                Self::NAME,
                "expects w, x, ids and an optional row mask",
            ));
        }
        let (w, x, ids) = (srcs[0], srcs[1], srcs[2]);
        let Some(dot) = w
            .dtype
            .info()
            .dot_type
            .filter(|_| w.dtype.info().vec_dot.is_some())
        else {
            return Err(shape_err(
                Self::NAME,
                format!("no dot product for weight type {}", w.dtype),
            ));
        };
        if dot.info().quantize_activation.is_none() {
            return Err(shape_err(
                Self::NAME,
                format!("no activation quantizer for dot type {dot}"),
            ));
        }
        if !w.rows_contiguous() || w.ne[3] != 1 {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "weights must be a 3-D stack {{K, N, E}} with contiguous rows, got {}",
                    w.shape_str()
                ),
            ));
        }
        let preconverted = x.dtype == dot && x.dtype != DType::F32 && x.is_contiguous();
        if !(x.dtype == DType::F32 || preconverted) || !x.rows_contiguous() || x.ne[3] != 1 {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "activations must be 3-D f32 {{K, B, T}} with contiguous rows, got {}",
                    x.shape_str()
                ),
            ));
        }
        if ids.dtype != DType::I32 || ids.ne[2] != 1 || ids.ne[3] != 1 {
            return Err(shape_err(
                Self::NAME,
                format!("ids must be 2-D i32 {{n_used, T}}, got {}", ids.shape_str()),
            ));
        }
        let (n_used, t) = (ids.ne[0], ids.ne[1]);
        if w.ne[0] != x.ne[0] || x.ne[2] != t || n_used % x.ne[1] != 0 {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "w {} · x {} with ids {}: need equal K, x.ne[2] = T and B | n_used",
                    w.shape_str(),
                    x.shape_str(),
                    ids.shape_str()
                ),
            ));
        }
        if quant::bytes_for(dot, x.ne[0]).is_err() {
            return Err(shape_err(
                Self::NAME,
                format!("K = {} is not a whole number of {dot} blocks", x.ne[0]),
            ));
        }
        let out = TensorDesc::f32(&[w.ne[1], n_used, t])?;
        super::mul_mat::check_row_mask(Self::NAME, srcs.get(3).copied(), &out)?;
        Ok(out)
    }
}

impl Graph {
    /// `out[:, u, t] = W[ids[u, t]] · x[:, u mod B, t]` (see the module doc for shapes).
    pub fn mul_mat_id(
        &mut self,
        w: TensorId,
        x: TensorId,
        ids: TensorId,
    ) -> Result<TensorId, GraphError> {
        let x = self.activation_for(w, x)?;
        self.op(MulMatId::new(), &[w, x, ids])
    }
    /// MUL_MAT_ID that computes only the output rows whose `mask` entry is non-zero (the
    /// others are 0 and their weight rows are not read): gate-first SwiGLU row skipping.
    pub fn mul_mat_id_masked(
        &mut self,
        w: TensorId,
        x: TensorId,
        ids: TensorId,
        mask: TensorId,
    ) -> Result<TensorId, GraphError> {
        let x = self.activation_for(w, x)?;
        self.op(MulMatId::new(), &[w, x, ids, mask])
    }
}
