//! TOP_K / ARGSORT / ARGMAX kernels. The reference sorts each row's `(value, index)` pairs with
//! a *stable* sort on the value alone; the forward kernel uses an explicit index tie-break
//! (a total order, so unstable selection/sorting gives the same answer): ARGMAX is one linear
//! scan, TOP_K selects the `k`-th element (`select_nth_unstable`, O(n)) and sorts the first
//! `k`, ARGSORT sorts the whole row. Index buffers live in the thread's scratch.

use crate::case::{CaseBuilder, CaseRng};
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::topk::{Argmax, Argsort, SortOrder, TopK};
use graph::{Graph, GraphError, TensorDesc, TensorId, WeightData};
use std::cmp::Ordering;

/// Value order of the descending ranking: larger first, NaN after every number.
fn desc_value(a: f32, b: f32) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (false, false) => b.partial_cmp(&a).expect("not NaN"),
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
    }
}

/// Value order of the ascending ranking: NaN before every number, then smaller first.
fn asc_value(a: f32, b: f32) -> Ordering {
    desc_value(b, a)
}

/// Scalar oracle: stable sort of the whole row (any strides), first `k` indices.
fn reference_rows(cx: &KernelCx, dst: &TensorMut, x: &TensorRef, cmp: fn(f32, f32) -> Ordering) {
    let (n, k) = (x.desc.ne[0], dst.desc.ne[0]);
    for r in cx.my_rows(dst.desc.nrows()) {
        let mut v: Vec<(f32, usize)> = (0..n).map(|i| (x.get_flat(i, r), i)).collect();
        v.sort_by(|a, b| cmp(a.0, b.0));
        for (o, &(_, i)) in dst.row_i32_mut(r).iter_mut().zip(&v[..k]) {
            *o = i as i32;
        }
    }
}

/// Parallel kernel: each thread ranks its rows of the static split.
fn forward_rows(cx: &mut KernelCx, dst: &TensorMut, x: &TensorRef, cmp: fn(f32, f32) -> Ordering) {
    let (n, k) = (x.desc.ne[0], dst.desc.ne[0]);
    let rows = cx.my_rows(dst.desc.nrows());
    let crate::Scratch { f32s, bytes } = &mut *cx.scratch;
    if f32s.len() < n {
        f32s.resize(n, 0.0);
    }
    if bytes.len() < 4 * n + 4 {
        bytes.resize(4 * n + 4, 0);
    }
    let (_, idx, _) = bytemuck::pod_align_to_mut::<u8, u32>(bytes);
    let idx = &mut idx[..n];
    for r in rows {
        let vals: &[f32] = if x.desc.rows_contiguous() {
            x.row_f32(r)
        } else {
            x.row_to_f32(r, &mut f32s[..n]);
            &f32s[..n]
        };
        let out = dst.row_i32_mut(r);
        let total = |a: &u32, b: &u32| cmp(vals[*a as usize], vals[*b as usize]).then(a.cmp(b));
        if k == 1 {
            let mut best = 0u32;
            for i in 1..n as u32 {
                if total(&i, &best) == Ordering::Less {
                    best = i;
                }
            }
            out[0] = best as i32;
            continue;
        }
        for (i, o) in idx.iter_mut().enumerate() {
            *o = i as u32;
        }
        if k < n {
            idx.select_nth_unstable_by(k - 1, total);
        }
        idx[..k].sort_unstable_by(total);
        for (o, &i) in out.iter_mut().zip(&idx[..k]) {
            *o = i as i32;
        }
    }
}

fn order_cmp(o: SortOrder) -> fn(f32, f32) -> Ordering {
    match o {
        SortOrder::Ascending => asc_value,
        SortOrder::Descending => desc_value,
    }
}

impl CpuKernel for TopK {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        reference_rows(cx, dst, &srcs[0], desc_value);
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        forward_rows(cx, dst, &srcs[0], desc_value);
    }
    fn cases() -> Vec<Case> {
        let mut v = Vec::new();
        for (ne, k, transposed, quick) in [
            ([7usize, 3], 3usize, false, true),
            ([1, 2], 1, false, true),
            ([33, 5], 33, false, true),
            ([50, 4], 5, true, true),
            ([100, 6], 1, false, true),
            ([256, 1], 6, false, false),    // router top-6 of 256 experts
            ([8192, 2], 512, false, false), // indexer top-512
        ] {
            v.push(rank_case("TOP_K", ne, transposed, quick, |g, x| {
                g.top_k(x, k)
            }));
        }
        v
    }
}

impl CpuKernel for Argsort {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        reference_rows(cx, dst, &srcs[0], order_cmp(self.order));
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        forward_rows(cx, dst, &srcs[0], order_cmp(self.order));
    }
    fn cases() -> Vec<Case> {
        let mut v = Vec::new();
        for o in [SortOrder::Ascending, SortOrder::Descending] {
            for (ne, transposed, quick) in [
                ([7usize, 3], false, true),
                ([1, 3], false, true),
                ([9, 6], true, true),
                ([4096, 2], false, false),
            ] {
                v.push(rank_case("ARGSORT", ne, transposed, quick, |g, x| {
                    g.argsort(x, o)
                }));
            }
        }
        v
    }
}

