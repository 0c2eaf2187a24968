//! Every multi-row (decode) kernel of the kernel table this CPU runs against the reference
//! (the float types: against the one-row kernel of their level), bit for bit, for every row
//! count, long rows and large batches.

mod common;

use common::{
    activations, assert_rows_match, kernels_of, random_blocks, rng, set_iq1m_scales, Tally,
    Q2X_SCALES,
};
use fathom_quant as quant;
use quant::simd::table::Column;
use quant::{bytes_for, quantize_activation, DType};

/// The multi-row kernels give each weight row the single-row reference's bits, for every
/// row count 1..=9 (all pass tails) and several row lengths (partial groups of eight
/// blocks), with extreme codes in the weights.
#[test]
fn multi_row_kernels_match_the_reference_bit_for_bit() {
    let mut tally = Tally::default();
    let mut types = Vec::new();
    let mut r = rng(0x3c02);
    for (wt, act, blk, scale_at) in [
        (DType::Q8_0, DType::Q8_0, 32usize, &[0usize][..]),
        (DType::IQ2_XXS, DType::Q8_K, 256, &[0]),
        (DType::Q2_0, DType::Q8_0, 64, &[0]),
        (DType::Q2_0_X, DType::Q8_0, 512, &Q2X_SCALES),
        (DType::Q6_K, DType::Q8_K, 256, &[208]),
        (DType::IQ1_S, DType::Q8_K, 256, &[0]),
        (DType::IQ1_S_X, DType::Q8_K, 256, &[0]),
        (DType::IQ2_XXS_X, DType::Q8_K, 256, &[0]),
        (DType::Q5_K, DType::Q8_K, 256, &[0, 2]),
        (DType::Q4_K, DType::Q8_K, 256, &[0, 2]),
        (DType::MXFP4, DType::Q8_0, 32, &[]),
        (DType::IQ1_M, DType::Q8_K, 256, &[]),
        (DType::IQ1_M_X, DType::Q8_K, 256, &[]),
    ] {
        types.push(wt);
        let reference = wt.info().vec_dot.unwrap();
        for nb in [1usize, 3, 8, 9, 17] {
            let n = blk * nb;
            let x = activations(&mut r, n, 2.0);
            let mut a = vec![0u8; bytes_for(act, n).unwrap()];
            quantize_activation(act, &x, &mut a).unwrap();
            for rows in 1..=9usize {
                let ws: Vec<Vec<u8>> = (0..rows)
                    .map(|i| {
                        let mut w = random_blocks(&mut r, wt, n, scale_at, 0.004);
                        // row 1: the extreme codes −128 and 127 in its first block
                        if i == 1 && wt == DType::Q8_0 {
                            w[2] = 0x80;
                            w[3] = 0x7f;
                        }
                        // MXFP4: E8M0 scales 2^-16..2^7 (random bytes would overflow);
                        // row 2 only the subnormal codes 0 and 1 and the smallest normal, 2
                        // (alone in their row, so that they decide its result)
                        if wt == DType::MXFP4 {
                            for blk in w.chunks_exact_mut(17) {
                                blk[0] = if i == 2 {
                                    blk[0] % 3
                                } else {
                                    112 + blk[0] % 24
                                };
                            }
                        }
                        if matches!(wt, DType::IQ1_M | DType::IQ1_M_X) {
                            set_iq1m_scales(&mut r, &mut w, wt, 0.004);
                        }
                        w
                    })
                    .collect();
                assert_rows_match(&mut tally, wt, n, &ws, &a, reference);
            }
        }
    }
    tally.assert_all(Column::Rows, &types);
}

