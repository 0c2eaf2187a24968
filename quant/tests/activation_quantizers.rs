//! The activation quantizers' SIMD forms write the scalar forms' bytes.

mod common;

use common::{activations, rng};
use fathom_quant as quant;

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
        // every SIMD form this CPU runs, not only the one used
        #[cfg(target_arch = "x86_64")]
        for (name, form) in forms(quant::simd::q8_0_forms) {
            let mut c = vec![0xa5u8; n / 32 * 34];
            form(x, &mut c);
            assert_eq!(c, b, "{name}, n={n}");
        }
    }
}

/// The SIMD forms of a quantizer this CPU runs, saying so when it runs fewer than the two
/// forms there are (AVX-512, AVX2).
#[cfg(target_arch = "x86_64")]
fn forms(
    list: fn() -> Vec<(&'static str, quant::simd::QuantizeFn)>,
) -> Vec<(&'static str, quant::simd::QuantizeFn)> {
    let v = list();
    if v.len() < 2 {
        eprintln!(
            "this CPU runs {} of the quantizers' two SIMD forms",
            v.len()
        );
    }
    v
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
        #[cfg(target_arch = "x86_64")]
        for (name, form) in forms(quant::simd::q8_k_forms) {
            let mut c = vec![0x33u8; n / 256 * 292];
            form(x, &mut c);
            for (i, (bc, bb)) in c.chunks(292).zip(b.chunks(292)).enumerate() {
                assert_eq!(bc, bb, "{name}, n={n} block {i}");
            }
        }
    }
}

/// `quantize_activation` gives exactly the blocks holding a NaN or an infinity a NaN scale
/// (Q8_0: f16 `0x7E00`; Q8_K: f32 NaN) and
/// leaves every other byte as the all-finite row's: one bad value in each position of a
/// block, first, middle and last block, and rows with none.
#[test]
fn nonfinite_values_give_their_block_a_nan_scale_and_nothing_else() {
    // (type, block elements, block bytes, whether the scale at byte 0 is an f32 or an f16)
    let types = [
        (quant::DType::Q8_0, 32, 34, false),
        (quant::DType::Q8_K, 256, 292, true),
    ];
    let mut r = rng(0x7f80);
    for (dtype, blk, bytes, f32_scale) in types {
        let nb = 3;
        let x = activations(&mut r, blk * nb, 2.0);
        let mut clean = vec![0u8; nb * bytes];
        quant::quantize_activation(dtype, &x, &mut clean).unwrap();
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            for at in [0, blk / 2, blk - 1, blk + 3, nb * blk - 1] {
                let mut y = x.clone();
                y[at] = bad;
                let mut got = vec![0u8; nb * bytes];
                quant::quantize_activation(dtype, &y, &mut got).unwrap();
                let hit = at / blk;
                for (b, (g, c)) in got.chunks(bytes).zip(clean.chunks(bytes)).enumerate() {
                    if b != hit {
                        assert_eq!(g, c, "{dtype:?}: block {b} changed by a value in {hit}");
                        continue;
                    }
                    if f32_scale {
                        let s = f32::from_le_bytes(g[..4].try_into().unwrap());
                        assert!(s.is_nan(), "{dtype:?}: {bad} at {at} left scale {s}");
                    } else {
                        assert_eq!(&g[..2], &0x7E00u16.to_le_bytes(), "{dtype:?} at {at}");
                    }
                }
            }
        }
    }
}
