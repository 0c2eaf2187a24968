//! The DeepSeek-V4 forward graph (spec §4), built from `fathom-graph` builders so it reads like
//! the spec: embedding → 4-stream residual → per layer `HC_PRE → attention → HC_POST →
//! HC_PRE → MoE → HC_POST` → HyperHead → norm → logits.
//!
//! This module builds the **stateless prefill** graph: `T` tokens at positions `0..T` in one
//! chunk, no cache. Every per-token value (positions, masks, compressed-entry positions,
//! visibility limits, window-slot positions for the APE) is a named input computed by
//! [`PrefillInputs`], so the same graph serves any prompt of length `T`.
//!
//! Tensor names and shapes come from the model's tensor table ([`super::tensors`]);
//! [`Weights`] resolves them.

use super::hparams::{AttnKind, Hparams};
use super::tensors::Tensor;
use crate::weights::{ForwardError, Weights};
use graph::op::mhc::HcPre;
use graph::op::rope::{Rope, RopeScaling};
use graph::{Graph, GraphError, TensorDesc, TensorId, WeightData};
use quant::DType;

/// Names of the graph inputs of the prefill graph.
pub mod input {
    /// I32 `{T}` token ids.
    pub const TOKENS: &str = "tokens";
    /// I32 `{T}` absolute positions.
    pub const POS: &str = "pos";
    /// f32 `{T, T}` sliding-window + causal mask (0 / −∞).
    pub const SWA_MASK: &str = "swa_mask";
    /// I32 `{W}` first-token positions of the compressed entries of ratio `r` (`comp_pos.{r}`).
    pub fn comp_pos(ratio: u32) -> String {
        format!("comp_pos.{ratio}")
    }
    /// I32 `{T}` slot index `p mod r` of every token, for the APE lookup (`ape_slot.{r}`).
    pub fn ape_slot(ratio: u32) -> String {
        format!("ape_slot.{ratio}")
    }
    /// HCA: f32 `{W, T}` visibility mask of the compressed entries (`comp_mask.{r}`).
    pub fn comp_mask(ratio: u32) -> String {
        format!("comp_mask.{ratio}")
    }
    /// CSA: I32 `{T}` number of visible compressed entries `floor((p+1)/r)` (`n_visible.{r}`).
    pub fn n_visible(ratio: u32) -> String {
        format!("n_visible.{ratio}")
    }
}

/// Host-side values of every input of the prefill graph for `T` tokens from position 0.
#[derive(Debug, Clone)]
pub struct PrefillInputs {
    /// `(name, bytes)` for every input except the tokens.
    pub values: Vec<(String, Vec<u8>)>,
}

fn ratios_used(hp: &Hparams) -> Vec<u32> {
    let mut r: Vec<u32> = hp
        .compress_ratios
        .iter()
        .copied()
        .filter(|&r| r > 0)
        .collect();
    r.sort_unstable();
    r.dedup();
    r
}

impl PrefillInputs {
    /// Positions, masks and compressed-entry bookkeeping for `t` tokens at `0..t`.
    pub fn new(hp: &Hparams, t: usize) -> PrefillInputs {
        let i32s = |v: Vec<i32>| bytemuck::cast_slice(&v).to_vec();
        let f32s = |v: Vec<f32>| bytemuck::cast_slice(&v).to_vec();
        let ninf = f32::NEG_INFINITY;
        let mut values = vec![(input::POS.to_string(), i32s((0..t as i32).collect()))];
        let mut m = vec![ninf; t * t];
        for p in 0..t {
            for s in 0..t {
                if s <= p && p - s < hp.window {
                    m[p * t + s] = 0.0;
                }
            }
        }
        values.push((input::SWA_MASK.to_string(), f32s(m)));
        for r in ratios_used(hp) {
            let ru = r as usize;
            let w = t / ru;
            values.push((
                input::ape_slot(r),
                i32s((0..t).map(|p| (p % ru) as i32).collect()),
            ));
            if w == 0 {
                continue;
            }
            values.push((
                input::comp_pos(r),
                i32s((0..w).map(|e| (e * ru) as i32).collect()),
            ));
            let mut cm = vec![ninf; w * t];
            for p in 0..t {
                for e in 0..w.min((p + 1) / ru) {
                    cm[p * w + e] = 0.0;
                }
            }
            values.push((input::comp_mask(r), f32s(cm)));
            values.push((
                input::n_visible(r),
                i32s((0..t).map(|p| ((p + 1) / ru) as i32).collect()),
            ));
        }
        PrefillInputs { values }
    }
}

