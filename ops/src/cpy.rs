//! CPY kernel: strided read, contiguous write, f32/f16/bf16 conversion.
//!
//! The forward kernel copies an F32 source whose rows are contiguous in memory (any row
//! strides: the permuted views `cont` makes contiguous) a row slice at a time instead of
//! one element accessor call per element; the same values (a copy, or the same conversion
//! function per element).

use crate::case::CaseBuilder;
use crate::tensor::split_row;
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

/// The forward path for an F32 source with contiguous rows (`nb[0] == 4`).
fn rows_f32(cx: &KernelCx, dst: &TensorMut, src: &TensorRef) {
    let (d, n) = (&src.desc, dst.desc.ne[0]);
    let b = src.bytes();
    for r in cx.my_rows(dst.desc.nrows()) {
        let (i1, i2, i3) = split_row(d, r);
        let at = i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
        let row = &b[at..at + 4 * n];
        let out = dst.row_bytes_mut(r);
        match dst.desc.dtype {
            DType::F32 => out[..4 * n].copy_from_slice(row),
            t => {
                let conv = if t == DType::F16 {
                    quant::scalar::f32_to_f16
                } else {
                    quant::scalar::f32_to_bf16
                };
                for (o, v) in out.chunks_exact_mut(2).zip(row.chunks_exact(4)) {
                    let v = f32::from_le_bytes([v[0], v[1], v[2], v[3]]);
                    o.copy_from_slice(&conv(v).to_le_bytes());
                }
            }
        }
    }
}

impl CpuKernel for Cpy {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows(cx, dst, &srcs[0]);
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let src = &srcs[0];
        if src.desc.dtype == DType::F32 && src.desc.nb[0] == 4 {
            rows_f32(cx, dst, src);
        } else {
            rows(cx, dst, src);
        }
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
        // permuted (row-contiguous) F32 sources, as `cont` of a permute: the row-slice path
        for (t, tol) in [(DType::F32, 0.0), (DType::F16, 1e-6), (DType::BF16, 1e-4)] {
            let mut b = CaseBuilder::new(3);
            let x = b.input_f32("x", &[37, 5, 3], 2.0).expect("case");
            let xp = b.g.permute(x, [0, 2, 1, 3]).expect("case");
            let h = b.g.cpy(xp, t).expect("case");
            let out = b.g.cpy(h, DType::F32).expect("case");
            v.push(
                b.finish(
                    format!("CPY f32{{37,5,3}} permuted → {t} → f32"),
                    out,
                    tol,
                    true,
                )
                .expect("case"),
            );
        }
        v
    }
}
