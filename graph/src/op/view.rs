//! VIEW: a tensor that aliases part of its source's bytes (ggml `view`, `reshape`, `permute`,
//! `transpose`). No kernel work; the planner resolves it to the source buffer plus an offset.
//! `cont` (a dense copy) is [`crate::op::cpy::Cpy`].

use super::{want_srcs, OpDef};
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;

/// Alias of `srcs[0]` with layout `desc` starting `offset` bytes into it.
#[derive(Debug, Clone)]
pub struct View {
    /// The layout of the view.
    pub ne: [usize; 4],
    /// Byte strides of the view.
    pub nb: [usize; 4],
    /// Byte offset into the source.
    pub offset: usize,
}

impl OpDef for View {
    const NAME: &'static str = "VIEW";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        want_srcs(Self::NAME, srcs, 1)?;
        let s = srcs[0];
        let d = TensorDesc {
            dtype: s.dtype,
            ne: self.ne,
            nb: self.nb,
        };
        let end = self
            .offset
            .checked_add(d.nbytes())
            .ok_or_else(|| GraphError::Overflow("view".into()))?;
        if end > s.nbytes() {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "view [{}, {end}) exceeds source {} ({} bytes)",
                    self.offset,
                    s.shape_str(),
                    s.nbytes()
                ),
            ));
        }
        if s.dtype.is_quantized()
            && (self.nb[0] != s.dtype.type_size()
                || !self.ne[0].is_multiple_of(s.dtype.block_size()))
        {
            return Err(shape_err(
                Self::NAME,
                "a view of a quantized tensor must keep whole contiguous rows of blocks",
            ));
        }
        if !s.dtype.is_quantized()
            && (!self.offset.is_multiple_of(s.dtype.type_size())
                || self.nb.iter().any(|n| n % s.dtype.type_size() != 0))
        {
            return Err(shape_err(
                Self::NAME,
                "view offset/strides must be multiples of the element size",
            ));
        }
        Ok(d)
    }
    fn view_offset(&self) -> Option<usize> {
        Some(self.offset)
    }
}

impl Graph {
    /// A view with explicit shape, strides and byte offset.
    pub fn view(
        &mut self,
        a: TensorId,
        ne: [usize; 4],
        nb: [usize; 4],
        offset: usize,
    ) -> Result<TensorId, GraphError> {
        self.op(View { ne, nb, offset }, &[a])
    }
    /// Reinterpret a contiguous tensor with a new shape of the same element count.
    pub fn reshape(&mut self, a: TensorId, ne: &[usize]) -> Result<TensorId, GraphError> {
        let s = *self.desc(a);
        if !s.is_contiguous() {
            return Err(shape_err(
                "RESHAPE",
                format!("source {} is not contiguous", s.shape_str()),
            ));
        }
        let d = TensorDesc::new(s.dtype, ne)?;
        if d.nelements() != s.nelements() {
            return Err(shape_err(
                "RESHAPE",
                format!("{} → {:?}: element counts differ", s.shape_str(), ne),
            ));
        }
        self.view(a, d.ne, d.nb, 0)
    }
    /// Permute dimensions: source dimension `i` becomes dimension `axes[i]` (ggml convention).
    pub fn permute(&mut self, a: TensorId, axes: [usize; 4]) -> Result<TensorId, GraphError> {
        let s = *self.desc(a);
        let mut seen = [false; 4];
        for &x in &axes {
            if x > 3 || seen[x] {
                return Err(shape_err(
                    "PERMUTE",
                    format!("axes {axes:?} are not a permutation of 0, 1, 2, 3"),
                ));
            }
            seen[x] = true;
        }
        let (mut ne, mut nb) = ([0; 4], [0; 4]);
        for i in 0..4 {
            ne[axes[i]] = s.ne[i];
            nb[axes[i]] = s.nb[i];
        }
        self.view(a, ne, nb, 0)
    }
    /// Swap dimensions 0 and 1.
    pub fn transpose(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        self.permute(a, [1, 0, 2, 3])
    }
}
