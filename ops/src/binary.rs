//! ADD / MUL / DIV kernels with broadcasting of the second operand.

use crate::case::CaseBuilder;
use crate::tensor::split_row;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::binary::{Add, Div, Mul};
use quant::DType;

/// `dst = f(a, b)` with `b` broadcast, for the calling thread's rows. Generic over `f` so it
/// is inlined; rows of two F32 operands with contiguous dimension 0 run over slices (the MoE
/// weighting multiplies 12.6 M elements per layer at a 512-token prefill: with an element
/// accessor and an indirect call per element it took 90 ms), anything else goes through
/// the strided accessor. Same operations per element either way, so the same bits.
fn rows(cx: &KernelCx, dst: &TensorMut, srcs: &[TensorRef], f: impl Fn(f32, f32) -> f32) {
    rows_with(cx, dst, srcs, f, true);
}

/// The reference: every element through the strided accessor.
fn rows_strided(cx: &KernelCx, dst: &TensorMut, srcs: &[TensorRef], f: impl Fn(f32, f32) -> f32) {
    rows_with(cx, dst, srcs, f, false);
}

fn rows_with(
    cx: &KernelCx,
    dst: &TensorMut,
    srcs: &[TensorRef],
    f: impl Fn(f32, f32) -> f32,
    allow_fast: bool,
) {
    let (a, b) = (&srcs[0], &srcs[1]);
    let n = dst.desc.ne[0];
    let f32_rows = |t: &TensorRef| t.desc.dtype == DType::F32 && t.desc.nb[0] == 4;
    let fast = allow_fast && f32_rows(a) && f32_rows(b) && (b.desc.ne[0] == n || b.desc.ne[0] == 1);
    for r in cx.my_rows(dst.desc.nrows()) {
        let (i1, i2, i3) = split_row(&dst.desc, r);
        let (j1, j2, j3) = (i1 % b.desc.ne[1], i2 % b.desc.ne[2], i3 % b.desc.ne[3]);
        let out = dst.row_f32_mut(r);
        if fast {
            let ao = i1 * a.desc.nb[1] + i2 * a.desc.nb[2] + i3 * a.desc.nb[3];
            let bo = j1 * b.desc.nb[1] + j2 * b.desc.nb[2] + j3 * b.desc.nb[3];
            let ab = &a.bytes()[ao..ao + 4 * n];
            let bb = &b.bytes()[bo..bo + 4 * b.desc.ne[0]];
            let av = ab
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
            if b.desc.ne[0] == n {
                let bv = bb
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
                for ((o, x), y) in out.iter_mut().zip(av).zip(bv) {
                    *o = f(x, y);
                }
            } else {
                let y = f32::from_le_bytes([bb[0], bb[1], bb[2], bb[3]]);
                for (o, x) in out.iter_mut().zip(av) {
                    *o = f(x, y);
                }
            }
            continue;
        }
        for (i, o) in out.iter_mut().enumerate().take(n) {
            *o = f(a.get(i, i1, i2, i3), b.get(i % b.desc.ne[0], j1, j2, j3));
        }
    }
}

fn binary_cases(
    name: &str,
    op: fn(
        &mut graph::Graph,
        graph::TensorId,
        graph::TensorId,
    ) -> Result<graph::TensorId, graph::GraphError>,
) -> Vec<Case> {
    let mut v = Vec::new();
    for (sa, sb) in [
        ([7usize, 3, 2], [7usize, 3, 2]),
        ([7, 3, 2], [7, 1, 1]),
        ([9, 4, 3], [1, 4, 1]),
        ([4096, 4, 1], [4096, 1, 1]),
    ] {
        let mut b = CaseBuilder::new(4);
        let x = b.input_f32("a", &sa, 1.0).expect("case");
        let y = b.input_f32("b", &sb, 1.0).expect("case");
        let out = op(&mut b.g, x, y).expect("case");
        v.push(
            b.finish(format!("{name} {sa:?} ∘ {sb:?}"), out, 0.0, sa[0] < 4096)
                .expect("case"),
        );
    }
    // non-contiguous first operand
    let mut b = CaseBuilder::new(5);
    let x = b.input_f32("a", &[6, 5], 1.0).expect("case");
    let xt = b.g.transpose(x).expect("case");
    let y = b.input_f32("b", &[5, 1], 1.0).expect("case");
    let out = op(&mut b.g, xt, y).expect("case");
    v.push(
        b.finish(format!("{name} transposed"), out, 0.0, true)
            .expect("case"),
    );
    v
}

impl CpuKernel for Add {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows_strided(cx, dst, srcs, |a, b| a + b);
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows(cx, dst, srcs, |a, b| a + b);
    }
    fn cases() -> Vec<Case> {
        binary_cases("ADD", |g, a, b| g.add(a, b))
    }
}

impl CpuKernel for Mul {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows_strided(cx, dst, srcs, |a, b| a * b);
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows(cx, dst, srcs, |a, b| a * b);
    }
    fn cases() -> Vec<Case> {
        binary_cases("MUL", |g, a, b| g.mul(a, b))
    }
}

impl CpuKernel for Div {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows_strided(cx, dst, srcs, |a, b| a / b);
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows(cx, dst, srcs, |a, b| a / b);
    }
    fn cases() -> Vec<Case> {
        binary_cases("DIV", |g, a, b| g.div(a, b))
    }
}
