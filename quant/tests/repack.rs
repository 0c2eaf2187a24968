//! The load-time repacked layouts against the formats they are made from (IQ1_S_X from
//! IQ1_S, IQ2_XXS_X from IQ2_XXS, IQ1_M_X from IQ1_M, Q2_0_X from Q2_0): each repack is
//! lossless, so on every
//! random source row (every grid index, sign index, scale and delta sign) the repacked row
//! dequantizes to the same bits, its reference dot gives the source's reference dot's bits,
//! and its tile expansion (IQ1_S_X, IQ2_XXS_X) is the source's byte for byte.

mod common;

use common::{activation, rng};
use fathom_quant as quant;
use quant::codec::repack::{
    q2_0_x_blocks, repack_iq1_m_x, repack_iq1_s_x, repack_iq2_xxs_x, repack_q2_0_x,
};
use quant::simd::iq::tile::{
    expand_iq1_s, expand_iq1_s_x, expand_iq2_xxs, expand_iq2_xxs_x, expanded_bytes,
};
use quant::{bytes_for, dequantize_row, quantize_activation, DType};

/// `nb` random IQ1_S blocks, the f16 scale `d` set to a finite value.
fn iq1_s_row(r: &mut impl FnMut() -> u64, nb: usize) -> Vec<u8> {
    random_blocks(r, nb, 50)
}

/// `nb` random blocks of `size` bytes whose first two bytes are a finite f16 scale.
fn random_blocks(r: &mut impl FnMut() -> u64, nb: usize, size: usize) -> Vec<u8> {
    let mut w = vec![0u8; size * nb];
    for blk in w.chunks_exact_mut(size) {
        for b in blk.iter_mut() {
            *b = r() as u8;
        }
        let d = quant::scalar::f32_to_f16(0.003 + (r() % 100) as f32 * 1e-4);
        blk[..2].copy_from_slice(&d.to_le_bytes());
    }
    w
}

fn repacked(w: &[u8]) -> Vec<u8> {
    let mut x = vec![0u8; w.len() / 50 * 70];
    repack_iq1_s_x(w, &mut x);
    x
}

#[test]
fn the_repack_is_lossless() {
    let mut r = rng(0x1f5);
    for nb in [1usize, 2, 7, 16] {
        let n = 256 * nb;
        let w = iq1_s_row(&mut r, nb);
        let x = repacked(&w);
        assert_eq!(x.len(), bytes_for(DType::IQ1_S_X, n).unwrap());
        // every level code of a repacked block is 0..=2 (v = −1, 0, +1)
        for blk in x.chunks_exact(70) {
            assert_codes_at_most_2(&blk[6..]);
        }
        let (mut a, mut b) = (vec![0f32; n], vec![0f32; n]);
        dequantize_row(DType::IQ1_S, &w, &mut a).unwrap();
        dequantize_row(DType::IQ1_S_X, &x, &mut b).unwrap();
        for (i, (p, q)) in a.iter().zip(&b).enumerate() {
            assert_eq!(p.to_bits(), q.to_bits(), "n={n} element {i}: {p} vs {q}");
        }
        for scale in [0.5f32, 2.0, 1e4] {
            let act: Vec<f32> = (0..n)
                .map(|_| ((r() >> 40) as f32 / (1u64 << 23) as f32 - 1.0) * scale)
                .collect();
            let mut q = vec![0u8; bytes_for(DType::Q8_K, n).unwrap()];
            quantize_activation(DType::Q8_K, &act, &mut q).unwrap();
            let want = quant::vec_dot(DType::IQ1_S, n, &w, &q).unwrap();
            let got = quant::vec_dot(DType::IQ1_S_X, n, &x, &q).unwrap();
            assert_eq!(got.to_bits(), want.to_bits(), "n={n}: {got} vs {want}");
        }
        let (mut e1, mut e2) = (vec![0u8; expanded_bytes(n)], vec![0u8; expanded_bytes(n)]);
        expand_iq1_s(&w, &mut e1);
        expand_iq1_s_x(&x, &mut e2);
        assert_eq!(e1, e2, "n={n}: tile expansions differ");
    }
}

