//! MUL_MAT_ID's tiled GEMMs for grid-type experts with several tokens (IQ2_XXS, IQ1_S, IQ1_M
//! and their repacked forms): the group's activation panels, and an item's rows expanded once and
//! multiplied by a VNNI register tile; every output has the reference's bits.

use super::{act, Shape};
use crate::mul_mat::WeightRows;
use crate::TensorMut;
use quant::simd::iq::{group as iq_group, tile as tile_grid};
use quant::simd::table::GridGroup;

/// The VNNI GEMM of a grid type on expanded rows (AVX-512 VNNI; the group tile also with
/// AVX-VNNI).
#[derive(Clone, Copy)]
pub(super) enum Vnni {
    /// Four expanded rows × eight tokens (`tile_grid`).
    Rows4(tile_grid::TileFn, tile_grid::ExpandFn),
    /// Rows expanded sixteen at a time into groups × eight tokens (`iq_group`: IQ2_XXS,
    /// IQ1_S, IQ1_M and their repacked forms).
    Group(GridGroup),
}

impl Vnni {
    /// Scratch bytes for an item of `rows` weight rows of `k` elements.
    pub(super) fn scratch(self, rows: usize, k: usize) -> usize {
        let eb = tile_grid::expanded_bytes(k);
        match self {
            Vnni::Rows4(..) => rows * eb,
            Vnni::Group(g) => {
                rows.div_ceil(iq_group::GROUP_ROWS) * iq_group::group_bytes(k, g.scales)
            }
        }
    }

    /// The panel layout this GEMM reads.
    pub(super) fn panels(self) -> Panels {
        match self {
            Vnni::Rows4(..) => Panels::Rows4,
            Vnni::Group(g) => Panels::Group(g.scales),
        }
    }
}

/// The layout of an expert's activation panels.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Panels {
    /// The four-row VNNI tile's (`tile_grid::pack_panel`).
    Rows4,
    /// The sixteen-row group tile's (`iq_group::pack_panel`) with this many scale groups a
    /// super-block.
    Group(usize),
}

impl Panels {
    /// Tokens per panel.
    fn cols(self) -> usize {
        match self {
            Panels::Rows4 => tile_grid::TILE_COLS,
            Panels::Group(_) => iq_group::PANEL_COLS,
        }
    }

    /// Bytes of one panel of `cols` tokens of `k` elements.
    fn bytes(self, k: usize, cols: usize) -> usize {
        match self {
            Panels::Rows4 => tile_grid::panel_bytes(k, cols),
            Panels::Group(h) => iq_group::panel_bytes(k, cols, h),
        }
    }

    /// The group's token chunks with their panels in `panels`, as [`pack_group_panels`] lays
    /// them out for `k`-element rows.
    fn chunks<'a>(
        self,
        k: usize,
        group: &'a [u32],
        panels: &'a [u8],
    ) -> impl Iterator<Item = (&'a [u32], &'a [u8])> {
        let mut at = 0;
        group.chunks(self.cols()).map(move |chunk| {
            let len = self.bytes(k, chunk.len());
            at += len;
            (chunk, &panels[at - len..at])
        })
    }
}

/// The group's activation panels in `layout`, one per chunk of up to the tile's column count
/// of tokens, packed back to back into `panels`.
pub(super) fn pack_group_panels(
    s: &Shape,
    group: &[u32],
    q: &[u8],
    panels: &mut [u8],
    layout: Panels,
) {
    let mut at = 0;
    for chunk in group.chunks(layout.cols()) {
        let acts: Vec<&[u8]> = chunk.iter().map(|&j| act(q, s, j as usize)).collect();
        let len = layout.bytes(s.k, chunk.len());
        let out = &mut panels[at..at + len];
        match layout {
            Panels::Rows4 => tile_grid::pack_panel(s.k, &acts, out),
            Panels::Group(h) => iq_group::pack_panel(s.k, &acts, out, h),
        }
        at += len;
    }
}

/// Bytes of one expert's panels for at most `t` tokens: the largest of the layouts' needs.
pub(super) fn group_panels_bytes(s: &Shape) -> usize {
    [
        Panels::Rows4,
        Panels::Group(iq_group::SCALES_32),
        Panels::Group(iq_group::SCALES_16),
    ]
    .into_iter()
    .map(|p| s.t.div_ceil(p.cols()) * p.bytes(s.k, p.cols()))
    .max()
    .unwrap_or(0)
}

