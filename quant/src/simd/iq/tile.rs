//! Register-tiled GEMM for the grid formats IQ2_XXS and IQ1_S (and their load-time repacked
//! forms IQ2_XXS_X and IQ1_S_X, which expand to the same bytes) against Q8_K, for MoE experts
//! chosen by several tokens (AVX-512): weight rows are first *expanded* — grid lookups,
//! signs and scales done once per row — and then up to four expanded rows × eight activation
//! columns are multiplied per call, every output with the scalar reference's bits. MUL_MAT_ID
//! runs IQ1_S(_X) experts through this tile; IQ2_XXS(_X) experts take the sixteen-row group
//! tile ([`super::group`]), whose reference expanders start from this module's.
//!
//! The expanded layout is its own format with its own references ([`expand_iq2_xxs`],
//! [`expand_iq1_s`], and AVX-512 expanders tested byte for byte against them): per
//! 256-element super-block [`EXPANDED_SB`] bytes —
//! - bytes 0..256: the signed values in element order (int8: IQ2_XXS ±grid, |v| ≤ 43; IQ1_S
//!   the grid's −1/0/+1);
//! - bytes 256..288: the eight group scales `ls` as little-endian i16, each twice (IQ2_XXS
//!   `2·(a1 >> 28) + 1`, IQ1_S `2·((h >> 12) & 7) + 1`): one 32-bit pair per group, which
//!   the kernel broadcasts from memory straight into `vpdpwssd` (no shuffle);
//! - bytes 288..292: the super-block scale `d` as f32;
//! - bytes 292..296: the offset correction `128 · Σ_g ls_g · Σ_{j∈g} v_j` as i32;
//! - bytes 296..328: IQ1_S's delta weights `ls_g · sign_g`, each twice (one per 16-element
//!   `bsums` entry of the group), as i16; zero for IQ2_XXS.
//!
//! The kernel offsets the activation codes by 128 (`y ^ 0x80`, unsigned) so that
//! `vpmaddubsw` can multiply them by the signed values (pair sums ≤ 2·255·43, no
//! saturation); `vpdpwssd` multiplies the pair sums by their group's scale and accumulates.
//! Subtracting the correction leaves the exact integer Σ ls·v·y of the reference. IQ1_S's
//! delta sum Σ ls·sign·(bsum(2g) + bsum(2g+1)) is one `vpdpwssd` of the delta weights
//! with the column's `bsums`. The float combine (`s += d·dy·Σ`, IQ1_S
//! `s += d·dy·(Σ + Σδ/8)`) and IQ2_XXS's final `×0.125` are the reference's operations in
//! the reference's order.
//!
//! A 512-bit register holds a 32-element group of two columns against one row's group
//! broadcast to both halves, so per (row, column pair, group) the work is one `vpmaddubsw`
//! and one `vpdpwssd`; the activation register is reused for four rows and the row's values
//! for four column pairs. The multi-column kernels instead unpack per call and reduce
//! across lanes once per column and super-block.

use crate::blocks::{le_u16, view, BlockIQ1S, BlockIQ1SX, BlockIQ2XXS, BlockIQ2XXSX};
use crate::codec::iquants::grid_byte;
use crate::codec::repack::{iq1sx_code, iq1sx_group, iq2xx_scale, iq2xx_value};
use crate::grids::{IQ1S_GRID, IQ2XXS_GRID, KSIGNS_IQ2XS};
use crate::scalar::le_f16;

/// Expanded bytes per 256-element super-block (see the module docs).
pub const EXPANDED_SB: usize = 328;

/// Most expanded weight rows in one tile call.
pub const TILE_ROWS: usize = 4;

/// Most activation columns in one tile call.
pub const TILE_COLS: usize = 8;

/// Bytes of an expanded row of `n` elements.
pub fn expanded_bytes(n: usize) -> usize {
    n / 256 * EXPANDED_SB
}

/// Bytes of the activation panel ([`pack_panel`]) for `cols` (1..=[`TILE_COLS`]) Q8_K
/// columns of `n` elements.
pub fn panel_bytes(n: usize, cols: usize) -> usize {
    n / 256 * 8 * cols.div_ceil(2) * 64
}

