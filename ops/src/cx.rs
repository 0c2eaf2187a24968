//! The per-thread kernel context: thread index, thread count, the node's shared chunk counter
//! and per-thread scratch memory that persists across nodes and runs (no allocation per token
//! once warm).

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Per-thread scratch buffers, grown on first use and reused afterwards.
#[derive(Debug, Default)]
pub struct Scratch {
    /// f32 scratch.
    pub f32s: Vec<f32>,
    /// byte scratch (quantized activation rows).
    pub bytes: Vec<u8>,
}

impl Scratch {
    /// At least `n` f32 values (contents unspecified).
    pub fn f32(&mut self, n: usize) -> &mut [f32] {
        if self.f32s.len() < n {
            self.f32s.resize(n, 0.0);
        }
        &mut self.f32s[..n]
    }
    /// At least `n` bytes (contents unspecified).
    pub fn bytes(&mut self, n: usize) -> &mut [u8] {
        if self.bytes.len() < n {
            self.bytes.resize(n, 0);
        }
        &mut self.bytes[..n]
    }
}

/// What a kernel knows about the thread running it.
#[derive(Debug)]
pub struct KernelCx<'a> {
    /// This thread's index, 0..nth.
    pub ith: usize,
    /// Number of threads running the node.
    pub nth: usize,
    /// Shared work counter of this node (starts at 0 every run).
    pub chunk: &'a AtomicUsize,
    /// This thread's scratch.
    pub scratch: &'a mut Scratch,
    /// The kernels of the node's weight type (MUL_MAT, MUL_MAT_ID), resolved from the kernel
    /// table when the plan was built ([`crate::node_kernels`]); `None` for other ops.
    pub kernels: Option<&'a quant::simd::Kernels>,
    /// The CPU level the plan was built for (ops without a weight type pick their SIMD
    /// paths by it).
    pub cpu: quant::simd::CpuLevel,
    /// Where a MUL_MAT_ID (or EXPERT_PREFETCH) node's weight takes its experts from when they
    /// are paged (the weight's [`graph::WeightData::experts`]); `None` for every other node.
    pub experts: Option<&'a dyn graph::ExpertSource>,
    /// The tile scales of a MUL_MAT node's block-scaled weight (the weight's
    /// [`graph::WeightData::block_scales`]); `None` for every other node.
    pub block_scales: Option<&'a graph::BlockScales>,
}

impl KernelCx<'_> {
    /// The static even split of `n` rows: the rows this thread owns. Row-wise ops must use it
    /// (barrier elision relies on every row-wise node splitting rows the same way).
    pub fn my_rows(&self, n: usize) -> Range<usize> {
        split(n, self.ith, self.nth)
    }
    /// Claim the next chunk of `size` items out of `n` from the node's atomic counter, or
    /// `None` when all are taken (dynamic load balancing for matmuls).
    pub fn claim(&self, n: usize, size: usize) -> Option<Range<usize>> {
        let start = self.chunk.fetch_add(size, Ordering::Relaxed);
        (start < n).then(|| start..(start + size).min(n))
    }
}

/// Rows `[n·i/nth, n·(i+1)/nth)`.
pub fn split(n: usize, i: usize, nth: usize) -> Range<usize> {
    let per = n / nth;
    let rem = n % nth;
    let start = i * per + i.min(rem);
    start..start + per + usize::from(i < rem)
}

#[cfg(test)]
mod tests {
    #[test]
    fn split_covers_all_rows_once() {
        for n in [0, 1, 5, 17, 64] {
            for nth in 1..5 {
                let mut seen = vec![0; n];
                for i in 0..nth {
                    for r in super::split(n, i, nth) {
                        seen[r] += 1;
                    }
                }
                assert!(seen.iter().all(|&c| c == 1));
            }
        }
    }
}
