//! INDEX_MASK kernel: one token (row) per thread share.

use crate::case::CaseBuilder;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::index_mask::IndexMask;

fn rows(cx: &KernelCx, dst: &TensorMut, ids: &TensorRef) {
    let k = ids.desc.ne[0];
    let all = ids.i32s();
    for t in cx.my_rows(dst.desc.nrows()) {
        let out = dst.row_f32_mut(t);
        out.fill(f32::NEG_INFINITY);
        for &e in &all[t * k..(t + 1) * k] {
            if e >= 0 && (e as usize) < out.len() {
                out[e as usize] = 0.0;
            }
        }
    }
}

impl CpuKernel for IndexMask {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows(cx, dst, &srcs[0]);
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows(cx, dst, &srcs[0]);
    }
    fn cases() -> Vec<Case> {
        let mut b = CaseBuilder::new(40);
        let ids = b
            .input_i32("ids", &[3, 0, -1, 7, 7, 2, 9, 100, -1])
            .expect("case");
        let ids = b.g.reshape(ids, &[3, 3]).expect("case");
        let m = b.g.index_mask(ids, 8).expect("case");
        // −∞ entries compare as equal non-finite values in test-ops
        vec![b
            .finish("INDEX_MASK {3,3} → {8,3}".into(), m, 0.0, true)
            .expect("case")]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Scratch;
    use graph::TensorDesc;
    use quant::DType;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn zeros_at_picks() {
        let ids = [1i32, -1, 4, 0];
        let src = [TensorRef::new(
            TensorDesc::new(DType::I32, &[2, 2]).unwrap(),
            bytemuck::cast_slice(&ids),
        )];
        let od = TensorDesc::f32(&[3, 2]).unwrap();
        let mut out = vec![0u8; od.nbytes()];
        let dst = TensorMut::new(od, &mut out);
        let (c, mut s) = (AtomicUsize::new(0), Scratch::default());
        IndexMask { n: 3 }.reference(
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
            &src,
        );
        let ni = f32::NEG_INFINITY;
        assert_eq!(
            bytemuck::cast_slice::<u8, f32>(&out),
            &[ni, 0.0, ni, 0.0, ni, ni]
        );
    }
}
