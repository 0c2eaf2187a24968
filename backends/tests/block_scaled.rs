//! A block-scaled FP8 E4M3 weight (an official checkpoint's dense matrix used in place)
//! multiplies as the F32 matrix of its codes times their tile scales would, on the reference
//! and the optimized executor, for decode and prompt-chunk column counts and partial tiles;
//! and the graph refuses such a weight anywhere its scales would be ignored.

use fathom_backends::{ExecConfig, Executor};
use graph::{BlockScales, Graph, TensorDesc, WeightData};
use quant::DType;
use std::sync::Arc;

/// Deterministic values in ±`scale`.
fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// `{k, n}` codes and `tile`×`tile` scales, and the same matrix as F32.
fn matrices(k: usize, n: usize, tile: usize) -> (Vec<u8>, BlockScales, Vec<f32>) {
    let mut codes = vec![0u8; k * n];
    quant::codec::float::quant_e4m3(&values(k * n, 7, 300.0), &mut codes);
    let per_row = k.div_ceil(tile);
    let scales: Vec<f32> = (0..n.div_ceil(tile) * per_row)
        .map(|i| 2f32.powi((i % 9) as i32 - 12))
        .collect();
    let f32s = (0..n)
        .flat_map(|r| {
            let (codes, scales) = (&codes, &scales);
            (0..k).map(move |c| {
                quant::fp8::e4m3_to_f32(codes[r * k + c]) * scales[r / tile * per_row + c / tile]
            })
        })
        .collect();
    let bs = BlockScales {
        rows: tile,
        cols: tile,
        per_row,
        values: scales,
    };
    (codes, bs, f32s)
}

fn matmul(
    w: (DType, WeightData),
    k: usize,
    n: usize,
    x: &[f32],
    cfg: Option<ExecConfig>,
) -> Vec<f32> {
    let t = x.len() / k;
    let mut g = Graph::new();
    let wid = g
        .weight("w", TensorDesc::new(w.0, &[k, n]).unwrap(), w.1)
        .unwrap();
    let xid = g.input("x", TensorDesc::f32(&[k, t]).unwrap()).unwrap();
    let y = g.mul_mat(wid, xid).unwrap();
    g.output("y", y).unwrap();
    let mut e = match cfg {
        Some(c) => Executor::new(g, c),
        None => Executor::reference(g),
    };
    e.set_input_f32("x", x).unwrap();
    e.run();
    e.output_f32("y").unwrap()
}

#[test]
fn a_block_scaled_matmul_is_the_matmul_of_its_scaled_values() {
    for (k, n, tile) in [
        (256usize, 300usize, 128usize),
        (300, 61, 32),
        (4096, 130, 128),
    ] {
        let (codes, bs, f32s) = matrices(k, n, tile);
        let bs = Arc::new(bs);
        for t in [1usize, 3, 11] {
            let x = values(k * t, 11 + t as u64, 2.0);
            let want = matmul(
                (
                    DType::F32,
                    WeightData::from_vec(bytemuck::cast_slice(&f32s).to_vec()),
                ),
                k,
                n,
                &x,
                None,
            );
            let scaled = || {
                (
                    DType::F8_E4M3,
                    WeightData::from_vec(codes.clone()).with_block_scales(bs.clone()),
                )
            };
            let mut runs = vec![("reference", matmul(scaled(), k, n, &x, None))];
            for threads in [1, 2, 3] {
                let cfg = ExecConfig {
                    threads,
                    ..ExecConfig::default()
                };
                runs.push(("optimized", matmul(scaled(), k, n, &x, Some(cfg))));
            }
            for (what, got) in runs {
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    let row = i % n;
                    let mag: f32 = (0..k)
                        .map(|c| (f32s[row * k + c] * x[(i / n) * k + c]).abs())
                        .sum();
                    // prompt chunks (four columns or more) run the f32 tile on expanded
                    // rows: f32 sums, within (k/8 + 4)·2⁻²⁴·Σ|w·x|; the dots within 1e-6·Σ
                    let bound = if t >= 4 && what == "optimized" {
                        (k as f32 / 8.0 + 4.0) * 2f32.powi(-24)
                    } else {
                        1e-6
                    };
                    assert!(
                        (g - w).abs() <= bound * mag,
                        "{what} k={k} n={n} t={t} out {i}: {g} vs {w}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_graph_refuses_fp8_codes_where_their_scales_would_be_ignored() {
    let (codes, bs, _) = matrices(64, 8, 32);
    let desc = TensorDesc::new(DType::F8_E4M3, &[64, 8]).unwrap();
    let mut g = Graph::new();
    let x = g.input("x", TensorDesc::f32(&[64, 1]).unwrap()).unwrap();
    // codes without scales
    let bare = g
        .weight("bare", desc, WeightData::from_vec(codes.clone()))
        .unwrap();
    let e = g.mul_mat(bare, x).unwrap_err().to_string();
    assert!(e.contains("'bare'") && e.contains("scale"), "{e}");
    // a grid for another shape
    let wrong = BlockScales {
        per_row: 1,
        ..bs.clone()
    };
    let w2 = g
        .weight(
            "wrong",
            desc,
            WeightData::from_vec(codes.clone()).with_block_scales(Arc::new(wrong)),
        )
        .unwrap();
    assert!(g.mul_mat(w2, x).is_err());
    // scaled, but rows taken by GET_ROWS (an embedding lookup would read them unscaled)
    let w = g
        .weight(
            "w",
            desc,
            WeightData::from_vec(codes).with_block_scales(Arc::new(bs)),
        )
        .unwrap();
    let ids = g
        .input("ids", TensorDesc::new(DType::I32, &[1]).unwrap())
        .unwrap();
    let e = g.get_rows(w, ids).unwrap_err().to_string();
    assert!(e.contains("only MUL_MAT"), "{e}");
    assert!(g.mul_mat(w, x).is_ok());
}
