//! The Q8_0 activation panel of the Q2_0 / Q2_0_X prompt tiles (`tile_q2`, `tile_q2_avx2`):
//! for every block, pairs of columns side by side — 64 code bytes (first column's block,
//! then the second's), 16 f32 scales (eight lanes of each) and 16 i32 offset terms
//! −128·Σ₄y (lane k of each column: its elements 4k..4k+3) — so that one 512-bit register
//! holds a block of two columns. An odd last column is paired with itself. The terms are the
//! start values of tiles that offset unsigned codes by 128 (`tile_q2` takes −Σ₄y from them
//! by a shift). Q8_0's own tile has its own layout (`tile_x16`).

use crate::blocks::{view, BlockQ8_0};
use crate::scalar::le_f16;

/// Bytes of one packed pair-block: 64 code bytes, 16 f32 scales and 16 i32 offset terms
/// −128·Σ₄y (lane k of each column: its elements 4k..4k+3).
pub(crate) const PAIR_BLOCK: usize = 192;

/// Most activation columns in one panel (four pairs).
pub const TILE_COLS: usize = 8;

/// Most weight rows in one tile call.
pub const TILE_ROWS: usize = 4;

/// Bytes of the panel for `cols` (1..=[`TILE_COLS`]) Q8_0 columns of `n` elements.
pub fn panel_bytes(n: usize, cols: usize) -> usize {
    (n / 32) * cols.div_ceil(2) * PAIR_BLOCK
}

/// Packs `acts` (1..=[`TILE_COLS`] Q8_0 rows of `n` elements) into `out`, which must be
/// [`panel_bytes`]`(n, acts.len())` long (see the module docs for the layout): with AVX2 and
/// F16C where the CPU has them ([`pack_q8_0_panel_ref`]'s bytes), else by the reference.
///
/// # Panics
/// If the column count or a length does not match (a caller's bug, not bad input).
pub fn pack_q8_0_panel(n: usize, acts: &[&[u8]], out: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if crate::simd::CpuLevel::detect() >= crate::simd::CpuLevel::Avx2 {
        let (ys, pairs) = panel_columns(n, acts, out);
        // SAFETY: the level guarantees AVX2 and F16C; the shapes were checked above.
        unsafe { x86::pack_avx2(&ys, acts.len(), pairs, out) };
        return;
    }
    pack_q8_0_panel_ref(n, acts, out);
}

