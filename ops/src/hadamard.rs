//! HADAMARD kernels. The reference evaluates `y_i = Σ_j (−1)^popcount(i&j)·x_j / sqrt(n)`
//! explicitly in f64 (O(n²) per chunk, an oracle independent of the butterfly); the forward
//! kernel runs the in-place f32 butterfly (`log2 n` stages of `(a, b) → (a+b, a−b)`, ggml's
//! `fwht` order) and scales by `1/sqrt(n)` at the end.

use crate::case::CaseBuilder;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::hadamard::Hadamard;

/// In-place unnormalised fast Walsh–Hadamard transform of `x` (length a power of two),
/// natural (Sylvester) order.
pub fn fwht_unnormalised(x: &mut [f32]) {
    let n = x.len();
    let mut h = 1;
    while h < n {
        for blk in x.chunks_exact_mut(2 * h) {
            let (a, b) = blk.split_at_mut(h);
            for (u, v) in a.iter_mut().zip(b.iter_mut()) {
                let (p, q) = (*u, *v);
                *u = p + q;
                *v = p - q;
            }
        }
        h *= 2;
    }
}

/// In-place normalised transform `x ← H_n·x` (`n = x.len()`, a power of two).
pub fn fwht(x: &mut [f32]) {
    fwht_unnormalised(x);
    let s = 1.0 / (x.len() as f32).sqrt();
    x.iter_mut().for_each(|v| *v *= s);
}

impl CpuKernel for Hadamard {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let n = self.n;
        let s = 1.0 / (n as f64).sqrt();
        let x = &srcs[0];
        let ne0 = x.desc.ne[0];
        let row = cx.scratch.f32(ne0);
        for r in 0..dst.desc.nrows() {
            for (i, v) in row.iter_mut().enumerate() {
                *v = x.get_flat(i, r);
            }
            let out = dst.row_f32_mut(r);
            for c in 0..ne0 / n {
                let xc = &row[c * n..(c + 1) * n];
                for (i, o) in out[c * n..(c + 1) * n].iter_mut().enumerate() {
                    let mut acc = 0.0f64;
                    for (j, &v) in xc.iter().enumerate() {
                        if (i & j).count_ones() % 2 == 0 {
                            acc += v as f64;
                        } else {
                            acc -= v as f64;
                        }
                    }
                    *o = (acc * s) as f32;
                }
            }
        }
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        for r in cx.my_rows(dst.desc.nrows()) {
            let out = dst.row_f32_mut(r);
            srcs[0].row_to_f32(r, out);
            for chunk in out.chunks_exact_mut(self.n) {
                fwht(chunk);
            }
        }
    }
    fn cases() -> Vec<Case> {
        let mut v = Vec::new();
        // (n, shape, layout, quick): layout 0 contiguous, 1 permuted dims 1↔2, 2 transposed
        // (strided rows)
        for (n, shape, layout, quick) in [
            (1usize, vec![3usize, 2], 0u8, true),
            (2, vec![6, 3], 0, true),
            (8, vec![8, 5], 2, true),
            (64, vec![192, 3], 0, true),
            (128, vec![128, 3, 2], 1, true),
            (128, vec![256, 2, 3], 2, true),
            (512, vec![512, 2], 0, true),
            (128, vec![128, 64, 3], 0, false),
            (512, vec![512, 64, 2], 0, false),
            (512, vec![512, 1, 5], 1, false),
        ] {
            let mut b = CaseBuilder::new(21);
            let (x, desc) = match layout {
                0 => (b.input_f32("x", &shape, 1.0).expect("case"), "contiguous"),
                1 => {
                    let mut s = shape.clone();
                    s.swap(1, 2);
                    let x = b.input_f32("x", &s, 1.0).expect("case");
                    (b.g.permute(x, [0, 2, 1, 3]).expect("case"), "permuted")
                }
                _ => {
                    let mut s = shape.clone();
                    s.swap(0, 1);
                    let x = b.input_f32("x", &s, 1.0).expect("case");
                    (b.g.transpose(x).expect("case"), "transposed")
                }
            };
            let out = b.g.hadamard(x, n).expect("case");
            v.push(
                b.finish(
                    format!("HADAMARD n={n} f32{shape:?} {desc}"),
                    out,
                    1e-11,
                    quick,
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
    use crate::dsv4_testutil::{as_f32, assert_close, run, Src};

    fn both(n: usize, x: &[f32], rows: usize) -> [Vec<f32>; 2] {
        let s = Src::f32(&[x.len() / rows, rows], x);
        let op = Hadamard { n };
        [false, true].map(|fwd| as_f32(&run(&op, &[&s], fwd, 2).1))
    }

    #[test]
    fn first_unit_vector_maps_to_scaled_ones() {
        for n in [64usize, 128, 256, 512] {
            let mut x = vec![0.0f32; n];
            x[0] = 1.0;
            let want = vec![1.0 / (n as f64).sqrt(); n];
            for got in both(n, &x, 1) {
                assert_close(&got, &want, 1e-7);
            }
        }
    }

    #[test]
    fn applying_twice_is_the_identity() {
        for n in [64usize, 128, 512] {
            let x: Vec<f32> = (0..3 * n)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 17.0)
                .collect();
            let op = Hadamard { n };
            for fwd in [false, true] {
                let once = as_f32(&run(&op, &[&Src::f32(&[n, 3], &x)], fwd, 1).1);
                let twice = as_f32(&run(&op, &[&Src::f32(&[n, 3], &once)], fwd, 1).1);
                let want: Vec<f64> = x.iter().map(|&v| v as f64).collect();
                assert_close(&twice, &want, 1e-5);
            }
        }
    }

    /// `H_64` built by the Sylvester recursion `H_2s = [[H_s, H_s], [H_s, −H_s]]`, then scaled.
    fn sylvester(n: usize) -> Vec<Vec<f64>> {
        let mut h = vec![vec![1.0f64]];
        while h.len() < n {
            let s = h.len();
            let mut g = vec![vec![0.0; 2 * s]; 2 * s];
            for i in 0..s {
                for j in 0..s {
                    g[i][j] = h[i][j];
                    g[i][j + s] = h[i][j];
                    g[i + s][j] = h[i][j];
                    g[i + s][j + s] = -h[i][j];
                }
            }
            h = g;
        }
        let sc = 1.0 / (n as f64).sqrt();
        h.iter()
            .map(|r| r.iter().map(|v| v * sc).collect())
            .collect()
    }

    #[test]
    fn equals_the_explicit_sylvester_matrix_product() {
        let n = 64;
        let h = sylvester(n);
        // symmetric and H² = I
        for i in 0..n {
            for j in 0..n {
                assert_eq!(h[i][j], h[j][i]);
                let hh: f64 = (0..n).map(|k| h[i][k] * h[k][j]).sum();
                assert!((hh - f64::from(u8::from(i == j))).abs() < 1e-12);
            }
        }
        let x: Vec<f32> = (0..2 * n)
            .map(|i| ((i * 7919) % 23) as f32 - 11.0)
            .collect();
        let want: Vec<f64> = (0..2 * n)
            .map(|o| {
                let (c, i) = (o / n, o % n);
                (0..n).map(|j| h[i][j] * x[c * n + j] as f64).sum()
            })
            .collect();
        for got in both(n, &x, 1) {
            assert_close(&got, &want, 1e-5);
        }
    }
}