/// Callers hand a multi-row kernel up to `DOT_BATCH` rows at once, and kernels that prepare
/// their activation side once per call (Q2_0: per segment of 128 blocks, MXFP4: of 64 block
/// pairs, IQ1_S_X, IQ1_M_X, IQ2_XXS and the AVX2 grid kernels: of 32 super-blocks, IQ2_XXS's in pairs, so odd
/// counts end on a single block; for batches of 64 rows) must give every row the
/// reference's bits across segment and batch boundaries.
#[test]
fn long_rows_and_large_batches_match_the_reference_bit_for_bit() {
    let mut tally = Tally::default();
    let mut r = rng(0xba7c4);
    for (wt, act, blk, nbs, at) in [
        (
            DType::Q2_0,
            DType::Q8_0,
            64usize,
            [128usize, 131, 263],
            &[0usize][..],
        ),
        (DType::Q2_0_X, DType::Q8_0, 512, [16, 17, 33], &Q2X_SCALES),
        (DType::Q8_0, DType::Q8_0, 32, [128, 131, 263], &[0]),
        (DType::MXFP4, DType::Q8_0, 32, [128, 131, 263], &[]),
        (DType::IQ1_M_X, DType::Q8_K, 256, [32, 35, 70], &[]),
        (DType::IQ1_S_X, DType::Q8_K, 256, [32, 35, 70], &[0]),
        (DType::IQ1_S, DType::Q8_K, 256, [32, 35, 70], &[0]),
        (DType::IQ1_M, DType::Q8_K, 256, [32, 35, 70], &[]),
        (DType::IQ2_XXS, DType::Q8_K, 256, [32, 35, 71], &[0]),
        (DType::IQ2_XXS_X, DType::Q8_K, 256, [32, 35, 70], &[0]),
    ] {
        let reference = wt.info().vec_dot.unwrap();
        for nb in nbs {
            let n = blk * nb;
            let x = activations(&mut r, n, 2.0);
            let mut a = vec![0u8; bytes_for(act, n).unwrap()];
            quantize_activation(act, &x, &mut a).unwrap();
            let ws: Vec<Vec<u8>> = (0..quant::simd::DOT_BATCH + 6)
                .map(|_| {
                    let mut w = random_blocks(&mut r, wt, n, at, 0.004);
                    // MXFP4: E8M0 scales 2^-16..2^7 (random bytes would overflow)
                    if wt == DType::MXFP4 {
                        for blk in w.chunks_exact_mut(17) {
                            blk[0] = 112 + blk[0] % 24;
                        }
                    }
                    // finite super-scales (random bits make NaNs, whose payloads follow the
                    // operand order the compiler picks for an add)
                    if matches!(wt, DType::IQ1_M | DType::IQ1_M_X) {
                        set_iq1m_scales(&mut r, &mut w, wt, 0.004);
                    }
                    w
                })
                .collect();
            for rows in [1usize, 5, 63, 64, 65, quant::simd::DOT_BATCH + 6] {
                assert_rows_match(&mut tally, wt, n, &ws[..rows], &a, reference);
            }
        }
    }
    let checked = [
        DType::Q2_0,
        DType::Q2_0_X,
        DType::Q8_0,
        DType::MXFP4,
        DType::IQ1_M_X,
        DType::IQ1_S_X,
        DType::IQ1_S,
        DType::IQ1_M,
        DType::IQ2_XXS,
        DType::IQ2_XXS_X,
    ];
    tally.assert_all(Column::Rows, &checked);
}

/// The float multi-row kernels give each row the bits of the one-row kernel of their tier
/// (which itself is within the reordering bound of the reference): every row count 1..=9
/// and lengths with every eight- and sixteen-element tail.
#[test]
fn float_multi_row_kernels_match_the_one_row_kernel_bit_for_bit() {
    let mut tally = Tally::default();
    let mut r = rng(0xf10b8);
    for wt in [DType::F32, DType::F16, DType::BF16] {
        // each multi-row kernel against the one-row kernel of its own level: the levels sum
        // their f64 lanes in different orders
        let ones = kernels_of(wt, |r| r.dot);
        for n in [1usize, 7, 8, 9, 15, 16, 17, 31, 64, 257, 4099] {
            let x = activations(&mut r, n, 3.0);
            let mut a = vec![0u8; bytes_for(wt, n).unwrap()];
            quantize_activation(wt, &x, &mut a).unwrap();
            for rows in 1..=9usize {
                let ws: Vec<Vec<u8>> = (0..rows)
                    .map(|_| {
                        let mut w = vec![0u8; bytes_for(wt, n).unwrap()];
                        quant::quantize_row(wt, &activations(&mut r, n, 1.5), &mut w).unwrap();
                        w
                    })
                    .collect();
                let refs: Vec<&[u8]> = ws.iter().map(|w| w.as_slice()).collect();
                for (level, kernel) in kernels_of(wt, |r| r.rows) {
                    let one = ones
                        .iter()
                        .find(|o| o.0 == level)
                        .unwrap_or_else(|| panic!("{wt:?}: no one-row {level} kernel"));
                    let mut out = vec![f32::NAN; ws.len()];
                    (kernel.f)(n, &refs, &a, &mut out);
                    for (i, w) in ws.iter().enumerate() {
                        let want = (one.1.f)(n, w, &a);
                        assert_eq!(
                            out[i].to_bits(),
                            want.to_bits(),
                            "{wt:?} {level} n={n} row {i}"
                        );
                    }
                    tally.ran(wt, Column::Rows, level, &kernel);
                }
            }
        }
    }
    tally.assert_all(Column::Rows, &[DType::F32, DType::F16, DType::BF16]);
}

