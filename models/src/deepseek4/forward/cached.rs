//! Cached (decode) mode of the forward builder — the per-layer state of spec §6.1 and the
//! per-step procedure of §6.2, for a chunk of `T` tokens at any position, so that chunked
//! prefill, one-token decode and single-shot prefill give the same logits (§6.3).
//!
//! State tensors per layer (declared for all layers in a fixed order, so every plan of a
//! sequence shares one [`backends`-side] state buffer):
//! - `l{l}.kv` `{d, W}`: the sliding-window ring (post-norm, post-RoPE kv), slot `p mod W`;
//! - compressed layers: `l{l}.comp_a` / `l{l}.comp_z` `{coff·d, R}` — the compressor's pending
//!   rows `A_s` and `Z_s` (APE added), slot `p mod R` with `R = coff·ratio` (CSA 8 = previous
//!   + current window, HCA 128); `l{l}.comp` `{d, C}` — the compressed entries, `C =
//!   ceil(ctx/ratio)`;
//! - CSA layers: the same three for the Lightning Indexer's keys (`l{l}.idx_*`, width dI).
//!
//! Per chunk the graph computes `A`, `Z` of its tokens, gathers the slots of every window that
//! closes inside the chunk from `[ring ‖ chunk ‖ pad]` (indices from [`ChunkInputs`]; the pad
//! row is kv 0 / score −∞ for window 0's empty previous half), pools, norms, RoPEs at `w·ratio`
//! and writes the entries with SET_ROWS, then writes the chunk's rows into the rings. Keys are
//! `[window ring (old) ‖ chunk kv ‖ all compressed entries]`, masked per query by position.
//! Fixed shapes with runtime indices (−1 = skip) keep one plan per chunk length.

use super::{input, Builder, Compressor, Keys};
use crate::deepseek4::hparams::{AttnKind, Hparams};
use crate::weights::{ForwardError, Weights};
use graph::{Graph, TensorDesc, TensorId};
use std::collections::HashMap;

/// The state tensors of a cached graph, and the positions it attends over.
#[derive(Debug, Clone)]
pub struct CacheLayout {
    /// Positions the graph attends over (the compressed entries below it are its keys).
    span: usize,
    states: HashMap<String, TensorId>,
}

fn coff(ratio: u32) -> usize {
    if ratio == 4 {
        2
    } else {
        1
    }
}

/// Every state tensor of a model at context `ctx`: `(name, ne)`, in declaration order.
pub(crate) fn state_tensors(hp: &Hparams, ctx: usize) -> Vec<(String, [usize; 2])> {
    let mut v = Vec::new();
    for l in 0..hp.n_layer {
        v.push((format!("l{l}.kv"), [hp.head_dim, hp.window]));
        let r = hp.compress_ratios[l];
        if r == 0 {
            continue;
        }
        let (c, ring, cap) = (coff(r), coff(r) * r as usize, ctx.div_ceil(r as usize));
        v.push((format!("l{l}.comp_a"), [c * hp.head_dim, ring]));
        v.push((format!("l{l}.comp_z"), [c * hp.head_dim, ring]));
        v.push((format!("l{l}.comp"), [hp.head_dim, cap]));
        if hp.attn_kind(l) == AttnKind::Csa {
            v.push((format!("l{l}.idx_a"), [c * hp.idx_dim, ring]));
            v.push((format!("l{l}.idx_z"), [c * hp.idx_dim, ring]));
            v.push((format!("l{l}.idx"), [hp.idx_dim, cap]));
        }
    }
    v
}

impl CacheLayout {
    /// Declare every state tensor of a `ctx`-token context in `g`, each named `prefix` + its
    /// name, for a graph attending over the positions below `span` (at most `ctx`).
    pub fn declare(
        g: &mut Graph,
        hp: &Hparams,
        ctx: usize,
        span: usize,
        prefix: &str,
    ) -> Result<CacheLayout, ForwardError> {
        if span == 0 || span > ctx {
            return Err(ForwardError::Unsupported(format!(
                "a span of {span} positions in a context of {ctx}"
            )));
        }
        let mut states = HashMap::new();
        for (name, ne) in state_tensors(hp, ctx) {
            let id = g.state(&format!("{prefix}{name}"), TensorDesc::f32(&ne)?)?;
            states.insert(name, id);
        }
        Ok(CacheLayout { span, states })
    }
    fn get(&self, name: &str) -> Result<TensorId, ForwardError> {
        self.states
            .get(name)
            .copied()
            .ok_or_else(|| ForwardError::Missing(format!("state {name}")))
    }
}