/// Output columns `cols` of every output row in `group` (the `(token, slot)` rows routed to
/// expert `rows`) with the tiled grid GEMM (IQ2_XXS, IQ1_S): the item's weight rows (at most
/// [`GRID_CHUNK`](super::GRID_CHUNK)) are expanded into `ex`, then multiplied four at a time against up to eight
/// of the group's activations per call, chunk by chunk of the group, whose packed panels
/// ([`pack_group_panels`]) are in `panels` (the reference's bits).
#[allow(clippy::too_many_arguments)]
pub(super) fn expert_tiles(
    (tile, expand): (tile_grid::TileFn, tile_grid::ExpandFn),
    s: &Shape,
    rows: &WeightRows,
    cols: std::ops::Range<usize>,
    group: &[u32],
    q: &[u8],
    panels: &[u8],
    ex: &mut [u8],
    dst: &TensorMut,
) {
    const R: usize = tile_grid::TILE_ROWS;
    const C: usize = tile_grid::TILE_COLS;
    let eb = tile_grid::expanded_bytes(s.k);
    // every row of the item is expanded first, then each chunk's panel (32 KiB at K = 4096)
    // stays in L1 while the item's expanded rows stream past it: less L2 traffic than
    // re-reading the panel for every four rows
    for (i, buf) in ex.chunks_exact_mut(eb).take(cols.len()).enumerate() {
        expand(rows.row(cols.start + i), buf);
    }
    for (chunk, panel) in Panels::Rows4.chunks(s.k, group, panels) {
        let acts: [&[u8]; C] =
            std::array::from_fn(|c| act(q, s, chunk[c.min(chunk.len() - 1)] as usize));
        let m = chunk.len();
        let mut n0 = cols.start;
        while n0 < cols.end {
            let nr = (cols.end - n0).min(R);
            let base = n0 - cols.start;
            let xr: [&[u8]; R] = std::array::from_fn(|i| &ex[(base + i.min(nr - 1)) * eb..][..eb]);
            let mut out = [0f32; R * C];
            tile(s.k, &xr[..nr], &acts[..m], panel, &mut out[..nr * m]);
            for (c, &j) in chunk.iter().enumerate() {
                let d = dst.row_range_f32_mut(j as usize, n0..n0 + nr);
                for (r, o) in d.iter_mut().enumerate() {
                    *o = out[r * m + c];
                }
            }
            n0 += nr;
        }
    }
}

/// Output columns `cols` of every output row in `group` (the `(token, slot)` rows routed to
/// expert `rows`) with the sixteen-row group GEMM (IQ2_XXS, IQ1_S, IQ1_M, their repacked forms): the item's weight rows
/// are expanded sixteen at a time into groups in `ex`, then each chunk's panel
/// ([`pack_group_panels`], [`Panels::Group`] of its scale groups) in `panels` is multiplied against every group of
/// the item (the reference's bits).
#[allow(clippy::too_many_arguments)]
pub(super) fn expert_groups(
    g: GridGroup,
    s: &Shape,
    rows: &WeightRows,
    cols: std::ops::Range<usize>,
    group: &[u32],
    panels: &[u8],
    ex: &mut [u8],
    dst: &TensorMut,
) {
    const R: usize = iq_group::GROUP_ROWS;
    const C: usize = iq_group::PANEL_COLS;
    let gb = iq_group::group_bytes(s.k, g.scales);
    let nr = cols.len();
    let ng = nr.div_ceil(R);
    for (gi, out) in ex.chunks_exact_mut(gb).take(ng).enumerate() {
        let n0 = cols.start + gi * R;
        let m = (cols.end - n0).min(R);
        let wr: [&[u8]; R] = std::array::from_fn(|i| rows.row(n0 + i.min(m - 1)));
        (g.expand)(s.k, &wr[..m], out);
    }
    for (chunk, panel) in Panels::Group(g.scales).chunks(s.k, group, panels) {
        let m = chunk.len();
        for gi in 0..ng {
            let mut out = [[0f32; R]; C];
            (g.tile)(s.k, &ex[gi * gb..(gi + 1) * gb], panel, m, &mut out[..m]);
            let n0 = cols.start + gi * R;
            let nrg = (cols.end - n0).min(R);
            for (c, &j) in chunk.iter().enumerate() {
                dst.row_range_f32_mut(j as usize, n0..n0 + nrg)
                    .copy_from_slice(&out[c][..nrg]);
            }
        }
    }
}
