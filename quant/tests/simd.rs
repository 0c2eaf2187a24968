//! Every kernel of the kernel table (`quant::simd::table`) that this CPU runs, at every level
//! it has, against its scalar reference on random inputs: block counts 1..=40 for
//! 32-element blocks and 1..=12 for 256-element super-blocks (every tail), extreme codes
//! included. The kernels reproduce the reference's accumulation order, so the results must
//! be bit-identical. Every test ends by checking that it ran every kernel the table lists
//! for its types at this CPU's level ([`common::Tally`]), and says how many of higher levels
//! it could not run.

mod common;

use common::{assert_tile_bits, kernels_of, rng, Tally};
use fathom_quant as quant;
use quant::simd::table::Column;
use quant::simd::Tile;
use quant::{bytes_for, quantize_activation, DType};

/// Random activations of length `n` in `[-scale, scale)`.
fn activations(r: &mut impl FnMut() -> u64, n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|_| ((r() >> 40) as f32 / (1u64 << 23) as f32 - 1.0) * scale)
        .collect()
}

/// Quantizes `x` to `act` and asserts every dot kernel of `wt` this CPU runs returns the
/// reference's bits (recorded in `tally`).
fn assert_kernels_match(tally: &mut Tally, wt: DType, act: DType, w: &[u8], x: &[f32]) {
    let n = x.len();
    let reference = wt.info().vec_dot.unwrap();
    let mut a = vec![0u8; bytes_for(act, n).unwrap()];
    quantize_activation(act, x, &mut a).unwrap();
    let want = reference(n, w, &a);
    for (level, k) in kernels_of(wt, |r| r.dot) {
        let got = (k.f)(n, w, &a);
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "{wt:?} {}@{level} n={n}: {got} vs reference {want}",
            k.name
        );
        tally.ran(wt, Column::Dot, level, &k);
    }
}

#[test]
fn q8_0_kernels_match_the_reference_bit_for_bit() {
    let mut tally = Tally::default();
    let mut r = rng(0xabcdef);
    for nb in 1..=40usize {
        let n = 32 * nb;
        // weights: random codes incl. −128 and 127, small random f16 scales
        let mut w = vec![0u8; bytes_for(DType::Q8_0, n).unwrap()];
        for blk in w.chunks_exact_mut(34) {
            let d = quant::scalar::f32_to_f16(1e-3 + (r() % 1000) as f32 * 1e-5);
            blk[..2].copy_from_slice(&d.to_le_bytes());
            for (i, b) in blk[2..].iter_mut().enumerate() {
                *b = match (r() % 20, i) {
                    (0, _) => 0x80, // −128
                    (1, _) => 0x7f,
                    _ => r() as u8,
                };
            }
        }
        let x = activations(&mut r, n, 3.0);
        assert_kernels_match(&mut tally, DType::Q8_0, DType::Q8_0, &w, &x);
    }
    tally.assert_all(Column::Dot, &[DType::Q8_0]);
}

#[test]
fn mxfp4_kernels_match_the_reference_bit_for_bit() {
    let mut tally = Tally::default();
    let mut r = rng(0x5151);
    for nb in 1..=40usize {
        let n = 32 * nb;
        let mut w = vec![0u8; bytes_for(DType::MXFP4, n).unwrap()];
        for blk in w.chunks_exact_mut(17) {
            blk[0] = 118 + (r() % 12) as u8; // E8M0 exponent around 2^-10
            for b in blk[1..].iter_mut() {
                *b = r() as u8;
            }
        }
        let x = activations(&mut r, n, 2.0);
        assert_kernels_match(&mut tally, DType::MXFP4, DType::Q8_0, &w, &x);
    }
    tally.assert_all(Column::Dot, &[DType::MXFP4]);
}

#[test]
fn q4_k_kernels_match_the_reference_bit_for_bit() {
    let mut tally = Tally::default();
    let mut r = rng(0x44);
    for nb in 1..=12usize {
        let n = 256 * nb;
        let mut w = vec![0u8; bytes_for(DType::Q4_K, n).unwrap()];
        for blk in w.chunks_exact_mut(144) {
            for b in blk.iter_mut() {
                *b = r() as u8;
            }
            blk[0..2].copy_from_slice(&quant::scalar::f32_to_f16(0.002).to_le_bytes());
            blk[2..4].copy_from_slice(&quant::scalar::f32_to_f16(0.001).to_le_bytes());
        }
        let x = activations(&mut r, n, 2.0);
        assert_kernels_match(&mut tally, DType::Q4_K, DType::Q8_K, &w, &x);
    }
    tally.assert_all(Column::Dot, &[DType::Q4_K]);
}

