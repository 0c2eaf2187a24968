//! Q8_0 · Q8_0 GEMM for prompt chunks with sixteen weight rows in a register's lanes
//! (AVX-512 VNNI), every output with the scalar reference's bits ([`crate::dot::dot_q8_0`]:
//! per block the exact integer sum, then `s += Σ·(dw·dy)` in block order).
//!
//! A chunk's weight rows are first *expanded* sixteen at a time into a group
//! ([`expand_group`]): per block, eight 64-byte vectors whose lane r holds bytes 4k..4k+4 of
//! row r's block (offset by 128, `x ⊕ 0x80`, so that `vpdpbusd` takes them as unsigned), then
//! the sixteen rows' scales as f32. The activation columns are packed eight at a time into
//! a *panel* ([`pack_panel`]): per block each column's 32 codes, its scale as f32 and
//! −128·Σy, the offset's share of the block sum.
//!
//! Per (group, column, block) the kernel starts an integer accumulator from −128·Σy and adds
//! eight `vpdpbusd` of the group's vectors with the column's code dwords broadcast from the
//! panel: lane r ends with row r's exact block sum. A conversion, the scale product
//! `dw·dy` (sixteen rows at once), a multiply and an add follow: 12 vector operations for
//! 512 multiply-adds, against 32 for the four-row tiles of the lane form
//! (docs/kernels.md, "Q8_0 in the integer-sum form"). Each column's sixteen outputs are
//! one store.

use crate::blocks::{view, BlockQ8_0};
use crate::scalar::le_f16;

/// Weight rows in a group.
pub const GROUP_ROWS: usize = 16;

/// Most activation columns in a panel.
pub const PANEL_COLS: usize = 8;

/// Bytes of one expanded block of a group: 8 × 64 code bytes and 16 f32 scales.
const GROUP_BLOCK: usize = 8 * 64 + 4 * GROUP_ROWS;

/// Bytes of a group of rows of `n` elements.
pub fn group_bytes(n: usize) -> usize {
    n / 32 * GROUP_BLOCK
}

/// Bytes of a panel of `cols` (1..=[`PANEL_COLS`]) columns of `n` elements: per block
/// `cols` × 32 codes, then `cols` f32 scales, then `cols` i32 terms −128·Σy.
pub fn panel_bytes(n: usize, cols: usize) -> usize {
    n / 32 * 40 * cols
}

/// Expands `rows` (1..=[`GROUP_ROWS`] Q8_0 rows of `n` elements) into a group (`out`,
/// [`group_bytes`]`(n)` bytes; the layout in the module docs). Missing rows are zero rows
/// (codes 0, scale 0), whose outputs are 0 and are not stored by callers.
///
/// # Panics
/// If a length does not match (a caller's bug, not bad input).
pub fn expand_group(n: usize, rows: &[&[u8]], out: &mut [u8]) {
    assert!(
        (1..=GROUP_ROWS).contains(&rows.len()),
        "group of {} rows",
        rows.len()
    );
    assert_eq!(out.len(), group_bytes(n), "group length");
    let nb = n / 32;
    let mut xs: [&[BlockQ8_0]; GROUP_ROWS] = [&[]; GROUP_ROWS];
    for (x, w) in xs.iter_mut().zip(rows) {
        *x = view::<BlockQ8_0>(w);
        assert_eq!(x.len(), nb, "weight row length");
    }
    for (b, ob) in out.chunks_exact_mut(GROUP_BLOCK).enumerate() {
        let (codes, scales) = ob.split_at_mut(8 * 64);
        for r in 0..GROUP_ROWS {
            let (q, d) = match xs[r].get(b) {
                Some(x) => (x.qs.map(|q| q as u8 ^ 0x80), le_f16(x.d)),
                None => ([0x80; 32], 0.0),
            };
            for k in 0..8 {
                codes[64 * k + 4 * r..64 * k + 4 * r + 4].copy_from_slice(&q[4 * k..4 * k + 4]);
            }
            scales[4 * r..4 * r + 4].copy_from_slice(&d.to_le_bytes());
        }
    }
}

/// Packs `acts` (1..=[`PANEL_COLS`] Q8_0 rows of `n` elements) into a panel (`out`,
/// [`panel_bytes`]`(n, acts.len())` bytes; the layout in the module docs).
///
/// # Panics
/// If a length does not match (a caller's bug).
pub fn pack_panel(n: usize, acts: &[&[u8]], out: &mut [u8]) {
    let cols = acts.len();
    assert!((1..=PANEL_COLS).contains(&cols), "panel of {cols} columns");
    assert_eq!(out.len(), panel_bytes(n, cols), "panel length");
    let ys: Vec<&[BlockQ8_0]> = acts.iter().map(|a| view::<BlockQ8_0>(a)).collect();
    for (b, ob) in out.chunks_exact_mut(40 * cols).enumerate() {
        let (codes, rest) = ob.split_at_mut(32 * cols);
        let (scales, terms) = rest.split_at_mut(4 * cols);
        for (c, y) in ys.iter().enumerate() {
            let y = &y[b];
            let mut sum = 0i32;
            for (o, &q) in codes[32 * c..32 * c + 32].iter_mut().zip(&y.qs) {
                *o = q as u8;
                sum += i32::from(q);
            }
            scales[4 * c..4 * c + 4].copy_from_slice(&le_f16(y.d).to_le_bytes());
            terms[4 * c..4 * c + 4].copy_from_slice(&(-128 * sum).to_le_bytes());
        }
    }
}

