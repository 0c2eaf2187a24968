//! mHC (manifold-constrained hyper-connections, spec §4.3, §4.10, §9.1): HC_PRE and HC_POST on
//! the 4-stream residual `X {D, 4, T}` (stream-major: `flat[s·D + i] = X[i, s, t]`).
//!
//! **HC_PRE** (per token; `M = 24`):
//! 1. `u = RMSNorm_1(flat) = flat / sqrt(mean(flat²) + eps_norm)`; `mix = Fn·u ∈ R^M`.
//! 2. `pre[s] = σ(mix[s]·scale[0] + base[s]) + eps_hc`, s = 0…3.
//! 3. `post[s] = 2·σ(mix[4+s]·scale[1] + base[4+s])` (no eps).
//! 4. `L[i][j] = mix[8+4i+j]·scale[2] + base[8+4i+j]` (i = source stream, j = destination).
//! 5. Sinkhorn: `C[i][j] = softmax_j(L[i][·]) + eps_hc`; column normalisation
//!    `C[i][j] /= (Σ_i' C[i'][j] + eps_hc)`; then `sinkhorn_iters − 1` times: row normalisation
//!    `C[i][j] /= (Σ_j' C[i][j'] + eps_hc)` followed by a column normalisation.
//! 6. `y = Σ_s pre[s]·X[s]`.
//!
//! The output is one packed f32 tensor `{D + 24, T}`: per token
//! `[y (D) | pre (4) | post (4) | C (16, row-major C[i][j], i = source)]`; offsets after the
//! `D` elements of `y` are [`HC_PRE_AT`], [`HC_POST_AT`], [`HC_COMB_AT`]. `C`'s order equals
//! ggml's `comb {dst, src}` tensor (`comb[dst + 4·src] = C[src][dst]`).
//!
//! With `premixed`, source 1 is `mix {M, T}` itself, computed in the graph as
//! `MUL_MAT(Fn, RMS_NORM(flat))`: the matmul then quantizes the normalised activation to the
//! weight's dot type exactly as llama.cpp's `build_hc_pre` does (a quantized `Fn`, e.g. Q8_0,
//! otherwise gives different rounding than llama.cpp's).
//!
//! **HyperHead** (`head = true`, §4.10): `Fh {4D, 4}`, one scale, `M = 4`:
//! `pre[s] = σ(mix[s]·scale[0] + base[s]) + eps_hc`, `y = Σ_s pre[s]·X[s]`; no post, no
//! Sinkhorn. Output `{D + 4, T}` = `[y | pre]`.
//!
//! **HC_POST**: `X_new[j] = post[j]·o + Σ_i C[i][j]·X[i]` (the transpose of `C` is applied:
//! the sum runs over the source index), reading `post` and `C` from HC_PRE's packed output.

use super::{want_srcs, OpDef};
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;
use quant::DType;

/// Number of hyper-connection streams (hard-coded, as in ggml).
pub const HC: usize = 4;
/// Offset of `pre[0..4]` after the `D` elements of `y` in HC_PRE's packed row.
pub const HC_PRE_AT: usize = 0;
/// Offset of `post[0..4]` after `y` (not present with `head = true`).
pub const HC_POST_AT: usize = HC;
/// Offset of `C[0..16]` (row-major, `C[i][j]` at `4i + j`, i = source) after `y`.
pub const HC_COMB_AT: usize = 2 * HC;
/// Mixes (and packed extras) of a layer's HC_PRE: `(2 + 4)·4 = 24`.
pub const HC_MIX: usize = (2 + HC) * HC;
/// Mixes (and packed extras) of the final HyperHead: 4.
pub const HC_HEAD_MIX: usize = HC;

/// The mHC pre step (or the final HyperHead when `head`).
#[derive(Debug, Clone)]
pub struct HcPre {
    /// RMSNorm epsilon inside the square root (V4: 1e-6).
    pub eps_norm: f32,
    /// `ε_hc` added to `pre` and to every Sinkhorn entry and sum (V4: 1e-6).
    pub eps_hc: f32,
    /// Sinkhorn column normalisations (V4: 20); ignored with `head`.
    pub sinkhorn_iters: usize,
    /// Source 1 is the precomputed `mix {M, T}` (f32, e.g. `MUL_MAT(Fn, RMSNorm_1(flat))` so the
    /// activation is quantized like llama.cpp's) instead of the weight `Fn {4D, M}`.
    pub premixed: bool,
    /// HyperHead variant: `Fh {4D, 4}`, `scale {≥1}`, `base {4}`, output `{D + 4, T}`.
    pub head: bool,
}

impl HcPre {
    /// DeepSeek-V4-Flash sublayer parameters: `eps_norm = eps_hc = 1e-6`, 20 Sinkhorn
    /// iterations (spec §1.1, §9.1).
    pub const V4: HcPre = HcPre {
        eps_norm: 1e-6,
        eps_hc: 1e-6,
        sinkhorn_iters: 20,
        head: false,
        premixed: false,
    };
    /// Mixes computed per token (24, or 4 for the head).
    pub fn n_mix(&self) -> usize {
        if self.head {
            HC_HEAD_MIX
        } else {
            HC_MIX
        }
    }
}

fn f32_rows(op: &'static str, what: &str, d: &TensorDesc) -> Result<(), GraphError> {
    if d.dtype != DType::F32 || !d.rows_contiguous() {
        return Err(shape_err(
            op,
            format!(
                "{what} must be f32 with contiguous rows, got {}",
                d.shape_str()
            ),
        ));
    }
    Ok(())
}

