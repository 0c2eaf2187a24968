//! ROPE kernels. Angles follow ggml's `ggml_rope_cache_init` + `rope_yarn` in f32 (see the op
//! doc in `graph::op::rope`): `θ_k = p·theta_scale^k` by repeated f32 multiplication, YaRN
//! blend without mscale, `cos`/`sin` of the f32 angle, rotation in f32. The reference reads
//! every element with `get` (any strides) and recomputes the angles per row; the forward
//! kernel converts its own rows (`my_rows`) and reuses the cos/sin cache while consecutive
//! rows share a position. Both produce bit-identical results.

use crate::case::CaseBuilder;
use crate::tensor::split_row;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::rope::{Rope, RopeScaling};

/// ggml `ggml_rope_yarn_corr_dim`: the dim whose wavelength spans `orig_ctx / beta` turns.
fn corr_dim(n_dims: usize, orig_ctx: usize, beta: f32, base: f32) -> f32 {
    n_dims as f32 * (orig_ctx as f32 / (beta * 2.0 * std::f32::consts::PI)).ln() / (2.0 * base.ln())
}

/// ggml `ggml_rope_yarn_corr_dims`: `[low, high]` with floor/ceil and clamping.
fn corr_dims(op: &Rope, orig_ctx: usize, beta_fast: f32, beta_slow: f32) -> [f32; 2] {
    let start = corr_dim(op.n_dims, orig_ctx, beta_fast, op.freq_base).floor();
    let end = corr_dim(op.n_dims, orig_ctx, beta_slow, op.freq_base).ceil();
    [start.max(0.0), end.min(op.n_dims as f32 - 1.0)]
}

/// The angles `θ_k = p·ω_k`, `k = 0..n_dims/2`, into `out`.
fn thetas(op: &Rope, p: f32, out: &mut [f32]) {
    let theta_scale = op.freq_base.powf(-2.0 / op.n_dims as f32);
    let (freq_scale, corr) = match op.scaling {
        RopeScaling::None => (1.0f32, None),
        RopeScaling::Yarn {
            factor,
            orig_ctx,
            beta_fast,
            beta_slow,
        } => (
            1.0 / factor,
            Some(corr_dims(op, orig_ctx, beta_fast, beta_slow)),
        ),
    };
    let mut theta = p;
    for (k, o) in out.iter_mut().enumerate() {
        let extrap = theta;
        let interp = freq_scale * extrap;
        *o = match corr {
            None => interp,
            Some([low, high]) => {
                // ext_factor = 1: mix = 1 − ramp (ggml rope_yarn_ramp)
                let y = (k as f32 - low) / (high - low).max(0.001);
                let mix = 1.0 - y.clamp(0.0, 1.0);
                interp * (1.0 - mix) + extrap * mix
            }
        };
        theta *= theta_scale;
    }
}

/// `cache[2k] = cos θ_k`, `cache[2k+1] = ±sin θ_k` (negated for the inverse rotation).
fn cos_sin(op: &Rope, p: i32, cache: &mut [f32]) {
    let half = op.n_dims / 2;
    let (th, cs) = cache.split_at_mut(half);
    thetas(op, p as f32, th);
    let sign = if op.inverse { -1.0 } else { 1.0 };
    for (k, &t) in th.iter().enumerate() {
        cs[2 * k] = t.cos();
        cs[2 * k + 1] = t.sin() * sign;
    }
}

/// Rotate the pairs of `row[n_offs..n_offs+n_dims]` in place with `cs` (from [`cos_sin`]).
fn rotate(op: &Rope, cs: &[f32], row: &mut [f32]) {
    let v = &mut row[op.n_offs..op.n_offs + op.n_dims];
    for (pair, c) in v.chunks_exact_mut(2).zip(cs.chunks_exact(2)) {
        let (x0, x1) = (pair[0], pair[1]);
        pair[0] = x0 * c[0] - x1 * c[1];
        pair[1] = x0 * c[1] + x1 * c[0];
    }
}

