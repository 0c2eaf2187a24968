//! GET_ROWS kernel: each thread dequantizes its share of the requested rows.

use crate::case::CaseBuilder;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::get_rows::GetRows;
use quant::DType;

fn rows(cx: &KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
    let (table, ids) = (&srcs[0], srcs[1].i32s());
    let nrows = table.desc.ne[1];
    for r in cx.my_rows(ids.len()) {
        let out = dst.row_f32_mut(r);
        let id = ids[r];
        if id < 0 || id as usize >= nrows {
            // out-of-range ids produce NaN rows rather than reading out of bounds
            out.fill(f32::NAN);
            continue;
        }
        table.row_to_f32(id as usize, out);
    }
}

impl CpuKernel for GetRows {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows(cx, dst, srcs);
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows(cx, dst, srcs);
    }
    fn cases() -> Vec<Case> {
        let mut v = Vec::new();
        for t in [
            DType::F32,
            DType::F16,
            DType::BF16,
            DType::Q8_0,
            DType::Q4_K,
            DType::Q6_K,
            DType::IQ2_XXS,
            DType::MXFP4,
            DType::Q2_0,
        ] {
            let mut b = CaseBuilder::new(3);
            let k = if t.block_size() > 32 { 256 } else { 64 };
            let w = b.weight("table", t, &[k, 11], 1.0).expect("case");
            let ids = b.input_i32("ids", &[3, 0, 10, 3, 7]).expect("case");
            let out = b.g.get_rows(w, ids).expect("case");
            v.push(
                b.finish(format!("GET_ROWS {t}{{{k},11}}[5]"), out, 0.0, true)
                    .expect("case"),
            );
        }
        v
    }
}