impl CpuKernel for Argmax {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        reference_rows(cx, dst, &srcs[0], desc_value);
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        forward_rows(cx, dst, &srcs[0], desc_value);
    }
    fn cases() -> Vec<Case> {
        let mut v = Vec::new();
        for (ne, transposed, quick) in [
            ([7usize, 3], false, true),
            ([1, 4], false, true),
            ([11, 5], true, true),
            ([129_280, 1], false, false), // greedy sampling over the vocabulary
        ] {
            v.push(rank_case("ARGMAX", ne, transposed, quick, |g, x| {
                g.argmax(x)
            }));
        }
        v
    }
}

/// Row data with many ties (even positions rounded to integers; odd positions keep their
/// continuous value), `−0` and a few NaN.
fn tie_data(rng: &mut CaseRng, n: usize) -> Vec<f32> {
    let mut v = rng.f32s(n, 3.0);
    for (i, x) in v.iter_mut().enumerate() {
        match i % 13 {
            5 => *x = f32::NAN,
            7 => *x = -0.0,
            _ if i % 2 == 0 => *x = x.round(),
            _ => {}
        }
    }
    v
}

/// A case whose I32 output is made comparable as f32: the indices are looked up in a
/// `{1, n}` table holding `0, 1, …, n−1` (GET_ROWS), which is exact.
fn rank_case(
    name: &str,
    ne: [usize; 2],
    transposed: bool,
    quick: bool,
    op: impl Fn(&mut Graph, TensorId) -> Result<TensorId, GraphError>,
) -> Case {
    let mut b = CaseBuilder::new(41);
    let stored = if transposed { [ne[1], ne[0]] } else { ne };
    let d = TensorDesc::f32(&stored).expect("case");
    let data = tie_data(&mut b.rng, d.nelements());
    let mut x = b
        .input_data("x", d, bytemuck::cast_slice(&data).to_vec())
        .expect("case");
    if transposed {
        x = b.g.transpose(x).expect("case");
    }
    let idx = op(&mut b.g, x).expect("case");
    let cnt = b.g.desc(idx).nelements();
    let flat = b.g.reshape(idx, &[cnt]).expect("case");
    let table: Vec<f32> = (0..ne[0]).map(|i| i as f32).collect();
    let td = TensorDesc::f32(&[1, ne[0]]).expect("case");
    let t =
        b.g.weight(
            "index_table",
            td,
            WeightData::from_vec(bytemuck::cast_slice(&table).to_vec()),
        )
        .expect("case");
    let out = b.g.get_rows(t, flat).expect("case");
    let tr = if transposed { "ᵀ" } else { "" };
    let desc = b.g.desc(idx).shape_str();
    b.finish(
        format!("{name} f32{{{},{}}}{tr} → {desc}", ne[0], ne[1]),
        out,
        0.0,
        quick,
    )
    .expect("case")
}

#[cfg(test)]
mod tests {
    use super::*;
    use graph::DType;

    /// Indices from reference and forward (single thread) of `op` on rows of `x`.
    fn run<K: CpuKernel>(op: &K, x: &[f32], n: usize, k: usize) -> [Vec<i32>; 2] {
        let xd = TensorDesc::f32(&[n, x.len() / n]).unwrap();
        let od = TensorDesc::new(DType::I32, &[k, x.len() / n]).unwrap();
        let src = [TensorRef::new(xd, bytemuck::cast_slice(x))];
        let mut res = [Vec::new(), Vec::new()];
        for (i, r) in res.iter_mut().enumerate() {
            let mut out = vec![0u8; od.nbytes()];
            let dst = TensorMut::new(od, &mut out);
            crate::dsv4_testutil::run_one(op, &dst, &src, i != 0);
            *r = bytemuck::cast_slice(&out).to_vec();
        }
        res
    }

    const NAN: f32 = f32::NAN;
    // ties (3 at 1 and 3), ±0 (equal), NaN at 2
    const ROW: [f32; 7] = [1.0, 3.0, NAN, 3.0, -0.0, 0.0, 2.0];

    #[test]
    fn top_k_hand_computed() {
        for got in run(&TopK { k: 3 }, &ROW, 7, 3) {
            assert_eq!(got, [1, 3, 6]);
        }
        for got in run(&TopK { k: 7 }, &ROW, 7, 7) {
            assert_eq!(got, [1, 3, 6, 0, 4, 5, 2]);
        }
        // router-like: two rows of 5, k = 2
        let x = [0.1, 0.9, 0.5, 0.9, -1.0, 4.0, 3.0, 2.0, 1.0, 0.0];
        for got in run(&TopK { k: 2 }, &x, 5, 2) {
            assert_eq!(got, [1, 3, 0, 1]);
        }
    }

    #[test]
    fn argsort_hand_computed() {
        let desc = Argsort {
            order: SortOrder::Descending,
        };
        let asc = Argsort {
            order: SortOrder::Ascending,
        };
        for got in run(&desc, &ROW, 7, 7) {
            assert_eq!(got, [1, 3, 6, 0, 4, 5, 2]);
        }
        for got in run(&asc, &ROW, 7, 7) {
            assert_eq!(got, [2, 4, 5, 0, 6, 1, 3]);
        }
        for got in run(&asc, &[NAN, NAN, 5.0], 3, 3) {
            assert_eq!(got, [0, 1, 2]);
        }
    }

    #[test]
    fn argmax_hand_computed() {
        for got in run(&Argmax, &ROW, 7, 1) {
            assert_eq!(got, [1]);
        }
        // first maximum, NaN ignored, all-NaN row → 0
        let x = [NAN, -2.0, -1.0, -1.0, NAN, NAN, NAN, NAN];
        for got in run(&Argmax, &x, 4, 1) {
            assert_eq!(got, [2, 0]);
        }
    }
}
