//! MOE_ROUTE / MASK_IDS kernels: one token (row) per owning thread.

use crate::case::CaseBuilder;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::knobs::{apply_routing, LayerMoe, MoeKnobs, Rescale};
use graph::op::moe_route::{MaskIds, MoeRoute};
use std::sync::Arc;

fn route(op: &MoeRoute, cx: &KernelCx, dst: &TensorMut, w: &TensorRef) {
    let m = op.knobs.get(op.layer);
    for t in cx.my_rows(dst.desc.nrows()) {
        let out = dst.row_f32_mut(t);
        out.copy_from_slice(w.row_f32(t));
        apply_routing(&m, out);
    }
}

fn mask(cx: &KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
    let k = srcs[0].desc.ne[0];
    let ids = srcs[0].i32s();
    for t in cx.my_rows(dst.desc.nrows()) {
        let w = srcs[1].row_f32(t);
        for (j, o) in dst.row_i32_mut(t).iter_mut().enumerate() {
            *o = if w[j] == 0.0 { -1 } else { ids[t * k + j] };
        }
    }
}

impl CpuKernel for MoeRoute {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        route(self, cx, dst, &srcs[0]);
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        route(self, cx, dst, &srcs[0]);
    }
    fn cases() -> Vec<Case> {
        let knobs = Arc::new(MoeKnobs::new(2));
        knobs.set(
            1,
            LayerMoe {
                top_k: 4,
                rescale: Rescale::L2,
                min_weight: 0.1,
                min_k: 2,
                keep_experts: 0,
                keep_shared: 0,
            },
        );
        let mut v = Vec::new();
        for layer in [0, 1] {
            let mut b = CaseBuilder::new(70);
            let w = b.input_f32("w", &[6, 5], 0.5).expect("case");
            let out = b.g.moe_route(w, layer, knobs.clone()).expect("case");
            v.push(
                b.finish(format!("MOE_ROUTE layer {layer}"), out, 0.0, true)
                    .expect("case"),
            );
        }
        v
    }
}

impl CpuKernel for MaskIds {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        mask(cx, dst, srcs);
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        mask(cx, dst, srcs);
    }
    fn cases() -> Vec<Case> {
        let mut b = CaseBuilder::new(71);
        let ids = b.input_i32("ids", &[3, 1, 4, 1, 5, 9]).expect("case");
        let ids = b.g.reshape(ids, &[3, 2]).expect("case");
        let wd = graph::TensorDesc::f32(&[3, 2]).expect("case");
        let w = b
            .input_data(
                "w",
                wd,
                bytemuck::cast_slice(&[0.5f32, 0.0, 0.2, 0.0, 0.3, 0.0]).to_vec(),
            )
            .expect("case");
        let out = b.g.mask_ids(ids, w).expect("case");
        vec![b.finish("MASK_IDS".into(), out, 0.0, true).expect("case")]
    }
}