/// Which of a layer's two compressors (spec §4.5–4.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Compressor {
    /// The attention's (kv entries of `head_dim`).
    Attention,
    /// The Lightning Indexer's (keys of `idx_dim`).
    Indexer,
}

impl Compressor {
    /// Its kv, gate, APE and norm tensors.
    fn tensors(self) -> [Tensor; 4] {
        match self {
            Compressor::Attention => [
                Tensor::AttnCompressorKv,
                Tensor::AttnCompressorGate,
                Tensor::AttnCompressorApe,
                Tensor::AttnCompressorNorm,
            ],
            Compressor::Indexer => [
                Tensor::IndexerCompressorKv,
                Tensor::IndexerCompressorGate,
                Tensor::IndexerCompressorApe,
                Tensor::IndexerCompressorNorm,
            ],
        }
    }
}

/// Builds the prefill graph for one model and one prompt length.
pub struct Builder<'a, W: Weights> {
    /// The graph being built.
    pub g: Graph,
    hp: &'a Hparams,
    w: &'a mut W,
    t: usize,
    pos: TensorId,
    /// The sliding-window mask (of the slot being built, in slots mode).
    swa_mask: Option<TensorId>,
    /// Prefix of the per-chunk inputs' names (`s{k}.` while building slot `k`'s attention).
    prefix: String,
    /// Slots mode: each active slot and its caches, in slot order.
    slots: Vec<(usize, cached::CacheLayout)>,
    consts: std::collections::HashMap<String, TensorId>,
    inputs: std::collections::HashMap<String, TensorId>,
    /// Cached (decode) mode: context capacity and the declared state tensors.
    cache: Option<cached::CacheLayout>,
    /// Live MoE settings read by the graph at run time (issue 6); `None`: the model's routing.
    moe_knobs: Option<std::sync::Arc<graph::knobs::MoeKnobs>>,
    /// Add EXPERT_PREFETCH hints (experts read from disk, `--ram`): each layer guesses the
    /// next one's experts.
    prefetch: bool,
}

pub(crate) mod cached;
mod indexer;
mod keys;
pub use cached::ChunkInputs;
use keys::Keys;

fn f32_input(g: &mut Graph, name: &str, ne: &[usize]) -> Result<TensorId, GraphError> {
    g.input(name, TensorDesc::f32(ne)?)
}

fn i32_input(g: &mut Graph, name: &str, n: usize) -> Result<TensorId, GraphError> {
    g.input(name, TensorDesc::new(DType::I32, &[n])?)
}

impl<'a, W: Weights> Builder<'a, W> {
    /// Start a stateless prefill graph for `t` tokens at positions `0..t`.
    pub fn new(hp: &'a Hparams, w: &'a mut W, t: usize) -> Result<Self, ForwardError> {
        Self::make(hp, w, t, None, &[])
    }

    /// Start a cached graph for a chunk of `t` tokens at runtime positions below `span`, with
    /// decode caches for a context of `ctx` tokens (spec §6; see [`ChunkInputs`]): the
    /// compressed entries of positions below `span` are its keys, the rest of the cache is
    /// neither read nor scored.
    pub fn new_cached(
        hp: &'a Hparams,
        w: &'a mut W,
        t: usize,
        ctx: usize,
        span: usize,
    ) -> Result<Self, ForwardError> {
        Self::make(hp, w, t, Some((ctx, span)), &[])
    }

