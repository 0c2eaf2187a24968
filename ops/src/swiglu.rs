//! SWIGLU kernel: `silu(min(g, limit)) · clamp(u, −limit, limit)` element-wise, in f32 with
//! ggml's `silu(x) = x / (1 + e^−x)`. NaN propagates from either operand (the clamps are
//! written so a NaN is not replaced by the limit).

use crate::case::CaseBuilder;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::swiglu::Swiglu;

/// One element of the clamped SwiGLU.
pub fn swiglu(g: f32, u: f32, limit: Option<f32>) -> f32 {
    let (g, u) = match limit {
        Some(l) => (
            if g > l { l } else { g },
            if u > l {
                l
            } else if u < -l {
                -l
            } else {
                u
            },
        ),
        None => (g, u),
    };
    g / (1.0 + (-g).exp()) * u
}

fn rows(s: &Swiglu, cx: &KernelCx, dst: &TensorMut, srcs: &[TensorRef], fast: bool) {
    let (g, u) = (&srcs[0], &srcs[1]);
    let contiguous = fast && g.desc.rows_contiguous() && u.desc.rows_contiguous();
    for r in cx.my_rows(dst.desc.nrows()) {
        let out = dst.row_f32_mut(r);
        if contiguous {
            for ((o, &a), &b) in out.iter_mut().zip(g.row_f32(r)).zip(u.row_f32(r)) {
                *o = swiglu(a, b, s.limit);
            }
        } else {
            for (i, o) in out.iter_mut().enumerate() {
                *o = swiglu(g.get_flat(i, r), u.get_flat(i, r), s.limit);
            }
        }
    }
}

impl CpuKernel for Swiglu {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows(self, cx, dst, srcs, false);
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows(self, cx, dst, srcs, true);
    }
    fn cases() -> Vec<Case> {
        let mut v = Vec::new();
        for (shape, limit, quick) in [
            (vec![1usize], Some(10.0f32), true),
            (vec![17, 3], Some(10.0), true),
            (vec![17, 3], None, true),
            (vec![64, 5, 2], Some(2.5), true),
            (vec![2048, 6, 4], Some(10.0), false), // routed experts, 4 tokens
            (vec![2048, 4], Some(10.0), false),    // shared expert
        ] {
            let mut b = CaseBuilder::new(31);
            // ±20 so that both clamps are exercised
            let g = b.input_f32("g", &shape, 20.0).expect("case");
            let u = b.input_f32("u", &shape, 20.0).expect("case");
            let out = b.g.swiglu(g, u, limit).expect("case");
            v.push(
                b.finish(format!("SWIGLU {shape:?} limit={limit:?}"), out, 0.0, quick)
                    .expect("case"),
            );
        }
        // non-contiguous: transposed gate, permuted up
        let mut b = CaseBuilder::new(32);
        let g = b.input_f32("g", &[5, 9], 20.0).expect("case");
        let gt = b.g.transpose(g).expect("case");
        let u = b.input_f32("u", &[5, 1, 9], 20.0).expect("case");
        let up = b.g.permute(u, [1, 2, 0, 3]).expect("case");
        let out = b.g.swiglu(gt, up, Some(10.0)).expect("case");
        v.push(
            b.finish("SWIGLU transposed/permuted".into(), out, 0.0, true)
                .expect("case"),
        );
        v
    }
}

#[cfg(test)]
mod tests {
    use super::swiglu;

    #[test]
    fn hand_computed() {
        let close = |a: f32, b: f32| (a - b).abs() <= 1e-5 * b.abs();
        // gate clamped to 10 before silu, up clamped to −10: silu(10)·(−10)
        assert!(close(swiglu(12.0, -15.0, Some(10.0)), -99.995_46));
        // silu(−1) = −1/(1+e) = −0.268941…; ·2
        assert!(close(swiglu(-1.0, 2.0, Some(10.0)), -0.537_882_8));
        // the gate is not clamped from below: silu(−30)·1 ≈ −2.8e−12
        assert!(close(swiglu(-30.0, 1.0, Some(10.0)), -2.807_287e-12));
        // no limit: silu(12)·(−15)
        assert!(close(swiglu(12.0, -15.0, None), -179.998_9));
        assert_eq!(swiglu(0.0, 5.0, Some(10.0)), 0.0);
        assert!(swiglu(f32::NAN, 1.0, Some(10.0)).is_nan());
        assert!(swiglu(1.0, f32::NAN, Some(10.0)).is_nan());
    }
}
