//! Element-wise unary kernels (SCALE, CLAMP, SILU, SIGMOID, SOFTPLUS, SQRT).

use crate::case::CaseBuilder;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::unary::{Clamp, Scale, Sigmoid, Silu, Softplus, Sqrt};

fn rows(cx: &KernelCx, dst: &TensorMut, src: &TensorRef, f: impl Fn(f32) -> f32) {
    for r in cx.my_rows(dst.desc.nrows()) {
        for (i, o) in dst.row_f32_mut(r).iter_mut().enumerate() {
            *o = f(src.get_flat(i, r));
        }
    }
}

/// `ln(1+eˣ)`, `x` for `x > 20` (PyTorch / ggml threshold).
pub fn softplus(x: f32) -> f32 {
    if x > 20.0 {
        x
    } else {
        x.exp().ln_1p()
    }
}

/// Logistic sigmoid.
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

fn unary_cases(
    name: &str,
    scale: f32,
    op: impl Fn(&mut graph::Graph, graph::TensorId) -> graph::TensorId,
) -> Vec<Case> {
    let mut v = Vec::new();
    for shape in [vec![1usize], vec![17, 3], vec![64, 5, 2]] {
        let mut b = CaseBuilder::new(6);
        let x = b.input_f32("x", &shape, scale).expect("case");
        let out = op(&mut b.g, x);
        v.push(
            b.finish(format!("{name} {shape:?}"), out, 1e-12, true)
                .expect("case"),
        );
    }
    let mut b = CaseBuilder::new(7);
    let x = b.input_f32("x", &[9, 4], scale).expect("case");
    let xt = b.g.transpose(x).expect("case");
    let out = op(&mut b.g, xt);
    v.push(
        b.finish(format!("{name} transposed"), out, 1e-12, true)
            .expect("case"),
    );
    v
}

macro_rules! unary_kernel {
    ($t:ty, $name:literal, $scale:expr, |$s:ident| $f:expr, |$g:ident, $x:ident| $build:expr) => {
        impl CpuKernel for $t {
            fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
                let $s = self;
                rows(cx, dst, &srcs[0], $f);
            }
            fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
                let $s = self;
                rows(cx, dst, &srcs[0], $f);
            }
            fn cases() -> Vec<Case> {
                unary_cases($name, $scale, |$g, $x| $build.expect("case"))
            }
        }
    };
}

unary_kernel!(
    Scale,
    "SCALE",
    3.0,
    |s| move |x| x * s.scale + s.bias,
    |g, x| g.scale(x, 0.7, -0.25)
);
unary_kernel!(
    Clamp,
    "CLAMP",
    3.0,
    |s| move |x: f32| x.max(s.min).min(s.max),
    |g, x| g.clamp(x, -1.5, 2.0)
);
unary_kernel!(Silu, "SILU", 8.0, |_s| |x| x * sigmoid(x), |g, x| g.silu(x));
unary_kernel!(Sigmoid, "SIGMOID", 8.0, |_s| sigmoid, |g, x| g.sigmoid(x));
unary_kernel!(Softplus, "SOFTPLUS", 30.0, |_s| softplus, |g, x| g
    .softplus(x));
unary_kernel!(Sqrt, "SQRT", 4.0, |_s| |x: f32| x.sqrt(), |g, x| g.sqrt(x));
