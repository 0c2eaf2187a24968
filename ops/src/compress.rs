//! COMPRESS_POOL kernels (spec §4.5–4.7). The reference is scalar f64 per `(window,
//! channel)`. The forward kernel claims `(window, 128-channel)` chunks — so decode (W = 1)
//! still spreads over threads — and runs two f32 passes over the S slot rows: the running
//! max, then `Σ e^{s−max}` and `Σ e^{s−max}·kv`; `−∞` slots are skipped in both kernels.

use crate::case::CaseBuilder;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::compress::CompressPool;
use graph::TensorDesc;

/// Channels per claimed chunk.
const CHUNK: usize = 128;

impl CpuKernel for CompressPool {
    fn reference(&self, _cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let (kv, sc) = (&srcs[0], &srcs[1]);
        let [d, s_n, w_n, _] = kv.desc.ne;
        for w in 0..w_n {
            let out = dst.row_f32_mut(w);
            for (c, o) in out.iter_mut().enumerate().take(d) {
                let score = |s: usize| sc.row_f32(s + s_n * w)[c] as f64;
                let mx = (0..s_n).map(score).fold(f64::NEG_INFINITY, f64::max);
                if mx == f64::NEG_INFINITY {
                    *o = 0.0;
                    continue;
                }
                let (mut num, mut den) = (0f64, 0f64);
                for s in 0..s_n {
                    if score(s) == f64::NEG_INFINITY {
                        continue;
                    }
                    let e = (score(s) - mx).exp();
                    den += e;
                    num += e * kv.row_f32(s + s_n * w)[c] as f64;
                }
                *o = (num / den) as f32;
            }
        }
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let (kv, sc) = (&srcs[0], &srcs[1]);
        let [d, s_n, w_n, _] = kv.desc.ne;
        let nc = d.div_ceil(CHUNK);
        while let Some(items) = cx.claim(nc * w_n, 1) {
            for item in items {
                let (w, ch) = (item / nc, item % nc);
                let cols = ch * CHUNK..((ch + 1) * CHUNK).min(d);
                let n = cols.len();
                let mut mx = [f32::NEG_INFINITY; CHUNK];
                for s in 0..s_n {
                    let sr = &sc.row_f32(s + s_n * w)[cols.clone()];
                    for (m, &v) in mx[..n].iter_mut().zip(sr) {
                        *m = m.max(v);
                    }
                }
                let (mut num, mut den) = ([0f32; CHUNK], [0f32; CHUNK]);
                for s in 0..s_n {
                    let sr = &sc.row_f32(s + s_n * w)[cols.clone()];
                    let kr = &kv.row_f32(s + s_n * w)[cols.clone()];
                    for c in 0..n {
                        if sr[c] != f32::NEG_INFINITY {
                            let e = (sr[c] - mx[c]).exp();
                            den[c] += e;
                            num[c] += e * kr[c];
                        }
                    }
                }
                let out = dst.row_range_f32_mut(w, cols);
                for c in 0..n {
                    out[c] = if mx[c] == f32::NEG_INFINITY {
                        0.0
                    } else {
                        num[c] / den[c]
                    };
                }
            }
        }
    }
    fn cases() -> Vec<Case> {
        let mut v = Vec::new();
        // (d, S, W, layout, quick): layout 0 contiguous, 1 second half of {2d, S, W} (CSA's
        // Cb/Gb split), 2 permuted from {d, W, S}
        for (d, s, w, layout, quick) in [
            (5usize, 8usize, 1usize, 0u8, true),
            (7, 8, 3, 1, true),
            (130, 8, 2, 2, true),
            (512, 8, 3, 1, true),
            (128, 8, 2, 0, true),
            (33, 128, 2, 0, true),
            (300, 128, 1, 2, true),
            (512, 128, 2, 0, false),
            (512, 128, 3, 1, false),
        ] {
            let mut b = CaseBuilder::new(61);
            // scores with −∞ slots: the empty previous window (first S/2 slots of window 0
            // when S = 8), one fully masked channel, and scattered single slots
            let n = d * s * w;
            let mut sv = b.rng.f32s(n, 3.0);
            for wi in 0..w {
                for si in 0..s {
                    for c in 0..d {
                        let i = c + d * (si + s * wi);
                        let prev_empty = s == 8 && wi == 0 && si < 4;
                        let masked_ch = wi == w - 1 && c == 3 % d;
                        if prev_empty || masked_ch || (i * 7919) % 23 == 0 {
                            sv[i] = f32::NEG_INFINITY;
                        }
                    }
                }
            }
            let kvv = b.rng.f32s(n, 2.0);
            let (kv, score, name) = match layout {
                0 => {
                    let kv = input(&mut b, "kv", &[d, s, w], &kvv);
                    let sc = input(&mut b, "score", &[d, s, w], &sv);
                    (kv, sc, "contiguous")
                }
                1 => {
                    // interleave [junk | real] halves along dim 0
                    let (mut kf, mut sf) = (Vec::new(), Vec::new());
                    for r in 0..s * w {
                        kf.extend(std::iter::repeat_n(f32::NAN, d));
                        kf.extend_from_slice(&kvv[r * d..(r + 1) * d]);
                        sf.extend(std::iter::repeat_n(f32::NAN, d));
                        sf.extend_from_slice(&sv[r * d..(r + 1) * d]);
                    }
                    let kf = input(&mut b, "kv2", &[2 * d, s, w], &kf);
                    let sf = input(&mut b, "score2", &[2 * d, s, w], &sf);
                    let nb = b.g.desc(kf).nb;
                    let kv = b.g.view(kf, [d, s, w, 1], nb, 4 * d).expect("case");
                    let sc = b.g.view(sf, [d, s, w, 1], nb, 4 * d).expect("case");
                    (kv, sc, "second half of {2d,S,W}")
                }
                _ => {
                    let perm = |x: &[f32]| -> Vec<f32> {
                        let mut o = vec![0f32; n];
                        for wi in 0..w {
                            for si in 0..s {
                                let src = d * (si + s * wi);
                                let dst = d * (wi + w * si);
                                o[dst..dst + d].copy_from_slice(&x[src..src + d]);
                            }
                        }
                        o
                    };
                    let kp = input(&mut b, "kv", &[d, w, s], &perm(&kvv));
                    let sp = input(&mut b, "score", &[d, w, s], &perm(&sv));
                    let kv = b.g.permute(kp, [0, 2, 1, 3]).expect("case");
                    let sc = b.g.permute(sp, [0, 2, 1, 3]).expect("case");
                    (kv, sc, "permuted")
                }
            };
            let out = b.g.compress_pool(kv, score).expect("case");
            v.push(
                b.finish(
                    format!("COMPRESS_POOL d={d} S={s} W={w} {name}"),
                    out,
                    1e-10,
                    quick,
                )
                .expect("case"),
            );
        }
        v
    }
}

