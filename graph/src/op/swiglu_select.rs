//! SWIGLU_SELECT: gate-first SwiGLU row skipping (issue 6). From the gate pre-activations
//! `g {I, rows…}` of an expert (routed: one row per (slot, token); shared: one per token) it
//! makes the per-row factor `rs {I, rows…}` used twice:
//! - as the row mask of the up projection (`MUL_MAT(_ID)` with a mask: rows with `rs = 0` are
//!   not computed, so those rows of `W_up` are never read — the saving);
//! - as a multiplier of `h = SwiGLU(g, u)`, rescaling the kept rows.
//!
//! Per stratum of 128 consecutive intermediate rows (a last partial stratum keeps
//! `ceil(keep·len/128)`), with `v_i = SiLU(min(g_i, limit))²`: the `keep` rows with the largest
//! `v` (ties: lower row first) get `rs = sqrt(Σ_stratum v / Σ_kept v)`, the others 0. `keep` is
//! read at run time from the layer's [`crate::knobs::MoeKnobs`] (`keep_experts` or
//! `keep_shared`); 0 or ≥ 128 means no skipping and `rs = 1` exactly, so the result is
//! bit-identical to the plain SwiGLU path.
//!
//! `W_down` sees `h = 0` for skipped rows: its dot products still read every block, because a
//! quantized row block (32 or 256 inputs) can only be skipped when all its inputs are skipped,
//! which a per-token selection of `keep`/128 rows essentially never produces.

use super::{want_srcs, Access, OpDef};
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::knobs::MoeKnobs;
use crate::tensor::TensorDesc;
use quant::DType;
use std::sync::Arc;

/// Rows of one selection stratum.
pub const STRATUM: usize = 128;

/// Gate-first row selection and rescale factors.
#[derive(Debug, Clone)]
pub struct SwigluSelect {
    /// Layer index into the knobs.
    pub layer: usize,
    /// The shared live settings.
    pub knobs: Arc<MoeKnobs>,
    /// Use `keep_shared` (the shared expert) instead of `keep_experts`.
    pub shared: bool,
    /// The gate's upper clamp (as in SWIGLU), if any.
    pub limit: Option<f32>,
}

impl OpDef for SwigluSelect {
    const NAME: &'static str = "SWIGLU_SELECT";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        want_srcs(Self::NAME, srcs, 1)?;
        let g = srcs[0];
        if g.dtype != DType::F32 || !g.rows_contiguous() {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "gate must be f32 with contiguous rows, got {}",
                    g.shape_str()
                ),
            ));
        }
        TensorDesc::f32(&g.ne)
    }
    fn access(&self) -> Access {
        Access::RowWise
    }
}

impl Graph {
    /// Row factors for gate-first SwiGLU row skipping (see the module doc).
    pub fn swiglu_select(
        &mut self,
        gate: TensorId,
        layer: usize,
        knobs: Arc<MoeKnobs>,
        shared: bool,
        limit: Option<f32>,
    ) -> Result<TensorId, GraphError> {
        self.op(
            SwigluSelect {
                layer,
                knobs,
                shared,
                limit,
            },
            &[gate],
        )
    }
}
