//! QUANTIZE kernel: each thread converts its share of rows.

use crate::case::CaseBuilder;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::quantize::Quantize;
use quant::DType;

/// Activation rows `0..n` of `x` in `dot` type, `qrow` bytes each, into `buf`: converted with
/// the dot type's activation quantizer, or copied when `x` already holds converted rows (a
/// shared QUANTIZE node) — the common prologue of MUL_MAT and MUL_MAT_ID.
pub(crate) fn activations_to(x: &TensorRef, dot: DType, n: usize, qrow: usize, buf: &mut [u8]) {
    if x.desc.dtype != DType::F32 {
        let len = (n * qrow).min(x.bytes().len()).min(buf.len());
        buf[..len].copy_from_slice(&x.bytes()[..len]);
        return;
    }
    let qa = dot
        .info()
        .quantize_activation
        .expect("validated at build time");
    for j in 0..n {
        let out = &mut buf[j * qrow..(j + 1) * qrow];
        qa(x.row_f32(j), out);
        quant::mark_nonfinite(dot, x.row_f32(j), out);
    }
}

/// Activation rows `0..n` of `x` in `dot` type, `qrow` bytes each: `x`'s own bytes when it
/// already holds converted rows (a shared QUANTIZE node) or is packed F32 rows for an F32
/// dot, else converted into `buf`. Every thread of a MUL_MAT or MUL_MAT_ID node reads them:
/// borrowed, a shared node's rows are not copied into each thread's scratch (that copy was
/// ~0.6% of an iq2 prompt's time, and the F32 copy for the HC mixes' F32 weights ~0.7%).
pub(crate) fn activations<'q, 'a: 'q>(
    x: &TensorRef<'a>,
    dot: DType,
    n: usize,
    qrow: usize,
    buf: &'q mut [u8],
) -> &'q [u8] {
    let len = n * qrow;
    let converted = x.desc.dtype != DType::F32;
    let packed_f32 = dot == DType::F32 && x.desc.nb[1] == qrow && x.desc.is_contiguous();
    if (converted || packed_f32) && x.bytes().len() >= len {
        return &x.bytes()[..len];
    }
    activations_to(x, dot, n, qrow, buf);
    buf
}

fn rows(op: &Quantize, cx: &KernelCx, dst: &TensorMut, x: &TensorRef) {
    let qa = op
        .dtype
        .info()
        .quantize_activation
        .expect("validated at build time");
    for r in cx.my_rows(dst.desc.nrows()) {
        qa(x.row_f32(r), dst.row_bytes_mut(r));
        quant::mark_nonfinite(op.dtype, x.row_f32(r), dst.row_bytes_mut(r));
    }
}

impl CpuKernel for Quantize {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows(self, cx, dst, &srcs[0]);
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows(self, cx, dst, &srcs[0]);
    }
    fn cases() -> Vec<Case> {
        // converted then read back as f32 (CPY-free: GET_ROWS dequantizes any type)
        let mut v = Vec::new();
        for t in [
            DType::Q8_0,
            DType::Q8_K,
            DType::Q8_1,
            DType::F16,
            DType::BF16,
        ] {
            let k = if t == DType::Q8_K { 512 } else { 96 };
            let mut b = CaseBuilder::new(50);
            let x = b.input_f32("x", &[k, 5], 3.0).expect("case");
            let q = b.g.quantize(x, t).expect("case");
            let ids = b.input_i32("ids", &[0, 1, 2, 3, 4]).expect("case");
            let out = b.g.get_rows(q, ids).expect("case");
            v.push(
                b.finish(format!("QUANTIZE f32{{{k},5}} → {t}"), out, 0.0, true)
                    .expect("case"),
            );
        }
        v
    }
}
