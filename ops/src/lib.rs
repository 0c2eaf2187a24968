//! fathom-ops: CPU kernels, one module per op family of `fathom-graph`'s op list.
//!
//! Every op implements [`CpuKernel`]: a scalar, single-threaded **reference** (the oracle of
//! every test) and a multi-threaded **forward** kernel run by all threads of the executor.
//! Row-wise ops split rows statically ([`KernelCx::my_rows`]); matmuls claim chunks from the
//! node's atomic counter. Each op also provides test-ops cases. Kernel dispatch is generated
//! from `graph::for_each_op!`, so an op without a kernel does not compile.

pub mod case;
mod cx;
pub mod tensor;

mod binary;
mod compress;
mod concat;
mod cpy;
#[cfg(test)]
mod dsv4_testutil;
mod expert_prefetch;
mod expert_rows;
mod flash_attn;
mod flash_attn_cases;
mod flash_attn_simd;
mod flash_attn_softmax;
mod get_rows;
mod hadamard;
mod index_mask;
mod indexer;
mod indexer_select;
mod indexer_simd;
mod mhc;
mod moe_route;
mod mul_mat;
mod mul_mat_id;
mod mul_mat_scaled;
mod norm;
mod quantize;
mod rope;
mod set_rows;
mod softmax;
mod sum_rows;
mod swiglu;
mod swiglu_select;
mod taper;
mod topk;
mod unary;
mod view;

pub use case::Case;
pub use cx::{split, KernelCx, Scratch};
pub use tensor::{TensorMut, TensorRef};

use graph::{Op, OpDef, OpKind};

/// A CPU implementation of an op.
pub trait CpuKernel: OpDef {
    /// Scalar single-threaded reference; called with `ith = 0, nth = 1`.
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]);
    /// The optimized kernel, called on every thread. Default: thread 0 runs the reference
    /// (only valid for [`graph::Access::Global`] ops).
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        if cx.ith == 0 {
            let mut one = KernelCx {
                ith: 0,
                nth: 1,
                chunk: cx.chunk,
                scratch: cx.scratch,
                kernels: cx.kernels,
                cpu: cx.cpu,
                experts: cx.experts,
                block_scales: cx.block_scales,
            };
            self.reference(&mut one, dst, srcs);
        }
    }
    /// Test-ops cases for this op (tiny, odd sizes, non-contiguous, real V4 shapes).
    fn cases() -> Vec<Case>;
}

macro_rules! define_dispatch {
    ($($v:ident => $t:path,)*) => {
        /// Run the reference kernel of `op`.
        pub fn run_reference(op: &Op, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
            match op { $(Op::$v(o) => <$t as CpuKernel>::reference(o, cx, dst, srcs),)* }
        }
        /// Run the optimized kernel of `op` on this thread.
        pub fn run_forward(op: &Op, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
            match op { $(Op::$v(o) => <$t as CpuKernel>::forward(o, cx, dst, srcs),)* }
        }
        /// The test-ops cases of an op kind.
        pub fn cases(kind: OpKind) -> Vec<Case> {
            match kind { $(OpKind::$v => <$t as CpuKernel>::cases(),)* }
        }
    };
}

graph::for_each_op!(define_dispatch);

/// The kernels a node of `op` runs at CPU `level`, resolved once from the kernel table
/// (`quant::simd::table`) when the plan is built: for MUL_MAT and MUL_MAT_ID those of the
/// weight type (the first source, `weight`); `None` for every other op.
pub fn node_kernels(
    op: &Op,
    weight: Option<quant::DType>,
    level: quant::simd::CpuLevel,
) -> Option<quant::simd::Kernels> {
    match op {
        Op::MulMat(_) | Op::MulMatId(_) => quant::simd::kernels(weight?, level),
        _ => None,
    }
}

/// The kernels of weight type `dtype` for a kernel call: those the plan resolved, or, for a
/// kernel called outside an executor (unit tests), resolved now at the context's level.
pub(crate) fn kernels_for(cx: &KernelCx, dtype: quant::DType) -> quant::simd::Kernels {
    cx.kernels
        .copied()
        .filter(|k| k.dtype == dtype)
        .or_else(|| quant::simd::kernels(dtype, cx.cpu))
        .expect("validated at build time: the weight type has a dot product")
}
