//! IQ2_XXS, IQ1_S and IQ1_M · Q8_K GEMM for MoE experts chosen by several tokens of a prompt
//! chunk, with sixteen weight rows in a register's lanes (AVX-512 VNNI; an AVX-VNNI form
//! takes each half of them in a 256-bit register), every output with the scalar reference's
//! bits: IQ2_XXS's ([`crate::dot::dot_iq2_xxs`]: per super-block the exact integer
//! Σ_g ls_g·Σ v·y over its eight 32-element groups, then `s += (d·dy)·Σ`, and `×0.125` at the
//! end) and the IQ1 types' ([`crate::dot::dot_iq1_s`], [`crate::dot::dot_iq1_m`]: the exact
//! T = 8·sumi + sumi1 = Σ_g ls_g·Σ W·y over IQ1_S's eight groups or IQ1_M's sixteen 16-element
//! halves, W = 8·v + σ with σ the delta sign, then `s += (d·dy)·(T·0.125)`, |T| < 2²⁴ so that
//! T·0.125 is the reference's `sumi + 0.125·sumi1`). A layout has `h` *scale groups* a
//! super-block: [`SCALES_32`] (8) or [`SCALES_16`] (16).
//!
//! Weight rows are first *expanded* sixteen at a time into a group (the references
//! [`expand_group_iq2_xxs`] and [`expand_group_iq2_xxs_x`]: each row expanded into
//! [`super::tile`]'s layout, then a scalar `regroup`; the kernel table's AVX-512 expanders unpack
//! the rows in registers and write the group's bytes at once): per super-block
//! - 64 vectors of 64 bytes, vector j holding in lane r bytes `4j .. 4j + 4` of row r's
//!   signed values (IQ2_XXS ±grid, IQ1_M W) offset by 128 (`v ⊕ 0x80`, so that `vpdpbusd`
//!   takes them as unsigned);
//! - h vectors of 16 i32, vector g holding the rows' scales `ls_g` of scale group g;
//! - the sixteen rows' scales `d` as f32.
//!
//! Missing rows (a group of fewer than sixteen) are zero rows: values 0, scales 0.
//!
//! The activation columns are packed eight at a time into a *panel* ([`pack_panel`]): per
//! super-block each column's 256 codes, then per column and scale group the offset's share
//! −128·Σ_{j∈g} y_j as i32, then each column's `dy` as f32.
//!
//! Per (column, scale group) the kernel starts an integer accumulator from −128·Σy and adds
//! the `vpdpbusd` of the group's vectors (eight, or four for IQ1_M's halves) with the
//! column's code dwords broadcast from the panel: lane r ends with row r's exact Σ v·y over
//! the group. One `vpmulld` by the group scales and one add put it into the super-block sum:
//! for IQ2_XXS 11 vector operations for 512 multiply-adds, against 16 for the four-row tile
//! on expanded rows (docs/kernels.md, "IQ2_XXS experts with rows in lanes"). The float
//! combine is four operations per column and super-block (five for IQ1_M).

use crate::blocks::{view, BlockIQ1M, BlockIQ1MX, BlockIQ1S, BlockIQ1SX, BlockQ8K};
use crate::grids::IQ1S_GRID;

/// Weight rows in a group.
pub const GROUP_ROWS: usize = 16;

/// Most activation columns in a panel.
pub const PANEL_COLS: usize = 8;

/// Scale groups a super-block of eight of 32 elements: IQ2_XXS, IQ1_S (and their repacked
/// forms).
pub const SCALES_32: usize = 8;

/// Scale groups a super-block of sixteen of 16 elements (halves): IQ1_M (and IQ1_M_X).
pub const SCALES_16: usize = 16;

/// Bytes of one super-block of a group with `h` scale groups: 64 × 64 code bytes, h × 16 i32
/// group scales and 16 f32 scales.
pub(crate) const fn group_sb(h: usize) -> usize {
    64 * 64 + h * 64 + 64
}

/// [`group_sb`] of IQ2_XXS.
pub(crate) const GROUP_SB: usize = group_sb(SCALES_32);

/// Offset of the group scales in a super-block of a group.
pub(crate) const LS_AT: usize = 64 * 64;

/// Offset of the row scales in a super-block of a group with `h` scale groups.
pub(crate) const fn d_at(h: usize) -> usize {
    LS_AT + h * 64
}