    /// Start a batched decode graph: one token of each slot in `active` (ascending), whose
    /// caches for a context of `ctx` tokens lie in one state buffer of `n_slots` sequences,
    /// slot `k`'s states named `s{k}.…` (see [`crate::model::GraphKind::Slots`]). Every
    /// matmul reads its weights once for all the slots; each slot attends over its own
    /// caches with its own inputs (`s{k}.…`).
    pub fn new_slots(
        hp: &'a Hparams,
        w: &'a mut W,
        ctx: usize,
        span: usize,
        n_slots: usize,
        active: &[usize],
    ) -> Result<Self, ForwardError> {
        if active.is_empty() || active.windows(2).any(|p| p[0] >= p[1]) {
            return Err(ForwardError::Unsupported(
                "a batched step needs its slots in ascending order".into(),
            ));
        }
        if active.last().is_some_and(|&k| k >= n_slots) {
            return Err(ForwardError::Unsupported(format!(
                "slot {} of {n_slots}",
                active[active.len() - 1]
            )));
        }
        let mut b = Self::make(hp, w, active.len(), None, active)?;
        // every slot's states, declared in slot order: slot k's region starts at k times one
        // sequence's state bytes, whichever slots this step evaluates
        for k in 0..n_slots {
            let layout = cached::CacheLayout::declare(&mut b.g, hp, ctx, span, &format!("s{k}."))?;
            if active.contains(&k) {
                b.slots.push((k, layout));
            }
        }
        Ok(b)
    }

    fn make(
        hp: &'a Hparams,
        w: &'a mut W,
        t: usize,
        ctx: Option<(usize, usize)>,
        slots: &[usize],
    ) -> Result<Self, ForwardError> {
        if hp.hc != 4 {
            return Err(ForwardError::Unsupported(format!(
                "{} HC streams (HC_PRE/HC_POST implement 4)",
                hp.hc
            )));
        }
        if t == 0 {
            return Err(ForwardError::Unsupported("empty prompt".into()));
        }
        let mut g = Graph::new();
        let pos = i32_input(&mut g, input::POS, t)?;
        let keys = if ctx.is_some() { hp.window + t } else { t };
        let swa_mask = if slots.is_empty() {
            Some(f32_input(&mut g, input::SWA_MASK, &[keys, t])?)
        } else {
            None
        };
        let cache = match ctx {
            Some((ctx, span)) => Some(cached::CacheLayout::declare(&mut g, hp, ctx, span, "")?),
            None => None,
        };
        Ok(Builder {
            g,
            hp,
            w,
            t,
            pos,
            swa_mask,
            prefix: String::new(),
            slots: Vec::new(),
            consts: Default::default(),
            inputs: Default::default(),
            cache,
            moe_knobs: None,
            prefetch: false,
        })
    }

    /// Route learned-router layers through live MoE knobs (top-k, tail, rescale), read at run
    /// time so they can change between tokens without a rebuild.
    pub fn with_moe_knobs(mut self, knobs: std::sync::Arc<graph::knobs::MoeKnobs>) -> Self {
        self.moe_knobs = Some(knobs);
        self
    }

    /// With `on`, the graph hints which experts each layer will use before it runs (for
    /// experts read from disk; the logits do not change): a hash-routed layer's exact
    /// choice at the start, the next layer's router applied to this layer's FFN input as
    /// a guess after this layer's gate projection.
    pub fn with_prefetch(mut self, on: bool) -> Self {
        self.prefetch = on;
        self
    }

    /// EXPERT_PREFETCH of layer `l`'s experts: on a hash-routed layer its table's choice for
    /// the chunk's tokens (exact), else its routing of `f` (a guess: `f` is an earlier
    /// layer's FFN input; without `f`, nothing).
    fn prefetch_experts(
        &mut self,
        l: usize,
        f: Option<TensorId>,
        tokens: TensorId,
    ) -> Result<(), ForwardError> {
        let hp = self.hp;
        let (k, t) = (hp.n_expert_used, self.t);
        let sel = if hp.is_hash_layer(l) {
            let tid2eid = self.tensor(l, Tensor::FfnGateTid2eid)?;
            let ids = self.g.get_rows(tid2eid, tokens)?;
            self.g.reshape(ids, &[k, t])?
        } else {
            // the layer's own routing, live MoE control included (experts it drops are not
            // read)
            let Some(f) = f else { return Ok(()) };
            self.route(l, f, tokens)?.0
        };
        let w1 = self.tensor(l, Tensor::FfnGateExps)?;
        self.g.expert_prefetch(w1, sel)?;
        Ok(())
    }

    fn input_i32(&mut self, name: String, n: usize) -> Result<TensorId, ForwardError> {
        let name = format!("{}{name}", self.prefix);
        if let Some(&id) = self.inputs.get(&name) {
            return Ok(id);
        }
        let id = i32_input(&mut self.g, &name, n)?;
        self.inputs.insert(name, id);
        Ok(id)
    }

