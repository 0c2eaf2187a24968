//! The Lightning Indexer of CSA layers (spec §4.6): its queries and head weights, and its
//! top-k over the compressed keys as an additive attention mask.

use super::{input, Builder, Compressor};
use crate::deepseek4::tensors::Tensor;
use crate::weights::{ForwardError, Weights};
use graph::TensorId;

impl<W: Weights> Builder<'_, W> {
    /// The Lightning Indexer's selection as an additive mask over the `nw` entries (§4.6).
    pub(super) fn indexer_mask(
        &mut self,
        l: usize,
        a: TensorId,
        qr: TensorId,
        nw: usize,
        ratio: u32,
    ) -> Result<TensorId, ForwardError> {
        let keys = self
            .compressor(l, a, Compressor::Indexer, self.hp.idx_dim, ratio)?
            .ok_or_else(|| ForwardError::Unsupported("indexer without entries".into()))?;
        self.indexer_select(l, a, qr, keys, nw, ratio)
    }

    /// The Lightning Indexer's query, head weights and top-k over `keys {dI, n}` (spec §4.6),
    /// returned as an additive mask `{n, T}` over those entries.
    pub(super) fn indexer_select(
        &mut self,
        l: usize,
        a: TensorId,
        qr: TensorId,
        keys: TensorId,
        n: usize,
        ratio: u32,
    ) -> Result<TensorId, ForwardError> {
        let query = self.indexer_query(l, a, qr)?;
        self.indexer_pick(query, keys, n, ratio)
    }

    /// The Lightning Indexer's roped queries `{dI, HI, T}` and scaled head weights
    /// `{HI, T}` (spec §4.6).
    pub(super) fn indexer_query(
        &mut self,
        l: usize,
        a: TensorId,
        qr: TensorId,
    ) -> Result<(TensorId, TensorId), ForwardError> {
        let hp = self.hp;
        let (di, hi, t) = (hp.idx_dim, hp.idx_heads, self.t);
        let wq = self.tensor(l, Tensor::IndexerQB)?;
        let wp = self.tensor(l, Tensor::IndexerProj)?;
        let q = self.g.mul_mat(wq, qr)?;
        let q = self.g.reshape(q, &[di, hi, t])?;
        let q = self
            .g
            .rope(q, self.pos, self.rope(l, di - hp.n_rot, false).in_place())?;
        let hw = self.g.mul_mat(wp, a)?; // {HI, T}
        let hw = self.g.scale(hw, 1.0 / ((di * hi) as f32).sqrt(), 0.0)?;
        Ok((q, hw))
    }

    /// The indexer's top-k of `query` ([`Builder::indexer_query`]) over `keys {dI, n}`, as
    /// an additive mask `{n, T}`. A chunk of several tokens takes the fused DSA_INDEXER (its
    /// tokens spread over the threads); a single token (decode) scores with DSA_SCORES, which
    /// splits the keys between the threads, and picks with DSA_SELECT: the same picks.
    pub(super) fn indexer_pick(
        &mut self,
        (q, hw): (TensorId, TensorId),
        keys: TensorId,
        n: usize,
        ratio: u32,
    ) -> Result<TensorId, ForwardError> {
        let nvis = self.input_i32(input::n_visible(ratio), self.t)?;
        let top_k = self.hp.idx_topk;
        let ids = if self.t == 1 {
            let scores = self.g.dsa_scores(q, keys, hw, nvis)?;
            self.g.dsa_select(scores, top_k)?
        } else {
            self.g.dsa_indexer(q, keys, hw, nvis, top_k)?
        };
        Ok(self.g.index_mask(ids, n)?)
    }
}