/// [`d_at`] of IQ2_XXS.
pub(crate) const D_AT: usize = d_at(SCALES_32);

/// Bytes of a panel's super-block per column with `h` scale groups: 256 codes, h i32 terms,
/// one f32 scale.
const fn panel_sb(h: usize) -> usize {
    256 + 4 * h + 4
}

/// Bytes of a group of rows of `n` elements with `h` scale groups ([`SCALES_32`] or
/// [`SCALES_16`]).
pub fn group_bytes(n: usize, h: usize) -> usize {
    n / 256 * group_sb(h)
}

/// Bytes of a panel of `cols` (1..=[`PANEL_COLS`]) columns of `n` elements with `h` scale
/// groups.
pub fn panel_bytes(n: usize, cols: usize, h: usize) -> usize {
    n / 256 * panel_sb(h) * cols
}

/// A group expander: `rows` (1..=[`GROUP_ROWS`] weight rows of `n` elements) → a group
/// (`out`, [`group_bytes`]`(n)` bytes; the layout in the module docs).
pub type GroupExpandFn = fn(n: usize, rows: &[&[u8]], out: &mut [u8]);

/// A group tile: `out[c][r] = dot_iq2_xxs(n, row r of the group, column c of the panel)` for
/// the panel's `cols` columns and all sixteen rows (a missing row's outputs are 0).
pub type GroupTileFn = fn(n: usize, group: &[u8], panel: &[u8], cols: usize, out: &mut [[f32; 16]]);

/// Checks a group expansion's shapes: `bytes` per super-block of a weight row, `h` scale
/// groups.
pub(crate) fn check_group(n: usize, rows: &[&[u8]], bytes: usize, h: usize, out: &[u8]) {
    assert!(
        (1..=GROUP_ROWS).contains(&rows.len()),
        "group of {} rows",
        rows.len()
    );
    assert_eq!(n % 256, 0, "whole super-blocks");
    assert_eq!(out.len(), group_bytes(n, h), "group length");
    assert!(
        rows.iter().all(|r| r.len() == n / 256 * bytes),
        "weight row length"
    );
}

/// The reference group expander of IQ2_XXS ([`GroupExpandFn`]).
///
/// # Panics
/// If a length does not match (a caller's bug, not bad input).
pub fn expand_group_iq2_xxs(n: usize, rows: &[&[u8]], out: &mut [u8]) {
    check_group(
        n,
        rows,
        size_of::<crate::blocks::BlockIQ2XXS>(),
        SCALES_32,
        out,
    );
    expand_then_regroup(super::tile::expand_iq2_xxs, n, rows, out);
}

/// The reference group expander of IQ2_XXS_X ([`GroupExpandFn`]): the group of the IQ2_XXS
/// rows they were repacked from.
///
/// # Panics
/// If a length does not match (a caller's bug, not bad input).
pub fn expand_group_iq2_xxs_x(n: usize, rows: &[&[u8]], out: &mut [u8]) {
    check_group(
        n,
        rows,
        size_of::<crate::blocks::BlockIQ2XXSX>(),
        SCALES_32,
        out,
    );
    expand_then_regroup(super::tile::expand_iq2_xxs_x, n, rows, out);
}

/// The reference group expander of IQ1_M ([`GroupExpandFn`], [`SCALES_16`]): per element
/// W = 8·v + σ (v the grid value, σ = ±1 its sub-group's delta sign), per half its scale
/// 2·s + 1, per row the super-block scale.
///
/// # Panics
/// If a length does not match (a caller's bug, not bad input).
pub fn expand_group_iq1_m(n: usize, rows: &[&[u8]], out: &mut [u8]) {
    use crate::codec::iquants::{iq1m_d, iq1m_index, iq1m_scales};
    check_group(n, rows, size_of::<BlockIQ1M>(), SCALES_16, out);
    let xs: Vec<&[BlockIQ1M]> = rows.iter().map(|w| view::<BlockIQ1M>(w)).collect();
    regroup_iq1(&xs, out, SCALES_16, |x| {
        let mut v = [0i8; 256];
        let mut ls = [0i32; 16];
        for g in 0..8 {
            let (s1, s2) = iq1m_scales(x, g);
            ls[2 * g] = 2 * s1 as i32 + 1;
            ls[2 * g + 1] = 2 * s2 as i32 + 1;
            for k in 0..4 {
                let (idx, delta) = iq1m_index(x, g, k);
                let sigma = if delta < 0.0 { -1 } else { 1 };
                for j in 0..8 {
                    let e = (IQ1S_GRID[idx] >> (8 * j)) as u8 as i8;
                    v[32 * g + 8 * k + j] = 8 * e + sigma;
                }
            }
        }
        (v, ls, iq1m_d(x))
    });
}

