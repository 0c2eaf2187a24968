//! Which keys and mask one layer's attention sees (spec §4.8): its window, and for CSA and
//! HCA layers the compressed entries after them, passed to FLASH_ATTN_EXT as two parts read
//! in place (a cache is never copied into one key tensor), with one additive mask over both.

use super::{input, Builder, Compressor};
use crate::deepseek4::hparams::AttnKind;
use crate::weights::{ForwardError, Weights};
use graph::TensorId;

/// What one layer's attention reads (see the module doc).
pub(super) struct Keys {
    /// The window's rows (this chunk's, and in cached mode the ring's before them).
    pub kv: TensorId,
    /// The compressed entries, if the layer has them.
    pub comp: Option<TensorId>,
    /// The additive mask `{n_kv + n_comp, T}`.
    pub mask: TensorId,
}

impl<W: Weights> Builder<'_, W> {
    /// The keys and mask of layer `l`'s attention for the chunk (one sequence).
    pub(super) fn keys(
        &mut self,
        l: usize,
        a: TensorId,
        qr: TensorId,
        kv: TensorId,
    ) -> Result<Keys, ForwardError> {
        let hp = self.hp;
        let (hd, t) = (hp.head_dim, self.t);
        let window = |b: &mut Self| -> Result<Keys, ForwardError> {
            Ok(Keys {
                kv,
                comp: None,
                mask: b.swa_mask()?,
            })
        };
        if self.cache.is_some() {
            let pre = self.layer_pre(l, a, qr)?;
            return self.cached_keys(l, &pre, kv);
        }
        let kind = hp.attn_kind(l);
        if kind == AttnKind::Sliding {
            return window(self);
        }
        let ratio = hp.compress_ratios[l];
        let Some(comp) = self.compressor(l, a, Compressor::Attention, hd, ratio)? else {
            return window(self);
        };
        let nw = t / ratio as usize;
        let cmask = if kind == AttnKind::Hca {
            self.input_f32(input::comp_mask(ratio), &[nw, t])?
        } else {
            self.indexer_mask(l, a, qr, nw, ratio)?
        };
        let mask = self.g.concat(self.swa_mask()?, cmask, 0)?;
        Ok(Keys {
            kv,
            comp: Some(comp),
            mask,
        })
    }

    /// Attention of `q {D, H, T}` over `k` with the layer's `sinks`: one softmax over the
    /// window's rows, the compressed entries and the sink (§4.8), scale `1/sqrt(D)`.
    pub(super) fn attend(
        &mut self,
        q: TensorId,
        k: Keys,
        sinks: TensorId,
    ) -> Result<TensorId, ForwardError> {
        let scale = 1.0 / (self.hp.head_dim as f32).sqrt();
        let (mask, sinks) = (Some(k.mask), Some(sinks));
        Ok(self
            .g
            .flash_attn_parts(q, k.kv, k.comp, mask, sinks, scale)?)
    }
}
