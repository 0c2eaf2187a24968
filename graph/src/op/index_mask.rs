//! INDEX_MASK: turn the Lightning Indexer's selection into an additive attention mask over the
//! compressed entries (spec §4.8, CSA "block bias"): `ids` I32 `{k, T}` (entry indices, −1 =
//! no pick) → f32 `{n, T}` with 0 at every selected index `< n` and −∞ elsewhere. `n` is the
//! capacity of the compressed-entry cache, fixed for a plan; which entries exist and are
//! visible is decided at run time by the indexer (it never selects an invalid entry).

use super::{want_srcs, Access, OpDef};
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;
use quant::DType;

/// Selected indices → 0 / −∞ mask.
#[derive(Debug, Clone)]
pub struct IndexMask {
    /// Mask length (compressed-entry capacity).
    pub n: usize,
}

impl OpDef for IndexMask {
    const NAME: &'static str = "INDEX_MASK";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        want_srcs(Self::NAME, srcs, 1)?;
        let ids = srcs[0];
        if ids.dtype != DType::I32 || !ids.is_contiguous() || ids.ne[2] != 1 || ids.ne[3] != 1 {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "ids must be contiguous i32 {{k, T}}, got {}",
                    ids.shape_str()
                ),
            ));
        }
        if self.n == 0 {
            return Err(shape_err(Self::NAME, "mask length must be positive"));
        }
        TensorDesc::f32(&[self.n, ids.ne[1]])
    }
    fn access(&self) -> Access {
        Access::RowWise
    }
}

impl Graph {
    /// Additive mask of length `n` from selected indices.
    pub fn index_mask(&mut self, ids: TensorId, n: usize) -> Result<TensorId, GraphError> {
        self.op(IndexMask { n }, &[ids])
    }
}
