//! Helpers shared by the quant integration tests (the `simd*.rs` kernel tests, `repack.rs`,
//! `amx.rs`): a seeded xorshift generator, random activations and weight blocks, the
//! kernels of the table this CPU runs with the [`Tally`] of those checked, and the bit-exact
//! checks of multi-row and tile kernels.

#![allow(dead_code)] // each test crate uses its own subset

use fathom_quant as quant;
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

use fathom_quant::simd::table::{column, inventory, Column, Row};
use fathom_quant::simd::{CpuLevel, Kernel};
use std::collections::HashSet;

/// The kernels of `col` the kernel table lists for `t` at the levels this CPU has, lowest
/// level first (the scalar reference not included).
pub fn kernels_of<F: Copy>(
    t: DType,
    col: impl Fn(&Row) -> Option<Kernel<F>>,
) -> Vec<(CpuLevel, Kernel<F>)> {
    column(t, CpuLevel::detect(), col)
}

/// Says once per test binary that this CPU cannot run the table's higher levels, and how
/// many of its kernels that leaves unrun here.
fn note_lower_level(level: CpuLevel) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let above = inventory()
            .iter()
            .filter(|e| !level.includes(e.level))
            .count();
        eprintln!(
            "this CPU runs the kernel table up to {level}: its {above} kernels of higher \
             levels are not checked here (every test still checks all it can run)"
        );
    });
}

/// The kernels a test ran, by (type, column, level, name): at its end [`Tally::assert_all`]
/// compares them with the kernel table, so a test whose loop skipped a kernel fails instead
/// of passing vacuously.
#[derive(Default)]
pub struct Tally(HashSet<(DType, Column, CpuLevel, &'static str)>);

impl Tally {
    /// Records that kernel `k` (of `col`, brought by `level`) of type `t` was checked.
    pub fn ran<F>(&mut self, t: DType, col: Column, level: CpuLevel, k: &Kernel<F>) {
        self.0.insert((t, col, level, k.name));
    }

    /// [`Tally::assert_all`] for the kernels `level` itself brings (a test of one level's
    /// kernels); nothing to check on a CPU below `level`.
    pub fn assert_level(&self, col: Column, types: &[DType], level: CpuLevel) -> usize {
        let listed = inventory()
            .into_iter()
            .filter(|e| e.column == col && e.level == level && types.contains(&e.dtype))
            .count();
        if !CpuLevel::detect().includes(level) {
            note_lower_level(CpuLevel::detect());
            return 0;
        }
        let checked = self.0.iter().filter(|k| k.1 == col && k.2 == level).count();
        assert_eq!(
            checked,
            listed,
            "{} kernels of {types:?} at {level}",
            col.name()
        );
        checked
    }

    /// Asserts that every kernel of `col` the table lists for `types` at this CPU's level was
    /// checked, and returns how many. A CPU below the table's highest levels says so once.
    pub fn assert_all(&self, col: Column, types: &[DType]) -> usize {
        let level = CpuLevel::detect();
        let listed: Vec<_> = inventory()
            .into_iter()
            .filter(|e| e.column == col && types.contains(&e.dtype))
            .collect();
        let runnable: HashSet<_> = listed
            .iter()
            .filter(|e| level.includes(e.level))
            .map(|e| (e.dtype, e.column, e.level, e.name))
            .collect();
        let checked: HashSet<_> = self.0.iter().filter(|k| k.1 == col).copied().collect();
        assert_eq!(
            checked,
            runnable,
            "{} kernels of {types:?}: checked vs the table at {level}",
            col.name()
        );
        let skipped = listed.len() - runnable.len();
        if skipped > 0 {
            note_lower_level(level);
        }
        runnable.len()
    }
}

/// Random activations of length `n` in `[-scale, scale)`.
pub fn activations(r: &mut impl FnMut() -> u64, n: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|_| ((r() >> 40) as f32 / (1u64 << 23) as f32 - 1.0) * scale)
        .collect()
}

/// Random weight bytes for `n` elements of `wt`, with an f16 scale of `scale`..2·`scale`
/// written at each block offset in `at` (random bytes everywhere else: every code, grid
/// index and sign pattern).
pub fn random_blocks(
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

/// The eight f16 scale offsets of a Q2_0_X block.
pub const Q2X_SCALES: [usize; 8] = [128, 130, 132, 134, 136, 138, 140, 142];

/// Writes the f16 super-scale `bits` into every IQ1_M (or IQ1_M_X) block of `w`: it lives in
/// the top nibbles of the four u16 scale words, the block's last eight bytes in both layouts.
pub fn set_iq1m_scale(w: &mut [u8], t: DType, bits: u16) {
    let size = t.type_size();
    for blk in w.chunks_exact_mut(size) {
        for i in 0..4 {
            let at = size - 8 + 2 * i + 1;
            blk[at] = (blk[at] & 0x0F) | (((bits >> (4 * i)) as u8 & 0xF) << 4);
        }
    }
}

/// Writes an f16 super-scale of `scale`..2·`scale` into each IQ1_M (or IQ1_M_X) block of
/// `w`, differing from block to block (as [`random_blocks`]' scales do), so that a kernel
/// pairing a block with another's scale cannot pass.
pub fn set_iq1m_scales(r: &mut impl FnMut() -> u64, w: &mut [u8], t: DType, scale: f32) {
    let size = t.type_size();
    for blk in w.chunks_exact_mut(size) {
        let s = scale * (1.0 + (r() % 16) as f32 / 16.0);
        set_iq1m_scale(blk, t, quant::scalar::f32_to_f16(s));
    }
}

/// Every multi-row kernel of `wt` this CPU runs gives each of the rows `ws` (against
/// activation `a`) the bits of `want` (recorded in `tally`).
pub fn assert_rows_match(
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
