//! CPY kernel: strided read, contiguous write, f32/f16/bf16 conversion.

use crate::case::CaseBuilder;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::cpy::Cpy;
use quant::DType;

fn rows(cx: &KernelCx, dst: &TensorMut, src: &TensorRef) {
    let n = dst.desc.ne[0];
    for r in cx.my_rows(dst.desc.nrows()) {
        let out = dst.row_bytes_mut(r);
        for i in 0..n {
            let v = src.get_flat(i, r);
            match dst.desc.dtype {
                DType::F32 => out[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes()),
                DType::F16 => out[2 * i..2 * i + 2]
                    .copy_from_slice(&quant::scalar::f32_to_f16(v).to_le_bytes()),
                _ => out[2 * i..2 * i + 2]
                    .copy_from_slice(&quant::scalar::f32_to_bf16(v).to_le_bytes()),
            }
        }
    }
}

impl CpuKernel for Cpy {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows(cx, dst, &srcs[0]);
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows(cx, dst, &srcs[0]);
    }
    fn cases() -> Vec<Case> {
        let mut v = Vec::new();
        for (t, tol) in [(DType::F16, 1e-6), (DType::BF16, 1e-4)] {
            let mut b = CaseBuilder::new(2);
            let x = b.input_f32("x", &[33, 7], 2.0).expect("case");
            let xt = b.g.transpose(x).expect("case");
            let h = b.g.cpy(xt, t).expect("case");
            let out = b.g.cpy(h, DType::F32).expect("case");
            v.push(
                b.finish(format!("CPY f32{{33,7}}ᵀ → {t} → f32"), out, tol, true)
                    .expect("case"),
            );
        }
        v
    }
}
