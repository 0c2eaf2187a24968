//! GET_ROWS: `out[:, r, b] = dequant(table[:, ids[r, b], b])` — embedding lookup for any table
//! dtype, quantized included, and its batched form (ggml `get_rows` with 3-D tables), used to
//! pick the routing weights `s[idx_k]` of each token's selected experts (spec §4.9).
//! `table {ne0, nrows, B}` (B = 1 broadcasts), `ids` I32 `{n, B'}` (B' = B or B = 1) →
//! f32 `{ne0, n, B'}` (I32 tables give I32 rows: the hash-routing table `tid2eid`).
//! Out-of-range ids give NaN rows (−1 for I32; never an out-of-bounds read).

use super::{want_srcs, OpDef};
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;
use quant::DType;

/// Row gather.
#[derive(Debug, Clone)]
pub struct GetRows;

impl OpDef for GetRows {
    const NAME: &'static str = "GET_ROWS";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        want_srcs(Self::NAME, srcs, 2)?;
        let (t, ids) = (srcs[0], srcs[1]);
        if ids.dtype != DType::I32 || ids.ne[2] != 1 || ids.ne[3] != 1 || !ids.is_contiguous() {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "ids must be a contiguous i32 {{n, B}} tensor, got {}",
                    ids.shape_str()
                ),
            ));
        }
        if t.ne[3] != 1 || !t.rows_contiguous() {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "table must be at most 3-D with contiguous rows, got {}",
                    t.shape_str()
                ),
            ));
        }
        if t.ne[2] != 1 && t.ne[2] != ids.ne[1] {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "table batches {} do not match ids {}",
                    t.shape_str(),
                    ids.shape_str()
                ),
            ));
        }
        if t.dtype == DType::I32 {
            // integer tables (the hash-routing `tid2eid`) are gathered as i32
            return TensorDesc::new(DType::I32, &[t.ne[0], ids.ne[0], ids.ne[1]]);
        }
        if t.dtype.info().dequantize.is_none() {
            return Err(shape_err(
                Self::NAME,
                format!("no dequantizer for {}", t.dtype),
            ));
        }
        TensorDesc::f32(&[t.ne[0], ids.ne[0], ids.ne[1]])
    }
}

impl Graph {
    /// Gather rows `ids` of `table` as f32.
    pub fn get_rows(&mut self, table: TensorId, ids: TensorId) -> Result<TensorId, GraphError> {
        self.op(GetRows, &[table, ids])
    }
}
