//! DSA_INDEXER and DSA_SCORES: the Lightning Indexer of CSA layers (spec §4.6, §7
//! `ggml_lightning_indexer`).
//!
//! Sources: `q` f32 `{dI, HI, T}` (indexer query heads, already RoPE'd and optionally
//! Hadamard-rotated by a separate op), `k` F32/F16/BF16 `{dI, n_kv}` (compressed indexer
//! keys), `w` f32 `{HI, T}` (head weights, already scaled by `1/sqrt(dI·HI)`), `n_visible` I32
//! `{T}` (runtime input: entries `e ≥ n_visible[t]` are not visible to token t; the caller
//! computes `floor((p+1)/4)`; values are clamped to `[0, n_kv]`). All rows contiguous.
//!
//! Score: `S(e, t) = Σ_h w[h,t]·max(0, q[:,h,t]·k[:,e])` for `e < n_visible[t]`, `−∞`
//! otherwise (a NaN score is treated as `−∞`).
//!
//! * **DSA_SCORES** → f32 `{n_kv, T}`: the scores themselves.
//! * **DSA_INDEXER** `{top_k}` → I32 `{top_k, T}`: per token the `min(top_k, n_kv)` entries
//!   with the largest scores among all `n_kv` (invalid ones at `−∞`), **in descending score
//!   order, ties by lower index**; a pick whose score is `−∞` (not visible) is written as `−1`,
//!   and slots `n_kv..top_k` are `−1`. So each row is the visible entries' top list followed
//!   by `−1` padding.
//! * **DSA_SELECT** `{top_k}`: f32 scores `{n_kv, T}` (DSA_SCORES' output) → DSA_INDEXER's
//!   I32 `{top_k, T}` by the same rule (NaN counts as `−∞`). DSA_INDEXER is DSA_SELECT of
//!   DSA_SCORES fused: each token's scores and selection on one thread, with no scores
//!   tensor (a prompt chunk's would grow with the context). A decode step has one token, so
//!   the fused op ran on one thread; there the model uses the two ops, whose scores split the
//!   keys between the threads.

use super::{want_srcs, OpDef};
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;
use quant::DType;

/// Validated indexer shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexerShape {
    /// Indexer head dimension `dI` (V4: 128).
    pub d: usize,
    /// Indexer heads `HI` (V4: 64).
    pub heads: usize,
    /// Tokens `T`.
    pub tokens: usize,
    /// Compressed entries `n_kv`.
    pub n_kv: usize,
}

/// Validate `[q, k, w, n_visible]` for `op`.
pub fn indexer_shape(op: &'static str, srcs: &[&TensorDesc]) -> Result<IndexerShape, GraphError> {
    want_srcs(op, srcs, 4)?;
    let (q, k, w, nv) = (srcs[0], srcs[1], srcs[2], srcs[3]);
    if q.dtype != DType::F32 || !q.rows_contiguous() || q.ne[3] != 1 || q.ne[0] == 0 {
        return Err(shape_err(
            op,
            format!(
                "q must be f32 {{dI, HI, T}} with contiguous rows, got {}",
                q.shape_str()
            ),
        ));
    }
    let s = IndexerShape {
        d: q.ne[0],
        heads: q.ne[1],
        tokens: q.ne[2],
        n_kv: k.ne[1],
    };
    if !matches!(k.dtype, DType::F32 | DType::F16 | DType::BF16)
        || !k.rows_contiguous()
        || k.ne != [s.d, s.n_kv, 1, 1]
        || s.n_kv == 0
        || s.n_kv > i32::MAX as usize
    {
        return Err(shape_err(
            op,
            format!(
                "k must be f32/f16/bf16 {{{}, n_kv ≥ 1}} with contiguous rows, got {}",
                s.d,
                k.shape_str()
            ),
        ));
    }
    if w.dtype != DType::F32 || !w.rows_contiguous() || w.ne != [s.heads, s.tokens, 1, 1] {
        return Err(shape_err(
            op,
            format!(
                "w must be f32 {{{}, {}}} with contiguous rows, got {}",
                s.heads,
                s.tokens,
                w.shape_str()
            ),
        ));
    }
    if nv.dtype != DType::I32 || !nv.is_contiguous() || nv.ne != [s.tokens, 1, 1, 1] {
        return Err(shape_err(
            op,
            format!(
                "n_visible must be a contiguous i32 {{{}}}, got {}",
                s.tokens,
                nv.shape_str()
            ),
        ));
    }
    Ok(s)
}

/// Lightning-Indexer scores + top-k selection (indices of the selected entries).
#[derive(Debug, Clone)]
pub struct DsaIndexer {
    /// Slots per token (V4: 512); `min(top_k, n_kv)` entries are selected.
    pub top_k: usize,
}

impl OpDef for DsaIndexer {
    const NAME: &'static str = "DSA_INDEXER";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        let s = indexer_shape(Self::NAME, srcs)?;
        if self.top_k == 0 {
            return Err(shape_err(Self::NAME, "top_k must be ≥ 1"));
        }
        TensorDesc::new(DType::I32, &[self.top_k, s.tokens])
    }
}

/// Lightning-Indexer scores only (`−∞` for entries not visible).
#[derive(Debug, Clone)]
pub struct DsaScores;

impl OpDef for DsaScores {
    const NAME: &'static str = "DSA_SCORES";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        let s = indexer_shape(Self::NAME, srcs)?;
        TensorDesc::f32(&[s.n_kv, s.tokens])
    }
}

/// DSA_INDEXER's selection from precomputed scores.
#[derive(Debug, Clone)]
pub struct DsaSelect {
    /// Slots per token (V4: 512).
    pub top_k: usize,
}

impl OpDef for DsaSelect {
    const NAME: &'static str = "DSA_SELECT";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        want_srcs(Self::NAME, srcs, 1)?;
        let x = srcs[0];
        if x.dtype != DType::F32 || !x.rows_contiguous() || x.ne[2] != 1 || x.ne[3] != 1 {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "scores must be f32 {{n_kv, T}} with contiguous rows, got {}",
                    x.shape_str()
                ),
            ));
        }
        if x.ne[0] > i32::MAX as usize {
            return Err(shape_err(
                Self::NAME,
                format!("{} entries do not fit i32 indices", x.ne[0]),
            ));
        }
        if self.top_k == 0 {
            return Err(shape_err(Self::NAME, "top_k must be ≥ 1"));
        }
        TensorDesc::new(DType::I32, &[self.top_k, x.ne[1]])
    }
}

impl Graph {
    /// DSA_INDEXER's picks from DSA_SCORES' `scores {n_kv, T}`, I32 `{top_k, T}` (see the
    /// module doc).
    pub fn dsa_select(&mut self, scores: TensorId, top_k: usize) -> Result<TensorId, GraphError> {
        self.op(DsaSelect { top_k }, &[scores])
    }
    /// Top-`top_k` indexer picks per token, I32 `{top_k, T}` (see the module doc).
    pub fn dsa_indexer(
        &mut self,
        q: TensorId,
        k: TensorId,
        w: TensorId,
        n_visible: TensorId,
        top_k: usize,
    ) -> Result<TensorId, GraphError> {
        self.op(DsaIndexer { top_k }, &[q, k, w, n_visible])
    }
    /// Indexer scores per token, f32 `{n_kv, T}` (see the module doc).
    pub fn dsa_scores(
        &mut self,
        q: TensorId,
        k: TensorId,
        w: TensorId,
        n_visible: TensorId,
    ) -> Result<TensorId, GraphError> {
        self.op(DsaScores, &[q, k, w, n_visible])
    }
}