/// The reference group expander of IQ1_M_X ([`GroupExpandFn`], [`SCALES_16`]): the group
/// of the IQ1_M rows they were repacked from.
///
/// # Panics
/// If a length does not match (a caller's bug, not bad input).
pub fn expand_group_iq1_m_x(n: usize, rows: &[&[u8]], out: &mut [u8]) {
    use crate::codec::iquants::{iq1m_d_of, iq1m_scales_of};
    use crate::codec::repack::{iq1mx_code, iq1mx_neg};
    check_group(n, rows, size_of::<BlockIQ1MX>(), SCALES_16, out);
    let xs: Vec<&[BlockIQ1MX]> = rows.iter().map(|w| view::<BlockIQ1MX>(w)).collect();
    regroup_iq1(&xs, out, SCALES_16, |x| {
        let mut v = [0i8; 256];
        let mut ls = [0i32; 16];
        for g in 0..8 {
            let (s1, s2) = iq1m_scales_of(&x.scales, g);
            ls[2 * g] = 2 * s1 as i32 + 1;
            ls[2 * g + 1] = 2 * s2 as i32 + 1;
        }
        for (e, ve) in v.iter_mut().enumerate() {
            let sigma = if iq1mx_neg(x, e / 8) { -1 } else { 1 };
            *ve = 8 * (iq1mx_code(x, e) as i8 - 1) + sigma;
        }
        (v, ls, iq1m_d_of(&x.scales))
    });
}

/// Writes the group of `rows` (blocks of an IQ1 form) in the layout of `h` scale groups into
/// `out`, each block's values, scales (the first `h`) and super-block scale from `block`:
/// the definition of an IQ1 group's bytes (missing rows: values 0, scales 0).
fn regroup_iq1<B>(
    rows: &[&[B]],
    out: &mut [u8],
    h: usize,
    block: impl Fn(&B) -> ([i8; 256], [i32; 16], f32),
) {
    for (b, ob) in out.chunks_exact_mut(group_sb(h)).enumerate() {
        for r in 0..GROUP_ROWS {
            let (v, ls, d) = rows
                .get(r)
                .map_or(([0i8; 256], [0i32; 16], 0f32), |x| block(&x[b]));
            for (e, &ve) in v.iter().enumerate() {
                ob[64 * (e / 4) + 4 * r + e % 4] = ve as u8 ^ 0x80;
            }
            for (g, l) in ls[..h].iter().enumerate() {
                let at = LS_AT + 64 * g + 4 * r;
                ob[at..at + 4].copy_from_slice(&l.to_le_bytes());
            }
            let at = d_at(h) + 4 * r;
            ob[at..at + 4].copy_from_slice(&d.to_le_bytes());
        }
    }
}

/// The reference group expander of IQ1_S ([`GroupExpandFn`], [`SCALES_32`]): per element
/// W = 8·v + σ (v the grid value, σ = ±1 its group's delta sign), per group its scale
/// 2·s + 1, per row the super-block scale; the tile's T is then the reference's
/// 8·sumi + sumi1, as IQ1_M's. Taken from the row expander of [`super::tile`].
///
/// # Panics
/// If a length does not match (a caller's bug, not bad input).
pub fn expand_group_iq1_s(n: usize, rows: &[&[u8]], out: &mut [u8]) {
    check_group(n, rows, size_of::<BlockIQ1S>(), SCALES_32, out);
    iq1_s_regroup(super::tile::expand_iq1_s, n, rows, out);
}

/// The reference group expander of IQ1_S_X ([`GroupExpandFn`], [`SCALES_32`]): the group
/// of the IQ1_S rows they were repacked from.
///
/// # Panics
/// If a length does not match (a caller's bug, not bad input).
pub fn expand_group_iq1_s_x(n: usize, rows: &[&[u8]], out: &mut [u8]) {
    check_group(n, rows, size_of::<BlockIQ1SX>(), SCALES_32, out);
    iq1_s_regroup(super::tile::expand_iq1_s_x, n, rows, out);
}