/// Input names of the cached graph (besides `tokens`, `pos`, `swa_mask`).
mod names {
    pub const KV_SLOT: &str = "kv_slot";
    pub fn ring(r: u32) -> String {
        format!("cmp.{r}.ring")
    }
    pub fn cur(r: u32) -> String {
        format!("cmp.{r}.cur")
    }
    pub fn prev(r: u32) -> String {
        format!("cmp.{r}.prev")
    }
    pub fn pos(r: u32) -> String {
        format!("cmp.{r}.pos")
    }
    pub fn write(r: u32) -> String {
        format!("cmp.{r}.write")
    }
}

/// A compressor's projections `(A, Z, norm weight)` (see `compressor_projections`).
type Proj = (TensorId, TensorId, TensorId);

/// What a layer's cached attention computes from the chunk's activations alone, before it
/// reads any cache: the compressors' projections and the indexer's queries. In slots mode
/// they are computed once for every slot's token (their weights read once) and each slot
/// takes its column.
pub(super) struct LayerPre {
    comp: Option<Proj>,
    idx: Option<Proj>,
    idx_q: Option<(TensorId, TensorId)>,
}

impl<W: Weights> Builder<'_, W> {
    fn layout(&self) -> Result<&CacheLayout, ForwardError> {
        self.cache
            .as_ref()
            .ok_or_else(|| ForwardError::Missing("the decode caches".into()))
    }

    /// Layer `l`'s [`LayerPre`] for the chunk's `a` (attn_norm output) and `qr`.
    pub(super) fn layer_pre(
        &mut self,
        l: usize,
        a: TensorId,
        qr: TensorId,
    ) -> Result<LayerPre, ForwardError> {
        let hp = self.hp;
        let kind = hp.attn_kind(l);
        let ratio = hp.compress_ratios[l];
        let mut pre = LayerPre {
            comp: None,
            idx: None,
            idx_q: None,
        };
        if kind == AttnKind::Sliding {
            return Ok(pre);
        }
        pre.comp = Some(self.compressor_projections(l, a, Compressor::Attention, ratio)?);
        if kind == AttnKind::Csa {
            pre.idx = Some(self.compressor_projections(l, a, Compressor::Indexer, ratio)?);
            pre.idx_q = Some(self.indexer_query(l, a, qr)?);
        }
        Ok(pre)
    }

    /// Token `i`'s column of `x` (its dimension `dim` is the token axis).
    fn column(&mut self, x: TensorId, dim: usize, i: usize) -> Result<TensorId, ForwardError> {
        let d = *self.g.desc(x);
        let mut ne = d.ne;
        ne[dim] = 1;
        Ok(self.g.view(x, ne, d.nb, i * d.nb[dim])?)
    }

    /// Token `i`'s part of a [`LayerPre`].
    fn pre_column(&mut self, pre: &LayerPre, i: usize) -> Result<LayerPre, ForwardError> {
        let proj = |b: &mut Self, p: Option<Proj>| -> Result<Option<Proj>, ForwardError> {
            Ok(match p {
                Some((a, z, n)) => Some((b.column(a, 1, i)?, b.column(z, 1, i)?, n)),
                None => None,
            })
        };
        let comp = proj(self, pre.comp)?;
        let idx = proj(self, pre.idx)?;
        let idx_q = match pre.idx_q {
            Some((q, hw)) => Some((self.column(q, 2, i)?, self.column(hw, 1, i)?)),
            None => None,
        };
        Ok(LayerPre { comp, idx, idx_q })
    }

    /// Slots mode: each slot's token attends over its own caches (the cached keys of a
    /// one-token chunk, with slot `k`'s states and `s{k}.` inputs); returns the attention
    /// outputs `{hd, H, S}` in slot order. Everything before and after (projections, norms,
    /// RoPE, the output projection, the MoE) runs on all the slots' tokens at once.
    pub(super) fn slots_attention(
        &mut self,
        l: usize,
        a: TensorId,
        qr: TensorId,
        q: TensorId,
        kv: TensorId,
        sinks: TensorId,
    ) -> Result<TensorId, ForwardError> {
        let pre = self.layer_pre(l, a, qr)?;
        let slots = std::mem::take(&mut self.slots);
        let (pos, t) = (self.pos, self.t);
        let each = |b: &mut Self| -> Result<TensorId, ForwardError> {
            let mut out: Option<TensorId> = None;
            for (i, (k, layout)) in slots.iter().enumerate() {
                b.t = 1;
                b.pos = pos;
                let pos_i = b.column(pos, 0, i)?;
                let q_i = b.column(q, 2, i)?;
                let kv_i = b.column(kv, 1, i)?;
                let pre_i = b.pre_column(&pre, i)?;
                b.pos = pos_i;
                b.prefix = format!("s{k}.");
                b.cache = Some(layout.clone());
                b.swa_mask =
                    Some(b.input_f32(super::input::SWA_MASK.into(), &[b.hp.window + 1, 1])?);
                let k = b.cached_keys(l, &pre_i, kv_i)?;
                let o = b.attend(q_i, k, sinks)?;
                out = Some(match out {
                    None => o,
                    Some(prev) => b.g.concat(prev, o, 2)?,
                });
            }
            out.ok_or_else(|| ForwardError::Unsupported("a batched step without slots".into()))
        };
        let r = each(self);
        self.slots = slots;
        self.pos = pos;
        self.t = t;
        self.prefix.clear();
        self.cache = None;
        self.swa_mask = None;
        r
    }

    /// Keys and mask of layer `l` in cached mode, from its [`LayerPre`]; also writes this
    /// chunk's kv into the ring. The compressed entries stay in their cache: attention reads
    /// them in place after the window's rows.
    pub(super) fn cached_keys(
        &mut self,
        l: usize,
        pre: &LayerPre,
        kv: TensorId,
    ) -> Result<Keys, ForwardError> {
        let hp = self.hp;
        let t = self.t;
        let ring = self.layout()?.get(&format!("l{l}.kv"))?;
        let win = self.g.concat(ring, kv, 1)?; // {d, W+T}: the copy is taken before the write
        let slot = self.input_i32(names::KV_SLOT.into(), t)?;
        self.g.set_rows(ring, kv, slot)?;
        let kind = hp.attn_kind(l);
        if kind == AttnKind::Sliding {
            return Ok(Keys {
                kv: win,
                comp: None,
                mask: self.swa_mask()?,
            });
        }
        let ratio = hp.compress_ratios[l];
        let cap = self.layout()?.span.div_ceil(ratio as usize);
        let missing = || ForwardError::Missing(format!("layer {l}'s compressor projections"));
        let comp = pre.comp.ok_or_else(missing)?;
        let comp = self.compressor_cached(l, comp, "comp", hp.head_dim, ratio)?;
        let cmask = if kind == AttnKind::Hca {
            self.input_f32(input::comp_mask(ratio), &[cap, t])?
        } else {
            let (idx, q) = pre.idx.zip(pre.idx_q).ok_or_else(missing)?;
            let keys = self.compressor_cached(l, idx, "idx", hp.idx_dim, ratio)?;
            self.indexer_pick(q, keys, cap, ratio)?
        };
        let mask = self.g.concat(self.swa_mask()?, cmask, 0)?;
        Ok(Keys {
            kv: win,
            comp: Some(comp),
            mask,
        })
    }

    /// One compressor in cached mode, from its projections; returns the entries of the span
    /// (the first `span / ratio` of the cache) after this chunk's writes.
    fn compressor_cached(
        &mut self,
        l: usize,
        (av, z, norm): Proj,
        state: &str,
        width: usize,
        ratio: u32,
    ) -> Result<TensorId, ForwardError> {
        let (t, ru, c) = (self.t, ratio as usize, coff(ratio));
        let nwmax = t.div_ceil(ru);
        let ring_a = self.layout()?.get(&format!("l{l}.{state}_a"))?;
        let ring_z = self.layout()?.get(&format!("l{l}.{state}_z"))?;
        let cache = self.layout()?.get(&format!("l{l}.{state}"))?;
        let pad_a = self.constant(&[c * width, 1], 0.0)?;
        let pad_z = self.constant(&[c * width, 1], f32::NEG_INFINITY)?;
        // [ring ‖ chunk ‖ pad] rows, gathered per window slot
        let ta = self.g.concat(ring_a, av, 1)?;
        let ta = self.g.concat(ta, pad_a, 1)?;
        let tz = self.g.concat(ring_z, z, 1)?;
        let tz = self.g.concat(tz, pad_z, 1)?;
        let cur = self.input_i32(names::cur(ratio), ru * nwmax)?;
        let row = c * width * 4;
        let half = |b: &mut Self,
                    table: TensorId,
                    idx: TensorId,
                    second: bool|
         -> Result<TensorId, ForwardError> {
            let rows = b.g.get_rows(table, idx)?; // {c·width, ru·nwmax}
            let off = if second { width * 4 } else { 0 };
            Ok(b.g.view(
                rows,
                [width, ru, nwmax, 1],
                [4, row, row * ru, row * ru * nwmax],
                off,
            )?)
        };
        let (kv_slots, z_slots) = if c == 2 {
            let prev = self.input_i32(names::prev(ratio), ru * nwmax)?;
            let pa = half(self, ta, prev, false)?;
            let ca = half(self, ta, cur, true)?;
            let pz = half(self, tz, prev, false)?;
            let cz = half(self, tz, cur, true)?;
            (self.g.concat(pa, ca, 1)?, self.g.concat(pz, cz, 1)?)
        } else {
            (half(self, ta, cur, false)?, half(self, tz, cur, false)?)
        };
        let pooled = self.g.compress_pool(kv_slots, z_slots)?; // {width, nwmax}
        let normed = self.g.rms_norm_w(pooled, norm, self.hp.rms_eps)?;
        let normed = self.g.reshape(normed, &[width, 1, nwmax])?;
        let cpos = self.input_i32(names::pos(ratio), nwmax)?;
        let r = self.g.rope(
            normed,
            cpos,
            self.rope(l, width - self.hp.n_rot, false).in_place(),
        )?;
        let entries = self.g.reshape(r, &[width, nwmax])?;
        let widx = self.input_i32(names::write(ratio), nwmax)?;
        let cache = self.g.set_rows(cache, entries, widx)?;
        let ring_idx = self.input_i32(names::ring(ratio), t)?;
        self.g.set_rows(ring_a, av, ring_idx)?;
        self.g.set_rows(ring_z, z, ring_idx)?;
        // the entries of the span only: the rest are not keys of this step
        let d = *self.g.desc(cache);
        let cap = self.layout()?.span.div_ceil(ru);
        Ok(self.g.view(cache, [width, cap, 1, 1], d.nb, 0)?)
    }
}

