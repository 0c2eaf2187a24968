//! SUM_ROWS kernel: f64 accumulation in index order, one rounding to f32 at the end.
//!
//! The forward kernel sums a transposed F32 input (dimension 1 contiguous, like the MoE's
//! permuted `{K, D, T}` expert outputs) *vertically*: up to [`VERTICAL`] adjacent output rows
//! at once, each element index in turn added to all of their accumulators, so every load
//! is a contiguous run instead of one strided element. Each output still adds its own
//! elements in index order from the same start: the reference's bits.

use crate::case::CaseBuilder;
use crate::tensor::split_row;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::sum_rows::SumRows;
use quant::DType;

/// Output rows summed together by the vertical path.
const VERTICAL: usize = 64;

/// Output rows `rows` of a transposed F32 input (`nb[1] == 4`), [`VERTICAL`] adjacent rows
/// of one `(i2, i3)` slice at a time; each run of `VERTICAL` f32 read as one slice and the
/// sums stored with one slice (the per-element byte decoding and per-output row offsets
/// were most of this op's time: 14 ms a call for the iq2 file's 512-token expert sums).
fn vertical(dst: &TensorMut, x: &TensorRef, rows: std::ops::Range<usize>) {
    let d = &x.desc;
    let Ok(xs) = bytemuck::try_cast_slice::<u8, f32>(x.bytes()) else {
        // an unaligned source (not from the arena): the general path's bits are the same
        return strided(dst, x, rows);
    };
    let unit = dst.desc.ne[0] == 1 && dst.desc.nb[1] == 4;
    let mut r = rows.start;
    while r < rows.end {
        let (i1, i2, i3) = split_row(d, r);
        let w = (d.ne[1] - i1).min(rows.end - r).min(VERTICAL);
        let base = (i1 * 4 + i2 * d.nb[2] + i3 * d.nb[3]) / 4;
        // −0.0: the neutral element `f64::sum` starts from
        let mut acc = [-0.0f64; VERTICAL];
        if w == VERTICAL {
            for i in 0..d.ne[0] {
                let at = base + i * d.nb[0] / 4;
                let v: &[f32; VERTICAL] = xs[at..at + VERTICAL].try_into().expect("in bounds");
                for (a, &v) in acc.iter_mut().zip(v) {
                    *a += v as f64;
                }
            }
        } else {
            for i in 0..d.ne[0] {
                let at = base + i * d.nb[0] / 4;
                for (a, &v) in acc[..w].iter_mut().zip(&xs[at..at + w]) {
                    *a += v as f64;
                }
            }
        }
        if unit && split_row(&dst.desc, r).0 + w <= dst.desc.ne[1] {
            for (o, a) in dst.unit_rows_f32_mut(r, w).iter_mut().zip(&acc) {
                *o = *a as f32;
            }
        } else {
            for (j, a) in acc[..w].iter().enumerate() {
                dst.row_f32_mut(r + j)[0] = *a as f32;
            }
        }
        r += w;
    }
}

/// Output rows `rows` of a strided F32 input, each read at its stride in index order.
fn strided(dst: &TensorMut, x: &TensorRef, rows: std::ops::Range<usize>) {
    let d = &x.desc;
    let b = x.bytes();
    for r in rows {
        let (i1, i2, i3) = split_row(d, r);
        let base = i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3];
        let sum: f64 = (0..d.ne[0])
            .map(|i| {
                let o = base + i * d.nb[0];
                f32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]) as f64
            })
            .sum();
        dst.row_f32_mut(r)[0] = sum as f32;
    }
}

fn rows(cx: &KernelCx, dst: &TensorMut, x: &TensorRef, fast: bool) {
    let n = x.desc.ne[0];
    if fast && x.desc.dtype == DType::F32 && x.desc.nb[1] == 4 && n > 1 {
        vertical(dst, x, cx.my_rows(dst.desc.nrows()));
        return;
    }
    let contiguous = fast && x.desc.rows_contiguous();
    // a strided F32 row (the MoE's permuted {K, D, T} expert outputs) is read at its stride
    // directly: the element accessor's index split and dtype match per element cost more
    // than the sum
    let strided_f32 = fast && !contiguous && x.desc.dtype == DType::F32;
    for r in cx.my_rows(dst.desc.nrows()) {
        let sum: f64 = if contiguous {
            x.row_f32(r).iter().map(|&v| v as f64).sum()
        } else if strided_f32 {
            strided(dst, x, r..r + 1);
            continue;
        } else {
            (0..n).map(|i| x.get_flat(i, r) as f64).sum()
        };
        dst.row_f32_mut(r)[0] = sum as f32;
    }
}

impl CpuKernel for SumRows {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows(cx, dst, &srcs[0], false);
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows(cx, dst, &srcs[0], true);
    }
    fn cases() -> Vec<Case> {
        let mut v = Vec::new();
        for (shape, quick) in [
            (vec![1usize], true),
            (vec![7, 3], true),
            (vec![33, 5, 2], true),
            (vec![4096, 4], false),
            (vec![4, 4, 512], false), // unfused HC Sinkhorn sums {hc, hc, T}
        ] {
            let mut b = CaseBuilder::new(61);
            let x = b.input_f32("x", &shape, 2.0).expect("case");
            let out = b.g.sum_rows(x).expect("case");
            v.push(
                b.finish(format!("SUM_ROWS {shape:?}"), out, 0.0, quick)
                    .expect("case"),
            );
        }
        // transposed inputs (the vertical path); the second has more rows per slice than one
        // vertical block, and slices split between threads
        for (seed, shape, name) in [
            (62, [6usize, 11, 2], "SUM_ROWS transposed"),
            (63, [6, 100, 3], "SUM_ROWS transposed {6,100,3}"),
        ] {
            let mut b = CaseBuilder::new(seed);
            let x = b.input_f32("x", &shape, 2.0).expect("case");
            let xp = b.g.permute(x, [1, 0, 2, 3]).expect("case");
            let out = b.g.sum_rows(xp).expect("case");
            v.push(b.finish(name.into(), out, 0.0, true).expect("case"));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph::TensorDesc;

    #[test]
    fn hand_computed() {
        // row 0: 1 + 2 + 3 = 6; row 1: 2^24 + 1 − 2^24 = 1 (f64 accumulation keeps the 1,
        // an f32 accumulator would lose it)
        let x = [1.0f32, 2.0, 3.0, 16_777_216.0, 1.0, -16_777_216.0];
        let xd = TensorDesc::f32(&[3, 2]).unwrap();
        let od = TensorDesc::f32(&[1, 2]).unwrap();
        let src = [TensorRef::new(xd, bytemuck::cast_slice(&x))];
        for i in 0..2 {
            let mut out = vec![0u8; od.nbytes()];
            let dst = TensorMut::new(od, &mut out);
            crate::dsv4_testutil::run_one(&SumRows, &dst, &src, i != 0);
            let got: &[f32] = bytemuck::cast_slice(&out);
            assert_eq!(got, [6.0, 1.0]);
        }
    }
}
