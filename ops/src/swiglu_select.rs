//! SWIGLU_SELECT kernel: per row, per 128-row stratum, a partial selection of the largest
//! `SiLU(min(g, limit))²`.

use crate::case::CaseBuilder;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::knobs::{LayerMoe, MoeKnobs};
use graph::op::swiglu_select::{SwigluSelect, STRATUM};
use std::sync::Arc;

fn silu2(g: f32, limit: Option<f32>) -> f64 {
    let g = limit.map_or(g, |l| g.min(l));
    let s = g / (1.0 + (-g).exp());
    (s as f64) * (s as f64)
}

/// Row factors of one row of gates (`keep` of 128 per stratum; 0 or ≥ 128: all ones).
pub fn select_row(
    g: &[f32],
    keep: usize,
    limit: Option<f32>,
    out: &mut [f32],
    order: &mut Vec<usize>,
) {
    if keep == 0 || keep >= STRATUM {
        out.fill(1.0);
        return;
    }
    for (s0, (gs, os)) in g.chunks(STRATUM).zip(out.chunks_mut(STRATUM)).enumerate() {
        let _ = s0;
        let len = gs.len();
        let k = (keep * len).div_ceil(STRATUM).clamp(1, len);
        let v: Vec<f64> = gs.iter().map(|&x| silu2(x, limit)).collect();
        order.clear();
        order.extend(0..len);
        order.sort_by(|&a, &b| v[b].total_cmp(&v[a]).then(a.cmp(&b)));
        let all: f64 = v.iter().sum();
        let kept: f64 = order[..k].iter().map(|&i| v[i]).sum();
        let f = if kept > 0.0 {
            (all / kept).sqrt() as f32
        } else {
            1.0
        };
        os.fill(0.0);
        for &i in &order[..k] {
            os[i] = f;
        }
    }
}

fn rows(op: &SwigluSelect, cx: &KernelCx, dst: &TensorMut, g: &TensorRef) {
    let m = op.knobs.get(op.layer);
    let keep = if op.shared {
        m.keep_shared
    } else {
        m.keep_experts
    } as usize;
    let mut order = Vec::new();
    for r in cx.my_rows(dst.desc.nrows()) {
        select_row(g.row_f32(r), keep, op.limit, dst.row_f32_mut(r), &mut order);
    }
}

impl CpuKernel for SwigluSelect {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows(self, cx, dst, &srcs[0]);
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        rows(self, cx, dst, &srcs[0]);
    }
    fn cases() -> Vec<Case> {
        let knobs = Arc::new(MoeKnobs::new(2));
        knobs.set(
            1,
            LayerMoe {
                keep_experts: 80,
                keep_shared: 100,
                ..LayerMoe::MODEL
            },
        );
        let mut v = Vec::new();
        for (layer, shared) in [(0, false), (1, false), (1, true)] {
            let mut b = CaseBuilder::new(80);
            let g = b.input_f32("g", &[300, 3], 4.0).expect("case");
            let out =
                b.g.swiglu_select(g, layer, knobs.clone(), shared, Some(2.5))
                    .expect("case");
            v.push(
                b.finish(
                    format!("SWIGLU_SELECT layer {layer} shared={shared}"),
                    out,
                    0.0,
                    true,
                )
                .expect("case"),
            );
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_largest_and_rescales_each_stratum() {
        // one stratum of 128 with 4 large gates; keep 4 → exactly those, factor sqrt(Σall/Σkept)
        let mut g = vec![0.01f32; 128];
        for (i, x) in [(5usize, 3.0f32), (17, 2.0), (60, -1.0), (99, 1.5)] {
            g[i] = x;
        }
        g[60] = 4.0; // clamped to 2.5 by the limit below
        let mut out = vec![0f32; 128];
        select_row(&g, 4, Some(2.5), &mut out, &mut Vec::new());
        let kept: Vec<usize> = (0..128).filter(|&i| out[i] != 0.0).collect();
        assert_eq!(kept, vec![5, 17, 60, 99]);
        let v = |x: f32| silu2(x, Some(2.5));
        let all: f64 = g.iter().map(|&x| v(x)).sum();
        let k: f64 = [5, 17, 60, 99].iter().map(|&i| v(g[i])).sum();
        assert!((out[5] as f64 - (all / k).sqrt()).abs() < 1e-6);
        assert!(kept.iter().all(|&i| out[i] == out[5]));
    }

    #[test]
    fn strata_are_independent_and_partial_strata_keep_proportionally() {
        let g: Vec<f32> = (0..192)
            .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
            .collect();
        let mut out = vec![0f32; 192];
        select_row(&g, 64, None, &mut out, &mut Vec::new());
        assert_eq!(out[..128].iter().filter(|&&x| x != 0.0).count(), 64);
        assert_eq!(
            out[128..].iter().filter(|&&x| x != 0.0).count(),
            32,
            "64 rows keep ceil(64·64/128)"
        );
    }

    #[test]
    fn no_skipping_is_exactly_one() {
        let g = [0.3f32, -2.0, 5.0];
        for keep in [0, 128, 200] {
            let mut out = [7f32; 3];
            select_row(&g, keep, Some(1.0), &mut out, &mut Vec::new());
            assert_eq!(out, [1.0; 3]);
        }
    }
}
