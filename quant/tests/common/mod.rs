//! Helpers shared by the quant integration tests (`simd.rs`, `repack.rs`, `amx.rs`): a
//! seeded xorshift generator, random Q8_K activation rows, and the bit-exact check of a
//! tile kernel's outputs.

#![allow(dead_code)] // each test crate uses its own subset

use fathom_quant::{bytes_for, quantize_activation, DType};

/// A xorshift64 stream from `seed` (forced odd, so never the all-zero state).
pub fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed | 1;
    move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    }
}

/// A Q8_K activation row of `n` random values in `[-scale, scale)`.
pub fn q8k(r: &mut impl FnMut() -> u64, n: usize, scale: f32) -> Vec<u8> {
    activation(r, n, scale, DType::Q8_K)
}

/// `n` random activations in `[-scale, scale)`, quantized to the activation type `t`.
pub fn activation(r: &mut impl FnMut() -> u64, n: usize, scale: f32, t: DType) -> Vec<u8> {
    let x: Vec<f32> = (0..n)
        .map(|_| ((r() >> 40) as f32 / (1u64 << 23) as f32 - 1.0) * scale)
        .collect();
    let mut a = vec![0u8; bytes_for(t, n).unwrap()];
    quantize_activation(t, &x, &mut a).unwrap();
    a
}

/// Asserts that a tile kernel's `out` (row-major, `rows.len()` × `acts.len()`) holds, bit for
/// bit, `reference(n, row, act)` for every weight row and activation column.
pub fn assert_tile_bits(
    wt: DType,
    n: usize,
    reference: fn(usize, &[u8], &[u8]) -> f32,
    rows: &[Vec<u8>],
    acts: &[&[u8]],
    out: &[f32],
) {
    let (nr, cols) = (rows.len(), acts.len());
    for ri in 0..nr {
        for (c, a) in acts.iter().enumerate() {
            let want = reference(n, &rows[ri], a);
            let got = out[ri * cols + c];
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{wt:?} n={n} rows={nr} cols={cols} ({ri},{c}): {got} vs {want}"
            );
        }
    }
}
