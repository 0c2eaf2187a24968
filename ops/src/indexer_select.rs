//! DSA_SELECT kernel: DSA_INDEXER's picks from DSA_SCORES' scores (formula in
//! `graph::op::indexer`). The model's decode step uses it after DSA_SCORES, whose entry chunks
//! spread one token's scoring over every thread; the fused DSA_INDEXER keeps a token on one.
//!
//! Both kernels share DSA_INDEXER's selection: the reference sorts every `(score, index)`
//! with a float comparator; the forward kernel keeps the finite candidates as `u64` keys and
//! runs a partial selection. Tokens (rows) are split statically: a decode step has one.

use crate::case::CaseBuilder;
use crate::indexer::{canonical, desc_key, pick, reference_pick};
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::indexer::DsaSelect;

impl CpuKernel for DsaSelect {
    fn reference(&self, _cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let x = &srcs[0];
        for t in 0..dst.desc.nrows() {
            let sc = x
                .row_f32(t)
                .iter()
                .enumerate()
                .map(|(e, &v)| (canonical(v), e))
                .collect();
            reference_pick(sc, dst.row_i32_mut(t));
        }
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let x = &srcs[0];
        let n = x.desc.ne[0];
        let mut bytes = std::mem::take(&mut cx.scratch.bytes);
        let need = 8 * n + 8;
        if bytes.len() < need {
            bytes.resize(need, 0);
        }
        let (_, keys, _) = bytemuck::pod_align_to_mut::<u8, u64>(&mut bytes[..need]);
        for t in cx.my_rows(dst.desc.nrows()) {
            let mut m = 0;
            for (e, &v) in x.row_f32(t).iter().enumerate() {
                let v = canonical(v);
                if v > f32::NEG_INFINITY {
                    keys[m] = desc_key(v, e);
                    m += 1;
                }
            }
            pick(&mut keys[..m], self.top_k, dst.row_i32_mut(t));
        }
        cx.scratch.bytes = bytes;
    }
    fn cases() -> Vec<Case> {
        let mut v = Vec::new();
        // scores with ties, −∞ (not visible), NaN, ±0 and +∞; top_k below, at and above n
        for (n, t, top_k, quick) in [
            (13usize, 3usize, 5usize, true),
            (40, 2, 40, true),
            (9, 2, 16, true),
            (2048, 1, 512, false),
        ] {
            let mut b = CaseBuilder::new(53 + n as u64);
            let vals: Vec<f32> = b
                .rng
                .f32s(n * t, 4.0)
                .iter()
                .enumerate()
                .map(|(i, &x)| match i % 11 {
                    0 => f32::NEG_INFINITY,
                    3 => 1.5, // ties
                    5 if i % 2 == 0 => -0.0,
                    5 => 0.0,
                    7 if i % 3 == 0 => f32::NAN,
                    9 if i % 5 == 0 => f32::INFINITY,
                    _ => x.round(), // more ties
                })
                .collect();
            let d = graph::TensorDesc::f32(&[n, t]).expect("case");
            let sc = b
                .input_data("scores", d, bytemuck::cast_slice(&vals).to_vec())
                .expect("case");
            let idx = b.g.dsa_select(sc, top_k).expect("case");
            let out = crate::indexer::indices_as_f32(&mut b, idx, n);
            let name = format!("DSA_SELECT n_kv={n} T={t} top_k={top_k}");
            v.push(b.finish(name, out, 0.0, quick).expect("case"));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsv4_testutil::{as_i32, run, Src};
    use graph::op::indexer::{DsaIndexer, DsaScores};
    use graph::OpDef;

    #[test]
    fn selection_of_the_scores_is_the_fused_indexer() {
        // 64 heads × 128 like V4, F16 keys, tokens at several visibilities (one sees none)
        let (d, heads, n_kv, top_k) = (128usize, 64usize, 300usize, 40usize);
        let nv = [300, 150, 7, 0];
        let t = nv.len();
        let mut rng = crate::case::CaseRng::new(11);
        let keys: Vec<f32> = rng.f32s(d * n_kv, 1.0);
        let s = [
            Src::f32(&[d, heads, t], &rng.f32s(d * heads * t, 1.0)),
            Src::f16(&[d, n_kv], &keys),
            Src::f32(&[heads, t], &rng.f32s(heads * t, 0.02)),
            Src::i32(&nv),
        ];
        let srcs: Vec<&Src> = s.iter().collect();
        for nth in [1, 3] {
            let fused = as_i32(&run(&DsaIndexer { top_k }, &srcs, true, nth).1);
            let (sd, sb) = run(&DsaScores, &srcs, true, nth);
            let scores = Src { desc: sd, data: sb };
            let op = DsaSelect { top_k };
            for fwd in [false, true] {
                let split = as_i32(&run(&op, &[&scores], fwd, nth).1);
                assert_eq!(split, fused, "nth={nth} fwd={fwd}");
            }
            assert!(fused[3 * top_k..].iter().all(|&e| e == -1));
            assert!(fused[2 * top_k + 7..3 * top_k].iter().all(|&e| e == -1));
        }
    }

    #[test]
    fn picks_in_order_ties_low_and_pads() {
        let inf = f32::INFINITY;
        let s = Src::f32(&[6, 1], &[2.0, f32::NAN, 2.0, -inf, inf, -0.0]);
        for fwd in [false, true] {
            let p = |k| as_i32(&run(&DsaSelect { top_k: k }, &[&s], fwd, 1).1);
            assert_eq!(p(3), vec![4, 0, 2]);
            assert_eq!(p(8), vec![4, 0, 2, 5, -1, -1, -1, -1]);
        }
        let bad = graph::TensorDesc::new(quant::DType::I32, &[6, 1]).unwrap();
        assert!(DsaSelect { top_k: 2 }.infer(&[&bad]).is_err());
        assert!(DsaSelect { top_k: 0 }.infer(&[&s.desc]).is_err());
    }
}