    fn input_f32(&mut self, name: String, ne: &[usize]) -> Result<TensorId, ForwardError> {
        let name = format!("{}{name}", self.prefix);
        if let Some(&id) = self.inputs.get(&name) {
            return Ok(id);
        }
        let id = f32_input(&mut self.g, &name, ne)?;
        self.inputs.insert(name, id);
        Ok(id)
    }

    /// The sliding-window mask of the sequence being built.
    fn swa_mask(&self) -> Result<TensorId, ForwardError> {
        self.swa_mask
            .ok_or_else(|| ForwardError::Missing("the sliding-window mask".into()))
    }

    /// The weight `t` of layer `l` (of the model for a global tensor), with the name and
    /// shape of the tensor table.
    fn tensor(&mut self, l: usize, t: Tensor) -> Result<TensorId, ForwardError> {
        let shape = t.shape(self.hp, l);
        self.w.get_shaped(&mut self.g, &t.name(l), &shape)
    }

    /// A constant f32 tensor filled with `v` (cached by shape and value).
    fn constant(&mut self, ne: &[usize], v: f32) -> Result<TensorId, ForwardError> {
        let key = format!("const.{ne:?}.{}", v.to_bits());
        if let Some(&id) = self.consts.get(&key) {
            return Ok(id);
        }
        let d = TensorDesc::f32(ne)?;
        let data: Vec<f32> = vec![v; d.nelements()];
        let id = self.g.weight(
            &key,
            d,
            WeightData::from_vec(bytemuck::cast_slice(&data).to_vec()),
        )?;
        self.consts.insert(key, id);
        Ok(id)
    }

    fn rope(&self, l: usize, n_offs: usize, inverse: bool) -> Rope {
        let hp = self.hp;
        match hp.attn_kind(l) {
            AttnKind::Sliding => Rope {
                n_dims: hp.n_rot,
                n_offs,
                freq_base: hp.rope_theta,
                scaling: RopeScaling::None,
                inverse,
                in_place: false,
            },
            _ => Rope {
                n_dims: hp.n_rot,
                n_offs,
                freq_base: hp.compress_rope_theta,
                scaling: match hp.yarn {
                    Some(y) => RopeScaling::Yarn {
                        factor: y.factor,
                        orig_ctx: y.orig_ctx as usize,
                        beta_fast: y.beta_fast,
                        beta_slow: y.beta_slow,
                    },
                    None => RopeScaling::None,
                },
                inverse,
                in_place: false,
            },
        }
    }

    /// Token embedding repeated over the 4 streams: `X {D, 4, T}` (spec §4.1).
    pub fn embed(&mut self, tokens: TensorId) -> Result<TensorId, ForwardError> {
        let d = self.hp.n_embd;
        let emb = self.tensor(0, Tensor::TokenEmbd)?;
        let e = self.g.get_rows(emb, tokens)?;
        let e = self.g.reshape(e, &[d, 1, self.t])?;
        let e2 = self.g.concat(e, e, 1)?;
        Ok(self.g.concat(e2, e2, 1)?)
    }