impl CpuKernel for Rope {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let (x, pos) = (&srcs[0], srcs[1].i32s());
        let cache = cx.scratch.f32(self.n_dims / 2 + self.n_dims);
        for r in 0..dst.desc.nrows() {
            let (i1, i2, i3) = split_row(&dst.desc, r);
            let out = dst.row_f32_mut(r);
            // in place, the row already holds x's (the output is x's storage)
            if !self.in_place {
                for (i0, o) in out.iter_mut().enumerate() {
                    *o = x.get(i0, i1, i2, i3);
                }
            }
            cos_sin(self, pos[i2], cache);
            rotate(self, &cache[self.n_dims / 2..], out);
        }
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let (x, pos) = (&srcs[0], srcs[1].i32s());
        let rows = cx.my_rows(dst.desc.nrows());
        let cache = cx.scratch.f32(self.n_dims / 2 + self.n_dims);
        let mut cached = None;
        for r in rows {
            let (_, i2, _) = split_row(&dst.desc, r);
            if cached != Some(pos[i2]) {
                cos_sin(self, pos[i2], cache);
                cached = Some(pos[i2]);
            }
            let out = dst.row_f32_mut(r);
            if !self.in_place {
                x.row_to_f32(r, out);
            }
            rotate(self, &cache[self.n_dims / 2..], out);
        }
    }
    fn cases() -> Vec<Case> {
        let mut v = Vec::new();
        // (name, op, x shape {D, H, T}, permuted input, positions base, quick)
        type Cfg = (&'static str, Rope, [usize; 3], bool, i32, bool);
        let big = 100_000;
        let configs: Vec<Cfg> = vec![
            (
                "main",
                Rope::ds4_main(448, false),
                [512, 3, 5],
                false,
                0,
                true,
            ),
            (
                "main inv",
                Rope::ds4_main(448, true),
                [512, 2, 3],
                false,
                7,
                true,
            ),
            (
                "compress",
                Rope::ds4_compress(448, false),
                [512, 3, 4],
                false,
                big,
                true,
            ),
            (
                "compress inv",
                Rope::ds4_compress(448, true),
                [512, 3, 2],
                true,
                big,
                true,
            ),
            (
                "indexer",
                Rope::ds4_compress(64, false),
                [128, 5, 3],
                false,
                130,
                true,
            ),
            (
                "indexer perm",
                Rope::ds4_compress(64, false),
                [128, 4, 3],
                true,
                9,
                true,
            ),
            (
                "odd",
                Rope {
                    n_dims: 6,
                    n_offs: 1,
                    freq_base: 500.0,
                    scaling: RopeScaling::Yarn {
                        factor: 4.0,
                        orig_ctx: 64,
                        beta_fast: 8.0,
                        beta_slow: 1.0,
                    },
                    inverse: false,
                    in_place: false,
                },
                [9, 7, 3],
                true,
                3,
                true,
            ),
            (
                "q real",
                Rope::ds4_compress(448, false),
                [512, 64, 8],
                false,
                4000,
                false,
            ),
            (
                "o real",
                Rope::ds4_main(448, true),
                [512, 64, 1],
                false,
                50,
                false,
            ),
        ];
        for (name, op, [d, h, t], perm, p0, quick) in configs {
            let mut b = CaseBuilder::new(21);
            let x = if perm {
                // stored {D, T, H}, permuted to {D, H, T}: non-contiguous rows order
                let raw = b.input_f32("x", &[d, t, h], 1.0).expect("case");
                b.g.permute(raw, [0, 2, 1, 3]).expect("case")
            } else {
                b.input_f32("x", &[d, h, t], 1.0).expect("case")
            };
            let p: Vec<i32> = (0..t as i32).map(|i| p0 + 3 * i).collect();
            let pos = b.input_i32("pos", &p).expect("case");
            let out = b.g.rope(x, pos, op).expect("case");
            v.push(
                b.finish(
                    format!("ROPE {name} {{{d},{h},{t}}} perm={perm} p0={p0}"),
                    out,
                    0.0,
                    quick,
                )
                .expect("case"),
            );
        }
        // in place: the rows of a row-wise op's output rotated where they are (the planner
        // elides the barrier between the two), against the reference's in-place rotation
        for (name, op, [d, h, t], quick) in [
            ("main", Rope::ds4_main(448, false), [512, 3, 5], true),
            (
                "compress inv",
                Rope::ds4_compress(60, true),
                [128, 5, 7],
                true,
            ),
        ] {
            let mut b = CaseBuilder::new(22);
            let x = b.input_f32("x", &[d, h, t], 1.0).expect("case");
            let y = b.g.scale(x, 0.5, 0.25).expect("case");
            let p: Vec<i32> = (0..t as i32).map(|i| 11 + 5 * i).collect();
            let pos = b.input_i32("pos", &p).expect("case");
            let out = b.g.rope(y, pos, op.in_place()).expect("case");
            v.push(
                b.finish(
                    format!("ROPE {name} in place {{{d},{h},{t}}}"),
                    out,
                    0.0,
                    quick,
                )
                .expect("case"),
            );
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph::{OpDef, TensorDesc};
    use quant::DType;

    /// Run the reference on `x {D, H, T}` (contiguous) at `pos`.
    fn run(op: &Rope, ne: [usize; 3], x: &[f32], pos: &[i32]) -> Vec<f32> {
        let xd = TensorDesc::f32(&ne).unwrap();
        let pd = TensorDesc::new(DType::I32, &[pos.len()]).unwrap();
        let od = op.infer(&[&xd, &pd]).unwrap();
        let mut ob = vec![0u8; od.nbytes()];
        let dst = TensorMut::new(od, &mut ob);
        let srcs = [
            TensorRef::new(xd, bytemuck::cast_slice(x)),
            TensorRef::new(pd, bytemuck::cast_slice(pos)),
        ];
        crate::dsv4_testutil::run_one(op, &dst, &srcs, false);
        bytemuck::cast_slice(&ob).to_vec()
    }

    #[test]
    fn compress_omega_table_matches_spec() {
        // spec §5 "Resulting compress ω_k" (f32 reference values), θ_k at p = 1
        let op = Rope::ds4_compress(448, false);
        let RopeScaling::Yarn {
            orig_ctx,
            beta_fast,
            beta_slow,
            ..
        } = op.scaling
        else {
            unreachable!()
        };
        assert_eq!(corr_dims(&op, orig_ctx, beta_fast, beta_slow), [15.0, 25.0]);
        let mut th = [0f32; 32];
        thetas(&op, 1.0, &mut th);
        for (k, want) in [
            (0usize, 1.0f64),
            (1, 0.687656),
            (8, 0.05),
            (15, 0.00363554),
            (16, 0.00226563),
            (24, 1.95312e-05),
            (25, 5.37231e-06),
            (31, 5.68053e-07),
        ] {
            let rel = (th[k] as f64 - want).abs() / want;
            assert!(rel < 2e-5, "ω_{k} = {} want {want} (rel {rel:.2e})", th[k]);
        }
        // main: 10000^(−2k/64), k = 31 → 1.33352e-4
        let mut th = [0f32; 32];
        thetas(&Rope::ds4_main(448, false), 1.0, &mut th);
        assert!((th[1] as f64 - 0.749894).abs() < 1e-6);
        assert!((th[31] as f64 - 1.33352e-4).abs() / 1.33352e-4 < 2e-5);
    }

    #[test]
    fn hand_computed_rotation() {
        // D = 8, rotate dims [2, 6) at p = 3 with base 10000, 4 dims: ω = (1, 10000^(−1/2))
        let op = Rope {
            n_dims: 4,
            n_offs: 2,
            freq_base: 10000.0,
            scaling: RopeScaling::None,
            inverse: false,
            in_place: false,
        };
        let x: Vec<f32> = (1..=8).map(|i| i as f32).collect();
        let y = run(&op, [8, 1, 1], &x, &[3]);
        let (a, b) = (3.0f64, 0.03f64);
        let want = [
            1.0,
            2.0,
            3.0 * a.cos() - 4.0 * a.sin(),
            3.0 * a.sin() + 4.0 * a.cos(),
            5.0 * b.cos() - 6.0 * b.sin(),
            5.0 * b.sin() + 6.0 * b.cos(),
            7.0,
            8.0,
        ];
        for (i, (&g, w)) in y.iter().zip(want).enumerate() {
            assert!((g as f64 - w).abs() < 1e-5, "dim {i}: {g} vs {w}");
        }
        // the inverse rotates the other way
        let yi = run(
            &Rope {
                inverse: true,
                ..op
            },
            [8, 1, 1],
            &x,
            &[3],
        );
        assert!((yi[2] as f64 - (3.0 * a.cos() + 4.0 * a.sin())).abs() < 1e-5);
        assert!((yi[3] as f64 - (-3.0 * a.sin() + 4.0 * a.cos())).abs() < 1e-5);
    }

    #[test]
    fn inverse_undoes_rope_and_position_zero_is_identity() {
        let ne = [512, 3, 4];
        let x = crate::case::CaseRng::new(5).f32s(512 * 12, 1.0);
        let pos = [0, 1, 777, 65535];
        for op in [Rope::ds4_main(448, false), Rope::ds4_compress(448, false)] {
            let y = run(&op, ne, &x, &pos);
            let back = run(
                &Rope {
                    inverse: true,
                    ..op.clone()
                },
                ne,
                &y,
                &pos,
            );
            for (i, (&a, &b)) in back.iter().zip(&x).enumerate() {
                assert!((a - b).abs() < 1e-6, "element {i}: {a} vs {b}");
            }
            for (i, (&a, &b)) in y.iter().zip(&x).enumerate() {
                let (d, t) = (i % 512, i / (512 * 3));
                if d < 448 || t == 0 {
                    // outside the slice or at position 0: untouched, bit for bit
                    assert_eq!(a.to_bits(), b.to_bits(), "element {i}");
                } else if d >= 448 && t == 2 {
                    assert_ne!(a, b, "element {i} should rotate");
                }
            }
        }
    }
}