/// Packs `acts` (1..=[`TILE_COLS`] Q8_K rows of `n` elements) into the tile's activation
/// panel `out` ([`panel_bytes`] long): per super-block, group and column pair, 64 bytes —
/// the group's 32 codes of the pair's first column, then of its second, each offset by 128
/// (`y ^ 0x80`, the unsigned operand of `vpmaddubsw`). An odd last column is paired with
/// itself. Packed once per group of tokens and used for every weight row of the expert, it
/// saves the kernel two loads, an insert and an XOR per (pair, group).
///
/// # Panics
/// If the column count or a length does not match (a caller's bug, not bad input).
pub fn pack_panel(n: usize, acts: &[&[u8]], out: &mut [u8]) {
    let cols = acts.len();
    assert!((1..=TILE_COLS).contains(&cols), "panel of {cols} columns");
    assert_eq!(out.len(), panel_bytes(n, cols), "panel length");
    let mut ys: [&[crate::blocks::BlockQ8K]; TILE_COLS] = [&[]; TILE_COLS];
    for (y, a) in ys.iter_mut().zip(acts) {
        *y = view(a);
        assert_eq!(y.len(), n / 256, "activation length");
    }
    let pairs = cols.div_ceil(2);
    // super-block, group and pair in nested loops (an index split per 64 bytes, three
    // divisions, cost more than the copy)
    for (b, sb) in out.chunks_exact_mut(8 * pairs * 64).enumerate() {
        for (g, grp) in sb.chunks_exact_mut(pairs * 64).enumerate() {
            for (p, chunk) in grp.chunks_exact_mut(64).enumerate() {
                let (c0, c1) = (2 * p, (2 * p + 1).min(cols - 1));
                for (half, c) in [c0, c1].into_iter().enumerate() {
                    let src: &[i8; 32] = ys[c][b].qs[32 * g..32 * g + 32]
                        .try_into()
                        .expect("32 codes");
                    let dst: &mut [u8; 32] = (&mut chunk[32 * half..32 * half + 32])
                        .try_into()
                        .expect("32 bytes");
                    for (d, &v) in dst.iter_mut().zip(src) {
                        *d = v as u8 ^ 0x80;
                    }
                }
            }
        }
    }
}

/// An expander: weight row `w` → its expanded layout in `out` ([`expanded_bytes`] long).
pub type ExpandFn = fn(w: &[u8], out: &mut [u8]);

/// Writes the scales, `d`, correction and delta weights of one expanded super-block whose
/// values are already in `o[..256]`.
fn finish_block(o: &mut [u8], ls: [i32; 8], lsg: [i32; 8], d: f32) {
    let mut corr = 0i32;
    for g in 0..8 {
        let sum: i32 = o[32 * g..32 * g + 32].iter().map(|&v| v as i8 as i32).sum();
        corr += ls[g] * sum;
        for k in 0..2 {
            let at = 256 + 4 * g + 2 * k;
            o[at..at + 2].copy_from_slice(&(ls[g] as i16).to_le_bytes());
            let at = 296 + 4 * g + 2 * k;
            o[at..at + 2].copy_from_slice(&(lsg[g] as i16).to_le_bytes());
        }
    }
    o[288..292].copy_from_slice(&d.to_le_bytes());
    o[292..296].copy_from_slice(&(128 * corr).to_le_bytes());
}

/// The scalar reference expander of IQ2_XXS (see the module docs for the layout).
///
/// # Panics
/// If `out` is not [`expanded_bytes`] of the row's length (a caller's bug).
pub fn expand_iq2_xxs(w: &[u8], out: &mut [u8]) {
    let xs = view::<BlockIQ2XXS>(w);
    assert_eq!(out.len(), xs.len() * EXPANDED_SB, "expanded row length");
    for (x, o) in xs.iter().zip(out.chunks_exact_mut(EXPANDED_SB)) {
        let mut ls = [0i32; 8];
        for g in 0..8 {
            let q = &x.qs[8 * g..8 * g + 8];
            let a1 = u32::from_le_bytes([q[4], q[5], q[6], q[7]]);
            ls[g] = (2 * (a1 >> 28) + 1) as i32;
            for k in 0..4 {
                let signs = KSIGNS_IQ2XS[((a1 >> (7 * k)) & 127) as usize];
                let grid = IQ2XXS_GRID[q[k] as usize];
                for j in 0..8 {
                    let v = grid_byte(grid, j) as i32;
                    let v = if signs & (1 << j) != 0 { -v } else { v };
                    o[32 * g + 8 * k + j] = v as i8 as u8;
                }
            }
        }
        finish_block(o, ls, [0; 8], le_f16(x.d));
    }
}

