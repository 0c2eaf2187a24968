//! SET_ROWS kernel: source rows split statically over threads; each writes its rows' slots.

use crate::case::CaseBuilder;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::set_rows::SetRows;
use graph::TensorDesc;
use quant::DType;

fn rows(cx: &KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
    let (src, idx) = (&srcs[1], srcs[2].i32s());
    let slots = dst.desc.ne[1];
    for r in cx.my_rows(idx.len()) {
        let i = idx[r];
        if i < 0 || i as usize >= slots {
            continue;
        }
        let out = dst.row_bytes_mut(i as usize);
        for c in 0..dst.desc.ne[0] {
            let v = src.get_flat(c, r);
            match dst.desc.dtype {
                DType::F16 => out[2 * c..2 * c + 2]
                    .copy_from_slice(&quant::scalar::f32_to_f16(v).to_le_bytes()),
                _ => out[4 * c..4 * c + 4].copy_from_slice(&v.to_le_bytes()),
            }
        }
    }
}

impl CpuKernel for SetRows {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows(cx, dst, srcs);
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows(cx, dst, srcs);
    }
    fn cases() -> Vec<Case> {
        let mut v = Vec::new();
        for t in [DType::F32, DType::F16] {
            let mut b = CaseBuilder::new(60);
            let cache =
                b.g.state("cache", TensorDesc::new(t, &[7, 5]).expect("case"))
                    .expect("case");
            let rows = b.input_f32("rows", &[7, 4], 2.0).expect("case");
            let idx = b.input_i32("idx", &[3, -1, 0, 9]).expect("case");
            let c2 = b.g.set_rows(cache, rows, idx).expect("case");
            let rows2 = b.input_f32("rows2", &[7, 1], 2.0).expect("case");
            let idx2 = b.input_i32("idx2", &[4]).expect("case");
            let c3 = b.g.set_rows(c2, rows2, idx2).expect("case");
            let out = b.g.cpy(c3, DType::F32).expect("case");
            v.push(
                b.finish(format!("SET_ROWS {t}{{7,5}} ×2"), out, 0.0, true)
                    .expect("case"),
            );
        }
        v
    }
}
