//! EXPERT_PREFETCH: a hint, no arithmetic. `w {K, N, E}` (a routed-expert stack whose
//! experts may be paged, see [`crate::experts`]) and `ids` I32 `{n_used, T}` (a guess of the
//! experts a later MUL_MAT_ID on `w` will use) → I32 `{1}`: how many distinct experts in
//! `0..E` the guess names.
//!
//! Where `w`'s experts are paged, the kernel asks the source to read the guessed experts
//! ahead ([`crate::ExpertSource::prefetch`]), so that the disk works while the layers before
//! that MUL_MAT_ID compute; otherwise it does nothing. The result never changes a logit: a
//! wrong guess only costs a read. Ids outside `0..E` (and `−1`) are ignored.

use super::{want_srcs, OpDef};
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;
use quant::DType;

/// Read-ahead hint for a paged expert stack.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExpertPrefetch;

impl OpDef for ExpertPrefetch {
    const NAME: &'static str = "EXPERT_PREFETCH";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        want_srcs(Self::NAME, srcs, 2)?;
        let (w, ids) = (srcs[0], srcs[1]);
        if w.ne[3] != 1 || !w.rows_contiguous() {
            return Err(shape_err(
                Self::NAME,
                format!("w {} must be a stack of expert matrices", w.shape_str()),
            ));
        }
        if ids.dtype != DType::I32 || ids.ne[2] != 1 || ids.ne[3] != 1 {
            return Err(shape_err(
                Self::NAME,
                format!("ids {} must be i32 {{n_used, T}}", ids.shape_str()),
            ));
        }
        TensorDesc::new(DType::I32, &[1])
    }
}

impl Graph {
    /// Ask `w`'s expert source (if its experts are paged) to read the experts in `ids` ahead.
    pub fn expert_prefetch(&mut self, w: TensorId, ids: TensorId) -> Result<TensorId, GraphError> {
        self.op(ExpertPrefetch, &[w, ids])
    }
}
