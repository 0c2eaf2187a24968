//! HC_PRE / HC_POST kernels (mHC, spec §4.3, §4.10).
//!
//! References are scalar f64 (RMS, mixes, sigmoids, Sinkhorn, collapse) from f32 inputs and
//! rows of `Fn` dequantized to f32. Forward kernels run in f32 in ggml's order:
//! `mix = (Fn·flat)·rsqrt(mean(flat²)+eps)` (the official code's form), Sinkhorn sums start at
//! `eps` and normalise by multiplying with `1/sum` (`ggml_compute_forward_dsv4_hc_comb_f32`).
//! HC_PRE's forward is split over tokens (`my_rows`); a quantized `Fn` is dequantized once per
//! thread; its Σx² is the eight-lane f64 sum of RMS_NORM's forward (skipped when the mixes
//! come premixed, which do not use it). HC_POST's forward claims `(token, 256-column)` chunks, so decode (T = 1) runs on
//! every thread.

use crate::case::CaseBuilder;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::mhc::{HcPost, HcPre, HC, HC_COMB_AT, HC_MIX, HC_POST_AT, HC_PRE_AT};
use quant::DType;

/// Columns per claimed HC_POST chunk.
const POST_CHUNK: usize = 256;

/// f32 dot product with 8 independent accumulators (vectorizes; fixed summation order).
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut tail = 0f32;
    for (x, y) in ra.iter().zip(rb) {
        tail += x * y;
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

fn sigmoid64(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn sigmoid32(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// Reference Sinkhorn in f64 on row-major `L[i][j]` (i = source): row softmax, `+eps`,
/// column normalisation, then `iters − 1` × (row, column) normalisations; divisions by
/// `sum + eps`.
pub fn sinkhorn_f64(l: &[f64; 16], eps: f64, iters: usize) -> [f64; 16] {
    let mut c = [0f64; 16];
    for i in 0..HC {
        let r = &l[HC * i..HC * i + HC];
        let mx = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = r.iter().map(|v| (v - mx).exp()).sum();
        for j in 0..HC {
            c[HC * i + j] = (r[j] - mx).exp() / sum + eps;
        }
    }
    let cols = |c: &mut [f64; 16]| {
        for j in 0..HC {
            let s: f64 = (0..HC).map(|i| c[HC * i + j]).sum::<f64>() + eps;
            (0..HC).for_each(|i| c[HC * i + j] /= s);
        }
    };
    let rows = |c: &mut [f64; 16]| {
        for i in 0..HC {
            let s: f64 = c[HC * i..HC * i + HC].iter().sum::<f64>() + eps;
            c[HC * i..HC * i + HC].iter_mut().for_each(|v| *v /= s);
        }
    };
    cols(&mut c);
    for _ in 1..iters {
        rows(&mut c);
        cols(&mut c);
    }
    c
}

/// f32 Sinkhorn exactly as ggml's `dsv4_hc_comb` CPU kernel (sums start at `eps`, multiply by
/// the reciprocal); same layout and steps as [`sinkhorn_f64`].
pub fn sinkhorn_f32(l: &[f32; 16], eps: f32, iters: usize) -> [f32; 16] {
    let mut c = [0f32; 16];
    for i in 0..HC {
        let r = &l[HC * i..HC * i + HC];
        let mx = r.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut sum = 0f32;
        for j in 0..HC {
            c[HC * i + j] = (r[j] - mx).exp();
            sum += c[HC * i + j];
        }
        let inv = 1.0 / sum;
        c[HC * i..HC * i + HC]
            .iter_mut()
            .for_each(|v| *v = *v * inv + eps);
    }
    let cols = |c: &mut [f32; 16]| {
        for j in 0..HC {
            let mut s = eps;
            (0..HC).for_each(|i| s += c[HC * i + j]);
            let inv = 1.0 / s;
            (0..HC).for_each(|i| c[HC * i + j] *= inv);
        }
    };
    let rows = |c: &mut [f32; 16]| {
        for i in 0..HC {
            let mut s = eps;
            c[HC * i..HC * i + HC].iter().for_each(|v| s += v);
            let inv = 1.0 / s;
            c[HC * i..HC * i + HC].iter_mut().for_each(|v| *v *= inv);
        }
    };
    cols(&mut c);
    for _ in 1..iters {
        rows(&mut c);
        cols(&mut c);
    }
    c
}

/// The 4 stream rows of token `t` of `X {D, 4, T}`.
fn stream_rows<'a>(x: &TensorRef<'a>, t: usize) -> [&'a [f32]; HC] {
    std::array::from_fn(|s| x.row_f32(s + HC * t))
}

impl CpuKernel for HcPre {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let (x, f, scale, base) = (&srcs[0], &srcs[1], &srcs[2], &srcs[3]);
        let (d, m) = (x.desc.ne[0], self.n_mix());
        let (eps, eps_hc) = (self.eps_norm as f64, self.eps_hc as f64);
        let sc = |k: usize| scale.get(k, 0, 0, 0) as f64;
        let bs = |k: usize| base.get(k, 0, 0, 0) as f64;
        let frow = cx.scratch.f32(HC * d);
        for t in 0..x.desc.ne[2] {
            let xs = stream_rows(x, t);
            let ss: f64 = xs
                .iter()
                .flat_map(|r| r.iter())
                .map(|&v| (v as f64).powi(2))
                .sum();
            let r = 1.0 / (ss / (HC * d) as f64 + eps).sqrt();
            let mut mix = [0f64; HC_MIX];
            for (k, mx) in mix.iter_mut().enumerate().take(m) {
                if self.premixed {
                    *mx = f.row_f32(t)[k] as f64;
                    continue;
                }
                f.row_to_f32(k, frow);
                *mx = (0..HC * d)
                    .map(|e| frow[e] as f64 * (xs[e / d][e % d] as f64 * r))
                    .sum();
            }
            let out = dst.row_f32_mut(t);
            let pre: [f64; HC] =
                std::array::from_fn(|s| sigmoid64(mix[s] * sc(0) + bs(s)) + eps_hc);
            for (i, o) in out[..d].iter_mut().enumerate() {
                *o = (0..HC).map(|s| pre[s] * xs[s][i] as f64).sum::<f64>() as f32;
            }
            let extra = &mut out[d..];
            for s in 0..HC {
                extra[HC_PRE_AT + s] = pre[s] as f32;
            }
            if self.head {
                continue;
            }
            for s in 0..HC {
                extra[HC_POST_AT + s] = (2.0 * sigmoid64(mix[HC + s] * sc(1) + bs(HC + s))) as f32;
            }
            let l: [f64; 16] = std::array::from_fn(|k| mix[2 * HC + k] * sc(2) + bs(2 * HC + k));
            let c = sinkhorn_f64(&l, eps_hc, self.sinkhorn_iters);
            for k in 0..16 {
                extra[HC_COMB_AT + k] = c[k] as f32;
            }
        }
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let (x, f, scale, base) = (&srcs[0], &srcs[1], &srcs[2], &srcs[3]);
        let (d, m) = (x.desc.ne[0], self.n_mix());
        let rows = cx.my_rows(x.desc.ne[2]);
        if rows.is_empty() {
            return;
        }
        let sc: [f32; 3] = std::array::from_fn(|k| {
            if k < scale.desc.ne[0] {
                scale.get(k, 0, 0, 0)
            } else {
                0.0
            }
        });
        let bs: Vec<f32> = (0..m).map(|k| base.get(k, 0, 0, 0)).collect();
        let n = HC * d;
        let deq: &[f32] = if f.desc.dtype == DType::F32 || self.premixed {
            &[]
        } else {
            let buf = cx.scratch.f32(m * n);
            for k in 0..m {
                f.row_to_f32(k, &mut buf[k * n..(k + 1) * n]);
            }
            buf
        };
        let frow = |k: usize| -> &[f32] {
            if deq.is_empty() {
                f.row_f32(k)
            } else {
                &deq[k * n..(k + 1) * n]
            }
        };
        for t in rows {
            let xs = stream_rows(x, t);
            // premixed mixes come normalised from their MUL_MAT: no RMS needed
            let rs = if self.premixed {
                1.0
            } else {
                let ss: f64 = xs.iter().map(|r| crate::norm::sum_sq_lanes(r)).sum();
                1.0 / ((ss / n as f64) as f32 + self.eps_norm).sqrt()
            };
            let mut mix = [0f32; HC_MIX];
            for (k, mx) in mix.iter_mut().enumerate().take(m) {
                if self.premixed {
                    *mx = f.row_f32(t)[k];
                    continue;
                }
                let fr = frow(k);
                let mut acc = 0f32;
                for s in 0..HC {
                    acc += dot_f32(&fr[s * d..(s + 1) * d], xs[s]);
                }
                *mx = acc * rs;
            }
            let out = dst.row_f32_mut(t);
            let pre: [f32; HC] =
                std::array::from_fn(|s| sigmoid32(mix[s] * sc[0] + bs[s]) + self.eps_hc);
            for (i, o) in out[..d].iter_mut().enumerate() {
                *o = pre[0] * xs[0][i] + pre[1] * xs[1][i] + pre[2] * xs[2][i] + pre[3] * xs[3][i];
            }
            let extra = &mut out[d..];
            extra[HC_PRE_AT..HC_PRE_AT + HC].copy_from_slice(&pre);
            if self.head {
                continue;
            }
            for s in 0..HC {
                extra[HC_POST_AT + s] = 2.0 * sigmoid32(mix[HC + s] * sc[1] + bs[HC + s]);
            }
            let l: [f32; 16] = std::array::from_fn(|k| mix[2 * HC + k] * sc[2] + bs[2 * HC + k]);
            let c = sinkhorn_f32(&l, self.eps_hc, self.sinkhorn_iters);
            extra[HC_COMB_AT..HC_COMB_AT + 16].copy_from_slice(&c);
        }
    }
    fn cases() -> Vec<Case> {
        let mut v = Vec::new();
        // (D, T, Fn type, head, permuted X, quick)
        for (d, t, ft, head, perm, quick) in [
            (1usize, 1usize, DType::F32, false, false, true),
            (7, 3, DType::F32, false, false, true),
            (64, 5, DType::BF16, false, true, true),
            (64, 2, DType::F16, false, false, true),
            (64, 3, DType::Q8_0, false, false, true),
            (64, 2, DType::Q4_K, false, true, true),
            (16, 3, DType::F32, true, false, true),
            (64, 2, DType::Q8_0, true, true, true),
            (4096, 2, DType::F32, false, false, false),
            (4096, 3, DType::Q8_0, false, true, false),
            (4096, 1, DType::F32, true, false, false),
        ] {
            let m = if head { 4 } else { HC_MIX };
            let mut b = CaseBuilder::new(31);
            let x = if perm {
                let x = b.input_f32("x", &[d, t, HC], 1.5).expect("case");
                b.g.permute(x, [0, 2, 1, 3]).expect("case")
            } else {
                b.input_f32("x", &[d, HC, t], 1.5).expect("case")
            };
            let ws = 3.0 / ((HC * d) as f32).sqrt();
            let f = b.weight("fn", ft, &[HC * d, m], ws).expect("case");
            let scale = b
                .input_f32("scale", &[if head { 1 } else { 3 }], 1.5)
                .expect("case");
            let base = b.input_f32("base", &[m], 1.0).expect("case");
            let out = if head {
                b.g.hc_head(x, f, scale, base, 1e-6, 1e-6)
            } else {
                b.g.hc_pre(x, f, scale, base, HcPre::V4)
            }
            .expect("case");
            let what = if head { "HC_PRE(head)" } else { "HC_PRE" };
            let pm = if perm { " permuted" } else { "" };
            v.push(
                b.finish(format!("{what} D={d} T={t} Fn={ft}{pm}"), out, 1e-10, quick)
                    .expect("case"),
            );
        }
        // premixed: mix = MUL_MAT(Fn, RMS_NORM(flat)) in the graph (llama.cpp's decomposition)
        for (head, ft) in [(false, DType::Q8_0), (true, DType::F32)] {
            let (d, t) = (64usize, 3usize);
            let m = if head { 4 } else { HC_MIX };
            let mut b = CaseBuilder::new(32);
            let x = b.input_f32("x", &[d, HC, t], 1.5).expect("case");
            let f = b.weight("fn", ft, &[HC * d, m], 0.2).expect("case");
            let flat = b.g.reshape(x, &[HC * d, t]).expect("case");
            let u = b.g.rms_norm(flat, 1e-6).expect("case");
            let mix = b.g.mul_mat(f, u).expect("case");
            let scale = b
                .input_f32("scale", &[if head { 1 } else { 3 }], 1.5)
                .expect("case");
            let base = b.input_f32("base", &[m], 1.0).expect("case");
            let op = HcPre {
                head,
                sinkhorn_iters: if head { 0 } else { 20 },
                premixed: true,
                ..HcPre::V4
            };
            let out = b.g.hc_pre(x, mix, scale, base, op).expect("case");
            v.push(
                b.finish(
                    format!("HC_PRE premixed head={head} Fn={ft}"),
                    out,
                    1e-10,
                    true,
                )
                .expect("case"),
            );
        }
        v
    }
}

impl CpuKernel for HcPost {
    fn reference(&self, _cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let (o, x, hc) = (&srcs[0], &srcs[1], &srcs[2]);
        let d = x.desc.ne[0];
        for t in 0..x.desc.ne[2] {
            let (or, xs, h) = (o.row_f32(t), stream_rows(x, t), hc.row_f32(t));
            for j in 0..HC {
                let out = dst.row_f32_mut(j + HC * t);
                let post = h[d + HC_POST_AT + j] as f64;
                for (c, oc) in out.iter_mut().enumerate() {
                    let mut acc = post * or[c] as f64;
                    for i in 0..HC {
                        acc += h[d + HC_COMB_AT + HC * i + j] as f64 * xs[i][c] as f64;
                    }
                    *oc = acc as f32;
                }
            }
        }
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let (o, x, hc) = (&srcs[0], &srcs[1], &srcs[2]);
        let d = x.desc.ne[0];
        let nc = d.div_ceil(POST_CHUNK);
        let total = nc * x.desc.ne[2];
        while let Some(items) = cx.claim(total, 1) {
            for item in items {
                let (t, ch) = (item / nc, item % nc);
                let cols = ch * POST_CHUNK..((ch + 1) * POST_CHUNK).min(d);
                let or = &o.row_f32(t)[cols.clone()];
                let xs: [&[f32]; HC] = stream_rows(x, t).map(|r| &r[cols.clone()]);
                let h = &hc.row_f32(t)[d..];
                for j in 0..HC {
                    let post = h[HC_POST_AT + j];
                    let cm: [f32; HC] = std::array::from_fn(|i| h[HC_COMB_AT + HC * i + j]);
                    let out = dst.row_range_f32_mut(j + HC * t, cols.clone());
                    for (c, oc) in out.iter_mut().enumerate() {
                        *oc = post * or[c]
                            + cm[0] * xs[0][c]
                            + cm[1] * xs[1][c]
                            + cm[2] * xs[2][c]
                            + cm[3] * xs[3][c];
                    }
                }
            }
        }
    }
    fn cases() -> Vec<Case> {
        let mut v = Vec::new();
        // (D, T, permuted X, hc from a real HC_PRE, quick)
        for (d, t, perm, chained, quick) in [
            (1usize, 1usize, false, false, true),
            (7, 3, false, false, true),
            (300, 2, true, false, true),
            (64, 3, false, true, true),
            (513, 1, true, true, true),
            (4096, 3, false, true, false),
            (4096, 1, false, false, false),
        ] {
            let mut b = CaseBuilder::new(41);
            let x = if perm {
                let x = b.input_f32("x", &[d, t, HC], 1.0).expect("case");
                b.g.permute(x, [0, 2, 1, 3]).expect("case")
            } else {
                b.input_f32("x", &[d, HC, t], 1.0).expect("case")
            };
            let o = b.input_f32("o", &[d, t], 1.0).expect("case");
            let hc = if chained {
                let ws = 3.0 / ((HC * d) as f32).sqrt();
                let f = b
                    .weight("fn", DType::F32, &[HC * d, HC_MIX], ws)
                    .expect("case");
                let scale = b.input_f32("scale", &[3], 1.5).expect("case");
                let base = b.input_f32("base", &[HC_MIX], 1.0).expect("case");
                b.g.hc_pre(x, f, scale, base, HcPre::V4).expect("case")
            } else {
                b.input_f32("hc", &[d + HC_MIX, t], 1.0).expect("case")
            };
            let out = b.g.hc_post(o, x, hc).expect("case");
            let pm = if perm { " permuted X" } else { "" };
            let ch = if chained { " (hc from HC_PRE)" } else { "" };
            v.push(
                b.finish(format!("HC_POST D={d} T={t}{pm}{ch}"), out, 1e-10, quick)
                    .expect("case"),
            );
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsv4_testutil::{as_f32, assert_close, run, Src};
    use graph::OpDef;

    /// D = 2, T = 1 inputs shared with the numpy oracle (values printed by an independent
    /// numpy implementation of spec §4.3 in f64).
    fn small_inputs(m: usize, nscale: usize) -> [Src; 4] {
        let x: Vec<f32> = (0..4)
            .flat_map(|s| [(s + 1) as f32, -((s + 1) as f32) * 0.5])
            .collect();
        let f: Vec<f32> = (0..m)
            .flat_map(|k| (0..8).map(move |e| (((k * 8 + e + 1) as f64).sin() * 0.5) as f32))
            .collect();
        let sc = [0.9f32, 1.1, 1.7];
        let bs: Vec<f32> = (0..m).map(|k| ((k as f64).cos() * 0.3) as f32).collect();
        [
            Src::f32(&[2, 4, 1], &x),
            Src::f32(&[8, m], &f),
            Src::f32(&[nscale], &sc[..nscale]),
            Src::f32(&[m], &bs),
        ]
    }

    const NUMPY_PRE: [f64; 26] = [
        4.518029248024024,
        -2.259014624012012, // y
        0.5549006334595875,
        0.6487599283908204,
        0.45593626076772625,
        0.32444999386990414,
        1.0112602976470841,
        1.2705260627205375,
        0.9663802607368907,
        0.9300163669317875,
        0.27751716916978814,
        0.39407192222039344,
        0.17884856867691748,
        0.14956133993290352,
        0.33512648315729554,
        0.3264255377293293,
        0.18753452723446637,
        0.1509124518789113,
        0.17408766509155937,
        0.15118548218834968,
        0.29673392216998945,
        0.3779919305501041,
        0.21326768258135947,
        0.12831605786193018,
        0.3368819819186293,
        0.32153327763808365,
    ];
    /// C after one softmax + one column normalisation (sinkhorn_iters = 1).
    const NUMPY_C1: [f64; 16] = [
        0.28663727110555487,
        0.4053281552847653,
        0.18489857461494905,
        0.15476084888967345,
        0.3274808759215557,
        0.3176506867742708,
        0.1834271941921068,
        0.14774106372725437,
        0.17244911251283818,
        0.14913910370053993,
        0.29421543372907255,
        0.3751236486041836,
        0.21343211367022974,
        0.12788046309978976,
        0.33745649357289054,
        0.32237369365605,
    ];

    fn pre_op(iters: usize, head: bool) -> HcPre {
        HcPre {
            eps_norm: 1e-6,
            eps_hc: 1e-6,
            sinkhorn_iters: iters,
            head,
            premixed: false,
        }
    }

    #[test]
    fn hc_pre_matches_numpy() {
        let s = small_inputs(HC_MIX, 3);
        let srcs: Vec<&Src> = s.iter().collect();
        for fwd in [false, true] {
            let (d, out) = run(&pre_op(20, false), &srcs, fwd, 1);
            assert_eq!(d.ne, [26, 1, 1, 1]);
            assert_close(&as_f32(&out), &NUMPY_PRE, 2e-6);
            let (_, out) = run(&pre_op(1, false), &srcs, fwd, 1);
            assert_close(&as_f32(&out)[2 + HC_COMB_AT..], &NUMPY_C1, 2e-6);
        }
    }

    #[test]
    fn hyper_head_matches_numpy() {
        let s = small_inputs(4, 1);
        let srcs: Vec<&Src> = s.iter().collect();
        for fwd in [false, true] {
            let (d, out) = run(&pre_op(0, true), &srcs, fwd, 1);
            assert_eq!(d.ne, [6, 1, 1, 1]);
            // the head uses Fn rows 0..4, scale[0] and base 0..4: identical y and pre
            assert_close(&as_f32(&out), &NUMPY_PRE[..6], 2e-6);
        }
    }

    #[test]
    fn sinkhorn_is_nearly_doubly_stochastic_and_f32_matches_f64() {
        let l64: [f64; 16] = std::array::from_fn(|k| ((k * 7 % 11) as f64 - 5.0) * 0.4);
        let l32: [f32; 16] = std::array::from_fn(|k| l64[k] as f32);
        let c = sinkhorn_f64(&l64, 1e-6, 20);
        let c32 = sinkhorn_f32(&l32, 1e-6, 20);
        for i in 0..HC {
            let row: f64 = (0..HC).map(|j| c[HC * i + j]).sum();
            let col: f64 = (0..HC).map(|j| c[HC * j + i]).sum();
            assert!((row - 1.0).abs() < 1e-4, "row {i} sums to {row}");
            assert!((col - 1.0).abs() < 1e-5, "col {i} sums to {col}");
        }
        assert_close(&c32, &c, 1e-6);
        // not symmetric: direction matters for HC_POST
        assert!((c[1] - c[4]).abs() > 1e-3);
    }

    #[test]
    fn hc_post_applies_the_transpose_of_c() {
        let o = Src::f32(&[2, 1], &[1.0, -2.0]);
        let x = Src::f32(&[2, 4, 1], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
        let mut h = vec![9.0f32, 9.0, 0.0, 0.0, 0.0, 0.0, 0.5, 1.0, 1.5, 2.0];
        h.extend((0..16).map(|k| (k + 1) as f32 / 10.0)); // C[i][j] = (4i+j+1)/10
        let hc = Src::f32(&[26, 1], &h);
        // X_new[j][c] = post[j]·o[c] + Σ_i C[i][j]·X[i][c], worked by hand
        let want = [15.7, 17.0, 17.8, 18.0, 19.9, 19.0, 22.0, 20.0];
        for fwd in [false, true] {
            let (d, out) = run(&HcPost, &[&o, &x, &hc], fwd, 2);
            assert_eq!(d.ne, [2, 4, 1, 1]);
            assert_close(&as_f32(&out), &want, 1e-5);
        }
    }

    #[test]
    fn hc_y_views_the_collapsed_input() {
        let mut g = graph::Graph::new();
        let p = g
            .input("packed", graph::TensorDesc::f32(&[6 + HC_MIX, 3]).unwrap())
            .unwrap();
        let y = g.hc_y(p, 6).unwrap();
        let d = g.desc(y);
        assert_eq!((d.ne, d.nb[1]), ([6, 3, 1, 1], 4 * (6 + HC_MIX)));
        assert!(g.hc_y(p, 6 + HC_MIX).is_err());
    }

    #[test]
    fn infer_rejects_bad_sources() {
        let s = small_inputs(HC_MIX, 3);
        let d: Vec<&graph::TensorDesc> = s.iter().map(|s| &s.desc).collect();
        assert!(pre_op(20, false).infer(&d).is_ok());
        assert!(pre_op(0, false).infer(&d).is_err());
        assert!(pre_op(0, true).infer(&d).is_err()); // Fn has 24 rows, head wants 4
        let mut bad = d.clone();
        let short = graph::TensorDesc::f32(&[2]).unwrap();
        bad[2] = &short;
        assert!(pre_op(20, false).infer(&bad).is_err());
        let mut tr = s[0].desc;
        tr.nb.swap(0, 1); // rows not contiguous
        bad = d.clone();
        bad[0] = &tr;
        assert!(pre_op(20, false).infer(&bad).is_err());
        let o = graph::TensorDesc::f32(&[2, 1]).unwrap();
        let hc = graph::TensorDesc::f32(&[26, 1]).unwrap();
        assert!(HcPost.infer(&[&o, &s[0].desc, &hc]).is_ok());
        let hc_head = graph::TensorDesc::f32(&[6, 1]).unwrap();
        assert!(HcPost.infer(&[&o, &s[0].desc, &hc_head]).is_err());
    }
}
