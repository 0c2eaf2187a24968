//! A NaN or infinity in the activations of a matrix product comes out non-finite in exactly
//! the output columns it reaches, for every weight type, every kernel level this CPU runs
//! (matvec, multi-row and tile paths) and the reference: the 8-bit activation quantizers
//! would otherwise turn it into code 0 and the model into finite, wrong logits.

use fathom_backends::{ExecConfig, Executor};
use graph::TensorDesc;
use ops::case::CaseBuilder;
use quant::simd::table::CpuLevel;
use quant::DType;

const TYPES: [DType; 16] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::Q8_0,
    DType::Q2_0,
    DType::Q2_0_X,
    DType::MXFP4,
    DType::Q4_K,
    DType::Q5_K,
    DType::Q6_K,
    DType::IQ2_XXS,
    DType::IQ2_XXS_X,
    DType::IQ1_S,
    DType::IQ1_S_X,
    DType::IQ1_M,
    DType::IQ1_M_X,
];

fn configs() -> Vec<(String, ExecConfig)> {
    let mut v = vec![(
        "reference".to_string(),
        ExecConfig {
            reference: true,
            ..ExecConfig::default()
        },
    )];
    for level in CpuLevel::detect().up_to() {
        for threads in [1, 2] {
            v.push((
                format!("{} × {threads}", level.name()),
                ExecConfig {
                    threads,
                    pin: false,
                    cpu: level,
                    ..ExecConfig::default()
                },
            ));
        }
    }
    v
}

fn run(b: &CaseBuilder, cfg: &ExecConfig, x: &[f32], ids: Option<&[i32]>) -> Vec<f32> {
    let mut e = Executor::new(b.g.clone(), cfg.clone());
    e.set_input_f32("x", x).unwrap();
    if let Some(ids) = ids {
        e.set_input_i32("ids", ids).unwrap();
    }
    e.run();
    e.output_f32("out").unwrap()
}