fn f32_vec(op: &'static str, what: &str, d: &TensorDesc, min: usize) -> Result<(), GraphError> {
    if d.dtype != DType::F32 || d.nrows() != 1 || d.ne[0] < min {
        return Err(shape_err(
            op,
            format!(
                "{what} must be an f32 vector of ≥ {min} elements, got {}",
                d.shape_str()
            ),
        ));
    }
    Ok(())
}

/// Validate `X {D, 4, T}` and return `(D, T)`.
fn streams(op: &'static str, x: &TensorDesc) -> Result<(usize, usize), GraphError> {
    f32_rows(op, "X", x)?;
    if x.ne[1] != HC || x.ne[3] != 1 || x.ne[0] == 0 {
        return Err(shape_err(
            op,
            format!("X must be {{D, 4, T}}, got {}", x.shape_str()),
        ));
    }
    Ok((x.ne[0], x.ne[2]))
}

impl OpDef for HcPre {
    const NAME: &'static str = "HC_PRE";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        want_srcs(Self::NAME, srcs, 4)?;
        let (x, f, scale, base) = (srcs[0], srcs[1], srcs[2], srcs[3]);
        let (d, t) = streams(Self::NAME, x)?;
        let m = self.n_mix();
        if self.premixed {
            if f.dtype != DType::F32 || !f.rows_contiguous() || f.ne != [m, t, 1, 1] {
                return Err(shape_err(
                    Self::NAME,
                    format!("mix must be f32 {{{m}, {t}}}, got {}", f.shape_str()),
                ));
            }
        } else if f.dtype.info().dequantize.is_none()
            || !f.rows_contiguous()
            || f.ne != [HC * d, m, 1, 1]
        {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "Fn must be {{{}, {m}}} with contiguous rows of a type with a dequantizer, \
                     got {}",
                    HC * d,
                    f.shape_str()
                ),
            ));
        }
        f32_vec(Self::NAME, "scale", scale, if self.head { 1 } else { 3 })?;
        f32_vec(Self::NAME, "base", base, m)?;
        if base.ne[0] != m {
            return Err(shape_err(
                Self::NAME,
                format!("base must have {m} elements, got {}", base.shape_str()),
            ));
        }
        if !self.head && self.sinkhorn_iters == 0 {
            return Err(shape_err(Self::NAME, "sinkhorn_iters must be ≥ 1"));
        }
        TensorDesc::f32(&[d + m, t])
    }
    // Global: the kernel reads every row of Fn, which could have the output's row count
    // (T = 24) — not row-wise in the planner's sense.
}

/// The mHC post step: `X_new[j] = post[j]·o + Σ_i C[i][j]·X[i]`.
#[derive(Debug, Clone)]
pub struct HcPost;

impl OpDef for HcPost {
    const NAME: &'static str = "HC_POST";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        want_srcs(Self::NAME, srcs, 3)?;
        let (o, x, hc) = (srcs[0], srcs[1], srcs[2]);
        let (d, t) = streams(Self::NAME, x)?;
        f32_rows(Self::NAME, "o", o)?;
        f32_rows(Self::NAME, "hc", hc)?;
        if o.ne != [d, t, 1, 1] || hc.ne != [d + HC_MIX, t, 1, 1] {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "o {} / hc {} do not match X {} (want {{{d}, {t}}} and {{{}, {t}}})",
                    o.shape_str(),
                    hc.shape_str(),
                    x.shape_str(),
                    d + HC_MIX
                ),
            ));
        }
        TensorDesc::f32(&[d, HC, t])
    }
}

impl Graph {
    /// HC_PRE of a decoder sublayer: `X {D,4,T}`, `Fn {4D,24}`, `scale {3}`, `base {24}` →
    /// packed `{D+24, T}` (see the module doc). `params.head` selects the HyperHead variant
    /// instead (see [`Graph::hc_head`]); [`HcPre::V4`] holds the V4-Flash values.
    pub fn hc_pre(
        &mut self,
        x: TensorId,
        fn_w: TensorId,
        scale: TensorId,
        base: TensorId,
        params: HcPre,
    ) -> Result<TensorId, GraphError> {
        self.op(params, &[x, fn_w, scale, base])
    }
    /// The final HyperHead: `X {D,4,T}`, `Fh {4D,4}`, `scale {1}`, `base {4}` → `{D+4, T}` =
    /// `[y | pre]`.
    pub fn hc_head(
        &mut self,
        x: TensorId,
        fh: TensorId,
        scale: TensorId,
        base: TensorId,
        eps_norm: f32,
        eps_hc: f32,
    ) -> Result<TensorId, GraphError> {
        let op = HcPre {
            eps_norm,
            eps_hc,
            sinkhorn_iters: 0,
            head: true,
            premixed: false,
        };
        self.op(op, &[x, fh, scale, base])
    }
    /// The collapsed input `y {D, T}`: a view of the first `D` elements of each row of an
    /// HC_PRE / HyperHead packed output `{D + 24, T}` or `{D + 4, T}`.
    pub fn hc_y(&mut self, packed: TensorId, d: usize) -> Result<TensorId, GraphError> {
        let p = *self.desc(packed);
        if p.ne[0] <= d {
            return Err(shape_err(
                "HC_Y",
                format!("{} has no room after D = {d}", p.shape_str()),
            ));
        }
        self.view(packed, [d, p.ne[1], p.ne[2], p.ne[3]], p.nb, 0)
    }
    /// HC_POST: `o {D,T}`, `X {D,4,T}`, HC_PRE's packed `{D+24,T}` → `X_new {D,4,T}`.
    pub fn hc_post(
        &mut self,
        o: TensorId,
        x: TensorId,
        hc: TensorId,
    ) -> Result<TensorId, GraphError> {
        self.op(HcPost, &[o, x, hc])
    }
}
