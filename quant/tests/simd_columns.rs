//! Every multi-column kernel of the kernel table this CPU runs against the reference, bit
//! for bit, for every column count and several row lengths; and the column split the
//! callers use.

mod common;

use common::{activations, kernels_of, random_blocks, rng, set_iq1m_scales, Tally, Q2X_SCALES};
use fathom_quant as quant;
use quant::simd::table::Column;
use quant::{bytes_for, quantize_activation, DType};

/// The multi-column kernels give each column the single-column reference's bits, for every
/// column count 1..=17 (all chunk tails of eight- and sixteen-column passes) and several row
/// lengths.
#[test]
fn multi_column_kernels_match_the_reference_bit_for_bit() {
    let mut tally = Tally::default();
    let mut types = Vec::new();
    let mut r = rng(0x3c01);
    for (wt, act, blk, scale_at) in [
        (DType::Q8_0, DType::Q8_0, 32usize, 0usize),
        (DType::IQ2_XXS, DType::Q8_K, 256, 0),
        (DType::IQ1_S, DType::Q8_K, 256, 0),
        (DType::IQ1_S_X, DType::Q8_K, 256, 0),
        (DType::IQ2_XXS_X, DType::Q8_K, 256, 0),
        (DType::Q2_0, DType::Q8_0, 64, 0),
        (DType::Q2_0_X, DType::Q8_0, 512, 0),
        (DType::IQ1_M, DType::Q8_K, 256, 0),
        (DType::IQ1_M_X, DType::Q8_K, 256, 0),
        (DType::Q4_K, DType::Q8_K, 256, 0),
        (DType::Q5_K, DType::Q8_K, 256, 0),
        (DType::MXFP4, DType::Q8_0, 32, 0),
        (DType::Q6_K, DType::Q8_K, 256, 208),
    ] {
        types.push(wt);
        let kernels = kernels_of(wt, |r| r.multi);
        let reference = wt.info().vec_dot.unwrap();
        for nb in [1usize, 3, 8, 9, 17] {
            let n = blk * nb;
            // IQ1_M(_X) has no scale field: its scale is in the scale words' top nibbles
            // (and the K-quants two, `d` and `dmin`; MXFP4's is one E8M0 byte, set below)
            let at: &[usize] = match wt {
                DType::IQ1_M | DType::IQ1_M_X | DType::MXFP4 => &[],
                DType::Q4_K | DType::Q5_K => &[0, 2],
                DType::Q2_0_X => &Q2X_SCALES,
                _ => &[scale_at],
            };
            let mut w = random_blocks(&mut r, wt, n, at, 0.004);
            if matches!(wt, DType::IQ1_M | DType::IQ1_M_X) {
                set_iq1m_scales(&mut r, &mut w, wt, 0.004);
            }
            // MXFP4: E8M0 scales 2^-16..2^7 and, in every fifth block, the subnormal codes
            // 0..2 (random bytes would overflow)
            if wt == DType::MXFP4 {
                for (i, blk) in w.chunks_exact_mut(17).enumerate() {
                    blk[0] = if i % 5 == 4 {
                        blk[0] % 3
                    } else {
                        112 + blk[0] % 24
                    };
                }
            }
            for cols in 1..=17usize {
                let acts: Vec<Vec<u8>> = (0..cols)
                    .map(|_| {
                        let x = activations(&mut r, n, 2.0);
                        let mut a = vec![0u8; bytes_for(act, n).unwrap()];
                        quantize_activation(act, &x, &mut a).unwrap();
                        a
                    })
                    .collect();
                let refs: Vec<&[u8]> = acts.iter().map(|a| a.as_slice()).collect();
                for (level, multi) in &kernels {
                    let mut out = vec![f32::NAN; cols];
                    (multi.f)(n, &w, &refs, &mut out);
                    for (c, a) in acts.iter().enumerate() {
                        let want = reference(n, &w, a);
                        assert_eq!(
                            out[c].to_bits(),
                            want.to_bits(),
                            "{wt:?} {}@{level} n={n} cols={cols} col {c}",
                            multi.name
                        );
                    }
                    tally.ran(wt, Column::Multi, *level, multi);
                }
            }
        }
    }
    tally.assert_all(Column::Multi, &types);
}

/// The FP8 multi-column kernel gives each column the one-row kernel's bits (its level's:
/// the float kernels reorder the reference's f64 sum), for every column count 1..=17.
#[test]
fn f8_multi_column_kernel_matches_the_one_row_kernel_bit_for_bit() {
    let mut tally = Tally::default();
    let mut r = rng(0xf8c0);
    let wt = DType::F8_E4M3;
    let ones = kernels_of(wt, |r| r.dot);
    for n in [1usize, 7, 8, 9, 64, 257, 4099] {
        // codes with bit 3 clear: never the NaN code S.1111.111
        let w: Vec<u8> = (0..n).map(|_| (r() as u8) & 0xF7).collect();
        for cols in 1..=17usize {
            let acts: Vec<Vec<u8>> = (0..cols)
                .map(|_| {
                    let x = activations(&mut r, n, 2.0);
                    let mut a = vec![0u8; bytes_for(DType::F32, n).unwrap()];
                    quantize_activation(DType::F32, &x, &mut a).unwrap();
                    a
                })
                .collect();
            let refs: Vec<&[u8]> = acts.iter().map(|a| a.as_slice()).collect();
            for (level, multi) in kernels_of(wt, |r| r.multi) {
                let one = ones.iter().find(|o| o.0 == level).expect("one-row kernel");
                let mut out = vec![f32::NAN; cols];
                (multi.f)(n, &w, &refs, &mut out);
                for (c, a) in acts.iter().enumerate() {
                    let want = (one.1.f)(n, &w, a);
                    assert_eq!(out[c].to_bits(), want.to_bits(), "{level} n={n} col {c}");
                }
                tally.ran(wt, Column::Multi, level, &multi);
            }
        }
    }
    tally.assert_all(Column::Multi, &[wt]);
}

/// `column_split`: in order, covering every column once, at most `max` per pass, as few
/// passes as `div_ceil(max)`, and no pass of one column unless there is one column.
#[test]
fn column_split_never_leaves_a_single_column() {
    use quant::simd::column_split;
    for max in [3usize, 4, 8] {
        for n in 0..=40usize {
            let passes: Vec<_> = column_split(n, max).collect();
            let mut at = 0;
            for r in &passes {
                assert_eq!(r.start, at, "max={max} n={n}");
                assert!(
                    !r.is_empty() && r.len() <= max,
                    "max={max} n={n} {passes:?}"
                );
                at = r.end;
            }
            assert_eq!(at, n);
            assert_eq!(passes.len(), n.div_ceil(max), "max={max} n={n}");
            if n >= 2 {
                assert!(
                    passes.iter().all(|r| r.len() >= 2),
                    "max={max} n={n} {passes:?}"
                );
            }
        }
    }
    let lens = |n, max| column_split(n, max).map(|r| r.len()).collect::<Vec<_>>();
    assert_eq!(lens(5, 4), [3, 2]);
    assert_eq!(lens(9, 4), [4, 3, 2]);
    assert_eq!(lens(9, 8), [7, 2]);
    assert_eq!(lens(8, 4), [4, 4]);
    assert_eq!(lens(1, 4), [1]);
}