    /// One gated-softmax compressor (spec §4.5–4.7) over the chunk: `a {D, T}` → entries
    /// `{width, W}` (normed, RoPE'd at `w·ratio`). `prefix` selects the attention or the
    /// indexer compressor tensors.
    fn compressor(
        &mut self,
        l: usize,
        a: TensorId,
        which: Compressor,
        width: usize,
        ratio: u32,
    ) -> Result<Option<TensorId>, ForwardError> {
        let (t, ru) = (self.t, ratio as usize);
        let nw = t / ru;
        if nw == 0 {
            return Ok(None);
        }
        let coff = if ratio == 4 { 2 } else { 1 };
        let (kv, z, norm) = self.compressor_projections(l, a, which, ratio)?;
        let row = coff * width * 4; // bytes per token row of kv / z
                                    // slots of window w: [previous window's first half (CSA) |] this window's (second) half
        let cur = |g: &mut Graph, src: TensorId| {
            g.view(
                src,
                [width, ru, nw, 1],
                [4, row, row * ru, row * ru * nw],
                (coff - 1) * width * 4,
            )
        };
        let (kv_slots, z_slots) = if coff == 2 {
            let pad_kv = self.constant(&[width, ru, 1], 0.0)?;
            let pad_z = self.constant(&[width, ru, 1], f32::NEG_INFINITY)?;
            let prev =
                |b: &mut Self, src: TensorId, pad: TensorId| -> Result<TensorId, ForwardError> {
                    if nw == 1 {
                        return Ok(pad);
                    }
                    let v = b.g.view(
                        src,
                        [width, ru, nw - 1, 1],
                        [4, row, row * ru, row * ru * (nw - 1)],
                        0,
                    )?;
                    Ok(b.g.concat(pad, v, 2)?)
                };
            let pk = prev(self, kv, pad_kv)?;
            let pz = prev(self, z, pad_z)?;
            let ck = cur(&mut self.g, kv)?;
            let cz = cur(&mut self.g, z)?;
            (self.g.concat(pk, ck, 1)?, self.g.concat(pz, cz, 1)?)
        } else {
            (cur(&mut self.g, kv)?, cur(&mut self.g, z)?)
        };
        let pooled = self.g.compress_pool(kv_slots, z_slots)?; // {width, W}
        let normed = self.g.rms_norm_w(pooled, norm, self.hp.rms_eps)?;
        let normed = self.g.reshape(normed, &[width, 1, nw])?;
        let cpos = self.input_i32(input::comp_pos(ratio), nw)?;
        // the rotation in place: nothing else reads the normed entries
        let rope = self.rope(l, width - self.hp.n_rot, false).in_place();
        let r = self.g.rope(normed, cpos, rope)?;
        Ok(Some(self.g.reshape(r, &[width, nw])?))
    }

    /// The projections every compressor starts from (spec §4.5–4.7): `A = W_kv·a`,
    /// `Z = W_gate·a + APE[p mod ratio]` (both `{coff·width, T}`), and its norm weight.
    fn compressor_projections(
        &mut self,
        l: usize,
        a: TensorId,
        which: Compressor,
        ratio: u32,
    ) -> Result<(TensorId, TensorId, TensorId), ForwardError> {
        let [kv, gate, ape, norm] = which.tensors();
        let wkv = self.tensor(l, kv)?;
        let wgate = self.tensor(l, gate)?;
        let ape = self.tensor(l, ape)?;
        let norm = self.tensor(l, norm)?;
        let kv = self.g.mul_mat(wkv, a)?;
        let z = self.g.mul_mat(wgate, a)?;
        let slot = self.input_i32(input::ape_slot(ratio), self.t)?;
        let ape_rows = self.g.get_rows(ape, slot)?; // APE[p mod ratio] per token
        let z = self.g.add(z, ape_rows)?;
        Ok((kv, z, norm))
    }