/// Each row through an IQ1_S row expander of [`super::tile`] (values v, group scales, f32
/// scale, delta weights ls·σ), then its IQ1 group: W = 8·v + σ, σ the delta weight's sign.
fn iq1_s_regroup(expand: super::tile::ExpandFn, n: usize, rows: &[&[u8]], out: &mut [u8]) {
    use super::tile::{expanded_bytes, EXPANDED_SB};
    let ex: Vec<Vec<u8>> = rows
        .iter()
        .map(|w| {
            let mut e = vec![0u8; expanded_bytes(n)];
            expand(w, &mut e);
            e
        })
        .collect();
    let blocks: Vec<Vec<&[u8]>> = ex
        .iter()
        .map(|e| e.chunks_exact(EXPANDED_SB).collect())
        .collect();
    let blocks: Vec<&[&[u8]]> = blocks.iter().map(|b| b.as_slice()).collect();
    let word = |e: &[u8], at: usize| i16::from_le_bytes([e[at], e[at + 1]]);
    regroup_iq1(&blocks, out, SCALES_32, |e: &&[u8]| {
        let mut v = [0i8; 256];
        let mut ls = [0i32; 16];
        for (g, l) in ls.iter_mut().take(8).enumerate() {
            *l = i32::from(word(e, 256 + 4 * g));
            let sigma = word(e, 296 + 4 * g).signum() as i8;
            for (o, &c) in v[32 * g..32 * g + 32]
                .iter_mut()
                .zip(&e[32 * g..32 * g + 32])
            {
                *o = 8 * c as i8 + sigma;
            }
        }
        (v, ls, f32::from_le_bytes([e[288], e[289], e[290], e[291]]))
    });
}

/// Each row through the reference row expander `expand`, then [`regroup`].
fn expand_then_regroup(expand: super::tile::ExpandFn, n: usize, rows: &[&[u8]], out: &mut [u8]) {
    let ex: Vec<Vec<u8>> = rows
        .iter()
        .map(|w| {
            let mut e = vec![0u8; super::tile::expanded_bytes(n)];
            expand(w, &mut e);
            e
        })
        .collect();
    let ex: Vec<&[u8]> = ex.iter().map(|e| e.as_slice()).collect();
    regroup(&ex, out);
}

/// Expanded rows ([`super::tile`]'s layout) → their group, row by row and super-block by
/// super-block (the definition of the group's bytes).
fn regroup(rows: &[&[u8]], out: &mut [u8]) {
    use super::tile::EXPANDED_SB;
    for (b, ob) in out.chunks_exact_mut(GROUP_SB).enumerate() {
        for r in 0..GROUP_ROWS {
            let x = rows
                .get(r)
                .map(|x| &x[b * EXPANDED_SB..(b + 1) * EXPANDED_SB]);
            for v in 0..64 {
                for i in 0..4 {
                    let e = 4 * v + i;
                    ob[64 * v + 4 * r + i] = x.map_or(0, |x| x[e]) ^ 0x80;
                }
            }
            for g in 0..8 {
                let ls = x.map_or(0, |x| {
                    i32::from(i16::from_le_bytes([x[256 + 4 * g], x[257 + 4 * g]]))
                });
                let at = LS_AT + 64 * g + 4 * r;
                ob[at..at + 4].copy_from_slice(&ls.to_le_bytes());
            }
            let d = x.map_or([0; 4], |x| [x[288], x[289], x[290], x[291]]);
            ob[D_AT + 4 * r..D_AT + 4 * r + 4].copy_from_slice(&d);
        }
    }
}

