//! VIEW kernel: nothing to do — the planner placed the view inside its source's buffer.

use crate::case::CaseBuilder;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::view::View;

impl CpuKernel for View {
    fn reference(&self, _cx: &mut KernelCx, _dst: &TensorMut, _srcs: &[TensorRef]) {}
    fn forward(&self, _cx: &mut KernelCx, _dst: &TensorMut, _srcs: &[TensorRef]) {}
    fn cases() -> Vec<Case> {
        // a permuted view made contiguous again, then reshaped and viewed with an offset
        let mut b = CaseBuilder::new(1);
        let x = b.input_f32("x", &[5, 3, 2], 1.0).expect("case");
        let p = b.g.permute(x, [2, 0, 1, 3]).expect("case");
        let c = b.g.cont(p).expect("case");
        let r = b.g.reshape(c, &[15, 2]).expect("case");
        let v =
            b.g.view(r, [7, 2, 1, 1], [4, 60, 120, 120], 8)
                .expect("case");
        let out = b.g.cont(v).expect("case");
        vec![b
            .finish("VIEW permute/reshape/offset".into(), out, 0.0, true)
            .expect("case")]
    }
}