fn input(b: &mut CaseBuilder, name: &str, ne: &[usize], v: &[f32]) -> graph::TensorId {
    let d = TensorDesc::f32(ne).expect("case");
    b.input_data(name, d, bytemuck::cast_slice(v).to_vec())
        .expect("case")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsv4_testutil::{as_f32, assert_close, run, Src};
    use graph::OpDef;

    #[test]
    fn pools_with_a_per_channel_softmax() {
        let ninf = f32::NEG_INFINITY;
        let ln3 = 3f32.ln();
        // d = 3 channels, S = 2 slots, W = 2 windows; kv/score rows are (slot, window)
        // window 0: ch0 α = [1/4, 3/4] over kv [4, 8] → 7; ch1 all −∞ → 0;
        //           ch2 [−∞, 5] → kv of slot 1 (3), even though slot 0's kv is NaN
        // window 1: ch0 equal scores → mean of [1, 2] = 1.5; ch1 α = [3/4, 1/4] over
        //           [−4, 4] → −2; ch2 [2, −∞] → 6
        let score = [
            0.0, ninf, ninf, ln3, ninf, 5.0, // w0: slot 0, slot 1
            1.0, ln3, 2.0, 1.0, 0.0, ninf, // w1: slot 0, slot 1
        ];
        let kv = [
            4.0,
            9.0,
            f32::NAN,
            8.0,
            9.0,
            3.0,
            1.0,
            -4.0,
            6.0,
            2.0,
            4.0,
            f32::NAN,
        ];
        let (k, s) = (Src::f32(&[3, 2, 2], &kv), Src::f32(&[3, 2, 2], &score));
        for (fwd, nth) in [(false, 1), (true, 1), (true, 2)] {
            let (d, out) = run(&CompressPool, &[&k, &s], fwd, nth);
            assert_eq!(d.ne, [3, 2, 1, 1]);
            assert_close(&as_f32(&out), &[7.0, 0.0, 3.0, 1.5, -2.0, 6.0], 1e-6);
        }
    }

    #[test]
    fn infer_rejects_mismatched_sources() {
        let a = TensorDesc::f32(&[4, 8, 2]).unwrap();
        let b = TensorDesc::f32(&[4, 8, 3]).unwrap();
        assert!(CompressPool.infer(&[&a, &a]).is_ok());
        assert!(CompressPool.infer(&[&a, &b]).is_err());
        let mut t = a;
        t.nb.swap(0, 1);
        assert!(CompressPool.infer(&[&t, &a]).is_err());
    }
}
