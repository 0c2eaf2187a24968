//! MUL_MAT_ID's tiled GEMMs for grid-type experts with several tokens (IQ2_XXS, IQ1_S and
//! their repacked forms): the group's activation panels, and an item's rows expanded once and
//! multiplied by the VNNI register tile or, where the CPU has AMX, the AMX tile; every output
//! has the reference's bits.

use super::{act, Shape};
use crate::mul_mat::WeightRows;
use crate::TensorMut;
use quant::simd::iq::{amx as tile_amx, tile as tile_grid};

/// The group's activation panels (`tile_grid::pack_panel`, or `tile_amx::pack_panel` with
/// `amx`), one per chunk of up to the tile's column count of tokens, packed back to back into
/// `panels`.
pub(super) fn pack_group_panels(s: &Shape, group: &[u32], q: &[u8], panels: &mut [u8], amx: bool) {
    let c = if amx {
        tile_amx::TILE_COLS
    } else {
        tile_grid::TILE_COLS
    };
    let mut at = 0;
    for chunk in group.chunks(c) {
        let acts: Vec<&[u8]> = chunk.iter().map(|&j| act(q, s, j as usize)).collect();
        if amx {
            let len = tile_amx::panel_bytes(s.k, chunk.len());
            tile_amx::pack_panel(s.k, &acts, &mut panels[at..at + len]);
            at += len;
        } else {
            let len = tile_grid::panel_bytes(s.k, chunk.len());
            tile_grid::pack_panel(s.k, &acts, &mut panels[at..at + len]);
            at += len;
        }
    }
}

/// Bytes of one expert's panels for at most `t` tokens: the larger of the two tiles' needs.
pub(super) fn group_panels_bytes(s: &Shape, amx: bool) -> usize {
    let vnni =
        s.t.div_ceil(tile_grid::TILE_COLS) * tile_grid::panel_bytes(s.k, tile_grid::TILE_COLS);
    let amx = if amx {
        s.t.div_ceil(tile_amx::TILE_COLS) * tile_amx::panel_bytes(s.k, tile_amx::TILE_COLS)
    } else {
        0
    };
    vnni.max(amx)
}

/// Output columns `cols` of every output row in `group` (the rows routed to expert `rows`) with
/// the AMX grid GEMM: the item's weight rows (at most [`CHUNK`](super::CHUNK) = [`tile_amx::TILE_ROWS`])
/// are expanded (`tile_grid`'s expander into `tmp`) and split into their AMX form in `ex`
/// (or, with a direct expander, written in that form at once), then multiplied against up
/// to 16 of the group's tokens per call, whose panels ([`pack_group_panels`]) are in
/// `panels` (the reference's bits).
#[allow(clippy::too_many_arguments)]
pub(super) fn expert_tiles_amx(
    (tile, kind, split, direct, expand): (
        tile_amx::AmxTileFn,
        tile_amx::GridKind,
        tile_amx::SplitFn,
        Option<tile_amx::AmxExpandFn>,
        tile_grid::ExpandFn,
    ),
    s: &Shape,
    rows: &WeightRows,
    cols: std::ops::Range<usize>,
    group: &[u32],
    panels: &[u8],
    (ex, tmp): (&mut [u8], &mut [u8]),
    dst: &TensorMut,
) {
    let ab = tile_amx::amx_bytes(s.k);
    let nr = cols.len();
    for (i, buf) in ex.chunks_exact_mut(ab).take(nr).enumerate() {
        let row = rows.row(cols.start + i);
        match direct {
            Some(direct) => direct(row, buf),
            None => {
                expand(row, tmp);
                split(kind, tmp, buf);
            }
        }
    }
    let mut at = 0;
    for chunk in group.chunks(tile_amx::TILE_COLS) {
        let m = chunk.len();
        let len = tile_amx::panel_bytes(s.k, m);
        let panel = &panels[at..at + len];
        at += len;
        let mut out = [0f32; tile_amx::TILE_ROWS * tile_amx::TILE_COLS];
        tile(s.k, &ex[..nr * ab], nr, panel, m, &mut out[..nr * m]);
        for (c, &j) in chunk.iter().enumerate() {
            let d = dst.row_range_f32_mut(j as usize, cols.clone());
            for (r, o) in d.iter_mut().enumerate() {
                *o = out[r * m + c];
            }
        }
    }
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
    let mut at = 0;
    for chunk in group.chunks(C) {
        let acts: [&[u8]; C] =
            std::array::from_fn(|c| act(q, s, chunk[c.min(chunk.len() - 1)] as usize));
        let m = chunk.len();
        let len = tile_grid::panel_bytes(s.k, m);
        let panel = &panels[at..at + len];
        at += len;
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