/// The columns of a panel as blocks (the unused entries empty) and its pair count, after
/// checking the shapes.
fn panel_columns<'a>(
    n: usize,
    acts: &[&'a [u8]],
    out: &[u8],
) -> ([&'a [BlockQ8_0]; TILE_COLS], usize) {
    let cols = acts.len();
    assert!((1..=TILE_COLS).contains(&cols), "panel of {cols} columns");
    assert_eq!(out.len(), panel_bytes(n, cols), "panel length");
    let mut ys: [&[BlockQ8_0]; TILE_COLS] = [&[]; TILE_COLS];
    for (y, a) in ys.iter_mut().zip(acts) {
        *y = view::<BlockQ8_0>(a);
        assert_eq!(y.len(), n / 32, "activation length");
    }
    (ys, cols.div_ceil(2))
}

/// The reference packer of [`pack_q8_0_panel`], block by block and pair by pair.
///
/// # Panics
/// As [`pack_q8_0_panel`].
pub fn pack_q8_0_panel_ref(n: usize, acts: &[&[u8]], out: &mut [u8]) {
    let (ys, pairs) = panel_columns(n, acts, out);
    let cols = acts.len();
    for (b, blk) in out.chunks_exact_mut(pairs * PAIR_BLOCK).enumerate() {
        for (p, pb) in blk.chunks_exact_mut(PAIR_BLOCK).enumerate() {
            let (c0, c1) = (2 * p, (2 * p + 1).min(cols - 1));
            let (y0, y1) = (&ys[c0][b], &ys[c1][b]);
            for (dst, src) in pb[..32].iter_mut().zip(&y0.qs) {
                *dst = *src as u8;
            }
            for (dst, src) in pb[32..64].iter_mut().zip(&y1.qs) {
                *dst = *src as u8;
            }
            let (d0, d1) = (le_f16(y0.d).to_le_bytes(), le_f16(y1.d).to_le_bytes());
            for (l, dst) in pb[64..128].chunks_exact_mut(4).enumerate() {
                dst.copy_from_slice(if l < 8 { &d0 } else { &d1 });
            }
            for (l, dst) in pb[128..].chunks_exact_mut(4).enumerate() {
                let (y, k) = (if l < 8 { y0 } else { y1 }, l % 8);
                let sum: i32 = y.qs[4 * k..4 * k + 4].iter().map(|&q| i32::from(q)).sum();
                dst.copy_from_slice(&(-128 * sum).to_le_bytes());
            }
        }
    }
}

/// A tile kernel: `out[r * cols + c] = dot(n, rows[r], column c of the panel)` for up to
/// [`TILE_ROWS`] rows and the panel's `cols` columns (Q2_0, Q2_0_X).
pub type TileFn = fn(n: usize, rows: &[&[u8]], panel: &[u8], cols: usize, out: &mut [f32]);

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::{BlockQ8_0, PAIR_BLOCK, TILE_COLS, TILE_ROWS};
    use std::arch::x86_64::*;

    /// [`super::pack_q8_0_panel_ref`]'s bytes with AVX2 and F16C: per pair-block the two
    /// code runs copied, the two scales converted by `vcvtph2ps` (exact) and each spread over
    /// eight lanes, and the lane terms −128·Σ₄y by `vpmaddubsw` / `vpmaddwd` against ones
    /// (exact: |Σ₄y| ≤ 512) and a shift.
    ///
    /// # Safety
    /// The CPU must have AVX2 and F16C; `ys` holds `cols` columns of whole blocks and `out`
    /// is their panel (checked by the caller).
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn pack_avx2(
        ys: &[&[BlockQ8_0]; TILE_COLS],
        cols: usize,
        pairs: usize,
        out: &mut [u8],
    ) {
        let ones8 = _mm256_set1_epi8(1);
        let ones16 = _mm256_set1_epi16(1);
        let zero = _mm256_setzero_si256();
        for (b, blk) in out.chunks_exact_mut(pairs * PAIR_BLOCK).enumerate() {
            for (p, pb) in blk.chunks_exact_mut(PAIR_BLOCK).enumerate() {
                let (c0, c1) = (2 * p, (2 * p + 1).min(cols - 1));
                let pb: &mut [u8; PAIR_BLOCK] = pb.try_into().expect("pair-block length");
                for (half, y) in [&ys[c0][b], &ys[c1][b]].into_iter().enumerate() {
                    // SAFETY: a block's 32 codes are readable (unaligned load).
                    let q = unsafe { _mm256_loadu_si256(y.qs.as_ptr().cast()) };
                    let d = _mm256_cvtph_ps(_mm_set1_epi16(i16::from_le_bytes(y.d)));
                    let pairs16 = _mm256_maddubs_epi16(ones8, q);
                    let sums = _mm256_madd_epi16(pairs16, ones16);
                    let terms = _mm256_sub_epi32(zero, _mm256_slli_epi32::<7>(sums));
                    let base = pb.as_mut_ptr().wrapping_add(32 * half);
                    let at = |o: usize| base.wrapping_add(o);
                    // SAFETY: each store writes 32 bytes inside the 192-byte pair-block
                    // (offsets 0/32, 64/96 and 128/160; unaligned stores).
                    unsafe {
                        _mm256_storeu_si256(at(0).cast(), q);
                        _mm256_storeu_ps(at(64).cast(), d);
                        _mm256_storeu_si256(at(128).cast(), terms);
                    }
                }
            }
        }
    }

    /// The shapes every tile on a packed panel checks before its kernel runs (Q2_0 and
    /// Q2_0_X, AVX-512 and AVX2): row and column counts, panel and output lengths, and each
    /// weight row `row_bytes` long.
    ///
    /// # Panics
    /// On any mismatch.
    pub(crate) fn check_panel_call(
        n: usize,
        rows: &[&[u8]],
        panel: &[u8],
        cols: usize,
        out: &[f32],
        row_bytes: usize,
    ) {
        assert!((1..=TILE_ROWS).contains(&rows.len()), "tile rows");
        assert!((1..=TILE_COLS).contains(&cols), "tile columns");
        assert_eq!(panel.len(), super::panel_bytes(n, cols), "panel length");
        assert_eq!(out.len(), rows.len() * cols, "tile output length");
        assert!(
            rows.iter().all(|r| r.len() == row_bytes),
            "weight row length"
        );
    }
}
