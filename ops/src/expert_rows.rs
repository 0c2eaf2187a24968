//! A pinned routed expert's weight rows as MUL_MAT_ID's kernels take them
//! ([`pinned_rows`]): its bytes as they are, or — an official checkpoint's FP4 expert used in
//! place, whose codes and scales are tensors of their own ([`ExpertLayout::Fp4Split`]) — the
//! item's `(codes, scales)` rows for the split kernels ([`split_rows`]), or, where the CPU
//! level has none, its rows converted to MXFP4 just before the kernels read them. The
//! conversion is the one loading makes (`quant::fp8::fp4_ds_blocks_to_mxfp4`: the scale byte
//! and the codes kept, the nibbles placed as ggml places them), so every kernel and every bit
//! are those of the stacked MXFP4 copy, without the copy.

use crate::mul_mat::WeightRows;
use crate::TensorRef;
use graph::{ExpertLayout, Pinned};
use quant::DType;

/// Rows `cols` of pinned expert `p` of weight `w` (`{k, n, E}`) as the kernels take them:
/// its bytes as they are, or (an expert in the official FP4 layout) those rows converted to
/// MXFP4 into `stage` first — a few KiB per item that stay in cache for its kernels. `None`
/// where the layout does not fit the weight (MUL_MAT_ID then writes its rows as NaN).
pub(crate) fn pinned_rows<'a>(
    w: &TensorRef,
    k: usize,
    n: usize,
    p: &'a Pinned,
    cols: std::ops::Range<usize>,
    stage: &'a mut [u8],
) -> Option<WeightRows<'a>> {
    match p.layout() {
        ExpertLayout::Stacked(b) => Some(WeightRows::of_bytes(w, b)),
        ExpertLayout::Fp4Split { codes, scales } => {
            let (cb, sb, rb) = (k / 2, k / 32, w.desc.row_bytes());
            let fits = w.desc.dtype == DType::MXFP4
                && k.is_multiple_of(32)
                && w.desc.nb[1] == rb
                && rb == 17 * sb
                && codes.len() == n * cb
                && scales.len() == n * sb
                && cols.end <= n
                && stage.len() >= cols.len() * rb;
            if !fits {
                return None;
            }
            let out = &mut stage[..cols.len() * rb];
            quant::fp8::fp4_ds_blocks_to_mxfp4(
                &codes[cols.start * cb..cols.end * cb],
                &scales[cols.start * sb..cols.end * sb],
                out,
            );
            Some(WeightRows::staged(w, out, cols.start))
        }
    }
}

/// Row `r`'s `(codes, scales)` of a pinned expert in the official FP4 layout of a `{k, n, E}`
/// weight, for the split kernels (`quant::simd::SplitFp4`); `None` where the expert is in
/// another layout or its tensors do not fit the shape.
pub(crate) fn split_rows<'p>(
    p: &'p Pinned,
    k: usize,
    n: usize,
) -> Option<impl Fn(usize) -> (&'p [u8], &'p [u8]) + Copy + 'p> {
    let ExpertLayout::Fp4Split { codes, scales } = p.layout() else {
        return None;
    };
    let (cb, sb) = (k / 2, k / 32);
    let fits = k.is_multiple_of(32) && codes.len() == n * cb && scales.len() == n * sb;
    fits.then_some(move |r: usize| (&codes[r * cb..(r + 1) * cb], &scales[r * sb..(r + 1) * sb]))
}

#[cfg(test)]
mod tests {
    use crate::cx::Scratch;
    use crate::{CpuKernel, KernelCx, TensorMut, TensorRef};
    use graph::op::mul_mat_id::MulMatId;
    use graph::{ExpertBytes, ExpertSource, Pinned, TensorDesc};
    use quant::DType;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    /// Experts in the official FP4 layout: per expert its codes and scales, each in a
    /// buffer of its own (as in a checkpoint's shards); `broken` hands out scales one byte
    /// short.
    struct Split {
        codes: Vec<ExpertBytes>,
        scales: Vec<ExpertBytes>,
        broken: Option<usize>,
    }