/// Every 2-bit level code in `codes` (a repacked block's code bytes) is 0..=2 (code 3 never
/// comes out of a repack).
fn assert_codes_at_most_2(codes: &[u8]) {
    for &b in codes {
        for p in 0..4 {
            assert!((b >> (2 * p)) & 3 <= 2, "code 3 in a repacked block");
        }
    }
}

/// The repacked row `x` (of `to`) dequantizes to the bits of the source row `w` (of `from`),
/// and on activations of several scales (of the source's activation type) its dot — the
/// fastest kernel's and the reference's — is the source's.
fn assert_same_values_and_dots(
    r: &mut impl FnMut() -> u64,
    (from, w): (DType, &[u8]),
    (to, x): (DType, &[u8]),
    n: usize,
) {
    let (mut a, mut b) = (vec![0f32; n], vec![0f32; n]);
    dequantize_row(from, w, &mut a).unwrap();
    dequantize_row(to, x, &mut b).unwrap();
    for (i, (p, q)) in a.iter().zip(&b).enumerate() {
        assert_eq!(
            p.to_bits(),
            q.to_bits(),
            "{to:?} n={n} element {i}: {p} vs {q}"
        );
    }
    for scale in [0.5f32, 2.0, 1e4] {
        let q = activation(r, n, scale, from.info().dot_type.unwrap());
        let want = quant::vec_dot(from, n, w, &q).unwrap();
        let got = quant::vec_dot(to, n, x, &q).unwrap();
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "{to:?} n={n}: {got} vs {want}"
        );
        // the reference dots themselves, not only the fastest kernels
        let (rw, rx) = (from.info().vec_dot.unwrap(), to.info().vec_dot.unwrap());
        assert_eq!(
            rw(n, w, &q).to_bits(),
            rx(n, x, &q).to_bits(),
            "{to:?} n={n}"
        );
    }
}

#[test]
fn the_iq2_xxs_repack_is_lossless() {
    let mut r = rng(0x2f7);
    for nb in [1usize, 2, 7, 16] {
        let n = 256 * nb;
        let w = random_blocks(&mut r, nb, 66);
        let mut x = vec![0u8; bytes_for(DType::IQ2_XXS_X, n).unwrap()];
        repack_iq2_xxs_x(&w, &mut x);
        for blk in x.chunks_exact(102) {
            assert_codes_at_most_2(&blk[6..70]);
        }
        assert_same_values_and_dots(&mut r, (DType::IQ2_XXS, &w), (DType::IQ2_XXS_X, &x), n);
        let (mut e1, mut e2) = (vec![0u8; expanded_bytes(n)], vec![0u8; expanded_bytes(n)]);
        expand_iq2_xxs(&w, &mut e1);
        expand_iq2_xxs_x(&x, &mut e2);
        assert_eq!(e1, e2, "n={n}: tile expansions differ");
    }
}

#[test]
fn the_iq1_m_repack_is_lossless() {
    let mut r = rng(0x1d3);
    for nb in [1usize, 2, 7, 16] {
        let n = 256 * nb;
        // random IQ1_M blocks (every grid index, delta sign and 3-bit scale) with a finite
        // f16 super-scale in the top nibbles of the four scale words (the last eight bytes)
        let mut w: Vec<u8> = (0..56 * nb).map(|_| r() as u8).collect();
        for blk in w.chunks_exact_mut(56) {
            let d = quant::scalar::f32_to_f16(0.003 + (r() % 100) as f32 * 1e-4);
            for i in 0..4 {
                let at = 48 + 2 * i + 1;
                blk[at] = (blk[at] & 0x0F) | (((d >> (4 * i)) as u8 & 0xF) << 4);
            }
        }
        let mut x = vec![0u8; bytes_for(DType::IQ1_M_X, n).unwrap()];
        repack_iq1_m_x(&w, &mut x);
        for (blk, src) in x.chunks_exact(76).zip(w.chunks_exact(56)) {
            assert_codes_at_most_2(&blk[..64]);
            assert_eq!(blk[68..], src[48..], "the scale words are kept as they are");
        }
        assert_same_values_and_dots(&mut r, (DType::IQ1_M, &w), (DType::IQ1_M_X, &x), n);
    }
}

