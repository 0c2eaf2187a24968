//! GET_ROWS kernel: each thread dequantizes its share of the requested rows.

use crate::case::CaseBuilder;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::get_rows::GetRows;
use graph::TensorDesc;
use quant::DType;

fn rows(cx: &KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
    let (table, ids) = (&srcs[0], srcs[1].i32s());
    let (nrows, tb) = (table.desc.ne[1], table.desc.ne[2]);
    let n = srcs[1].desc.ne[0];
    let row_len = table.desc.row_bytes();
    for r in cx.my_rows(ids.len()) {
        let (id, b) = (ids[r], if tb == 1 { 0 } else { r / n });
        let valid = id >= 0 && (id as usize) < nrows;
        let off = if valid {
            id as usize * table.desc.nb[1] + b * table.desc.nb[2]
        } else {
            0
        };
        let bytes = &table.bytes()[off..off + row_len];
        if table.desc.dtype == DType::I32 {
            let out = dst.row_i32_mut(r);
            if valid {
                for (o, c) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                    *o = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
            } else {
                out.fill(-1);
            }
            continue;
        }
        let out = dst.row_f32_mut(r);
        match (valid, table.desc.dtype.info().dequantize) {
            (true, Some(f)) => f(bytes, out),
            _ => out.fill(f32::NAN),
        }
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
        // batched: per-token routing weights s[idx] with s {1, 16, T=3}, idx {6, 3}
        let mut b = CaseBuilder::new(33);
        let s = b.input_f32("s", &[1, 16, 3], 1.0).expect("case");
        let ids = b
            .input_i32(
                "ids",
                &[0, 5, 15, 2, 2, 9, 1, 1, 1, 1, 1, 1, 14, 13, 12, 11, 10, 9],
            )
            .expect("case");
        let ids = b.g.reshape(ids, &[6, 3]).expect("case");
        let out = b.g.get_rows(s, ids).expect("case");
        v.push(
            b.finish("GET_ROWS batched f32{1,16,3}[{6,3}]".into(), out, 0.0, true)
                .expect("case"),
        );
        // i32 table (hash routing): gathered as i32
        let mut b = CaseBuilder::new(35);
        let tid2eid: Vec<i32> = (0..6 * 9).map(|i| i * 7 % 16).collect();
        let td = TensorDesc::new(DType::I32, &[6, 9]).expect("case");
        let tbl = b
            .input_data("tid2eid", td, bytemuck::cast_slice(&tid2eid).to_vec())
            .expect("case");
        let ids = b.input_i32("ids", &[8, 0, 3]).expect("case");
        let out = b.g.get_rows(tbl, ids).expect("case");
        v.push(
            b.finish("GET_ROWS i32{6,9}[3]".into(), out, 0.0, true)
                .expect("case"),
        );
        // out-of-range ids → NaN rows
        let mut b = CaseBuilder::new(34);
        let d = TensorDesc::f32(&[4, 3]).expect("case");
        let tbl = b.input_f32("t", &d.ne[..2], 1.0).expect("case");
        let ids = b.input_i32("ids", &[-1, 2, 3]).expect("case");
        let out = b.g.get_rows(tbl, ids).expect("case");
        v.push(
            b.finish("GET_ROWS invalid ids".into(), out, 0.0, true)
                .expect("case"),
        );
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Scratch;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn gathers_the_named_rows() {
        let table: Vec<f32> = (0..12).map(|i| i as f32).collect(); // {3, 4}
        let td = TensorDesc::f32(&[3, 4]).unwrap();
        let idd = TensorDesc::new(DType::I32, &[3]).unwrap();
        let ids = [2i32, 0, 9];
        let srcs = [
            TensorRef::new(td, bytemuck::cast_slice(&table)),
            TensorRef::new(idd, bytemuck::cast_slice(&ids)),
        ];
        let od = TensorDesc::f32(&[3, 3]).unwrap();
        let mut out = vec![0u8; od.nbytes()];
        let dst = TensorMut::new(od, &mut out);
        let (c, mut s) = (AtomicUsize::new(0), Scratch::default());
        GetRows.reference(
            &mut KernelCx {
                ith: 0,
                nth: 1,
                chunk: &c,
                scratch: &mut s,
                kernels: None,
                cpu: quant::simd::CpuLevel::detect(),
                experts: None,
                block_scales: None,
            },
            &dst,
            &srcs,
        );
        let got: &[f32] = bytemuck::cast_slice(&out);
        assert_eq!(&got[..6], &[6.0, 7.0, 8.0, 0.0, 1.0, 2.0]);
        assert!(got[6..].iter().all(|v| v.is_nan()));
    }
}
