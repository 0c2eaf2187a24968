//! Ranking ops over dimension 0 (the MoE router's expert selection, spec §4.9
//! `idx = top6(s + b)`; §7 lists `ggml_top_k` / `ggml_argsort_top_k`; ARGMAX for greedy
//! sampling). All take f32 `x {n, ne1, ne2, ne3}` with any strides and produce contiguous I32
//! indices into dimension 0, per row:
//!
//! - TOP_K: `{k, …}` — the indices of the `k` largest values in **descending value order**.
//! - ARGSORT: `{n, …}` — the sorting permutation, ascending or descending.
//! - ARGMAX: `{1, …}` — the index of the first maximum (= TOP_K with `k = 1`).
//!
//! The order is total and deterministic: ties (equal values, `−0 = +0`) go to the **lower
//! index first** in both directions (a stable sort), and NaN counts as smaller than every
//! number (last in descending order, first in ascending). ggml leaves ties and NaN
//! unspecified (its ARGMAX returns the last maximum).

use super::{want_srcs, Access, OpDef};
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;
use quant::DType;

fn infer_rank(
    name: &'static str,
    srcs: &[&TensorDesc],
    k: usize,
) -> Result<TensorDesc, GraphError> {
    want_srcs(name, srcs, 1)?;
    let x = srcs[0];
    if x.dtype != DType::F32 {
        return Err(shape_err(name, format!("f32 only, got {}", x.shape_str())));
    }
    if k == 0 || k > x.ne[0] {
        return Err(shape_err(
            name,
            format!("k = {k} must be 1 to {} for {}", x.ne[0], x.shape_str()),
        ));
    }
    TensorDesc::new(DType::I32, &[k, x.ne[1], x.ne[2], x.ne[3]])
}

/// Indices of the `k` largest values of each row, largest first.
#[derive(Debug, Clone)]
pub struct TopK {
    /// How many indices per row (`1 ≤ k ≤ ne0`, checked at build time).
    pub k: usize,
}

impl OpDef for TopK {
    const NAME: &'static str = "TOP_K";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        infer_rank(Self::NAME, srcs, self.k)
    }
    fn access(&self) -> Access {
        Access::RowWise
    }
}

/// Sort direction of ARGSORT (ggml `ggml_sort_order`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortOrder {
    /// Smallest value first.
    Ascending,
    /// Largest value first.
    Descending,
}

/// The stable sorting permutation of each row.
#[derive(Debug, Clone)]
pub struct Argsort {
    /// Direction.
    pub order: SortOrder,
}

impl OpDef for Argsort {
    const NAME: &'static str = "ARGSORT";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        let n = srcs.first().map_or(1, |x| x.ne[0]);
        infer_rank(Self::NAME, srcs, n)
    }
    fn access(&self) -> Access {
        Access::RowWise
    }
}

/// Index of the first maximum of each row.
#[derive(Debug, Clone)]
pub struct Argmax;

impl OpDef for Argmax {
    const NAME: &'static str = "ARGMAX";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        infer_rank(Self::NAME, srcs, 1)
    }
    fn access(&self) -> Access {
        Access::RowWise
    }
}

impl Graph {
    /// Indices (I32 `{k, …}`) of the `k` largest values of each row, largest first.
    pub fn top_k(&mut self, x: TensorId, k: usize) -> Result<TensorId, GraphError> {
        self.op(TopK { k }, &[x])
    }
    /// Stable sorting permutation (I32 `{n, …}`) of each row.
    pub fn argsort(&mut self, x: TensorId, order: SortOrder) -> Result<TensorId, GraphError> {
        self.op(Argsort { order }, &[x])
    }
    /// Index (I32 `{1, …}`) of the first maximum of each row.
    pub fn argmax(&mut self, x: TensorId) -> Result<TensorId, GraphError> {
        self.op(Argmax, &[x])
    }
}