/// Host-side values of every input of a cached chunk graph for tokens at `p0..p0+t`.
#[derive(Debug, Clone)]
pub struct ChunkInputs {
    /// `(name, bytes)` for every input except the tokens.
    pub values: Vec<(String, Vec<u8>)>,
}

impl ChunkInputs {
    /// Inputs of the chunk `[p0, p0+t)` for a context of `ctx` tokens, attending over the
    /// positions below `span` (see [`crate::model::span_for`]).
    pub fn new(
        hp: &Hparams,
        p0: usize,
        t: usize,
        ctx: usize,
        span: usize,
    ) -> Result<ChunkInputs, ForwardError> {
        if p0 + t > ctx {
            return Err(ForwardError::Unsupported(format!(
                "positions up to {} exceed the context of {ctx} tokens",
                p0 + t
            )));
        }
        if p0 + t > span {
            return Err(ForwardError::Unsupported(format!(
                "positions up to {} exceed the graph's span of {span}",
                p0 + t
            )));
        }
        let i32s = |v: Vec<i32>| bytemuck::cast_slice(&v).to_vec();
        let f32s = |v: Vec<f32>| bytemuck::cast_slice(&v).to_vec();
        let ninf = f32::NEG_INFINITY;
        let w = hp.window;
        let mut values = vec![(
            input::POS.to_string(),
            i32s((p0..p0 + t).map(|p| p as i32).collect()),
        )];
        // window ring: slot s holds the latest position q < p0 with q ≡ s (mod W)
        let mut m = vec![ninf; (w + t) * t];
        for j in 0..t {
            let p = p0 + j;
            for s in 0..w {
                if p0 == 0 {
                    break;
                }
                let last = p0 - 1;
                let back = (last + w - s) % w; // last − q
                if back <= last {
                    let q = last - back;
                    if p - q < w {
                        m[j * (w + t) + s] = 0.0;
                    }
                }
            }
            for k in 0..=j {
                if j - k < w {
                    m[j * (w + t) + w + k] = 0.0;
                }
            }
        }
        values.push((input::SWA_MASK.to_string(), f32s(m)));
        let last_w = |n: usize| -> Vec<i32> {
            (0..t)
                .map(|j| {
                    if t - j <= n {
                        ((p0 + j) % n) as i32
                    } else {
                        -1
                    }
                })
                .collect()
        };
        values.push((names::KV_SLOT.to_string(), i32s(last_w(w))));
        for r in super::ratios_used(hp) {
            let ru = r as usize;
            let c = coff(r);
            let ring_n = c * ru;
            let cap = span.div_ceil(ru);
            let nwmax = t.div_ceil(ru);
            values.push((
                input::ape_slot(r),
                i32s((p0..p0 + t).map(|p| (p % ru) as i32).collect()),
            ));
            values.push((names::ring(r), i32s(last_w(ring_n))));
            // windows closing in this chunk
            let closing: Vec<usize> = (p0..p0 + t)
                .filter(|p| (p + 1) % ru == 0)
                .map(|p| p / ru)
                .collect();
            let pad = (ring_n + t) as i32;
            let row_of = |tok: usize| -> i32 {
                if tok >= p0 {
                    (ring_n + tok - p0) as i32
                } else {
                    (tok % ring_n) as i32
                }
            };
            let (mut cur, mut prev, mut pos, mut write) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for jw in 0..nwmax {
                match closing.get(jw) {
                    Some(&wi) => {
                        cur.extend((0..ru).map(|s| row_of(wi * ru + s)));
                        if wi == 0 {
                            prev.extend(std::iter::repeat_n(pad, ru));
                        } else {
                            prev.extend((0..ru).map(|s| row_of((wi - 1) * ru + s)));
                        }
                        pos.push((wi * ru) as i32);
                        write.push(wi as i32);
                    }
                    None => {
                        cur.extend(std::iter::repeat_n(pad, ru));
                        prev.extend(std::iter::repeat_n(pad, ru));
                        pos.push(0);
                        write.push(-1);
                    }
                }
            }
            values.push((names::cur(r), i32s(cur)));
            values.push((names::prev(r), i32s(prev)));
            values.push((names::pos(r), i32s(pos)));
            values.push((names::write(r), i32s(write)));
            let mut cm = vec![ninf; cap * t];
            for j in 0..t {
                for e in 0..cap.min((p0 + j + 1) / ru) {
                    cm[j * cap + e] = 0.0;
                }
            }
            values.push((input::comp_mask(r), f32s(cm)));
            values.push((
                input::n_visible(r),
                i32s((p0..p0 + t).map(|p| ((p + 1) / ru) as i32).collect()),
            ));
        }
        Ok(ChunkInputs { values })
    }

    /// Inputs of a batched step (see [`Builder::new_slots`]): one token of each slot in
    /// `slots` at its position in `starts`. The positions and the compressors' APE slots
    /// cover every slot's token (the graph computes those for all of them at once); each
    /// slot's own inputs are a one-token chunk's, named `s{k}.…`.
    pub fn slots(
        hp: &Hparams,
        slots: &[usize],
        starts: &[usize],
        ctx: usize,
        span: usize,
    ) -> Result<ChunkInputs, ForwardError> {
        let i32s = |v: Vec<i32>| bytemuck::cast_slice(&v).to_vec();
        let mut values = vec![(
            input::POS.to_string(),
            i32s(starts.iter().map(|&p| p as i32).collect()),
        )];
        for r in super::ratios_used(hp) {
            let ape = starts.iter().map(|&p| (p % r as usize) as i32).collect();
            values.push((input::ape_slot(r), i32s(ape)));
        }
        for (&k, &p) in slots.iter().zip(starts) {
            for (name, bytes) in ChunkInputs::new(hp, p, 1, ctx, span)?.values {
                if name != input::POS {
                    values.push((format!("s{k}.{name}"), bytes));
                }
            }
        }
        Ok(ChunkInputs { values })
    }
}