#[test]
fn q6_k_kernels_match_the_reference_bit_for_bit() {
    let mut tally = Tally::default();
    let mut r = rng(0x66);
    for nb in 1..=12usize {
        let n = 256 * nb;
        let mut w = vec![0u8; bytes_for(DType::Q6_K, n).unwrap()];
        for blk in w.chunks_exact_mut(210) {
            for b in blk.iter_mut() {
                *b = r() as u8;
            }
            blk[208..210].copy_from_slice(&quant::scalar::f32_to_f16(0.003).to_le_bytes());
        }
        let x = activations(&mut r, n, 2.0);
        assert_kernels_match(&mut tally, DType::Q6_K, DType::Q8_K, &w, &x);
    }
    tally.assert_all(Column::Dot, &[DType::Q6_K]);
}

/// Random weight bytes for `n` elements of `wt`, with an f16 scale of `scale`..2·`scale`
/// written at each block offset in `at` (random bytes everywhere else: every code, grid
/// index and sign pattern).
fn random_blocks(
    r: &mut impl FnMut() -> u64,
    wt: DType,
    n: usize,
    at: &[usize],
    scale: f32,
) -> Vec<u8> {
    let mut w = vec![0u8; bytes_for(wt, n).unwrap()];
    let bs = wt.info().type_size;
    for blk in w.chunks_exact_mut(bs) {
        for b in blk.iter_mut() {
            *b = r() as u8;
        }
        for &o in at {
            // scales differ from block to block (by up to 2×), so that a kernel pairing a
            // block with another's scale cannot pass
            let s = scale * (1.0 + (r() % 16) as f32 / 16.0);
            blk[o..o + 2].copy_from_slice(&quant::scalar::f32_to_f16(s).to_le_bytes());
        }
    }
    w
}

#[test]
fn q2_0_kernels_match_the_reference_bit_for_bit() {
    let mut tally = Tally::default();
    let mut r = rng(0x2020);
    for nb in 1..=24usize {
        let n = 64 * nb;
        let w = random_blocks(&mut r, DType::Q2_0, n, &[0], 0.01);
        let x = activations(&mut r, n, 2.0);
        assert_kernels_match(&mut tally, DType::Q2_0, DType::Q8_0, &w, &x);
    }
    tally.assert_all(Column::Dot, &[DType::Q2_0]);
}

/// The eight f16 scale offsets of a Q2_0_X block.
const Q2X_SCALES: [usize; 8] = [128, 130, 132, 134, 136, 138, 140, 142];

/// Q2_0_X (AVX-512 only: it is made only where that kernel runs): random bytes (every code,
/// 3 included), each kernel against the reference, and the repacked row against the Q2_0
/// row it was made from.
#[test]
fn q2_0_x_kernels_match_the_reference_bit_for_bit() {
    let mut tally = Tally::default();
    let mut r = rng(0x2a2a);
    let kernels = kernels_of(DType::Q2_0_X, |r| r.dot);
    for groups in 1..=6usize {
        let n = 512 * groups;
        let src = random_blocks(&mut r, DType::Q2_0, n, &[0], 0.01);
        let mut w = vec![0u8; src.len()];
        quant::codec::repack::repack_q2_0_x(&src, &mut w);
        let x = activations(&mut r, n, 2.0);
        let mut a = vec![0u8; bytes_for(DType::Q8_0, n).unwrap()];
        quantize_activation(DType::Q8_0, &x, &mut a).unwrap();
        let want = DType::Q2_0.info().vec_dot.unwrap()(n, &src, &a);
        for (level, k) in &kernels {
            let got = (k.f)(n, &w, &a);
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{}@{level} n={n}: {got} vs {want}",
                k.name
            );
            tally.ran(DType::Q2_0_X, Column::Dot, *level, k);
        }
    }
    tally.assert_all(Column::Dot, &[DType::Q2_0_X]);
}

#[test]
fn q5_k_kernels_match_the_reference_bit_for_bit() {
    let mut tally = Tally::default();
    let mut r = rng(0x55);
    for nb in 1..=12usize {
        let n = 256 * nb;
        let w = random_blocks(&mut r, DType::Q5_K, n, &[0, 2], 0.002);
        let x = activations(&mut r, n, 2.0);
        assert_kernels_match(&mut tally, DType::Q5_K, DType::Q8_K, &w, &x);
    }
    tally.assert_all(Column::Dot, &[DType::Q5_K]);
}

#[test]
fn iq2_xxs_kernels_match_the_reference_bit_for_bit() {
    let mut tally = Tally::default();
    let mut r = rng(0x1122);
    for nb in 1..=12usize {
        let n = 256 * nb;
        let w = random_blocks(&mut r, DType::IQ2_XXS, n, &[0], 0.003);
        let x = activations(&mut r, n, 2.0);
        assert_kernels_match(&mut tally, DType::IQ2_XXS, DType::Q8_K, &w, &x);
    }
    tally.assert_all(Column::Dot, &[DType::IQ2_XXS]);
}