/// The scalar reference expander of IQ1_S (see the module docs for the layout).
///
/// # Panics
/// If `out` is not [`expanded_bytes`] of the row's length (a caller's bug).
pub fn expand_iq1_s(w: &[u8], out: &mut [u8]) {
    let xs = view::<BlockIQ1S>(w);
    assert_eq!(out.len(), xs.len() * EXPANDED_SB, "expanded row length");
    for (x, o) in xs.iter().zip(out.chunks_exact_mut(EXPANDED_SB)) {
        let (mut ls, mut lsg) = ([0i32; 8], [0i32; 8]);
        for g in 0..8 {
            let h = le_u16(&x.qh, g);
            ls[g] = (2 * ((h >> 12) & 7) + 1) as i32;
            lsg[g] = if h & 0x8000 != 0 { -ls[g] } else { ls[g] };
            for k in 0..4 {
                let idx = x.qs[4 * g + k] as usize | ((((h >> (3 * k)) & 7) as usize) << 8);
                for j in 0..8 {
                    o[32 * g + 8 * k + j] = grid_byte(IQ1S_GRID[idx], j);
                }
            }
        }
        finish_block(o, ls, lsg, le_f16(x.d));
    }
}

/// The scalar reference expander of IQ1_S_X: the values and fields of the IQ1_S row it was
/// repacked from, so the same bytes as [`expand_iq1_s`] of that row.
///
/// # Panics
/// If `out` is not [`expanded_bytes`] of the row's length (a caller's bug).
pub fn expand_iq1_s_x(w: &[u8], out: &mut [u8]) {
    let xs = view::<BlockIQ1SX>(w);
    assert_eq!(out.len(), xs.len() * EXPANDED_SB, "expanded row length");
    for (x, o) in xs.iter().zip(out.chunks_exact_mut(EXPANDED_SB)) {
        let (mut ls, mut lsg) = ([0i32; 8], [0i32; 8]);
        for g in 0..8 {
            let (l, neg) = iq1sx_group(x, g);
            (ls[g], lsg[g]) = (l, if neg { -l } else { l });
        }
        for (e, v) in o[..256].iter_mut().enumerate() {
            *v = (iq1sx_code(x, e) as i8 - 1) as u8;
        }
        finish_block(o, ls, lsg, le_f16(x.d));
    }
}

/// The scalar reference expander of IQ2_XXS_X: the values and scales of the IQ2_XXS row it
/// was repacked from, so the same bytes as [`expand_iq2_xxs`] of that row.
///
/// # Panics
/// If `out` is not [`expanded_bytes`] of the row's length (a caller's bug).
pub fn expand_iq2_xxs_x(w: &[u8], out: &mut [u8]) {
    let xs = view::<BlockIQ2XXSX>(w);
    assert_eq!(out.len(), xs.len() * EXPANDED_SB, "expanded row length");
    for (x, o) in xs.iter().zip(out.chunks_exact_mut(EXPANDED_SB)) {
        let ls = std::array::from_fn(|g| iq2xx_scale(x, g));
        for (e, v) in o[..256].iter_mut().enumerate() {
            *v = iq2xx_value(x, e) as i8 as u8;
        }
        finish_block(o, ls, [0; 8], le_f16(x.d));
    }
}

