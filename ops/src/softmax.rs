//! SOFT_MAX kernels (formula in `graph::op::softmax`).
//!
//! Reference: everything in f64 (logits `scale·x + mask`, max including the sink, exps, sum),
//! two passes, any source strides. Forward (ggml `soft_max_f32` numerics): logits and exps in
//! f32, the sum accumulated in f64, multiply by the f64 reciprocal; rows split by `my_rows`.
//! A row whose max (sink included) is `−∞` is written as zeros by both.

use crate::case::CaseBuilder;
use crate::tensor::split_row;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::softmax::SoftMax;
use graph::TensorDesc;
use quant::DType;

fn sink(op: &SoftMax, srcs: &[TensorRef], h: usize) -> Option<f32> {
    op.sinks_src().map(|i| srcs[i].get(h, 0, 0, 0))
}

impl CpuKernel for SoftMax {
    fn reference(&self, _cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let x = &srcs[0];
        let n = dst.desc.ne[0];
        let mut z = vec![0f64; n];
        for r in 0..dst.desc.nrows() {
            let (i1, i2, i3) = split_row(&dst.desc, r);
            for (i, zi) in z.iter_mut().enumerate() {
                let m = self.mask_src().map_or(0.0, |s| srcs[s].get(i, i2, i3, 0));
                *zi = self.scale as f64 * x.get(i, i1, i2, i3) as f64 + m as f64;
            }
            let s = sink(self, srcs, i1).map(f64::from);
            let max = z.iter().copied().chain(s).fold(f64::NEG_INFINITY, f64::max);
            let out = dst.row_f32_mut(r);
            if max == f64::NEG_INFINITY {
                out.fill(0.0);
                continue;
            }
            let den: f64 = z.iter().map(|&v| (v - max).exp()).sum::<f64>()
                + s.map_or(0.0, |s| (s - max).exp());
            for (o, &v) in out.iter_mut().zip(&z) {
                *o = ((v - max).exp() / den) as f32;
            }
        }
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let x = &srcs[0];
        let mask = self.mask_src().map(|i| &srcs[i]);
        for r in cx.my_rows(dst.desc.nrows()) {
            let (i1, i2, i3) = split_row(&dst.desc, r);
            let out = dst.row_f32_mut(r);
            x.row_to_f32(r, out);
            let mut max = f32::NEG_INFINITY;
            for (i, o) in out.iter_mut().enumerate() {
                let m = mask.map_or(0.0, |m| m.get(i, i2, i3, 0));
                *o = *o * self.scale + m;
                max = max.max(*o);
            }
            let s = sink(self, srcs, i1);
            if let Some(s) = s {
                max = max.max(s);
            }
            if max == f32::NEG_INFINITY {
                out.fill(0.0);
                continue;
            }
            let mut sum = 0f64;
            for o in out.iter_mut() {
                *o = (*o - max).exp();
                sum += *o as f64;
            }
            if let Some(s) = s {
                sum += (s - max).exp() as f64;
            }
            let inv = (1.0 / sum) as f32;
            out.iter_mut().for_each(|o| *o *= inv);
        }
    }
    fn cases() -> Vec<Case> {
        let mut v = Vec::new();
        // (n, H, T, mask dtype, sinks, permuted x, quick)
        let configs = [
            (1usize, 1usize, 1usize, None, false, false, true),
            (7, 3, 5, Some(DType::F32), true, false, true),
            (7, 3, 5, Some(DType::F16), false, false, true),
            (33, 4, 3, Some(DType::F16), true, true, true),
            (129, 2, 2, None, true, false, true),
            (640, 64, 1, Some(DType::F16), true, false, false),
            (640, 64, 7, Some(DType::F32), true, false, false),
        ];
        for (n, h, t, mdt, sinks, perm, quick) in configs {
            let mut b = CaseBuilder::new(31);
            let x = if perm {
                let raw = b.input_f32("x", &[n, t, h], 4.0).expect("case");
                b.g.permute(raw, [0, 2, 1, 3]).expect("case")
            } else {
                b.input_f32("x", &[n, h, t], 4.0).expect("case")
            };
            let mask = mdt.map(|dt| {
                // causal + window 4 mask for tokens at positions n−T+t over keys 0..n, and
                // token 0 of a T > 1 case fully masked (checks the all-zero / sink-only rows)
                let mut m = vec![0f32; n * t];
                for tt in 0..t {
                    let p = (n - t + tt) as i64;
                    for k in 0..n {
                        let vis = (k as i64) <= p && (k as i64) > p - 4 && !(t > 1 && tt == 0);
                        m[tt * n + k] = if vis { 0.0 } else { f32::NEG_INFINITY };
                    }
                }
                mask_input(&mut b, dt, &[n, t], &m)
            });
            let sk = sinks.then(|| b.input_f32("sinks", &[h], 2.0).expect("case"));
            let out = b.g.soft_max(x, mask, sk, 0.7).expect("case");
            v.push(
                b.finish(
                    format!("SOFT_MAX {{{n},{h},{t}}} mask={mdt:?} sinks={sinks} perm={perm}"),
                    out,
                    1e-12,
                    quick,
                )
                .expect("case"),
            );
        }
        v
    }
}