    impl std::fmt::Debug for Split {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "Split({} experts)", self.codes.len())
        }
    }

    impl ExpertSource for Split {
        fn request(&self, _: &[u32]) {}
        fn prefetch(&self, _: &[u32]) {}
        fn pin(&self, e: usize) -> Option<Pinned> {
            let (c, s) = (self.codes[e].clone(), self.scales[e].clone());
            let (cl, sl) = ((*c).as_ref().len(), (*s).as_ref().len());
            let cut = usize::from(self.broken == Some(e));
            Pinned::fp4_split(e, (c, 0, cl), (s, 0, sl - cut))
        }
    }

    /// Random official-layout experts `{k, n, e}` (scales 2^-10 .. 2^-7) and the MXFP4
    /// stack loading would make of them.
    fn experts(k: usize, n: usize, e: usize, seed: u64) -> (Split, Vec<u8>) {
        let mut rng = crate::case::CaseRng::new(seed);
        let (mut codes, mut scales, mut stack) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..e {
            let c: Vec<u8> = (0..n * k / 2).map(|_| rng.next_u64() as u8).collect();
            let s: Vec<u8> = (0..n * k / 32)
                .map(|_| 118 + (rng.next_u64() % 4) as u8)
                .collect();
            stack.extend(quant::fp8::fp4_ds_to_mxfp4(&c, &s, n, k).expect("shapes"));
            codes.push(Arc::new(c) as ExpertBytes);
            scales.push(Arc::new(s) as ExpertBytes);
        }
        let split = Split {
            codes,
            scales,
            broken: None,
        };
        (split, stack)
    }

    /// MUL_MAT_ID (`forward` or the reference) on `threads` threads, one after another
    /// (each claims what is left), with the experts from `src` or, without it, `stack`.
    #[allow(clippy::too_many_arguments)]
    fn run(
        wd: TensorDesc,
        stack: &[u8],
        src: Option<&dyn ExpertSource>,
        x: &[f32],
        xne: [usize; 3],
        ids: &[i32],
        forward: bool,
        threads: usize,
        cpu: quant::simd::CpuLevel,
    ) -> Vec<u32> {
        let xd = TensorDesc::f32(&xne).unwrap();
        let idd = TensorDesc::new(DType::I32, &[ids.len() / xne[2], xne[2]]).unwrap();
        let od = TensorDesc::f32(&[wd.ne[1], idd.ne[0], xne[2]]).unwrap();
        let zeros = vec![0u8; stack.len()];
        let srcs = [
            TensorRef::new(wd, if src.is_some() { &zeros } else { stack }),
            TensorRef::new(xd, bytemuck::cast_slice(x)),
            TensorRef::new(idd, bytemuck::cast_slice(ids)),
        ];
        let mut out = vec![0u8; od.nbytes()];
        let dst = TensorMut::new(od, &mut out);
        let chunk = AtomicUsize::new(0);
        for ith in 0..threads {
            let mut scratch = Scratch::default();
            let mut cx = KernelCx {
                ith,
                nth: threads,
                chunk: &chunk,
                scratch: &mut scratch,
                kernels: None,
                cpu,
                experts: src,
                block_scales: None,
            };
            if forward {
                MulMatId::new().forward(&mut cx, &dst, &srcs);
            } else {
                MulMatId::new().reference(&mut cx, &dst, &srcs);
            }
        }
        bytemuck::cast_slice(&out).to_vec()
    }

    /// Experts used in place in the official FP4 layout give the stacked MXFP4 copy's bits:
    /// decode (one token: the split multi-row kernel where the level has it, else rows
    /// converted for the multi-row kernel, in chunks that do not divide the rows),
    /// prompt chunks (several tokens per expert: the multi-column kernel), an odd block
    /// count, the reference and the forward kernel, one and two threads, every CPU level.
    #[test]
    fn fp4_split_experts_match_the_mxfp4_stack() {
        let (n, e, n_used) = (37usize, 5usize, 3usize);
        for k in [320usize, 352] {
            let (src, stack) = experts(k, n, e, k as u64);
            let wd = TensorDesc::new(DType::MXFP4, &[k, n, e]).unwrap();
            let mut rng = crate::case::CaseRng::new(7);
            for ids in [&[3, -1, 1][..], &[0, 4, 0, 2, -1, 1, 4, 4, 4, 3, 3, 1]] {
                let tt = ids.len() / n_used;
                let x: Vec<f32> = (0..k * tt)
                    .map(|_| (rng.next_u64() % 2001) as f32 / 1000.0 - 1.0)
                    .collect();
                // every level this CPU has: with and without the split multi-row kernel
                for cpu in quant::simd::CpuLevel::detect().up_to() {
                    for (forward, threads) in [(false, 1), (true, 1), (true, 2)] {
                        let xne = [k, 1, tt];
                        let want = run(wd, &stack, None, &x, xne, ids, forward, threads, cpu);
                        let got = run(wd, &stack, Some(&src), &x, xne, ids, forward, threads, cpu);
                        assert_eq!(
                            got, want,
                            "K={k} ids {ids:?} forward {forward} threads {threads} at {cpu}"
                        );
                    }
                }
            }
        }
    }

    /// An expert whose scales do not fit its shape gives NaN rows, and only that expert's.
    #[test]
    fn a_split_expert_of_the_wrong_size_gives_nan_rows() {
        let (k, n, e) = (64usize, 5usize, 3usize);
        let (mut src, stack) = experts(k, n, e, 1);
        src.broken = Some(1);
        let wd = TensorDesc::new(DType::MXFP4, &[k, n, e]).unwrap();
        let x = vec![0.5f32; k];
        for forward in [false, true] {
            let cpu = quant::simd::CpuLevel::detect();
            let out = run(
                wd,
                &stack,
                Some(&src),
                &x,
                [k, 1, 1],
                &[1, 2],
                forward,
                1,
                cpu,
            );
            let out: Vec<f32> = out.iter().map(|&b| f32::from_bits(b)).collect();
            assert!(out[..n].iter().all(|v| v.is_nan()), "{out:?}");
            assert!(out[n..].iter().all(|v| v.is_finite()), "{out:?}");
        }
    }
}