#[test]
fn iq1_s_kernels_match_the_reference_bit_for_bit() {
    let mut tally = Tally::default();
    let mut r = rng(0x1515);
    for nb in 1..=12usize {
        let n = 256 * nb;
        let w = random_blocks(&mut r, DType::IQ1_S, n, &[0], 0.004);
        let x = activations(&mut r, n, 2.0);
        assert_kernels_match(&mut tally, DType::IQ1_S, DType::Q8_K, &w, &x);
    }
    tally.assert_all(Column::Dot, &[DType::IQ1_S]);
}

/// IQ1_S_X: random bytes (every code 0..=3, every nibble), and repacked IQ1_S rows.
#[test]
fn iq1_s_x_kernels_match_the_reference_bit_for_bit() {
    let mut tally = Tally::default();
    let mut r = rng(0x1519);
    for nb in 1..=12usize {
        let n = 256 * nb;
        let w = random_blocks(&mut r, DType::IQ1_S_X, n, &[0], 0.004);
        let x = activations(&mut r, n, 2.0);
        assert_kernels_match(&mut tally, DType::IQ1_S_X, DType::Q8_K, &w, &x);
        let src = random_blocks(&mut r, DType::IQ1_S, n, &[0], 0.004);
        let mut w = vec![0u8; bytes_for(DType::IQ1_S_X, n).unwrap()];
        quant::codec::repack::repack_iq1_s_x(&src, &mut w);
        assert_kernels_match(&mut tally, DType::IQ1_S_X, DType::Q8_K, &w, &x);
    }
    tally.assert_all(Column::Dot, &[DType::IQ1_S_X]);
}

/// IQ2_XXS_X: random bytes (every code 0..=3, every sign and scale), and repacked IQ2_XXS
/// rows.
#[test]
fn iq2_xxs_x_kernels_match_the_reference_bit_for_bit() {
    let mut tally = Tally::default();
    let mut r = rng(0x2219);
    for nb in 1..=12usize {
        let n = 256 * nb;
        let w = random_blocks(&mut r, DType::IQ2_XXS_X, n, &[0], 0.003);
        let x = activations(&mut r, n, 2.0);
        assert_kernels_match(&mut tally, DType::IQ2_XXS_X, DType::Q8_K, &w, &x);
        let src = random_blocks(&mut r, DType::IQ2_XXS, n, &[0], 0.003);
        let mut w = vec![0u8; bytes_for(DType::IQ2_XXS_X, n).unwrap()];
        quant::codec::repack::repack_iq2_xxs_x(&src, &mut w);
        assert_kernels_match(&mut tally, DType::IQ2_XXS_X, DType::Q8_K, &w, &x);
    }
    tally.assert_all(Column::Dot, &[DType::IQ2_XXS_X]);
}

/// Writes the f16 super-scale `bits` into every IQ1_M (or IQ1_M_X) block of `w`: it lives in
/// the top nibbles of the four u16 scale words, the block's last eight bytes in both layouts.
fn set_iq1m_scale(w: &mut [u8], t: DType, bits: u16) {
    let size = t.type_size();
    for blk in w.chunks_exact_mut(size) {
        for i in 0..4 {
            let at = size - 8 + 2 * i + 1;
            blk[at] = (blk[at] & 0x0F) | (((bits >> (4 * i)) as u8 & 0xF) << 4);
        }
    }
}

#[test]
fn iq1_m_kernels_match_the_reference_bit_for_bit() {
    let mut tally = Tally::default();
    let mut r = rng(0x1313);
    let bits = quant::scalar::f32_to_f16(0.004);
    for nb in 1..=12usize {
        let n = 256 * nb;
        let mut w = random_blocks(&mut r, DType::IQ1_M, n, &[], 0.0);
        set_iq1m_scale(&mut w, DType::IQ1_M, bits);
        let x = activations(&mut r, n, 2.0);
        assert_kernels_match(&mut tally, DType::IQ1_M, DType::Q8_K, &w, &x);
    }
    tally.assert_all(Column::Dot, &[DType::IQ1_M]);
}