    /// Attention of layer `l` (spec §4.4): `a {D, T}` (attn_norm output) → `{D, T}`.
    pub fn attention(&mut self, l: usize, a: TensorId) -> Result<TensorId, ForwardError> {
        let hp = self.hp;
        let (h, hd, t) = (hp.n_head, hp.head_dim, self.t);
        let eps = hp.rms_eps;
        let wqa = self.tensor(l, Tensor::AttnQA)?;
        let qan = self.tensor(l, Tensor::AttnQANorm)?;
        let wqb = self.tensor(l, Tensor::AttnQB)?;
        let wkv = self.tensor(l, Tensor::AttnKv)?;
        let kvn = self.tensor(l, Tensor::AttnKvANorm)?;
        let sinks = self.tensor(l, Tensor::AttnSinks)?;
        let gsz = hd * h / hp.o_groups;
        let woa = self.tensor(l, Tensor::AttnOutputA)?;
        let wob = self.tensor(l, Tensor::AttnOutputB)?;
        let n_offs = hd - hp.n_rot;

        let qa = self.g.mul_mat(wqa, a)?;
        let qr = self.g.rms_norm_w(qa, qan, eps)?; // {Rq, T}, reused by the indexer
        let q = self.g.mul_mat(wqb, qr)?;
        let q = self.g.reshape(q, &[hd, h, t])?;
        let q = self.g.rms_norm(q, eps)?;
        // the rotations in place: each source is read by its rope only, and in a prompt chunk
        // q and o are 128 KiB a token, which a copying rope would read and write whole
        let q = self
            .g
            .rope(q, self.pos, self.rope(l, n_offs, false).in_place())?;
        let kv = self.g.mul_mat(wkv, a)?;
        let kv = self.g.rms_norm_w(kv, kvn, eps)?;
        let kv = self.g.reshape(kv, &[hd, 1, t])?;
        let kv = self
            .g
            .rope(kv, self.pos, self.rope(l, n_offs, false).in_place())?;
        let kv = self.g.reshape(kv, &[hd, t])?;

        // keys = [window ‖ compressed entries]; one softmax over both plus the sink (§4.8)
        let o = if !self.slots.is_empty() {
            self.slots_attention(l, a, qr, q, kv, sinks)?
        } else {
            let k = self.keys(l, a, qr, kv)?;
            self.attend(q, k, sinks)?
        };
        // de-rotation (step 10)
        let o = self
            .g
            .rope(o, self.pos, self.rope(l, n_offs, true).in_place())?;

        // grouped output projection (step 11): heads are contiguous within a group
        let g_n = hp.o_groups;
        let woa3 = self.g.reshape(woa, &[gsz, hp.o_lora_rank, g_n])?;
        let u = self.g.reshape(o, &[gsz, g_n, t])?;
        let u = self.g.permute(u, [0, 2, 1, 3])?; // {gsz, T, G}
        let z = self.g.mul_mat(woa3, u)?; // {Ro, T, G}
        let z = self.g.permute(z, [0, 2, 1, 3])?; // {Ro, G, T}
        let z = self.g.cont(z)?;
        let z = self.g.reshape(z, &[hp.o_lora_rank * g_n, t])?;
        Ok(self.g.mul_mat(wob, z)?)
    }

    /// Layer `l`'s routing (spec §4.9) of `f {D, T}`: the selected experts `{K, T}` (I32, −1
    /// where live MoE control drops one) and their weights `{K, T}`.
    fn route(
        &mut self,
        l: usize,
        f: TensorId,
        tokens: TensorId,
    ) -> Result<(TensorId, TensorId), ForwardError> {
        let hp = self.hp;
        let (e, k, t) = (hp.n_expert, hp.n_expert_used, self.t);
        let wg = self.tensor(l, Tensor::FfnGateInp)?;
        let logits = self.g.mul_mat(wg, f)?; // {E, T}
        let s = self.g.softplus(logits)?;
        let s = self.g.sqrt(s)?;
        let sel = if hp.is_hash_layer(l) {
            let tid2eid = self.tensor(l, Tensor::FfnGateTid2eid)?;
            let ids = self.g.get_rows(tid2eid, tokens)?; // i32 {K, T, 1}
            self.g.reshape(ids, &[k, t])?
        } else {
            let bias = self.tensor(l, Tensor::ExpProbsB)?;
            let biased = self.g.add(s, bias)?;
            self.g.top_k(biased, k)? // selection uses score + bias; weights use the score
        };
        let s3 = self.g.reshape(s, &[1, e, t])?;
        let gw = self.g.get_rows(s3, sel)?; // {1, K, T}
        let mut gw = self.g.reshape(gw, &[k, t])?;
        if hp.norm_topk {
            let sum = self.g.sum_rows(gw)?; // {1, T}
            let sum = self.g.clamp(sum, 6.103_515_6e-5, f32::INFINITY)?; // llama.cpp's floor (§4.9)
            gw = self.g.div(gw, sum)?;
        }
        let mut gw = self.g.scale(gw, hp.routed_scale, 0.0)?;
        let mut sel = sel;
        // live MoE control (issue 6): learned-router layers only; hash layers keep every expert
        if let (Some(knobs), false) = (self.moe_knobs.clone(), hp.is_hash_layer(l)) {
            gw = self.g.moe_route(gw, l, knobs)?;
            sel = self.g.mask_ids(sel, gw)?;
        }
        Ok((sel, gw))
    }