/// A tile kernel: `out[r * cols + c] = dot(n, weight row r, acts[c])` for up to
/// [`TILE_ROWS`] expanded rows and [`TILE_COLS`] Q8_K activation rows.
pub type TileFn = fn(n: usize, rows: &[&[u8]], acts: &[&[u8]], panel: &[u8], out: &mut [f32]);

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::{EXPANDED_SB, TILE_COLS, TILE_ROWS};
    use crate::blocks::{le4, view, BlockQ8K};
    use crate::simd::{dpwssd, fold_pairs, store_tile, tile_shapes, tree4};
    use std::arch::x86_64::*;

    /// Formats (the `K` parameter of the kernel).
    const IQ2_XXS: u8 = 0;
    const IQ1_S: u8 = 1;

    /// Safe entry of the AVX-512 IQ2_XXS expander: checks the lengths, then expands.
    pub(crate) fn expand_iq2_xxs_entry(w: &[u8], out: &mut [u8]) {
        assert_eq!(w.len() % 66, 0, "whole IQ2_XXS blocks");
        assert_eq!(out.len(), w.len() / 66 * EXPANDED_SB, "expanded row length");
        // SAFETY: `table::kernels` hands this entry out only after checking the features; the
        // lengths are checked above.
        unsafe { crate::simd::iq::avx512::expand_iq2_xxs_avx512(w, out) }
    }

    /// Safe entry of the AVX-512 IQ1_S expander: checks the lengths, then expands.
    pub(crate) fn expand_iq1_s_entry(w: &[u8], out: &mut [u8]) {
        assert_eq!(w.len() % 50, 0, "whole IQ1_S blocks");
        assert_eq!(out.len(), w.len() / 50 * EXPANDED_SB, "expanded row length");
        // SAFETY: as above.
        unsafe { crate::simd::iq::avx512::expand_iq1_s_avx512(w, out) }
    }

    /// Safe entry of the AVX-512 IQ1_S_X expander: checks the lengths, then expands.
    pub(crate) fn expand_iq1_s_x_entry(w: &[u8], out: &mut [u8]) {
        assert_eq!(w.len() % 70, 0, "whole IQ1_S_X blocks");
        assert_eq!(out.len(), w.len() / 70 * EXPANDED_SB, "expanded row length");
        // SAFETY: as above.
        unsafe { crate::simd::iq::avx512::expand_iq1_s_x_avx512(w, out) }
    }

    /// Safe entry of the AVX-512 IQ2_XXS_X expander: checks the lengths, then expands.
    pub(crate) fn expand_iq2_xxs_x_entry(w: &[u8], out: &mut [u8]) {
        assert_eq!(w.len() % 102, 0, "whole IQ2_XXS_X blocks");
        assert_eq!(
            out.len(),
            w.len() / 102 * EXPANDED_SB,
            "expanded row length"
        );
        // SAFETY: as above.
        unsafe { crate::simd::iq::avx512::expand_iq2_xxs_x_avx512(w, out) }
    }

    /// Safe entry, IQ2_XXS.
    pub(crate) fn tile_iq2_xxs_entry(
        n: usize,
        rows: &[&[u8]],
        acts: &[&[u8]],
        panel: &[u8],
        out: &mut [f32],
    ) {
        run::<IQ2_XXS>(n, rows, acts, panel, out)
    }

    /// Safe entry, IQ1_S.
    pub(crate) fn tile_iq1_s_entry(
        n: usize,
        rows: &[&[u8]],
        acts: &[&[u8]],
        panel: &[u8],
        out: &mut [f32],
    ) {
        run::<IQ1_S>(n, rows, acts, panel, out)
    }

    /// Checks the shapes, then runs the kernel for the tile's row and pair count.
    fn run<const K: u8>(n: usize, rows: &[&[u8]], acts: &[&[u8]], panel: &[u8], out: &mut [f32]) {
        let nsb = n / 256;
        let cols = acts.len();
        assert!((1..=TILE_ROWS).contains(&rows.len()), "tile rows");
        assert!((1..=TILE_COLS).contains(&cols), "tile columns");
        assert_eq!(out.len(), rows.len() * cols, "tile output length");
        assert!(
            rows.iter().all(|r| r.len() == nsb * EXPANDED_SB),
            "expanded row length"
        );
        assert!(
            acts.iter().all(|a| a.len() == nsb * 292),
            "activation length"
        );
        assert_eq!(panel.len(), super::panel_bytes(n, cols), "panel length");
        // an odd last column is paired with itself
        let ys: [&[BlockQ8K]; TILE_COLS] =
            std::array::from_fn(|c| view::<BlockQ8K>(acts[c.min(cols - 1)]));
        // ×1.0 is exact: IQ1_S keeps the reference's bits
        let scale = if K == IQ2_XXS { 0.125 } else { 1.0 };
        macro_rules! go {
            ($r:literal, $p:literal) => {{
                let xs: &[&[u8]; $r] = rows.try_into().expect("row count checked above");
                // SAFETY: `table::kernels` hands the entries out only after checking the features;
                // the shapes are checked above.
                let s = unsafe { tile::<K, $r, $p>(nsb, xs, &ys, panel) };
                store_tile(&s, $r, cols, scale, out);
            }};
        }
        tile_shapes!(rows.len(), cols.div_ceil(2), go)
    }

    /// The tile's float sums before IQ2_XXS's final ×0.125: `[column][row]` for `R` rows ×
    /// `P` column pairs (see the module docs).
    ///
    /// # Safety
    /// The CPU must have the enabled features; every row holds `nsb` expanded super-blocks
    /// and every activation row `nsb` Q8_K blocks.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx2,fma,f16c")]
    unsafe fn tile<const K: u8, const R: usize, const P: usize>(
        nsb: usize,
        xs: &[&[u8]; R],
        ys: &[&[BlockQ8K]; TILE_COLS],
        panel: &[u8],
    ) -> [[f32; 4]; TILE_COLS] {
        let zero = _mm512_setzero_si512();
        let mut s = [_mm_setzero_ps(); TILE_COLS];
        for b in 0..nsb {
            // a plain loop: `array::from_fn` here compiled to an out-of-line call per
            // super-block, which spilled the column sums around it
            let mut sb: [&[u8]; R] = [&[]; R];
            for (d, x) in sb.iter_mut().zip(xs) {
                *d = &x[b * EXPANDED_SB..(b + 1) * EXPANDED_SB];
            }
            let mut acc = [[zero; P]; R];
            for g in 0..8 {
                let mut gs = [zero; R];
                let mut ls = [zero; R];
                for r in 0..R {
                    // SAFETY: bytes 32g..32g+32 of the super-block are the group's values.
                    let v = unsafe { _mm256_loadu_si256(sb[r][32 * g..].as_ptr().cast()) };
                    gs[r] = _mm512_broadcast_i64x4(v);
                    let l = &sb[r][256 + 4 * g..260 + 4 * g];
                    ls[r] = _mm512_set1_epi32(i32::from_le_bytes([l[0], l[1], l[2], l[3]]));
                }
                for p in 0..P {
                    let at = ((b * 8 + g) * P + p) * 64;
                    // SAFETY: the panel holds nsb·8·P 64-byte pair-groups (checked by `run`).
                    let yu = unsafe { _mm512_loadu_si512(panel[at..at + 64].as_ptr().cast()) };
                    for r in 0..R {
                        let pairs = _mm512_maddubs_epi16(yu, gs[r]);
                        acc[r][p] = dpwssd(acc[r][p], pairs, ls[r]);
                    }
                }
            }
            // one 4-byte load each (`le4`)
            let f32_at = |r: usize| {
                if r < R {
                    f32::from_le_bytes(le4(sb[r], 288))
                } else {
                    0.0
                }
            };
            let i32_at = |r: usize| {
                if r < R {
                    i32::from_le_bytes(le4(sb[r], 292))
                } else {
                    0
                }
            };
            let dx = _mm_setr_ps(f32_at(0), f32_at(1), f32_at(2), f32_at(3));
            let corr = _mm_setr_epi32(i32_at(0), i32_at(1), i32_at(2), i32_at(3));
            // IQ1_S: rows 0, 1 and rows 2, 3 of the delta weights, 256 bits each
            let lsg = |r: usize| {
                if r < R {
                    // SAFETY: bytes 296..328 of the super-block (unaligned load).
                    unsafe { _mm256_loadu_si256(sb[r][296..].as_ptr().cast()) }
                } else {
                    _mm256_setzero_si256()
                }
            };
            let (l01, l23) = if K == IQ1_S {
                (
                    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lsg(0)), lsg(1)),
                    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lsg(2)), lsg(3)),
                )
            } else {
                (zero, zero)
            };
            for p in 0..P {
                let a: [__m512i; 4] = std::array::from_fn(|r| if r < R { acc[r][p] } else { zero });
                let (lo, hi) = fold_pairs(tree4(a[0], a[1], a[2], a[3]));
                let sums = [lo, hi];
                let deltas = if K == IQ1_S {
                    let bs = |c: usize| {
                        // SAFETY: a Q8_K block's 32 `bsums` bytes (unaligned load).
                        let v = unsafe { _mm256_loadu_si256(ys[c][b].bsums.as_ptr().cast()) };
                        _mm512_broadcast_i64x4(v)
                    };
                    let (b0, b1) = (bs(2 * p), bs(2 * p + 1));
                    let t = tree4(
                        _mm512_madd_epi16(l01, b0),
                        _mm512_madd_epi16(l23, b0),
                        _mm512_madd_epi16(l01, b1),
                        _mm512_madd_epi16(l23, b1),
                    );
                    // lane 0: rows 0, 2 of both columns; lane 2: rows 1, 3
                    let (e, o) = fold_pairs(t);
                    [_mm_unpacklo_epi32(e, o), _mm_unpackhi_epi32(e, o)]
                } else {
                    [_mm_setzero_si128(); 2]
                };
                for h in 0..2 {
                    let c = 2 * p + h;
                    let v = _mm_cvtepi32_ps(_mm_sub_epi32(sums[h], corr));
                    let v = if K == IQ1_S {
                        _mm_add_ps(
                            v,
                            _mm_mul_ps(_mm_set1_ps(0.125), _mm_cvtepi32_ps(deltas[h])),
                        )
                    } else {
                        v
                    };
                    let d = _mm_mul_ps(dx, _mm_set1_ps(ys[c][b].d()));
                    s[c] = _mm_add_ps(s[c], _mm_mul_ps(d, v));
                }
            }
        }
        let mut out = [[0f32; 4]; TILE_COLS];
        for (o, v) in out.iter_mut().zip(s) {
            // SAFETY: `o` has room for 4 f32.
            unsafe { _mm_storeu_ps(o.as_mut_ptr(), v) };
        }
        out
    }
}
