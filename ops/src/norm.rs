//! RMS_NORM kernel (optionally fused with the weight multiply); sums in f32 in index order
//! like ggml (`sum += x²`, `scale = 1/sqrt(sum/n + eps)`).

use crate::case::CaseBuilder;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::norm::RmsNorm;

fn rows(eps: f32, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
    let n = dst.desc.ne[0];
    let w = srcs.get(1);
    for r in cx.my_rows(dst.desc.nrows()) {
        let out = dst.row_f32_mut(r);
        srcs[0].row_to_f32(r, out);
        let mut sum = 0.0f64;
        for &v in out.iter() {
            sum += (v as f64) * (v as f64);
        }
        let scale = 1.0 / ((sum / n as f64) as f32 + eps).sqrt();
        match w {
            Some(w) => {
                let wr = w.row_f32(0);
                for (o, &wv) in out.iter_mut().zip(wr) {
                    *o = *o * scale * wv;
                }
            }
            None => out.iter_mut().for_each(|o| *o *= scale),
        }
    }
}

impl CpuKernel for RmsNorm {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows(self.eps, cx, dst, srcs);
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows(self.eps, cx, dst, srcs);
    }
    fn cases() -> Vec<Case> {
        let mut v = Vec::new();
        for (n, rows, weighted, quick) in [
            (7usize, 3usize, false, true),
            (512, 5, true, true),
            (4096, 4, true, false),
            (16384, 1, false, false),
            (1, 2, true, true),
        ] {
            let mut b = CaseBuilder::new(8);
            let x = b.input_f32("x", &[n, rows], 2.0).expect("case");
            let out = if weighted {
                let w = b.input_f32("w", &[n], 1.0).expect("case");
                b.g.rms_norm_w(x, w, 1e-6).expect("case")
            } else {
                b.g.rms_norm(x, 1e-6).expect("case")
            };
            v.push(
                b.finish(
                    format!("RMS_NORM {{{n},{rows}}} weighted={weighted}"),
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