    /// The MoE block of layer `l` (spec §4.9): `f {D, T}` (ffn_norm output) → `{D, T}`.
    pub fn moe(
        &mut self,
        l: usize,
        f: TensorId,
        tokens: TensorId,
    ) -> Result<TensorId, ForwardError> {
        let hp = self.hp;
        let (d, k, t) = (hp.n_embd, hp.n_expert_used, self.t);
        let (sel, gw) = self.route(l, f, tokens)?;
        let gw = self.g.reshape(gw, &[1, k, t])?;

        let w1 = self.tensor(l, Tensor::FfnGateExps)?;
        let w3 = self.tensor(l, Tensor::FfnUpExps)?;
        let w2 = self.tensor(l, Tensor::FfnDownExps)?;
        let f3 = self.g.reshape(f, &[d, 1, t])?;
        let gate = self.g.mul_mat_id(w1, f3, sel)?; // {I, K, T}
        if self.prefetch && l + 1 < hp.n_layer {
            // after this layer's own reads were queued: the next layer's read while the
            // rest of this layer and the next one's attention compute
            self.prefetch_experts(l + 1, Some(f), tokens)?;
        }
        let limit = Some(hp.swiglu_limit[l]);
        let hidden = match self.moe_knobs.clone() {
            // gate-first row skipping (issue 6): rows outside each stratum's keep are not
            // computed in W_up (not read), kept rows are rescaled; keep 0 = every row, exactly
            Some(knobs) if !hp.is_hash_layer(l) => {
                let rs = self.g.swiglu_select(gate, l, knobs, false, limit)?;
                let up = self.g.mul_mat_id_masked(w3, f3, sel, rs)?;
                let h = self.g.swiglu(gate, up, limit)?;
                self.g.mul(h, rs)?
            }
            _ => {
                let up = self.g.mul_mat_id(w3, f3, sel)?;
                self.g.swiglu(gate, up, limit)?
            }
        };
        let y = self.g.mul_mat_id(w2, hidden, sel)?; // {D, K, T}
        let y = self.g.mul(y, gw)?;
        let y = self.g.permute(y, [1, 0, 2, 3])?; // {K, D, T}
        let r = self.g.sum_rows(y)?; // {1, D, T}
        let r = self.g.reshape(r, &[d, t])?;

        // shared expert (same clamp family, its own limit)
        let ws1 = self.tensor(l, Tensor::FfnGateShexp)?;
        let ws3 = self.tensor(l, Tensor::FfnUpShexp)?;
        let ws2 = self.tensor(l, Tensor::FfnDownShexp)?;
        let sg = self.g.mul_mat(ws1, f)?;
        let limit = Some(hp.swiglu_limit_shared[l]);
        let sh = match self.moe_knobs.clone() {
            Some(knobs) if !hp.is_hash_layer(l) => {
                let rs = self.g.swiglu_select(sg, l, knobs, true, limit)?;
                let su = self.g.mul_mat_masked(ws3, f, rs)?;
                let h = self.g.swiglu(sg, su, limit)?;
                self.g.mul(h, rs)?
            }
            _ => {
                let su = self.g.mul_mat(ws3, f)?;
                self.g.swiglu(sg, su, limit)?
            }
        };
        let sh = self.g.mul_mat(ws2, sh)?;
        Ok(self.g.add(r, sh)?)
    }

    /// The HC mixes `Fn · RMSNorm_1(flat(X))` as a graph matmul (spec §4.3 step 2), so a
    /// quantized `Fn` sees the activation quantized to its dot type, as in llama.cpp.
    fn hc_mix(&mut self, x: TensorId, fn_w: TensorId) -> Result<TensorId, ForwardError> {
        let hp = self.hp;
        let flat = self.g.reshape(x, &[hp.hc * hp.n_embd, self.t])?;
        let u = self.g.rms_norm(flat, hp.rms_eps)?;
        Ok(self.g.mul_mat(fn_w, u)?)
    }

