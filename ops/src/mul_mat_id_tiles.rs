//! MUL_MAT_ID's tiled GEMM for grid-type experts with several tokens (IQ2_XXS, IQ1_S, IQ1_M
//! and their repacked forms): the group's activation panels, and an item's rows expanded
//! sixteen at a time into groups and multiplied by the group tile; every output has the
//! reference's bits.

use super::{act, Shape};
use crate::mul_mat::WeightRows;
use crate::TensorMut;
use quant::simd::iq::group as iq_group;
use quant::simd::table::GridGroup;

/// Scratch bytes for the groups of an item of `rows` weight rows of `k` elements in `g`'s
/// layout.
pub(super) fn groups_bytes(g: GridGroup, rows: usize, k: usize) -> usize {
    rows.div_ceil(iq_group::GROUP_ROWS) * iq_group::group_bytes(k, g.scales)
}

/// The group's token chunks (up to [`iq_group::PANEL_COLS`] each) with their panels in
/// `panels`, as [`pack_group_panels`] lays them out for `k`-element rows and `h` scale groups
/// a super-block.
fn panel_chunks<'a>(
    k: usize,
    h: usize,
    group: &'a [u32],
    panels: &'a [u8],
) -> impl Iterator<Item = (&'a [u32], &'a [u8])> {
    let mut at = 0;
    group.chunks(iq_group::PANEL_COLS).map(move |chunk| {
        let len = iq_group::panel_bytes(k, chunk.len(), h);
        at += len;
        (chunk, &panels[at - len..at])
    })
}

/// The group's activation panels for the layout of `h` scale groups a super-block, one per
/// chunk of up to [`iq_group::PANEL_COLS`] tokens, packed back to back into `panels`.
pub(super) fn pack_group_panels(s: &Shape, group: &[u32], q: &[u8], panels: &mut [u8], h: usize) {
    let mut at = 0;
    for chunk in group.chunks(iq_group::PANEL_COLS) {
        let acts: Vec<&[u8]> = chunk.iter().map(|&j| act(q, s, j as usize)).collect();
        let len = iq_group::panel_bytes(s.k, chunk.len(), h);
        iq_group::pack_panel(s.k, &acts, &mut panels[at..at + len], h);
        at += len;
    }
}

/// Bytes of one expert's panels for at most `t` tokens, `h` scale groups a super-block.
pub(super) fn group_panels_bytes(s: &Shape, h: usize) -> usize {
    let c = iq_group::PANEL_COLS;
    s.t.div_ceil(c) * iq_group::panel_bytes(s.k, c, h)
}

/// Output columns `cols` of every output row in `group` (the `(token, slot)` rows routed to
/// expert `rows`) with the sixteen-row group GEMM (IQ2_XXS, IQ1_S, IQ1_M, their repacked forms): the item's weight rows
/// are expanded sixteen at a time into groups in `ex`, then each chunk's panel
/// ([`pack_group_panels`] in its layout) in `panels` is multiplied against every group of
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
    for (chunk, panel) in panel_chunks(s.k, g.scales, group, panels) {
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