/// A named mask input `"mask"` of dtype `dt` (F32 or F16) with values `m`.
pub(crate) fn mask_input(
    b: &mut CaseBuilder,
    dt: DType,
    ne: &[usize],
    m: &[f32],
) -> graph::TensorId {
    let d = TensorDesc::new(dt, ne).expect("case");
    let bytes = match dt {
        DType::F16 => m
            .iter()
            .flat_map(|&v| quant::scalar::f32_to_f16(v).to_le_bytes())
            .collect(),
        _ => bytemuck::cast_slice(m).to_vec(),
    };
    b.input_data("mask", d, bytes).expect("case")
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph::OpDef;

    /// Run reference (`fwd = false`) or forward on one thread; sources contiguous.
    fn run(op: &SoftMax, srcs: &[(TensorDesc, Vec<u8>)], fwd: bool) -> Vec<f32> {
        let descs: Vec<&TensorDesc> = srcs.iter().map(|(d, _)| d).collect();
        let od = op.infer(&descs).unwrap();
        let mut ob = vec![0u8; od.nbytes()];
        let dst = TensorMut::new(od, &mut ob);
        let refs: Vec<TensorRef> = srcs.iter().map(|(d, b)| TensorRef::new(*d, b)).collect();
        crate::dsv4_testutil::run_one(op, &dst, &refs, fwd);
        bytemuck::cast_slice(&ob).to_vec()
    }

    fn f32s(ne: &[usize], v: &[f32]) -> (TensorDesc, Vec<u8>) {
        (
            TensorDesc::f32(ne).unwrap(),
            bytemuck::cast_slice(v).to_vec(),
        )
    }

    #[test]
    fn hand_computed_with_mask_and_sinks() {
        // x {3, H=2, T=1}, scale 2, mask {3, 1} = [0, −∞, 0], sinks [0, ln 2]
        let op = SoftMax {
            scale: 2.0,
            has_mask: true,
            has_sinks: true,
        };
        let inf = f32::NEG_INFINITY;
        let srcs = [
            f32s(&[3, 2, 1], &[0.0, 5.0, 0.5, 0.25, 9.0, 0.0]),
            f32s(&[3, 1], &[0.0, inf, 0.0]),
            f32s(&[2], &[0.0, 2f32.ln()]),
        ];
        let (e, e05) = (1f64.exp(), 0.5f64.exp());
        // head 0: logits 0, −∞, 1 and sink 0 → [1, 0, e]/(2 + e)
        // head 1: logits 0.5, −∞, 0 and sink ln 2 → [e^0.5, 0, 1]/(e^0.5 + 1 + 2)
        let want = [
            1.0 / (2.0 + e),
            0.0,
            e / (2.0 + e),
            e05 / (e05 + 3.0),
            0.0,
            1.0 / (e05 + 3.0),
        ];
        for fwd in [false, true] {
            let y = run(&op, &srcs, fwd);
            for (i, (&g, w)) in y.iter().zip(want).enumerate() {
                assert!((g as f64 - w).abs() < 1e-6, "fwd={fwd} {i}: {g} vs {w}");
            }
        }
    }

    #[test]
    fn fully_masked_rows_are_zero_and_plain_rows_sum_to_one() {
        let inf = f32::NEG_INFINITY;
        let op = SoftMax {
            scale: 1.0,
            has_mask: true,
            has_sinks: false,
        };
        let srcs = [
            f32s(&[2, 1, 2], &[1.0, 2.0, 3.0, 4.0]),
            f32s(&[2, 2], &[inf, inf, 0.0, 0.0]),
        ];
        for fwd in [false, true] {
            let y = run(&op, &srcs, fwd);
            assert_eq!(&y[..2], &[0.0, 0.0]);
            let e = 1f64.exp();
            assert!((y[2] as f64 - 1.0 / (1.0 + e)).abs() < 1e-7);
            assert!((y[2] + y[3] - 1.0).abs() < 1e-6);
        }
        // a sink alone absorbs the whole mass: still zeros
        let op = SoftMax {
            has_sinks: true,
            ..op
        };
        let srcs = [srcs[0].clone(), srcs[1].clone(), f32s(&[1], &[0.3])];
        for fwd in [false, true] {
            assert_eq!(&run(&op, &srcs, fwd)[..2], &[0.0, 0.0]);
        }
    }
}