    /// One decoder layer (spec §4.2): `X {D, 4, T}` → `X' {D, 4, T}`.
    pub fn layer(
        &mut self,
        l: usize,
        x: TensorId,
        tokens: TensorId,
    ) -> Result<TensorId, ForwardError> {
        let hp = self.hp;
        let d = hp.n_embd;
        if self.prefetch && l == 0 {
            self.prefetch_experts(0, None, tokens)?;
        }
        let p = HcPre {
            eps_norm: hp.rms_eps,
            eps_hc: hp.hc_eps,
            sinkhorn_iters: hp.hc_iters,
            head: false,
            premixed: true,
        };
        let fa = self.tensor(l, Tensor::HcAttnFn)?;
        let sa = self.tensor(l, Tensor::HcAttnScale)?;
        let ba = self.tensor(l, Tensor::HcAttnBase)?;
        let an = self.tensor(l, Tensor::AttnNorm)?;
        let mix = self.hc_mix(x, fa)?;
        let hc1 = self.g.hc_pre(x, mix, sa, ba, p.clone())?;
        let y = self.g.hc_y(hc1, d)?;
        let a = self.g.rms_norm_w(y, an, hp.rms_eps)?;
        let o = self.attention(l, a)?;
        let x = self.g.hc_post(o, x, hc1)?;

        let ff = self.tensor(l, Tensor::HcFfnFn)?;
        let sf = self.tensor(l, Tensor::HcFfnScale)?;
        let bf = self.tensor(l, Tensor::HcFfnBase)?;
        let fnw = self.tensor(l, Tensor::FfnNorm)?;
        let mix = self.hc_mix(x, ff)?;
        let hc2 = self.g.hc_pre(x, mix, sf, bf, p)?;
        let y = self.g.hc_y(hc2, d)?;
        let f = self.g.rms_norm_w(y, fnw, hp.rms_eps)?;
        let m = self.moe(l, f, tokens)?;
        Ok(self.g.hc_post(m, x, hc2)?)
    }

    /// HyperHead, final norm and LM head (spec §4.10): `X {D, 4, T}` → logits `{V, T}`.
    pub fn head(&mut self, x: TensorId) -> Result<TensorId, ForwardError> {
        let hp = self.hp;
        let d = hp.n_embd;
        let fh = self.tensor(0, Tensor::OutputHcFn)?;
        let sh = self.tensor(0, Tensor::OutputHcScale)?;
        let bh = self.tensor(0, Tensor::OutputHcBase)?;
        let nw = self.tensor(0, Tensor::OutputNorm)?;
        let out = self.tensor(0, Tensor::Output)?;
        let mix = self.hc_mix(x, fh)?;
        let op = HcPre {
            eps_norm: hp.rms_eps,
            eps_hc: hp.hc_eps,
            sinkhorn_iters: 0,
            head: true,
            premixed: true,
        };
        let y = self.g.hc_pre(x, mix, sh, bh, op)?;
        let y = self.g.hc_y(y, d)?;
        let y = self.g.rms_norm_w(y, nw, hp.rms_eps)?;
        Ok(self.g.mul_mat(out, y)?)
    }

    /// The whole model: tokens → logits `{V, T}` (output `"logits"`); every layer's residual
    /// state is also an output `"hidden.{l}"` when `hidden` is set.
    pub fn model(mut self, hidden: bool) -> Result<Graph, ForwardError> {
        let x = self.layers(hidden)?;
        let logits = self.head(x)?;
        self.g.output("logits", logits)?;
        Ok(self.g)
    }

    /// The whole model with the head on the last position only: tokens → logits `{V, 1}`
    /// (output `"logits"`). What generation needs: a prompt chunk of T tokens skips T − 1
    /// rows of the largest matmul. Every op of the head works per position, so these logits
    /// are the last column of [`Builder::model`]'s, bit for bit.
    pub fn model_last(mut self) -> Result<Graph, ForwardError> {
        let x = self.layers(false)?;
        let d = *self.g.desc(x);
        let last = self
            .g
            .view(x, [d.ne[0], d.ne[1], 1, 1], d.nb, (self.t - 1) * d.nb[2])?;
        let last = self.g.cont(last)?;
        let t = std::mem::replace(&mut self.t, 1);
        let logits = self.head(last);
        self.t = t;
        self.g.output("logits", logits?)?;
        Ok(self.g)
    }

    /// Embedding and every layer: tokens → the final residual state `{D, hc, T}`.
    fn layers(&mut self, hidden: bool) -> Result<TensorId, ForwardError> {
        let tokens = i32_input(&mut self.g, input::TOKENS, self.t)?;
        let mut x = self.embed(tokens)?;
        for l in 0..self.hp.n_layer {
            x = self.layer(l, x, tokens)?;
            if hidden {
                self.g.output(&format!("hidden.{l}"), x)?;
            }
        }
        Ok(x)
    }
}