/// IQ1_S_X's and IQ1_M_X's multi-row kernels sum sixteen 4·l·y products per 16-bit lane:
/// the largest sums (every code 3, which no repack writes, against every activation ±127,
/// both signs) must still give the reference's bits, in the one-row and multi-row kernels.
#[test]
fn iq1_x_extreme_codes_and_activations_match_the_reference() {
    let mut tally = Tally::default();
    let mut r = rng(0x131a);
    let bits = quant::scalar::f32_to_f16(0.004);
    let n = 512;
    for wt in [DType::IQ1_S_X, DType::IQ1_M_X] {
        // the code bytes: IQ1_S_X's after `d` and `sc`, IQ1_M_X's first
        let codes = if wt == DType::IQ1_S_X { 6..70 } else { 0..64 };
        for sign in [1.0f32, -1.0] {
            let x = vec![sign; n];
            let mut a = vec![0u8; bytes_for(DType::Q8_K, n).unwrap()];
            quantize_activation(DType::Q8_K, &x, &mut a).unwrap();
            let ws: Vec<Vec<u8>> = (0..5)
                .map(|_| {
                    let mut w = random_blocks(&mut r, wt, n, &[0], 0.004);
                    if wt == DType::IQ1_M_X {
                        set_iq1m_scale(&mut w, wt, bits);
                    }
                    for blk in w.chunks_exact_mut(wt.type_size()) {
                        blk[codes.clone()].fill(0xFF);
                    }
                    w
                })
                .collect();
            assert_kernels_match(&mut tally, wt, DType::Q8_K, &ws[0], &x);
            let reference = wt.info().vec_dot.unwrap();
            assert_rows_match(&mut tally, wt, n, &ws, &a, reference);
        }
    }
    tally.assert_all(Column::Dot, &[DType::IQ1_S_X, DType::IQ1_M_X]);
    tally.assert_all(Column::Rows, &[DType::IQ1_S_X, DType::IQ1_M_X]);
}

/// IQ1_M_X: random bytes (every code 0..=3, every delta sign and scale), and repacked IQ1_M
/// rows.
#[test]
fn iq1_m_x_kernels_match_the_reference_bit_for_bit() {
    let mut tally = Tally::default();
    let mut r = rng(0x1319);
    let bits = quant::scalar::f32_to_f16(0.004);
    for nb in 1..=12usize {
        let n = 256 * nb;
        let mut w = random_blocks(&mut r, DType::IQ1_M_X, n, &[], 0.0);
        set_iq1m_scale(&mut w, DType::IQ1_M_X, bits);
        let x = activations(&mut r, n, 2.0);
        assert_kernels_match(&mut tally, DType::IQ1_M_X, DType::Q8_K, &w, &x);
        let mut src = random_blocks(&mut r, DType::IQ1_M, n, &[], 0.0);
        set_iq1m_scale(&mut src, DType::IQ1_M, bits);
        let mut w = vec![0u8; bytes_for(DType::IQ1_M_X, n).unwrap()];
        quant::codec::repack::repack_iq1_m_x(&src, &mut w);
        assert_kernels_match(&mut tally, DType::IQ1_M_X, DType::Q8_K, &w, &x);
    }
    tally.assert_all(Column::Dot, &[DType::IQ1_M_X]);
}

/// The float kernels reorder the reference's f64 sum: equal within 1e-6·Σ|w·a| (and at
/// n < 8, where only the scalar tail runs, bit for bit).
#[test]
fn float_kernels_match_the_reference_within_reordering() {
    let mut tally = Tally::default();
    let mut r = rng(0xf10a7);
    for wt in [DType::F32, DType::F16, DType::BF16] {
        for n in (1..=70).chain([255, 256, 257, 4096, 4099]) {
            let wv = activations(&mut r, n, 1.5);
            let x = activations(&mut r, n, 3.0);
            let mut w = vec![0u8; bytes_for(wt, n).unwrap()];
            quant::quantize_row(wt, &wv, &mut w).unwrap();
            let mut a = vec![0u8; bytes_for(wt, n).unwrap()];
            quantize_activation(wt, &x, &mut a).unwrap();
            let want = wt.info().vec_dot.unwrap()(n, &w, &a);
            let mag: f32 = wv.iter().zip(&x).map(|(a, b)| (a * b).abs()).sum();
            for (level, k) in kernels_of(wt, |r| r.dot) {
                let got = (k.f)(n, &w, &a);
                let name = k.name;
                if n < 8 {
                    assert_eq!(got.to_bits(), want.to_bits(), "{wt:?} {name} n={n}");
                }
                assert!(
                    (got - want).abs() <= 1e-6 * mag,
                    "{wt:?} {name}@{level} n={n}: {got} vs reference {want}"
                );
                tally.ran(wt, Column::Dot, level, &k);
            }
        }
    }
    tally.assert_all(Column::Dot, &[DType::F32, DType::F16, DType::BF16]);
}

