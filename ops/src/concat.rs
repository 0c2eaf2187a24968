//! CONCAT kernel: byte copies of whole elements. The reference copies element by element
//! through the source strides; the forward kernel splits output rows statically and copies
//! each row (or, along dimension 0, each half row) with one `memcpy` when the source row is
//! contiguous.

use crate::case::CaseBuilder;
use crate::tensor::split_row;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::concat::Concat;
use quant::DType;

/// Copy `n` elements of `es` bytes starting at byte `off` of `src` (element stride `nb0`).
fn copy_elems(src: &TensorRef, off: usize, n: usize, out: &mut [u8]) {
    let (es, nb0) = (src.desc.dtype.type_size(), src.desc.nb[0]);
    let b = src.bytes();
    if nb0 == es {
        out.copy_from_slice(&b[off..off + n * es]);
    } else {
        for (i, o) in out.chunks_exact_mut(es).enumerate() {
            o.copy_from_slice(&b[off + i * nb0..off + i * nb0 + es]);
        }
    }
}

impl CpuKernel for Concat {
    fn reference(&self, _cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let (a, b) = (&srcs[0], &srcs[1]);
        let (d, es) = (self.dim, dst.desc.dtype.type_size());
        let ne = dst.desc.ne;
        for i3 in 0..ne[3] {
            for i2 in 0..ne[2] {
                for i1 in 0..ne[1] {
                    let r = i1 + ne[1] * (i2 + ne[2] * i3);
                    let out = dst.row_bytes_mut(r);
                    for i0 in 0..ne[0] {
                        let mut idx = [i0, i1, i2, i3];
                        let src = if idx[d] < a.desc.ne[d] {
                            a
                        } else {
                            idx[d] -= a.desc.ne[d];
                            b
                        };
                        let off: usize = (0..4).map(|k| idx[k] * src.desc.nb[k]).sum();
                        out[i0 * es..(i0 + 1) * es].copy_from_slice(&src.bytes()[off..off + es]);
                    }
                }
            }
        }
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let (a, b) = (&srcs[0], &srcs[1]);
        let (d, es) = (self.dim, dst.desc.dtype.type_size());
        for r in cx.my_rows(dst.desc.nrows()) {
            let (i1, i2, i3) = split_row(&dst.desc, r);
            let out = dst.row_bytes_mut(r);
            if d == 0 {
                let na = a.desc.ne[0];
                let (oa, ob) = out.split_at_mut(na * es);
                copy_elems(a, a.desc.row_offset(i1, i2, i3), na, oa);
                copy_elems(b, b.desc.row_offset(i1, i2, i3), b.desc.ne[0], ob);
                continue;
            }
            let mut idx = [i1, i2, i3];
            let src = if idx[d - 1] < a.desc.ne[d] {
                a
            } else {
                idx[d - 1] -= a.desc.ne[d];
                b
            };
            copy_elems(
                src,
                src.desc.row_offset(idx[0], idx[1], idx[2]),
                dst.desc.ne[0],
                out,
            );
        }
    }
    fn cases() -> Vec<Case> {
        let mut v = Vec::new();
        // every dimension, odd sizes
        for dim in 0..4 {
            let sa = [3usize, 4, 2, 2];
            let mut sb = sa;
            sb[dim] = [5, 1, 3, 2][dim];
            let mut b = CaseBuilder::new(51);
            let x = b.input_f32("a", &sa, 1.0).expect("case");
            let y = b.input_f32("b", &sb, 1.0).expect("case");
            let out = b.g.concat(x, y, dim).expect("case");
            v.push(
                b.finish(format!("CONCAT {sa:?} ++ {sb:?} dim {dim}"), out, 0.0, true)
                    .expect("case"),
            );
        }
        // non-contiguous sources: transposed a, permuted b, along dims 0 and 1
        for dim in [0usize, 1] {
            let mut b = CaseBuilder::new(52);
            let sa = if dim == 0 { [5usize, 7] } else { [7, 6] };
            let x = b.input_f32("a", &sa, 1.0).expect("case");
            let xt = b.g.transpose(x).expect("case");
            let bt = if dim == 0 { [5usize, 1, 3] } else { [3, 1, 6] };
            let y = b.input_f32("b", &bt, 1.0).expect("case");
            // {p, 1, q} → {q, p}
            let yp = b.g.permute(y, [1, 2, 0, 3]).expect("case");
            let out = b.g.concat(xt, yp, dim).expect("case");
            v.push(
                b.finish(
                    format!("CONCAT transposed/permuted dim {dim}"),
                    out,
                    0.0,
                    true,
                )
                .expect("case"),
            );
        }
        // f16 sources (converted back to f32 for the comparison)
        let mut b = CaseBuilder::new(53);
        let x = b.input_f32("a", &[9, 3], 1.0).expect("case");
        let y = b.input_f32("b", &[9, 4], 1.0).expect("case");
        let xh = b.g.cpy(x, DType::F16).expect("case");
        let yh = b.g.cpy(y, DType::F16).expect("case");
        let c = b.g.concat(xh, yh, 1).expect("case");
        let out = b.g.cpy(c, DType::F32).expect("case");
        v.push(
            b.finish("CONCAT f16{9,3} ++ f16{9,4} dim 1".into(), out, 0.0, true)
                .expect("case"),
        );
        // V4 shape: window keys {512, 128} ++ compressed keys {512, 64}
        let mut b = CaseBuilder::new(54);
        let x = b.input_f32("a", &[512, 128], 1.0).expect("case");
        let y = b.input_f32("b", &[512, 64], 1.0).expect("case");
        let out = b.g.concat(x, y, 1).expect("case");
        v.push(
            b.finish(
                "CONCAT f32{512,128} ++ f32{512,64} dim 1".into(),
                out,
                0.0,
                false,
            )
            .expect("case"),
        );
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph::TensorDesc;

    fn run(dim: usize, a: &[f32], sa: &[usize], b: &[f32], sb: &[usize]) -> [Vec<f32>; 2] {
        let (da, db) = (TensorDesc::f32(sa).unwrap(), TensorDesc::f32(sb).unwrap());
        let mut ne = da.ne;
        ne[dim] += db.ne[dim];
        let od = TensorDesc::f32(&ne).unwrap();
        let srcs = [
            TensorRef::new(da, bytemuck::cast_slice(a)),
            TensorRef::new(db, bytemuck::cast_slice(b)),
        ];
        let mut res = [Vec::new(), Vec::new()];
        for (i, r) in res.iter_mut().enumerate() {
            let mut out = vec![0u8; od.nbytes()];
            let dst = TensorMut::new(od, &mut out);
            crate::dsv4_testutil::run_one(&Concat { dim }, &dst, &srcs, i != 0);
            *r = bytemuck::cast_slice(&out).to_vec();
        }
        res
    }

    #[test]
    fn hand_computed() {
        // a = rows (1,2), (3,4); b = rows (5), (6) joined per row
        for got in run(0, &[1.0, 2.0, 3.0, 4.0], &[2, 2], &[5.0, 6.0], &[1, 2]) {
            assert_eq!(got, [1.0, 2.0, 5.0, 3.0, 4.0, 6.0]);
        }
        // b = one more row (5, 6)
        for got in run(1, &[1.0, 2.0, 3.0, 4.0], &[2, 2], &[5.0, 6.0], &[2, 1]) {
            assert_eq!(got, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        }
        // dim 2: {1,2,1} ++ {1,2,2}
        for got in run(
            2,
            &[1.0, 2.0],
            &[1, 2, 1],
            &[3.0, 4.0, 5.0, 6.0],
            &[1, 2, 2],
        ) {
            assert_eq!(got, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        }
    }
}
