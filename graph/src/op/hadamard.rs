//! HADAMARD: the normalised fast Walsh–Hadamard transform applied to every contiguous chunk
//! of `n` elements of each row (spec §7 `llama_mul_mat_hadamard`, §8): `y = H_n·x` per chunk,
//! with the Sylvester matrix `H_1 = 1/sqrt(n)` overall scale, `H_2s = [[H_s, H_s], [H_s, −H_s]]`,
//! i.e. `H[i][j] = (−1)^popcount(i & j) / sqrt(n)` — symmetric and orthonormal, `H² = I`.
//! DeepSeek-V4 uses `n = 128` (indexer q and keys) and `n = 512` (attention caches with a
//! quantised K type). f32 `{ne0, …}` with any strides → contiguous f32 of the same shape;
//! `ne0 % n == 0`.

use super::{want_srcs, Access, OpDef};
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;
use quant::DType;

/// Largest transform size accepted.
pub const HADAMARD_MAX_N: usize = 1 << 16;

/// Normalised Walsh–Hadamard transform of each `n`-chunk of every row.
#[derive(Debug, Clone)]
pub struct Hadamard {
    /// Chunk (transform) size: a power of two in `1..=HADAMARD_MAX_N` dividing `ne0`
    /// (V4: 128 or 512).
    pub n: usize,
}

impl OpDef for Hadamard {
    const NAME: &'static str = "HADAMARD";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        want_srcs(Self::NAME, srcs, 1)?;
        let x = srcs[0];
        if x.dtype != DType::F32 {
            return Err(shape_err(
                Self::NAME,
                format!("f32 only, got {}", x.shape_str()),
            ));
        }
        if !self.n.is_power_of_two() || self.n > HADAMARD_MAX_N {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "n = {} is not a power of two from 1 to {HADAMARD_MAX_N}",
                    self.n
                ),
            ));
        }
        if !x.ne[0].is_multiple_of(self.n) {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "ne0 of {} is not a multiple of n = {}",
                    x.shape_str(),
                    self.n
                ),
            ));
        }
        TensorDesc::f32(&x.ne)
    }
    fn access(&self) -> Access {
        Access::RowWise
    }
}

impl Graph {
    /// `H_n·x` on every contiguous `n`-chunk of each row of `x`.
    pub fn hadamard(&mut self, x: TensorId, n: usize) -> Result<TensorId, GraphError> {
        self.op(Hadamard { n }, &[x])
    }
}