/// The multi-column kernels give each column the single-column reference's bits, for every
/// column count 1..=9 (all chunk tails) and several row lengths.
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
                set_iq1m_scale(&mut w, wt, quant::scalar::f32_to_f16(0.004));
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
            for cols in 1..=9usize {
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

/// Every multi-row kernel of `wt` this CPU runs gives each of the rows `ws` (against
/// activation `a`) the bits of `want` (recorded in `tally`).
fn assert_rows_match(
    tally: &mut Tally,
    wt: DType,
    n: usize,
    ws: &[Vec<u8>],
    a: &[u8],
    want: quant::DotFn,
) {
    let refs: Vec<&[u8]> = ws.iter().map(|w| w.as_slice()).collect();
    for (level, kernel) in kernels_of(wt, |r| r.rows) {
        let mut out = vec![f32::NAN; ws.len()];
        (kernel.f)(n, &refs, a, &mut out);
        for (i, w) in ws.iter().enumerate() {
            assert_eq!(
                out[i].to_bits(),
                want(n, w, a).to_bits(),
                "{wt:?} {}@{level} n={n} rows={} row {i}",
                kernel.name,
                ws.len()
            );
        }
        tally.ran(wt, Column::Rows, level, &kernel);
    }
}

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
                            set_iq1m_scale(&mut w, wt, quant::scalar::f32_to_f16(0.004));
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
/// pairs, IQ1_S_X, IQ1_M_X and IQ2_XXS: of 32 super-blocks, IQ2_XXS's in pairs, so odd
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
                    if wt == DType::IQ1_M_X {
                        set_iq1m_scale(&mut w, wt, quant::scalar::f32_to_f16(0.004));
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

/// The tiled Q8_0 GEMMs (on raw and on expanded rows) give every (row, column) the
/// reference's bits, for every row count 1..=4 and column count 1..=8 (each pair count, odd
/// columns paired with themselves), with extreme codes (−128 and 127 weights, saturated
/// activations) included; the fast expander writes the reference expander's bytes, for
/// block counts with and without a partial group of eight scales.
#[test]
fn q8_0_tile_kernel_matches_the_reference_bit_for_bit() {
    let mut tally = Tally::default();
    for (level, k) in kernels_of(DType::Q8_0, |r| r.tile) {
        let Tile::Panel {
            tile,
            expanded: Some((etile, expand)),
        } = k.f
        else {
            panic!("Q8_0's tile is a panel tile with an expanded form");
        };
        q8_0_tiles(tile, etile, expand);
        tally.ran(DType::Q8_0, Column::Tile, level, &k);
    }
    tally.assert_all(Column::Tile, &[DType::Q8_0]);
}

/// [`q8_0_tile_kernel_matches_the_reference_bit_for_bit`] for one tile, expanded tile and
/// expander.
fn q8_0_tiles(
    tile: quant::simd::q8::tile::TileFn,
    etile: quant::simd::q8::tile::TileFn,
    expand: quant::simd::q8::tile::ExpandFn,
) {
    use quant::simd::q8::tile::{
        expand_q8_0, expanded_bytes, pack_q8_0_panel, panel_bytes, TILE_COLS,
    };
    let reference = DType::Q8_0.info().vec_dot.unwrap();
    let mut r = rng(0x711e);
    for nb in [1usize, 3, 8, 17] {
        let n = 32 * nb;
        let rows: Vec<Vec<u8>> = (0..4)
            .map(|i| {
                let mut w = random_blocks(&mut r, DType::Q8_0, n, &[0], 0.004);
                if i == 1 {
                    // extreme codes: the +128 offset must not overflow a byte
                    for (j, b) in w.iter_mut().enumerate() {
                        if j % 34 >= 2 {
                            *b = if j % 2 == 0 { 0x80 } else { 0x7f };
                        }
                    }
                }
                w
            })
            .collect();
        let acts: Vec<Vec<u8>> = (0..TILE_COLS)
            .map(|c| {
                let x = activations(&mut r, n, if c == 3 { 1e3 } else { 2.0 });
                let mut a = vec![0u8; bytes_for(DType::Q8_0, n).unwrap()];
                quantize_activation(DType::Q8_0, &x, &mut a).unwrap();
                a
            })
            .collect();
        let expanded: Vec<Vec<u8>> = rows
            .iter()
            .map(|w| {
                let (mut want, mut got) =
                    (vec![0u8; expanded_bytes(n)], vec![7u8; expanded_bytes(n)]);
                expand_q8_0(w, &mut want);
                expand(w, &mut got);
                assert_eq!(got, want, "expanded Q8_0 row, n={n}");
                got
            })
            .collect();
        for nr in 1..=4usize {
            let wr: Vec<&[u8]> = rows[..nr].iter().map(|w| w.as_slice()).collect();
            let er: Vec<&[u8]> = expanded[..nr].iter().map(|w| w.as_slice()).collect();
            for cols in 1..=TILE_COLS {
                let ar: Vec<&[u8]> = acts[..cols].iter().map(|a| a.as_slice()).collect();
                let mut panel = vec![0u8; panel_bytes(n, cols)];
                pack_q8_0_panel(n, &ar, &mut panel);
                let (mut out, mut eout) = (vec![f32::NAN; nr * cols], vec![f32::NAN; nr * cols]);
                tile(n, &wr, &panel, cols, &mut out);
                etile(n, &er, &panel, cols, &mut eout);
                for (ri, w) in wr.iter().enumerate() {
                    for (c, a) in ar.iter().enumerate() {
                        let want = reference(n, w, a);
                        for (kind, got) in [
                            ("raw", out[ri * cols + c]),
                            ("expanded", eout[ri * cols + c]),
                        ] {
                            assert_eq!(
                                got.to_bits(),
                                want.to_bits(),
                                "{kind} n={n} rows={nr} cols={cols} ({ri},{c}): {got} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The grid-format expanders (IQ2_XXS, IQ1_S and their repacked forms) agree byte for byte with their references,
/// and the tiled GEMM on expanded rows gives every (row, column) the reference dot's bits,
/// for every row count 1..=4 and column count 1..=8.
#[test]
fn grid_tile_kernels_match_the_reference_bit_for_bit() {
    use quant::simd::iq::tile::{
        expand_iq1_s, expand_iq1_s_x, expand_iq2_xxs, expand_iq2_xxs_x, expanded_bytes, TILE_COLS,
    };
    let mut tally = Tally::default();
    let mut r = rng(0x1a2);
    for (wt, reference_expand) in [
        (DType::IQ2_XXS, expand_iq2_xxs as fn(&[u8], &mut [u8])),
        (DType::IQ1_S, expand_iq1_s),
        (DType::IQ1_S_X, expand_iq1_s_x),
        (DType::IQ2_XXS_X, expand_iq2_xxs_x),
    ] {
        let reference = wt.info().vec_dot.unwrap();
        for (level, k) in kernels_of(wt, |r| r.tile) {
            let Tile::Grid { tile, expand, amx } = k.f else {
                panic!("{wt:?}'s tile is a grid tile");
            };
            tally.ran(wt, Column::Tile, level, &k);
            if amx.is_some() {
                continue; // the AMX level's row: its VNNI half is the level below's, its AMX
                          // tile is checked in `amx.rs`
            }
            for nsb in [1usize, 2, 5] {
                let n = 256 * nsb;
                let rows: Vec<Vec<u8>> = (0..4)
                    .map(|_| random_blocks(&mut r, wt, n, &[0], 0.004))
                    .collect();
                let expanded: Vec<Vec<u8>> = rows
                    .iter()
                    .map(|w| {
                        let mut want = vec![0u8; expanded_bytes(n)];
                        reference_expand(w, &mut want);
                        let mut got = vec![0u8; expanded_bytes(n)];
                        expand(w, &mut got);
                        assert_eq!(got, want, "{wt:?} expanders differ, n={n}");
                        want
                    })
                    .collect();
                let acts: Vec<Vec<u8>> = (0..TILE_COLS)
                    .map(|c| {
                        let x = activations(&mut r, n, if c == 5 { 1e4 } else { 2.0 });
                        let mut a = vec![0u8; bytes_for(DType::Q8_K, n).unwrap()];
                        quantize_activation(DType::Q8_K, &x, &mut a).unwrap();
                        a
                    })
                    .collect();
                for nr in 1..=4usize {
                    let xr: Vec<&[u8]> = expanded[..nr].iter().map(|w| w.as_slice()).collect();
                    for cols in 1..=TILE_COLS {
                        let ar: Vec<&[u8]> = acts[..cols].iter().map(|a| a.as_slice()).collect();
                        let mut out = vec![f32::NAN; nr * cols];
                        let mut panel = vec![0u8; quant::simd::iq::tile::panel_bytes(n, cols)];
                        quant::simd::iq::tile::pack_panel(n, &ar, &mut panel);
                        tile(n, &xr, &ar, &panel, &mut out);
                        assert_tile_bits(wt, n, reference, &rows[..nr], &ar, &out);
                    }
                }
            }
        }
    }
    let grids = [
        DType::IQ2_XXS,
        DType::IQ1_S,
        DType::IQ1_S_X,
        DType::IQ2_XXS_X,
    ];
    tally.assert_all(Column::Tile, &grids);
}

/// The float tile kernels (f32 accumulation) stay within their documented bound of the f64
/// reference, (n/16 + 4)·2⁻²⁴·Σ|w·a|, for every row count 1..=4, column count 1..=4 and
/// lengths with every 16- and 32-element tail; every kernel this CPU can run (both BF16
/// forms on an AVX512-BF16 CPU).
#[test]
fn float_tile_kernels_stay_within_their_bound_of_the_reference() {
    use quant::simd::float::tile::TILE_COLS;
    let mut tally = Tally::default();
    let mut r = rng(0xf10a7);
    for wt in [DType::F32, DType::F16, DType::BF16] {
        for (level, k) in kernels_of(wt, |r| r.tile) {
            let Tile::Float(tile) = k.f else {
                panic!("{wt:?}'s tile is a float tile");
            };
            tally.ran(wt, Column::Tile, level, &k);
            let name = format!("{}@{level}", k.name);
            let reference = wt.info().vec_dot.unwrap();
            for n in [1usize, 15, 16, 17, 33, 100, 1000, 4096] {
                let quantized = |r: &mut dyn FnMut() -> u64, scale: f32| {
                    let x = activations(&mut || r(), n, scale);
                    let mut q = vec![0u8; bytes_for(wt, n).unwrap()];
                    quantize_activation(wt, &x, &mut q).unwrap();
                    let mut back = vec![0f32; n];
                    quant::dequantize_row(wt, &q, &mut back).unwrap();
                    (q, back)
                };
                let rows: Vec<(Vec<u8>, Vec<f32>)> =
                    (0..4).map(|_| quantized(&mut r, 1.0)).collect();
                let acts: Vec<(Vec<u8>, Vec<f32>)> =
                    (0..TILE_COLS).map(|_| quantized(&mut r, 3.0)).collect();
                for nr in 1..=4usize {
                    let wr: Vec<&[u8]> = rows[..nr].iter().map(|w| w.0.as_slice()).collect();
                    for cols in 1..=TILE_COLS {
                        let ar: Vec<&[u8]> = acts[..cols].iter().map(|a| a.0.as_slice()).collect();
                        let mut out = vec![f32::NAN; nr * cols];
                        tile(n, &wr, &ar, &mut out);
                        for ri in 0..nr {
                            for c in 0..cols {
                                let want = reference(n, &rows[ri].0, &acts[c].0);
                                let mag: f64 = rows[ri]
                                    .1
                                    .iter()
                                    .zip(&acts[c].1)
                                    .map(|(a, b)| (*a as f64 * *b as f64).abs())
                                    .sum();
                                let bound = (n as f64 / 16.0 + 4.0) * 2f64.powi(-24) * mag;
                                let got = out[ri * cols + c];
                                assert!(
                                ((got - want) as f64).abs() <= bound,
                                "{wt:?} {name} n={n} rows={nr} cols={cols} ({ri},{c}): {got} vs {want}"
                            );
                            }
                        }
                    }
                }
            }
        }
    }
    tally.assert_all(Column::Tile, &[DType::F32, DType::F16, DType::BF16]);
}

/// The tiled Q2_0 GEMM (on the Q8_0 panel) gives every (row, column) the reference's bits,
/// for every row count 1..=4 and column count 1..=8, on Q2_0 rows and on Q2_0_X rows.
#[test]
fn q2_0_tile_kernel_matches_the_reference_bit_for_bit() {
    use quant::simd::q8::tile::{pack_q8_0_panel, panel_bytes, TILE_COLS};
    let mut tally = Tally::default();
    let panel_tile = |t: DType, tally: &mut Tally| {
        let (level, k) = kernels_of(t, |r| r.tile).pop()?;
        tally.ran(t, Column::Tile, level, &k);
        match k.f {
            Tile::Panel { tile, .. } => Some(tile),
            _ => panic!("{t:?}'s tile is a panel tile"),
        }
    };
    let tiles = (
        panel_tile(DType::Q2_0, &mut tally),
        panel_tile(DType::Q2_0_X, &mut tally),
    );
    tally.assert_all(Column::Tile, &[DType::Q2_0, DType::Q2_0_X]);
    let (Some(tile), Some(tile_x)) = tiles else {
        return;
    };
    let reference = DType::Q2_0.info().vec_dot.unwrap();
    let mut r = rng(0x2a0);
    // Q2_0 rows, then Q2_0_X rows (made from Q2_0 rows, against the source's reference)
    for (x_layout, nb) in [
        (false, 1usize),
        (false, 3),
        (false, 8),
        (false, 17),
        (true, 8),
        (true, 24),
    ] {
        let n = 64 * nb;
        let src: Vec<Vec<u8>> = (0..4)
            .map(|_| random_blocks(&mut r, DType::Q2_0, n, &[0], 0.004))
            .collect();
        let rows: Vec<Vec<u8>> = if x_layout {
            src.iter()
                .map(|w| {
                    let mut x = vec![0u8; w.len()];
                    quant::codec::repack::repack_q2_0_x(w, &mut x);
                    x
                })
                .collect()
        } else {
            src.clone()
        };
        let tile = if x_layout { tile_x } else { tile };
        let acts: Vec<Vec<u8>> = (0..TILE_COLS)
            .map(|c| {
                let x = activations(&mut r, n, if c == 6 { 1e3 } else { 2.0 });
                let mut a = vec![0u8; bytes_for(DType::Q8_0, n).unwrap()];
                quantize_activation(DType::Q8_0, &x, &mut a).unwrap();
                a
            })
            .collect();
        for nr in 1..=4usize {
            let wr: Vec<&[u8]> = rows[..nr].iter().map(|w| w.as_slice()).collect();
            for cols in 1..=TILE_COLS {
                let ar: Vec<&[u8]> = acts[..cols].iter().map(|a| a.as_slice()).collect();
                let mut panel = vec![0u8; panel_bytes(n, cols)];
                pack_q8_0_panel(n, &ar, &mut panel);
                let mut out = vec![f32::NAN; nr * cols];
                tile(n, &wr, &panel, cols, &mut out);
                for (ri, w) in src[..nr].iter().enumerate() {
                    for (c, a) in ar.iter().enumerate() {
                        let want = reference(n, w, a);
                        let got = out[ri * cols + c];
                        assert_eq!(
                            got.to_bits(),
                            want.to_bits(),
                            "x={x_layout} n={n} rows={nr} cols={cols} ({ri},{c}): {got} vs {want}"
                        );
                    }
                }
            }
        }
    }
}

/// The activation Q8_0 quantizer's SIMD form writes the scalar form's bytes: random rows of
/// several lengths, and blocks of zeros, NaNs, ±∞, subnormals, huge values and exact ties
/// (v·127/amax = k + 0.5).
#[test]
fn q8_0_activation_quantizer_matches_the_scalar_one() {
    use quant::codec::q8::{quant_q8_0_x86, quant_q8_0_x86_scalar};
    let mut r = rng(0x9a11);
    let mut rows: Vec<Vec<f32>> = (1..=9)
        .map(|nb| activations(&mut r, 32 * nb, 3.0))
        .collect();
    let mut special = vec![0f32; 32 * 8];
    special[32] = f32::NAN;
    special[33] = 1.0;
    special[64] = f32::INFINITY;
    special[65] = -2.0;
    special[96] = f32::NEG_INFINITY;
    for (i, v) in special[128..160].iter_mut().enumerate() {
        *v = f32::from_bits(1 + i as u32); // subnormals
    }
    for (i, v) in special[160..192].iter_mut().enumerate() {
        *v = 3.0e38 * if i % 2 == 0 { 1.0 } else { -1.0 };
    }
    // amax 127: every v·id = v, so k + 0.5 values are exact ties
    for (i, v) in special[192..224].iter_mut().enumerate() {
        *v = if i == 0 { 127.0 } else { i as f32 - 16.5 };
    }
    for (i, v) in special[224..256].iter_mut().enumerate() {
        *v = if i == 0 { -127.0 } else { f32::NAN };
    }
    rows.push(special);
    for x in &rows {
        let n = x.len();
        let (mut a, mut b) = (vec![0u8; n / 32 * 34], vec![0u8; n / 32 * 34]);
        quant_q8_0_x86(x, &mut a);
        quant_q8_0_x86_scalar(x, &mut b);
        assert_eq!(a, b, "n={n}");
    }
}

/// The activation Q8_K quantizer's SIMD form writes the scalar form's bytes: random rows of
/// one to five blocks, and blocks of zeros, −0.0, NaNs, ±∞, subnormals, huge values, exact
/// ties of `nearest_int`, and equal magnitudes of both signs (the first one sets the sign).
#[test]
fn q8_k_activation_quantizer_matches_the_scalar_one() {
    use quant::codec::q8::{quant_q8_k, quant_q8_k_scalar};
    let mut r = rng(0x8e1d);
    let mut rows: Vec<Vec<f32>> = (1..=5)
        .map(|nb| activations(&mut r, 256 * nb, 3.0))
        .collect();
    let mut special = activations(&mut r, 256 * 9, 1.0);
    special[..256].fill(0.0);
    special[256..512].fill(-0.0);
    special[512 + 7] = f32::NAN;
    special[512 + 200] = f32::NAN;
    special[768 + 3] = f32::INFINITY;
    special[768 + 9] = f32::NEG_INFINITY;
    for (i, v) in special[1024..1280].iter_mut().enumerate() {
        *v = f32::from_bits(1 + 3 * i as u32); // subnormals only
    }
    for (i, v) in special[1280..1536].iter_mut().enumerate() {
        *v = 3.0e38 * if i % 3 == 0 { 1.0 } else { -0.7 };
    }
    // max −127: every iscale·v = v, so k + 0.5 values are exact ties
    for (i, v) in special[1536..1792].iter_mut().enumerate() {
        *v = if i == 5 {
            -127.0
        } else {
            (i % 120) as f32 - 60.5
        };
    }
    // equal magnitudes: −5 first (sets the sign), +5 later in the same 16 and beyond
    for (i, v) in special[1792..2048].iter_mut().enumerate() {
        *v = match i {
            17 => -5.0,
            20 | 100 | 255 => 5.0,
            _ => (i % 9) as f32 * 0.5 - 2.0,
        };
    }
    special[2048..2304].fill(f32::NAN);
    special[2048 + 40] = 0.25;
    rows.push(special);
    for x in &rows {
        let n = x.len();
        let (mut a, mut b) = (vec![0xa5u8; n / 256 * 292], vec![0x5au8; n / 256 * 292]);
        quant_q8_k(x, &mut a);
        quant_q8_k_scalar(x, &mut b);
        for (i, (ba, bb)) in a.chunks(292).zip(b.chunks(292)).enumerate() {
            assert_eq!(ba, bb, "n={n} block {i}");
        }
    }
}