/// Packs `acts` (1..=[`PANEL_COLS`] Q8_K rows of `n` elements) into a panel for a layout of
/// `h` scale groups (`out`, [`panel_bytes`]`(n, acts.len(), h)` bytes; the layout in the
/// module docs). The sums are taken from the codes, not from the blocks' `bsums`.
///
/// # Panics
/// If a length does not match or `h` does not divide 256 (a caller's bug).
pub fn pack_panel(n: usize, acts: &[&[u8]], out: &mut [u8], h: usize) {
    let cols = acts.len();
    assert!((1..=PANEL_COLS).contains(&cols), "panel of {cols} columns");
    assert!(h > 0 && 256 % h == 0, "{h} scale groups");
    assert_eq!(out.len(), panel_bytes(n, cols, h), "panel length");
    let ys: Vec<&[BlockQ8K]> = acts.iter().map(|a| view::<BlockQ8K>(a)).collect();
    assert!(ys.iter().all(|y| y.len() == n / 256), "activation length");
    let len = 256 / h;
    for (b, ob) in out.chunks_exact_mut(panel_sb(h) * cols).enumerate() {
        let (codes, rest) = ob.split_at_mut(256 * cols);
        let (terms, scales) = rest.split_at_mut(4 * h * cols);
        for (c, y) in ys.iter().enumerate() {
            let y = &y[b];
            for (o, &q) in codes[256 * c..256 * c + 256].iter_mut().zip(&y.qs) {
                *o = q as u8;
            }
            for g in 0..h {
                let sum: i32 = y.qs[len * g..len * (g + 1)]
                    .iter()
                    .map(|&q| i32::from(q))
                    .sum();
                let at = 4 * h * c + 4 * g;
                terms[at..at + 4].copy_from_slice(&(-128 * sum).to_le_bytes());
            }
            scales[4 * c..4 * c + 4].copy_from_slice(&y.d);
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::{
        check_group, d_at, group_bytes, group_sb, panel_bytes, panel_sb, LS_AT, PANEL_COLS,
        SCALES_16, SCALES_32,
    };
    use crate::blocks::{BlockIQ1M, BlockIQ1MX, BlockIQ1S, BlockIQ1SX, BlockIQ2XXS, BlockIQ2XXSX};
    use crate::simd::iq::{avx2, avx512};
    use std::arch::x86_64::*;

    /// Safe entries of the group expanders: each checks the shapes (rows of its block type,
    /// its layout's scale groups), then expands.
    macro_rules! expand_entries {
        ($($entry:ident => $expand:expr, $block:ty, $h:expr;)+) => {$(
            pub(crate) fn $entry(n: usize, rows: &[&[u8]], out: &mut [u8]) {
                check_group(n, rows, size_of::<$block>(), $h, out);
                // SAFETY: `table::kernels` hands this entry out only after checking the
                // features; the shapes were checked above.
                unsafe { $expand(rows, out) }
            }
        )+};
    }

    expand_entries! {
        expand_iq2_xxs_entry => avx512::group_iq2::<BlockIQ2XXS>, BlockIQ2XXS, SCALES_32;
        expand_iq2_xxs_x_entry => avx512::group_iq2::<BlockIQ2XXSX>, BlockIQ2XXSX, SCALES_32;
        expand_iq2_xxs_avx2_entry => avx2::group_iq2_xxs::<BlockIQ2XXS>, BlockIQ2XXS, SCALES_32;
        expand_iq2_xxs_x_avx2_entry =>
            avx2::group_iq2_xxs::<BlockIQ2XXSX>, BlockIQ2XXSX, SCALES_32;
        expand_iq1_m_entry => avx2::group_iq1_m::<BlockIQ1M>, BlockIQ1M, SCALES_16;
        expand_iq1_m_x_entry => avx2::group_iq1_m::<BlockIQ1MX>, BlockIQ1MX, SCALES_16;
        expand_iq1_s_entry => avx2::group_iq1_s::<BlockIQ1S>, BlockIQ1S, SCALES_32;
        expand_iq1_s_x_entry => avx2::group_iq1_s::<BlockIQ1SX>, BlockIQ1SX, SCALES_32;
    }

    // the tiles' safe entries: IQ2_XXS's layout (×0.125 at the end), IQ1_S's (the same
    // layout, ×0.125 per block) and IQ1_M's (sixteen scale groups, ×0.125 per block)
    crate::simd::group_tile_entries!(
        256;
        tile_entry => tile [SCALES_32, false],
        tile_avx_vnni_entry => tile_avx_vnni [SCALES_32, false],
        tile_iq1s_entry => tile [SCALES_32, true],
        tile_iq1s_avx_vnni_entry => tile_avx_vnni [SCALES_32, true],
        tile_iq1m_entry => tile [SCALES_16, true],
        tile_iq1m_avx_vnni_entry => tile_avx_vnni [SCALES_16, true],
    );

    /// The group tile with AVX-VNNI (`vpdpbusd` on 256-bit registers, no AVX-512): the
    /// AVX-512 tile's steps on each half of the group (rows 0..8, then 8..16), up to four
    /// columns per pass. Per (row half, column, group) the accumulator starts from the
    /// panel's −128·Σy and takes eight `vpdpbusd` of the half's vectors with the column's
    /// code dwords broadcast; one `vpmulld` by the half's group scales and one add put it
    /// into the super-block sum. The float combine is the AVX-512 tile's: the reference's
    /// bits. `H` scale groups a super-block; `INNER`: ×0.125 on each block's sum (IQ1_M),
    /// else on the row's at the end (IQ2_XXS).
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and AVX-VNNI; `group` holds `nsb` super-blocks of a
    /// group and `panel` `nsb` super-blocks of `C` columns, both of `H` scale groups.
    #[target_feature(enable = "avx2,fma,avxvnni")]
    unsafe fn tile_avx_vnni<const C: usize, const H: usize, const INNER: bool>(
        nsb: usize,
        group: &[u8],
        panel: &[u8],
        out: &mut [[f32; 16]; C],
    ) {
        let (gsb, psb, kk) = (group_sb(H), panel_sb(H) * C, 64 / H);
        let eighth = _mm256_set1_ps(0.125);
        for half in 0..2 {
            for c0 in (0..C).step_by(4) {
                let cols = (C - c0).min(4);
                let mut s = [_mm256_setzero_ps(); 4];
                for b in 0..nsb {
                    let gb = &group[b * gsb..(b + 1) * gsb];
                    let pb = &panel[b * psb..(b + 1) * psb];
                    // SAFETY: every offset passed is below panel_sb(H)·C − 3 (as in `tile`).
                    let word =
                        |o: usize| unsafe { pb.as_ptr().add(o).cast::<i32>().read_unaligned() };
                    // SAFETY: half `half` of vector v is bytes 64v + 32·half.. + 32 of the
                    // super-block, v < group_sb(H) / 64 (unaligned load).
                    let vec = |v: usize| unsafe {
                        _mm256_loadu_si256(gb.as_ptr().add(64 * v + 32 * half).cast())
                    };
                    let mut bs = [_mm256_setzero_si256(); 4];
                    for g in 0..H {
                        let mut a: [__m256i; 4] = std::array::from_fn(|c| {
                            if c < cols {
                                _mm256_set1_epi32(word(256 * C + 4 * H * (c0 + c) + 4 * g))
                            } else {
                                _mm256_setzero_si256()
                            }
                        });
                        for k in 0..kk {
                            let w = vec(kk * g + k);
                            for (c, ac) in a.iter_mut().enumerate().take(cols) {
                                let y =
                                    _mm256_set1_epi32(word(256 * (c0 + c) + 4 * kk * g + 4 * k));
                                *ac = _mm256_dpbusd_avx_epi32(*ac, w, y);
                            }
                        }
                        let ls = vec(LS_AT / 64 + g);
                        for (bc, ac) in bs.iter_mut().zip(a).take(cols) {
                            *bc = _mm256_add_epi32(*bc, _mm256_mullo_epi32(ac, ls));
                        }
                    }
                    // SAFETY: the sixteen f32 scales are bytes d_at(H)..d_at(H) + 64 of the
                    // super-block (unaligned load of this half's eight).
                    let dw =
                        unsafe { _mm256_loadu_ps(gb.as_ptr().add(d_at(H) + 32 * half).cast()) };
                    for (c, (sc, bc)) in s.iter_mut().zip(bs).enumerate().take(cols) {
                        let dy = f32::from_bits(word(256 * C + 4 * H * C + 4 * (c0 + c)) as u32);
                        let d = _mm256_mul_ps(dw, _mm256_set1_ps(dy));
                        let mut t = _mm256_cvtepi32_ps(bc);
                        if INNER {
                            t = _mm256_mul_ps(t, eighth);
                        }
                        *sc = _mm256_add_ps(*sc, _mm256_mul_ps(t, d));
                    }
                }
                for (c, v) in s.iter().enumerate().take(cols) {
                    let o = &mut out[c0 + c][8 * half..8 * half + 8];
                    let v = if INNER { *v } else { _mm256_mul_ps(eighth, *v) };
                    // SAFETY: `o` has room for 8 f32 (unaligned store).
                    unsafe { _mm256_storeu_ps(o.as_mut_ptr(), v) };
                }
            }
        }
    }

    /// The group tile for `C` columns and `H` scale groups a super-block (see the module
    /// docs); `INNER`: ×0.125 on each block's sum (IQ1_M), else on the row's at the end
    /// (IQ2_XXS). With four columns or fewer each column's group sum runs as two chains of
    /// `vpdpbusd` (even and odd dwords), joined by one exact add, so that enough chains are in
    /// flight.
    ///
    /// # Safety
    /// The CPU must have the enabled features; `group` holds `nsb` super-blocks of a group
    /// and `panel` `nsb` super-blocks of `C` columns, both of `H` scale groups.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    unsafe fn tile<const C: usize, const H: usize, const INNER: bool>(
        nsb: usize,
        group: &[u8],
        panel: &[u8],
        out: &mut [[f32; 16]; C],
    ) {
        let zero = _mm512_setzero_si512();
        let two = C <= 4;
        let mut s = [_mm512_setzero_ps(); C];
        let (gsb, psb, kk) = (group_sb(H), panel_sb(H) * C, 64 / H);
        let eighth = _mm512_set1_ps(0.125);
        for b in 0..nsb {
            let gb = &group[b * gsb..(b + 1) * gsb];
            let pb = &panel[b * psb..(b + 1) * psb];
            // SAFETY: every offset passed is below panel_sb(H)·C − 3 (codes 256c + 4·kk·g +
            // 4k + 4 ≤ 256·C, terms 256·C + 4Hc + 4g, scales 256·C + 4HC + 4c), inside `pb`
            // (unaligned reads).
            let word = |o: usize| unsafe { pb.as_ptr().add(o).cast::<i32>().read_unaligned() };
            // SAFETY: vector v is bytes 64v.. of the super-block, v < group_sb(H) / 64.
            let vec = |v: usize| unsafe { _mm512_loadu_si512(gb.as_ptr().add(64 * v).cast()) };
            let mut bs = [zero; C];
            for g in 0..H {
                let mut a0: [__m512i; C] =
                    std::array::from_fn(|c| _mm512_set1_epi32(word(256 * C + 4 * H * c + 4 * g)));
                let mut a1 = [zero; C];
                for k in 0..kk {
                    let w = vec(kk * g + k);
                    for c in 0..C {
                        let y = _mm512_set1_epi32(word(256 * c + 4 * kk * g + 4 * k));
                        if two && k % 2 == 1 {
                            a1[c] = _mm512_dpbusd_epi32(a1[c], w, y);
                        } else {
                            a0[c] = _mm512_dpbusd_epi32(a0[c], w, y);
                        }
                    }
                }
                let ls = vec(LS_AT / 64 + g);
                for c in 0..C {
                    let a = if two {
                        _mm512_add_epi32(a0[c], a1[c])
                    } else {
                        a0[c]
                    };
                    bs[c] = _mm512_add_epi32(bs[c], _mm512_mullo_epi32(a, ls));
                }
            }
            // SAFETY: the sixteen f32 scales are bytes d_at(H)..d_at(H) + 64 of the
            // super-block.
            let dw = unsafe { _mm512_loadu_ps(gb.as_ptr().add(d_at(H)).cast()) };
            for (c, sc) in s.iter_mut().enumerate() {
                let dy = f32::from_bits(word(256 * C + 4 * H * C + 4 * c) as u32);
                let d = _mm512_mul_ps(dw, _mm512_set1_ps(dy));
                let mut t = _mm512_cvtepi32_ps(bs[c]);
                if INNER {
                    t = _mm512_mul_ps(t, eighth);
                }
                *sc = _mm512_add_ps(*sc, _mm512_mul_ps(t, d));
            }
        }
        for (o, v) in out.iter_mut().zip(s) {
            let v = if INNER { v } else { _mm512_mul_ps(eighth, v) };
            // SAFETY: `o` has room for 16 f32 (unaligned store).
            unsafe { _mm512_storeu_ps(o.as_mut_ptr(), v) };
        }
    }
}
