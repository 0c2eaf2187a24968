//! MOE_ROUTE and MASK_IDS: the live MoE controls of issue 6 applied inside the graph.
//!
//! * **MOE_ROUTE** `{layer, knobs}`: routing weights f32 `{K, T}` (the router's selection order,
//!   after the model's normalisation and routed scaling) → f32 `{K, T}` with the layer's live
//!   setting applied per token ([`crate::knobs::apply_routing`]: keep the first top-k, drop the
//!   adaptive tail, rescale none/l1/l2; dropped experts get weight exactly 0). The setting is read
//!   from the shared [`crate::knobs::MoeKnobs`] at execution time, so it can change between
//!   tokens without a rebuild; the model's own setting copies the weights bit for bit.
//! * **MASK_IDS**: expert ids I32 `{K, T}` and those weights → ids with −1 wherever the weight is
//!   exactly 0, so MUL_MAT_ID skips the dropped experts (their weights are never read).

use super::{want_srcs, Access, OpDef};
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::knobs::MoeKnobs;
use crate::tensor::TensorDesc;
use quant::DType;
use std::sync::Arc;

/// Apply the live MoE setting of `layer` to routing weights.
#[derive(Debug, Clone)]
pub struct MoeRoute {
    /// Layer index into the knobs.
    pub layer: usize,
    /// The shared live settings.
    pub knobs: Arc<MoeKnobs>,
}

impl OpDef for MoeRoute {
    const NAME: &'static str = "MOE_ROUTE";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        want_srcs(Self::NAME, srcs, 1)?;
        let w = srcs[0];
        if w.dtype != DType::F32 || !w.rows_contiguous() || w.ne[2] != 1 || w.ne[3] != 1 {
            return Err(shape_err(
                Self::NAME,
                format!("weights must be f32 {{K, T}}, got {}", w.shape_str()),
            ));
        }
        TensorDesc::f32(&[w.ne[0], w.ne[1]])
    }
    fn access(&self) -> Access {
        Access::RowWise
    }
}

/// Ids of dropped experts (weight 0) replaced by −1.
#[derive(Debug, Clone)]
pub struct MaskIds;

impl OpDef for MaskIds {
    const NAME: &'static str = "MASK_IDS";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        want_srcs(Self::NAME, srcs, 2)?;
        let (ids, w) = (srcs[0], srcs[1]);
        if ids.dtype != DType::I32
            || !ids.is_contiguous()
            || w.dtype != DType::F32
            || ids.ne != w.ne
        {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "ids {} and weights {} must be i32/f32 of one shape",
                    ids.shape_str(),
                    w.shape_str()
                ),
            ));
        }
        TensorDesc::new(DType::I32, &ids.ne)
    }
    fn access(&self) -> Access {
        Access::RowWise
    }
}

impl Graph {
    /// Routing weights `{K, T}` with layer `layer`'s live MoE setting applied.
    pub fn moe_route(
        &mut self,
        w: TensorId,
        layer: usize,
        knobs: Arc<MoeKnobs>,
    ) -> Result<TensorId, GraphError> {
        self.op(MoeRoute { layer, knobs }, &[w])
    }
    /// Expert ids with −1 where the (adjusted) weight is 0.
    pub fn mask_ids(&mut self, ids: TensorId, w: TensorId) -> Result<TensorId, GraphError> {
        self.op(MaskIds, &[ids, w])
    }
}
