//! Every kernel of the kernel table (`quant::simd::table`) that this CPU runs, at every level
//! it has, against its scalar reference on random inputs: block counts 1..=40 for
//! 32-element blocks and 1..=12 for 256-element super-blocks (every tail), extreme codes
//! included. The kernels reproduce the reference's accumulation order, so the results must
//! be bit-identical. Every test ends by checking that it ran every kernel the table lists
//! for its types at this CPU's level ([`common::Tally`]), and says how many of higher levels
//! it could not run.

mod common;

use common::{
    activations, assert_rows_match, kernels_of, random_blocks, rng, set_iq1m_scale, Tally,
};
use fathom_quant as quant;
use quant::simd::table::Column;
use quant::{bytes_for, quantize_activation, DType};

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

/// FP8 E4M3 codes for the kernel tests: every finite code (subnormals, ±448, ±0) at random,
/// never the NaN codes (a checkpoint holding one is refused at load).
fn e4m3_codes(r: &mut impl FnMut() -> u64, n: usize) -> Vec<u8> {
    (0..n)
        .map(|_| loop {
            let b = r() as u8;
            if b & 0x7F != 0x7F {
                break b;
            }
        })
        .collect()
}

/// The FP8 kernels against the reference (F32 activations): within the float family's
/// reordering bound 1e-6·Σ|w·a| for every length and tail, bit for bit below eight elements.
#[test]
fn f8_kernels_match_the_reference_within_reordering() {
    let mut tally = Tally::default();
    let mut r = rng(0xf8e4);
    let wt = DType::F8_E4M3;
    for n in (1..=70).chain([255, 256, 257, 4096, 4099]) {
        let w = e4m3_codes(&mut r, n);
        let x = activations(&mut r, n, 3.0);
        let mut a = vec![0u8; bytes_for(DType::F32, n).unwrap()];
        quantize_activation(DType::F32, &x, &mut a).unwrap();
        let want = wt.info().vec_dot.unwrap()(n, &w, &a);
        let mag: f32 = w
            .iter()
            .zip(&x)
            .map(|(&c, b)| (quant::fp8::e4m3_to_f32(c) * b).abs())
            .sum();
        for (level, k) in kernels_of(wt, |r| r.dot) {
            let got = (k.f)(n, &w, &a);
            if n < 8 {
                assert_eq!(got.to_bits(), want.to_bits(), "{} n={n}", k.name);
            }
            assert!(
                (got - want).abs() <= 1e-6 * mag,
                "{}@{level} n={n}: {got} vs reference {want}",
                k.name
            );
            tally.ran(wt, Column::Dot, level, &k);
        }
    }
    tally.assert_all(Column::Dot, &[wt]);
}