/// A group tile: `out[c][r] = dot_q8_0(n, row r of the group, column c of the panel)` for the
/// panel's `cols` columns and all sixteen rows (a missing row's outputs are 0).
pub type GroupTileFn = fn(n: usize, group: &[u8], panel: &[u8], cols: usize, out: &mut [[f32; 16]]);

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::{group_bytes, panel_bytes, GROUP_BLOCK, PANEL_COLS};
    use std::arch::x86_64::*;

    /// Safe entry: checks the lengths, then runs the kernel for the panel's column count.
    pub(crate) fn tile_entry(
        n: usize,
        group: &[u8],
        panel: &[u8],
        cols: usize,
        out: &mut [[f32; 16]],
    ) {
        assert!((1..=PANEL_COLS).contains(&cols), "tile columns");
        assert_eq!(group.len(), group_bytes(n), "group length");
        assert_eq!(panel.len(), panel_bytes(n, cols), "panel length");
        assert_eq!(out.len(), cols, "tile output length");
        let nb = n / 32;
        macro_rules! go {
            ($c:literal) => {{
                let out: &mut [[f32; 16]; $c] = out.try_into().expect("checked above");
                // SAFETY: `table::kernels` hands this entry out only after checking the
                // features; the lengths are checked above (every block of the group and the
                // panel is in bounds).
                unsafe { tile::<$c>(nb, group, panel, out) }
            }};
        }
        match cols {
            1 => go!(1),
            2 => go!(2),
            3 => go!(3),
            4 => go!(4),
            5 => go!(5),
            6 => go!(6),
            7 => go!(7),
            _ => go!(8),
        }
    }

    /// The group tile for `C` columns (see the module docs). Each column's accumulation runs
    /// as two chains of four `vpdpbusd` (even and odd dwords), joined by one exact add.
    ///
    /// # Safety
    /// The CPU must have the enabled features; `group` holds `nb` expanded blocks and `panel`
    /// `nb` blocks of `C` columns.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
    unsafe fn tile<const C: usize>(
        nb: usize,
        group: &[u8],
        panel: &[u8],
        out: &mut [[f32; 16]; C],
    ) {
        let mut s = [_mm512_setzero_ps(); C];
        let pblock = 40 * C;
        for b in 0..nb {
            let gb = &group[b * GROUP_BLOCK..(b + 1) * GROUP_BLOCK];
            let pb = &panel[b * pblock..(b + 1) * pblock];
            // SAFETY: `gb` is 576 readable bytes: eight 64-byte code vectors, then 16 f32.
            let (w, dw) = unsafe {
                (
                    std::array::from_fn::<__m512i, 8, _>(|k| {
                        _mm512_loadu_si512(gb.as_ptr().add(64 * k).cast())
                    }),
                    _mm512_loadu_ps(gb.as_ptr().add(512).cast()),
                )
            };
            debug_assert_eq!(pb.len(), 40 * C);
            // SAFETY: every offset passed is below 40·C − 3 (codes 32·c + 8k + 4 < 32·C,
            // scales 32·C + 4c, terms 36·C + 4c), inside `pb` (unaligned reads).
            let word = |o: usize| unsafe { pb.as_ptr().add(o).cast::<i32>().read_unaligned() };
            for (c, sc) in s.iter_mut().enumerate() {
                let y = 32 * c;
                let mut a0 = _mm512_set1_epi32(word(36 * C + 4 * c));
                let mut a1 = _mm512_setzero_si512();
                for k in 0..4 {
                    a0 = _mm512_dpbusd_epi32(a0, w[2 * k], _mm512_set1_epi32(word(y + 8 * k)));
                    a1 = _mm512_dpbusd_epi32(
                        a1,
                        w[2 * k + 1],
                        _mm512_set1_epi32(word(y + 8 * k + 4)),
                    );
                }
                let dy = f32::from_bits(word(32 * C + 4 * c) as u32);
                let d = _mm512_mul_ps(dw, _mm512_set1_ps(dy));
                let i = _mm512_cvtepi32_ps(_mm512_add_epi32(a0, a1));
                *sc = _mm512_add_ps(*sc, _mm512_mul_ps(i, d));
            }
        }
        for (o, v) in out.iter_mut().zip(s) {
            // SAFETY: `o` has room for 16 f32 (unaligned store).
            unsafe { _mm512_storeu_ps(o.as_mut_ptr(), v) };
        }
    }
}