#[test]
fn non_finite_activations_reach_the_output_of_every_kernel() {
    let (k, n) = (512usize, 13usize);
    let mut checked = 0;
    for wt in TYPES {
        // one column (matvec), three (multi-column), nine (tiles)
        for t in [1usize, 3, 9] {
            let mut b = CaseBuilder::new(7 + t as u64);
            let w = b.weight("w", wt, &[k, n], 1.0).unwrap();
            let x = b.g.input("x", TensorDesc::f32(&[k, t]).unwrap()).unwrap();
            let y = b.g.mul_mat(w, x).unwrap();
            b.g.output("out", y).unwrap();
            let clean: Vec<f32> = (0..k * t)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.02)
                .collect();
            for (name, cfg) in configs() {
                let base = run(&b, &cfg, &clean, None);
                assert!(
                    base.iter().all(|v| v.is_finite()),
                    "{wt} t={t} {name}: finite input gave non-finite output"
                );
                // the bad value in the last column, at the start, middle or end of a row
                for (at, bad) in [
                    (0, f32::NAN),
                    (k / 2 + 3, f32::INFINITY),
                    (k - 1, -f32::INFINITY),
                ] {
                    let mut x = clean.clone();
                    x[(t - 1) * k + at] = bad;
                    let out = run(&b, &cfg, &x, None);
                    for c in 0..t {
                        for r in 0..n {
                            let v = out[c * n + r];
                            if c == t - 1 {
                                assert!(
                                    !v.is_finite(),
                                    "{wt} t={t} {name} {bad}@{at}: row {r} is {v}"
                                );
                            } else {
                                assert_eq!(
                                    v.to_bits(),
                                    base[c * n + r].to_bits(),
                                    "{wt} t={t} {name}: column {c} changed"
                                );
                            }
                        }
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= TYPES.len() * 3 * 3 * 2);
}

#[test]
fn non_finite_activations_reach_the_output_of_expert_products() {
    let (k, n, experts, used, t) = (512usize, 7usize, 4usize, 2usize, 3usize);
    for wt in [
        DType::Q8_0,
        DType::Q4_K,
        DType::IQ2_XXS,
        DType::MXFP4,
        DType::IQ1_S_X,
    ] {
        let mut b = CaseBuilder::new(11);
        let w = b.weight("w", wt, &[k, n, experts], 1.0).unwrap();
        let x =
            b.g.input("x", TensorDesc::f32(&[k, 1, t]).unwrap())
                .unwrap();
        let ids =
            b.g.input("ids", TensorDesc::new(DType::I32, &[used, t]).unwrap())
                .unwrap();
        let y = b.g.mul_mat_id(w, x, ids).unwrap();
        b.g.output("out", y).unwrap();
        let id_v: Vec<i32> = vec![0, 3, 1, 2, 3, 0];
        let mut xs: Vec<f32> = (0..k * t)
            .map(|i| ((i * 13 % 29) as f32 - 14.0) * 0.05)
            .collect();
        xs[k + 100] = f32::NAN; // token 1
        for (name, cfg) in configs() {
            let out = run(&b, &cfg, &xs, Some(&id_v));
            for tok in 0..t {
                for u in 0..used {
                    for r in 0..n {
                        let v = out[(tok * used + u) * n + r];
                        assert_eq!(
                            !v.is_finite(),
                            tok == 1,
                            "{wt} {name}: token {tok} expert slot {u} row {r} = {v}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn attention_rows_that_see_a_nan_are_nan() {
    // q {32, 3 heads, 2 tokens}, kv {32, 40}: key 2 has a NaN; token 0 has it masked out,
    // token 1 sees it. Head 1 of token 0 has a NaN query (all its scores NaN: the case an
    // ordinary max turns into an all-masked row of zeros).
    let (d, h, t, n_kv) = (32usize, 3usize, 2usize, 40usize);
    for sinks in [false, true] {
        let mut g = graph::Graph::new();
        let q = g.input("q", TensorDesc::f32(&[d, h, t]).unwrap()).unwrap();
        let kv = g.input("kv", TensorDesc::f32(&[d, n_kv]).unwrap()).unwrap();
        let m = g.input("m", TensorDesc::f32(&[n_kv, t]).unwrap()).unwrap();
        let s = sinks.then(|| g.input("s", TensorDesc::f32(&[h]).unwrap()).unwrap());
        let y = g.flash_attn_ext(q, kv, Some(m), s, 0.2).unwrap();
        g.output("out", y).unwrap();
        let mut qs: Vec<f32> = (0..d * h * t)
            .map(|i| ((i * 7 % 23) as f32 - 11.0) * 0.1)
            .collect();
        qs[d + 5] = f32::NAN; // token 0, head 1
        let mut kvs: Vec<f32> = (0..d * n_kv)
            .map(|i| ((i * 5 % 19) as f32 - 9.0) * 0.1)
            .collect();
        kvs[2 * d + 7] = f32::NAN;
        let mut mask = vec![0f32; n_kv * t];
        mask[2] = f32::NEG_INFINITY; // token 0 does not see key 2
        for (name, cfg) in configs() {
            let mut e = Executor::new(g.clone(), cfg);
            e.set_input_f32("q", &qs).unwrap();
            e.set_input_f32("kv", &kvs).unwrap();
            e.set_input_f32("m", &mask).unwrap();
            if sinks {
                e.set_input_f32("s", &[0.5, -1.0, 2.0]).unwrap();
            }
            e.run();
            let out = e.output_f32("out").unwrap();
            for tok in 0..t {
                for head in 0..h {
                    let row = &out[(tok * h + head) * d..(tok * h + head + 1) * d];
                    let nan = tok == 1 || head == 1;
                    assert!(
                        row.iter().all(|v| v.is_nan() == nan),
                        "{name} sinks={sinks}: token {tok} head {head}: {row:?}"
                    );
                }
            }
        }
    }
}
