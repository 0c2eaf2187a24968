//! SET_ROWS: write rows into a persistent cache in place (ggml `set_rows`) — the decode-time
//! state of spec §6.1: the sliding-window ring (slot `p mod W`), the compressor pending rings,
//! the compressed-entry and indexer-key caches.
//!
//! `dst` (a [`crate::NodeKind::State`] tensor or an earlier SET_ROWS result on it) F32/F16
//! `{ne0, n_slots}`, `src` f32 `{ne0, n}` (any row strides), `idx` I32 `{n}` (runtime input):
//! `dst[:, idx[r]] = src[:, r]` for every `idx[r] ≥ 0` (−1 = skip; out-of-range indices are
//! skipped too, never written out of bounds). The result aliases `dst`; readers that must see
//! the new rows take it as their source, which orders them after the write. Indices must be
//! distinct (the host guarantees it), so rows can be written by any thread.

use super::{want_srcs, OpDef};
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;
use quant::DType;

/// In-place row scatter into a cache.
#[derive(Debug, Clone)]
pub struct SetRows;

impl OpDef for SetRows {
    const NAME: &'static str = "SET_ROWS";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        want_srcs(Self::NAME, srcs, 3)?;
        let (dst, src, idx) = (srcs[0], srcs[1], srcs[2]);
        if !matches!(dst.dtype, DType::F32 | DType::F16)
            || !dst.is_contiguous()
            || dst.ne[2] != 1
            || dst.ne[3] != 1
        {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "cache must be contiguous 2-D f32/f16, got {}",
                    dst.shape_str()
                ),
            ));
        }
        if src.dtype != DType::F32 || src.ne[0] != dst.ne[0] || src.ne[2] != 1 || src.ne[3] != 1 {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "rows {} do not fit cache {}",
                    src.shape_str(),
                    dst.shape_str()
                ),
            ));
        }
        if idx.dtype != DType::I32 || !idx.is_contiguous() || idx.nelements() != src.ne[1] {
            return Err(shape_err(
                Self::NAME,
                format!("idx must be i32 {{{}}}, got {}", src.ne[1], idx.shape_str()),
            ));
        }
        Ok(*dst)
    }
    fn inplace(&self) -> bool {
        true
    }
}

impl Graph {
    /// `cache[:, idx[r]] = rows[:, r]`, in place; returns the updated cache.
    pub fn set_rows(
        &mut self,
        cache: TensorId,
        rows: TensorId,
        idx: TensorId,
    ) -> Result<TensorId, GraphError> {
        self.op(SetRows, &[cache, rows, idx])
    }
}