/// Q2_0_X holds Q2_0's bytes in another order: every element's code where the layout says
/// (byte 64r + 8k + 4h + m is byte 8h + 4r + m of block k's codes), the scales side by side,
/// the blocks given back unchanged, and Q2_0's values and dot products (on Q8_0
/// activations: the fastest kernels' and the references').
#[test]
fn the_q2_0_repack_is_lossless() {
    let mut r = rng(0x2a0f);
    for groups in [1usize, 2, 5, 16] {
        let (nb, n) = (8 * groups, 512 * groups);
        let w = random_blocks(&mut r, nb, 18);
        let mut x = vec![0u8; bytes_for(DType::Q2_0_X, n).unwrap()];
        assert_eq!(x.len(), w.len(), "the same size");
        repack_q2_0_x(&w, &mut x);
        for (g, (xb, src)) in x.chunks_exact(144).zip(w.chunks_exact(144)).enumerate() {
            for k in 0..8 {
                let b = &src[18 * k..18 * k + 18];
                assert_eq!(
                    xb[128 + 2 * k..130 + 2 * k],
                    b[..2],
                    "group {g} block {k} scale"
                );
                for j in 0..64 {
                    // element j: bits 2(j mod 4) of code byte j / 4 = 8h + 4r + m
                    let q = j / 4;
                    let (h, r, m) = (q / 8, (q / 4) % 2, q % 4);
                    let code = |byte: u8| (byte >> (2 * (j % 4))) & 3;
                    assert_eq!(
                        code(xb[64 * r + 8 * k + 4 * h + m]),
                        code(b[2 + q]),
                        "group {g} block {k} element {j}"
                    );
                }
            }
            let blocks = q2_0_x_blocks(bytemuck::from_bytes(xb));
            assert_eq!(
                bytemuck::cast_slice::<_, u8>(&blocks),
                src,
                "group {g} given back"
            );
        }
        assert_same_values_and_dots(&mut r, (DType::Q2_0, &w), (DType::Q2_0_X, &x), n);
    }
}

#[test]
fn a_repacked_type_is_not_a_gguf_type() {
    for t in [DType::IQ1_S_X, DType::IQ2_XXS_X, DType::IQ1_M_X] {
        assert!(!t.is_gguf());
        assert!(DType::from_gguf_id(t.gguf_id()).is_err());
        assert_eq!(t.info().dot_type, Some(DType::Q8_K));
    }
    assert!(!DType::Q2_0_X.is_gguf());
    assert!(DType::from_gguf_id(DType::Q2_0_X.gguf_id()).is_err());
    assert_eq!(DType::Q2_0_X.info().dot_type, Some(DType::Q8_0));
    assert_eq!(
        (DType::Q2_0_X.block_size(), DType::Q2_0_X.type_size()),
        (512, 144)
    );
    assert_eq!(DType::IQ2_XXS_X.type_size(), 102);
    assert_eq!(DType::IQ1_M_X.type_size(), 76);
    assert!(!DType::IQ1_S_X.is_gguf());
    assert!(DType::IQ1_S.is_gguf());
    assert!(DType::from_gguf_id(DType::IQ1_S_X.gguf_id()).is_err());
    assert_eq!(DType::IQ1_S_X.type_size(), 70);
    assert_eq!(DType::IQ1_S_X.info().dot_type, Some(DType::Q8_K));
}
