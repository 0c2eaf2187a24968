//! Test-only helpers for the op unit tests: run one kernel (reference or forward, on one
//! thread or `nth` simulated threads run one after another) on in-memory sources.

use crate::{CpuKernel, KernelCx, Scratch, TensorMut, TensorRef};
use graph::TensorDesc;
use quant::DType;
use std::sync::atomic::AtomicUsize;

/// A source tensor: a descriptor over 4-byte-aligned storage.
pub(crate) struct Src {
    /// Layout (may be strided: it is only checked to fit in `data`).
    pub desc: TensorDesc,
    /// Storage.
    pub data: Vec<u32>,
}

impl Src {
    /// A contiguous f32 tensor.
    pub fn f32(ne: &[usize], v: &[f32]) -> Src {
        let desc = TensorDesc::f32(ne).expect("shape");
        assert_eq!(desc.nelements(), v.len());
        Src {
            desc,
            data: v.iter().map(|x| x.to_bits()).collect(),
        }
    }
    /// A contiguous f16 tensor (values rounded to f16).
    pub fn f16(ne: &[usize], v: &[f32]) -> Src {
        let desc = TensorDesc::new(DType::F16, ne).expect("shape");
        assert_eq!(desc.nelements(), v.len());
        let h: Vec<u16> = v.iter().map(|&x| quant::scalar::f32_to_f16(x)).collect();
        let data = h
            .chunks(2)
            .map(|p| u32::from(p[0]) | u32::from(*p.get(1).unwrap_or(&0)) << 16)
            .collect();
        Src { desc, data }
    }
    /// A contiguous i32 vector.
    pub fn i32(v: &[i32]) -> Src {
        Src {
            desc: TensorDesc::new(DType::I32, &[v.len()]).expect("shape"),
            data: v.iter().map(|&x| x as u32).collect(),
        }
    }
}

/// Run `op` on `srcs`: the reference (`forward = false`) or the forward kernel on `nth`
/// simulated threads. Returns the output descriptor and its storage.
pub(crate) fn run<K: CpuKernel>(
    op: &K,
    srcs: &[&Src],
    forward: bool,
    nth: usize,
) -> (TensorDesc, Vec<u32>) {
    let descs: Vec<&TensorDesc> = srcs.iter().map(|s| &s.desc).collect();
    let d = op.infer(&descs).expect("infer");
    let mut out = vec![0x7fc0_0001u32; d.nbytes().div_ceil(4)];
    let refs: Vec<TensorRef> = srcs
        .iter()
        .map(|s| TensorRef::new(s.desc, bytemuck::cast_slice(&s.data)))
        .collect();
    {
        let dst = TensorMut::new(d, bytemuck::cast_slice_mut(&mut out));
        let chunk = AtomicUsize::new(0);
        let mut scratch = Scratch::default();
        let nth = if forward { nth } else { 1 };
        for ith in 0..nth {
            let mut cx = KernelCx {
                ith,
                nth,
                chunk: &chunk,
                scratch: &mut scratch,
                kernels: None,
                cpu: quant::simd::CpuLevel::detect(),
                experts: None,
                block_scales: None,
            };
            if forward {
                op.forward(&mut cx, &dst, &refs);
            } else {
                op.reference(&mut cx, &dst, &refs);
            }
        }
    }
    (d, out)
}

/// Run `op` once on one thread into `dst`: the reference (`forward = false`) or the forward
/// kernel.
pub(crate) fn run_one<K: CpuKernel>(op: &K, dst: &TensorMut, srcs: &[TensorRef], forward: bool) {
    let chunk = AtomicUsize::new(0);
    let mut scratch = Scratch::default();
    let mut cx = KernelCx {
        ith: 0,
        nth: 1,
        chunk: &chunk,
        scratch: &mut scratch,
        kernels: None,
        cpu: quant::simd::CpuLevel::detect(),
        experts: None,
        block_scales: None,
    };
    if forward {
        op.forward(&mut cx, dst, srcs);
    } else {
        op.reference(&mut cx, dst, srcs);
    }
}

/// Output storage as f32.
pub(crate) fn as_f32(v: &[u32]) -> Vec<f32> {
    v.iter().map(|&b| f32::from_bits(b)).collect()
}

/// Output storage as i32.
pub(crate) fn as_i32(v: &[u32]) -> Vec<i32> {
    v.iter().map(|&b| b as i32).collect()
}

/// Assert `|a − b| ≤ tol` element-wise.
pub(crate) fn assert_close(got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "lengths differ");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g as f64 - w).abs() <= tol,
            "element {i}: got {g}, want {w} (tol {tol})"
        );
    }
}
