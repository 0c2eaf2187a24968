//! ROPE: partial rotary position embedding with interleaved pairs (spec §5, §7 `ggml_rope_ext`
//! + `ggml_rope_set_offset`, `ggml_rope_ext_back`).
//!
//! `x` f32 `{D, H, T}` (any strides; a 4th dimension is allowed and shares the positions),
//! `pos` I32 `{T}` (an input read at execution time: row `(h, t)` uses `pos[t]`) → f32
//! `{D, H, T}` contiguous. Dims `[n_offs, n_offs + n_dims)` form `n_dims/2` interleaved pairs
//! `(v[o+2k], v[o+2k+1])` rotated by `φ_k = p·ω_k`:
//! `v'[2k] = v[2k]·cos φ_k − v[2k+1]·sin φ_k`, `v'[2k+1] = v[2k]·sin φ_k + v[2k+1]·cos φ_k`;
//! every other dim is copied. `inverse` rotates by `−φ_k` (the output de-rotation of §4.4
//! step 10, ggml `rope_ext_back`). With `in_place` (ggml `rope_inplace`, [`Rope::in_place`]) the
//! output *is* `x`'s storage (`x` must then be contiguous): only the rotated dims are
//! rewritten, the copy of the others disappears, and `x` no longer holds its old values, so
//! a graph may use it only where nothing else reads `x`.
//!
//! Frequencies ([`RopeScaling`]):
//! * `None` (DS4 "main"): `ω_k = base^(−2k/n_dims)`.
//! * `Yarn` (DS4 "compress", §5): `f_k = base^(−2k/n_dims)`, correction dims
//!   `cd(β) = n_dims·ln(L/(2πβ))/(2 ln base)`, `low = max(floor(cd(β_fast)), 0)`,
//!   `high = min(ceil(cd(β_slow)), n_dims − 1)`, `ramp_k = clamp((k − low)/max(high − low,
//!   0.001), 0, 1)`, `ω_k = f_k·(1 − ramp_k) + (f_k/s)·ramp_k`. The attention factor (mscale)
//!   is exactly 1: cos/sin are never scaled (llama.cpp's `attn_factor` cancels ggml's YaRN
//!   mscale; HF forces 1; the official code never scales).
//!
//! Angles are computed in f32 exactly as ggml's `ggml_rope_cache_init`/`rope_yarn`:
//! `theta_scale = base^(−2/n_dims)` (`powf`), `θ_0 = p`, `θ_{k+1} = θ_k·theta_scale` by repeated
//! f32 multiplication, then `θ = θ_interp·(1 − mix) + θ_extrap·mix` with `θ_interp = θ/s` and
//! `mix = 1 − ramp_k` (YaRN), and `cosf`/`sinf` of the f32 angle (spec §9.3 item 8).

use super::{want_srcs, Access, OpDef};
use crate::error::{shape_err, GraphError};
use crate::graph::{Graph, TensorId};
use crate::tensor::TensorDesc;
use quant::DType;

/// How the rotation frequencies are derived from `freq_base`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RopeScaling {
    /// Plain RoPE: `ω_k = base^(−2k/n_dims)` (DS4 "main" variant).
    None,
    /// YaRN frequency blending without magnitude scaling (DS4 "compress" variant, spec §5).
    Yarn {
        /// Interpolation factor `s` (frequencies above the ramp are divided by it); 16 for DS4.
        factor: f32,
        /// Original training context `L` (65536 for DS4).
        orig_ctx: usize,
        /// `β_fast` (32 for DS4): selects the low correction dim.
        beta_fast: f32,
        /// `β_slow` (1 for DS4): selects the high correction dim.
        beta_slow: f32,
    },
}

/// Rotary embedding of a slice of each row.
#[derive(Debug, Clone, PartialEq)]
pub struct Rope {
    /// Rotated dims (even, > 0); 64 for DS4.
    pub n_dims: usize,
    /// First rotated dim: 448 for 512-wide heads/entries, 64 for 128-wide indexer vectors.
    pub n_offs: usize,
    /// Frequency base: 10000 (main) or 160000 (compress).
    pub freq_base: f32,
    /// Frequency scaling.
    pub scaling: RopeScaling,
    /// Rotate by `−φ` instead of `φ` (inverse RoPE, ggml `rope_ext_back`).
    pub inverse: bool,
    /// Rotate `x`'s rows where they are instead of into a new tensor (see the module doc).
    pub in_place: bool,
}

/// DS4 RoPE dims (spec §1: r = 64).
pub const DS4_ROPE_DIMS: usize = 64;