/// The FP8 multi-row kernel gives each row the bits of the one-row kernel of its level, for
/// every row count 1..=9 and every eight-element tail (F32 activations).
#[test]
fn f8_multi_row_kernel_matches_the_one_row_kernel_bit_for_bit() {
    let mut tally = Tally::default();
    let mut r = rng(0xf8b8);
    let wt = DType::F8_E4M3;
    let ones = kernels_of(wt, |r| r.dot);
    for n in [1usize, 7, 8, 9, 15, 16, 17, 31, 64, 257, 4099] {
        let x = activations(&mut r, n, 3.0);
        let mut a = vec![0u8; bytes_for(DType::F32, n).unwrap()];
        quantize_activation(DType::F32, &x, &mut a).unwrap();
        for rows in 1..=9usize {
            let ws: Vec<Vec<u8>> = (0..rows)
                .map(|_| (0..n).map(|_| (r() as u8) & 0xF7).collect())
                .collect();
            let refs: Vec<&[u8]> = ws.iter().map(|w| w.as_slice()).collect();
            for (level, kernel) in kernels_of(wt, |r| r.rows) {
                let one = ones.iter().find(|o| o.0 == level).expect("one-row kernel");
                let mut out = vec![f32::NAN; ws.len()];
                (kernel.f)(n, &refs, &a, &mut out);
                for (i, w) in ws.iter().enumerate() {
                    let want = (one.1.f)(n, w, &a);
                    assert_eq!(out[i].to_bits(), want.to_bits(), "{level} n={n} row {i}");
                }
                tally.ran(wt, Column::Rows, level, &kernel);
            }
        }
    }
    tally.assert_all(Column::Rows, &[wt]);
}

/// The MXFP4 kernels on rows in the official FP4 layout (codes and scales apart, an
/// official checkpoint's experts used in place) give each row the reference's bits on that
/// row converted to MXFP4: the multi-row kernel for every pass tail (1..=9 rows), every
/// group-of-eight tail and odd block counts, long rows across the activation segments, large
/// batches, scales from subnormal products to 2^7; the multi-column kernel for every column
/// count 1..=9 (every pass split, the one-column call).
#[test]
fn split_fp4_row_kernels_match_the_reference_on_converted_rows() {
    let mut tally = Tally::default();
    let mut r = rng(0x5b117);
    let reference = DType::MXFP4.info().vec_dot.unwrap();
    for nb in [1usize, 2, 3, 7, 8, 9, 10, 17, 128, 131, 263] {
        let n = 32 * nb;
        let x = activations(&mut r, n, 2.0);
        let mut a = vec![0u8; bytes_for(DType::Q8_0, n).unwrap()];
        quantize_activation(DType::Q8_0, &x, &mut a).unwrap();
        let rows_max = quant::simd::DOT_BATCH + 6;
        let mut codes = Vec::new();
        let mut scales = Vec::new();
        for i in 0..rows_max {
            let c: Vec<u8> = (0..16 * nb).map(|_| r() as u8).collect();
            // row 2: the smallest scales (subnormal products); the others 2^-16..2^7
            let s: Vec<u8> = (0..nb)
                .map(|_| {
                    let b = r() as u8;
                    if i == 2 {
                        b % 3
                    } else {
                        112 + b % 24
                    }
                })
                .collect();
            codes.push(c);
            scales.push(s);
        }
        let want: Vec<u32> = codes
            .iter()
            .zip(&scales)
            .map(|(c, s)| {
                let w = quant::fp8::fp4_ds_to_mxfp4(c, s, 1, n).unwrap();
                reference(n, &w, &a).to_bits()
            })
            .collect();
        let cs: Vec<&[u8]> = codes.iter().map(|c| c.as_slice()).collect();
        let ss: Vec<&[u8]> = scales.iter().map(|s| s.as_slice()).collect();
        let pairs: Vec<(&[u8], &[u8])> = cs.iter().copied().zip(ss.iter().copied()).collect();
        // the multi-column kernel: row 0 (and row 2, the small scales) against columns of
        // other activations, every column count 1..=9
        let cols: Vec<Vec<u8>> = (0..9)
            .map(|_| {
                let x = activations(&mut r, n, 2.0);
                let mut a = vec![0u8; bytes_for(DType::Q8_0, n).unwrap()];
                quantize_activation(DType::Q8_0, &x, &mut a).unwrap();
                a
            })
            .collect();
        let acts: Vec<&[u8]> = cols.iter().map(|a| a.as_slice()).collect();
        for (level, kernel) in kernels_of(DType::MXFP4, |r| r.split) {
            for rows in (1..=9usize).chain([63, 64, 65, rows_max]) {
                let mut out = vec![f32::NAN; rows];
                (kernel.f.rows)(n, &pairs[..rows], &a, &mut out);
                let got: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
                assert_eq!(
                    got,
                    want[..rows],
                    "{}@{level} nb={nb} rows={rows}",
                    kernel.name
                );
            }
            for row in [0usize, 2] {
                let w = quant::fp8::fp4_ds_to_mxfp4(cs[row], ss[row], 1, n).unwrap();
                for m in 1..=acts.len() {
                    let mut out = vec![f32::NAN; m];
                    (kernel.f.multi)(n, cs[row], ss[row], &acts[..m], &mut out);
                    for (c, o) in out.iter().enumerate() {
                        assert_eq!(
                            o.to_bits(),
                            reference(n, &w, acts[c]).to_bits(),
                            "{}@{level} multi nb={nb} row {row} cols={m} col {c}",
                            kernel.name
                        );
                    }
                }
            }
            tally.ran(DType::MXFP4, Column::Split, level, &kernel);
        }
    }
    tally.assert_all(Column::Split, &[DType::MXFP4]);
}
