//! COMPRESS_POOL: the gated-softmax pooling of the CSA, HCA and indexer compressors (spec
//! §4.5, §4.6, §4.7). `kv` and `score` f32 `{d, S, W}` (S slots per window, W windows; rows
//! contiguous, any other strides, so the caller can assemble slots with views/concat — e.g.
//! CSA's previous-window `Ca/Ga` rows followed by the current window's `Cb/Gb`) → f32 `{d, W}`:
//! per window w and channel c, `α_s = softmax_s(score[c, s, w])` and
//! `pooled[c, w] = Σ_s α_s·kv[c, s, w]`. `score` already includes the APE.
//!
//! A `−∞` score means weight 0 and its slot is skipped entirely (its `kv` is not read into
//! the sum, so an empty previous window may hold any value); a channel whose S scores are all
//! `−∞` pools to 0.

use super::{want_srcs, OpDef};
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;
use quant::DType;

/// Per-channel softmax pooling over the slots of each window.
#[derive(Debug, Clone)]
pub struct CompressPool;

impl OpDef for CompressPool {
    const NAME: &'static str = "COMPRESS_POOL";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        want_srcs(Self::NAME, srcs, 2)?;
        let (kv, score) = (srcs[0], srcs[1]);
        for (what, t) in [("kv", kv), ("score", score)] {
            if t.dtype != DType::F32 || !t.rows_contiguous() || t.ne[3] != 1 {
                return Err(shape_err(
                    Self::NAME,
                    format!(
                        "{what} must be f32 {{d, S, W}} with contiguous rows, got {}",
                        t.shape_str()
                    ),
                ));
            }
        }
        if !kv.same_shape(score) {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "kv {} and score {} differ",
                    kv.shape_str(),
                    score.shape_str()
                ),
            ));
        }
        TensorDesc::f32(&[kv.ne[0], kv.ne[2]])
    }
}

impl Graph {
    /// Softmax-gated pooling `{d, S, W}` × `{d, S, W}` → `{d, W}` (see the module doc).
    pub fn compress_pool(&mut self, kv: TensorId, score: TensorId) -> Result<TensorId, GraphError> {
        self.op(CompressPool, &[kv, score])
    }
}