impl Rope {
    /// DS4 "main" RoPE (SWA layers, MTP): base 10000, no scaling (spec §5).
    pub fn ds4_main(n_offs: usize, inverse: bool) -> Rope {
        Rope {
            n_dims: DS4_ROPE_DIMS,
            n_offs,
            freq_base: 10000.0,
            scaling: RopeScaling::None,
            inverse,
            in_place: false,
        }
    }
    /// DS4 "compress" RoPE (CSA/HCA layers): base 160000, YaRN s = 16, L = 65536, β 32/1.
    pub fn ds4_compress(n_offs: usize, inverse: bool) -> Rope {
        Rope {
            n_dims: DS4_ROPE_DIMS,
            n_offs,
            freq_base: 160000.0,
            scaling: RopeScaling::Yarn {
                factor: 16.0,
                orig_ctx: 65536,
                beta_fast: 32.0,
                beta_slow: 1.0,
            },
            inverse,
            in_place: false,
        }
    }
    /// The same rotation, written into its source's storage (ggml `rope_inplace`): for a
    /// contiguous source that nothing else reads.
    pub fn in_place(self) -> Rope {
        Rope {
            in_place: true,
            ..self
        }
    }

    fn check(&self, x: &TensorDesc) -> Result<(), GraphError> {
        let name = <Rope as OpDef>::NAME;
        if self.n_dims == 0 || !self.n_dims.is_multiple_of(2) {
            return Err(shape_err(
                name,
                format!("n_dims must be even and > 0, got {}", self.n_dims),
            ));
        }
        let fits = matches!(self.n_offs.checked_add(self.n_dims), Some(e) if e <= x.ne[0]);
        if !fits {
            return Err(shape_err(
                name,
                format!(
                    "rotated dims [{}, {}+{}) exceed rows of {}",
                    self.n_offs,
                    self.n_offs,
                    self.n_dims,
                    x.shape_str()
                ),
            ));
        }
        if !(self.freq_base.is_finite() && self.freq_base > 0.0) {
            return Err(shape_err(
                name,
                format!("freq_base must be finite and > 0, got {}", self.freq_base),
            ));
        }
        if let RopeScaling::Yarn {
            factor,
            orig_ctx,
            beta_fast,
            beta_slow,
        } = self.scaling
        {
            let pos = |v: f32| v.is_finite() && v > 0.0;
            if !(pos(factor) && pos(beta_fast) && pos(beta_slow) && orig_ctx > 0) {
                return Err(shape_err(
                    name,
                    format!(
                        "invalid YaRN parameters: factor {factor}, original context {orig_ctx}, \
                         beta_fast {beta_fast}, beta_slow {beta_slow} (each must be positive)"
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl OpDef for Rope {
    const NAME: &'static str = "ROPE";
    fn infer(&self, srcs: &[&TensorDesc]) -> Result<TensorDesc, GraphError> {
        want_srcs(Self::NAME, srcs, 2)?;
        let (x, pos) = (srcs[0], srcs[1]);
        if x.dtype != DType::F32 {
            return Err(shape_err(
                Self::NAME,
                format!("x must be f32, got {}", x.shape_str()),
            ));
        }
        if pos.dtype != DType::I32
            || pos.nrows() != 1
            || !pos.is_contiguous()
            || pos.ne[0] != x.ne[2]
        {
            return Err(shape_err(
                Self::NAME,
                format!(
                    "positions must be a contiguous i32 vector of x.ne[2] = {} entries, got {}",
                    x.ne[2],
                    pos.shape_str()
                ),
            ));
        }
        self.check(x)?;
        if self.in_place && !x.is_contiguous() {
            return Err(shape_err(
                Self::NAME,
                format!("in place needs a contiguous x, got {}", x.shape_str()),
            ));
        }
        TensorDesc::f32(&x.ne)
    }
    fn access(&self) -> Access {
        Access::RowWise
    }
    fn inplace(&self) -> bool {
        self.in_place
    }
}

impl Graph {
    /// RoPE of `x {D, H, T}` at positions `pos` (I32 `{T}`), see the module doc.
    pub fn rope(&mut self, x: TensorId, pos: TensorId, p: Rope) -> Result<TensorId, GraphError> {
        self.op(p, &[x, pos])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::WeightData;

    #[test]
    fn in_place_needs_a_contiguous_source_that_is_not_a_weight() {
        let mut g = Graph::new();
        let d = TensorDesc::f32(&[128, 2, 3]).unwrap();
        let pos = g
            .input("pos", TensorDesc::new(DType::I32, &[3]).unwrap())
            .unwrap();
        let x = g.input("x", d).unwrap();
        let rope = Rope::ds4_main(64, false).in_place();
        assert!(g.rope(x, pos, rope.clone()).is_ok());
        // a permuted view is not contiguous
        let raw = g
            .input("raw", TensorDesc::f32(&[128, 3, 2]).unwrap())
            .unwrap();
        let p = g.permute(raw, [0, 2, 1, 3]).unwrap();
        let err = g.rope(p, pos, rope.clone()).unwrap_err().to_string();
        assert!(err.contains("contiguous"), "{err}");
        // a weight, directly or through a reshape, is read-only
        let w = g
            .weight("w", d, WeightData::from_vec(vec![0; d.nbytes()]))
            .unwrap();
        let err = g.rope(w, pos, rope.clone()).unwrap_err().to_string();
        assert!(err.contains("in place into a weight"), "{err}");
        let v = g.reshape(w, &[128, 2, 3]).unwrap();
        assert!(g.rope(v, pos, rope.clone()).is_err());
        // the copying rope reads a weight as any other source
        assert!(g.rope(w, pos, Rope::ds4_main(64, false)).is_ok());
    }
}
