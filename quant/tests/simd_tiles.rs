//! Every prompt-chunk tile of the kernel table this CPU runs (Q8_0 groups, Q2_0 / Q2_0_X
//! panels, grid experts, float) against the reference: bit for bit, the float tiles within
//! their documented bound; and the fast expanders against the reference expanders.

mod common;

use common::{
    activations, assert_tile_bits, kernels_of, random_blocks, rng, set_iq1m_scales, Tally,
};
use fathom_quant as quant;
use quant::simd::table::Column;
use quant::simd::Tile;
use quant::{bytes_for, quantize_activation, DType};

/// The Q8_0 group tile gives every (row, column) the reference's bits, for groups of 1, 2,
/// 5, 15 and 16 rows (missing rows give 0) and every column count 1..=8, with extreme codes
/// (−128 and 127 weights, saturated activations) included, over block counts 1, 3, 8 and 17;
/// each level's group expander writes the reference expander's bytes.
#[test]
fn q8_0_group_tile_matches_the_reference_bit_for_bit() {
    use quant::simd::q8::tile_x16::{
        expand_group_ref, group_bytes, pack_panel, panel_bytes, GROUP_ROWS, PANEL_COLS,
    };
    let mut tally = Tally::default();
    let reference = DType::Q8_0.info().vec_dot.unwrap();
    for (level, k) in kernels_of(DType::Q8_0, |r| r.tile) {
        let Tile::Q8Group { tile, expand } = k.f else {
            panic!("Q8_0's tile is a group tile");
        };
        tally.ran(DType::Q8_0, Column::Tile, level, &k);
        let mut r = rng(0x711e);
        for nb in [1usize, 3, 8, 17] {
            let n = 32 * nb;
            let rows: Vec<Vec<u8>> = (0..GROUP_ROWS)
                .map(|i| {
                    let mut w = random_blocks(&mut r, DType::Q8_0, n, &[0], 0.004);
                    if i == 1 {
                        // extreme codes: the +128 offset must not overflow a byte
                        for (j, b) in w.iter_mut().enumerate() {
                            if j % 34 >= 2 {
                                *b = if j % 2 == 0 { 0x80 } else { 0x7f };
                            }
                        }
                    }
                    w
                })
                .collect();
            let acts: Vec<Vec<u8>> = (0..PANEL_COLS)
                .map(|c| {
                    let x = activations(&mut r, n, if c == 3 { 1e3 } else { 2.0 });
                    let mut a = vec![0u8; bytes_for(DType::Q8_0, n).unwrap()];
                    quantize_activation(DType::Q8_0, &x, &mut a).unwrap();
                    a
                })
                .collect();
            let k = GroupTile {
                group_bytes,
                panel_bytes,
                pack: pack_panel,
                expand,
                expand_ref: expand_group_ref,
                tile,
            };
            assert_group_tile(&level.to_string(), n, &rows, &acts, &k, reference);
        }
    }
    tally.assert_all(Column::Tile, &[DType::Q8_0]);
}

/// A sixteen-row group tile (Q8_0 or IQ2_XXS): its layout's sizes, packer, expanders and
/// kernel.
struct GroupTile {
    group_bytes: fn(usize) -> usize,
    panel_bytes: fn(usize, usize) -> usize,
    pack: fn(usize, &[&[u8]], &mut [u8]),
    expand: fn(usize, &[&[u8]], &mut [u8]),
    expand_ref: fn(usize, &[&[u8]], &mut [u8]),
    tile: quant::simd::q8::tile_x16::GroupTileFn,
}

/// A grid type's group tile `g` with the sizes and panel packer of its layout (`g.scales`
/// scale groups a super-block) and the reference expander `expand_ref`, as [`GroupTile`].
fn grid_group_tile(
    g: quant::simd::table::GridGroup,
    expand_ref: fn(usize, &[&[u8]], &mut [u8]),
) -> GroupTile {
    use quant::simd::iq::group::{group_bytes, pack_panel, panel_bytes, SCALES_16, SCALES_32};
    let wide = match g.scales {
        SCALES_32 => true,
        SCALES_16 => false,
        h => panic!("{h} scale groups"),
    };
    GroupTile {
        group_bytes: if wide {
            |n| group_bytes(n, SCALES_32)
        } else {
            |n| group_bytes(n, SCALES_16)
        },
        panel_bytes: if wide {
            |n, c| panel_bytes(n, c, SCALES_32)
        } else {
            |n, c| panel_bytes(n, c, SCALES_16)
        },
        pack: if wide {
            |n, a, o| pack_panel(n, a, o, SCALES_32)
        } else {
            |n, a, o| pack_panel(n, a, o, SCALES_16)
        },
        expand: g.expand,
        expand_ref,
        tile: g.tile,
    }
}

/// For the first 1, 2, 5, 15 and 16 of `rows` and every count of `acts` from one: the
/// expander writes the reference expander's bytes, and the tile gives every (row, column)
/// `reference`'s bits (a missing row's outputs 0).
fn assert_group_tile(
    label: &str,
    n: usize,
    rows: &[Vec<u8>],
    acts: &[Vec<u8>],
    k: &GroupTile,
    reference: fn(usize, &[u8], &[u8]) -> f32,
) {
    for nr in [1usize, 2, 5, 15, 16] {
        let wr: Vec<&[u8]> = rows[..nr].iter().map(|w| w.as_slice()).collect();
        let gb = (k.group_bytes)(n);
        let (mut group, mut want) = (vec![7u8; gb], vec![9u8; gb]);
        (k.expand)(n, &wr, &mut group);
        (k.expand_ref)(n, &wr, &mut want);
        assert_eq!(group, want, "{label} expanded group, n={n} rows={nr}");
        for cols in 1..=acts.len() {
            let ar: Vec<&[u8]> = acts[..cols].iter().map(|a| a.as_slice()).collect();
            let mut panel = vec![7u8; (k.panel_bytes)(n, cols)];
            (k.pack)(n, &ar, &mut panel);
            let mut out = vec![[f32::NAN; 16]; cols];
            (k.tile)(n, &group, &panel, cols, &mut out);
            for (c, a) in ar.iter().enumerate() {
                for (ri, &got) in out[c].iter().enumerate() {
                    let want = wr.get(ri).map_or(0.0, |w| reference(n, w, a));
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{label} n={n} rows={nr} cols={cols} ({ri},{c}): {got} vs {want}"
                    );
                }
            }
        }
    }
}

/// The grid-format expanders (IQ2_XXS, IQ1_S and their repacked forms) agree byte for byte with their references,
/// and the tiled GEMM on expanded rows gives every (row, column) the reference dot's bits,
/// for every row count 1..=4 and column count 1..=8.
#[test]
fn grid_tile_kernels_match_the_reference_bit_for_bit() {
    use quant::simd::iq::tile::{
        expand_iq1_s, expand_iq1_s_x, expand_iq2_xxs, expand_iq2_xxs_x, expanded_bytes, TILE_COLS,
    };
    let mut tally = Tally::default();
    let mut r = rng(0x1a2);
    for (wt, reference_expand) in [
        (DType::IQ2_XXS, expand_iq2_xxs as fn(&[u8], &mut [u8])),
        (DType::IQ1_S, expand_iq1_s),
        (DType::IQ1_S_X, expand_iq1_s_x),
        (DType::IQ2_XXS_X, expand_iq2_xxs_x),
    ] {
        let reference = wt.info().vec_dot.unwrap();
        for (level, k) in kernels_of(wt, |r| r.tile) {
            tally.ran(wt, Column::Tile, level, &k);
            let (tile, expand, amx) = match k.f {
                Tile::Grid {
                    tile, expand, amx, ..
                } => (tile, expand, amx),
                // the group tile alone (AVX-VNNI): checked in the group tile's test
                Tile::GridGroup(_) => continue,
                _ => panic!("{wt:?}'s tile is a grid tile"),
            };
            if amx.is_some() {
                continue; // the AMX level's row: its VNNI half is the level below's, its AMX
                          // tile is checked in `amx.rs`
            }
            for nsb in [1usize, 2, 5] {
                let n = 256 * nsb;
                let rows: Vec<Vec<u8>> = (0..4)
                    .map(|_| random_blocks(&mut r, wt, n, &[0], 0.004))
                    .collect();
                let expanded: Vec<Vec<u8>> = rows
                    .iter()
                    .map(|w| {
                        let mut want = vec![0u8; expanded_bytes(n)];
                        reference_expand(w, &mut want);
                        let mut got = vec![0u8; expanded_bytes(n)];
                        expand(w, &mut got);
                        assert_eq!(got, want, "{wt:?} expanders differ, n={n}");
                        want
                    })
                    .collect();
                let acts: Vec<Vec<u8>> = (0..TILE_COLS)
                    .map(|c| {
                        let x = activations(&mut r, n, if c == 5 { 1e4 } else { 2.0 });
                        let mut a = vec![0u8; bytes_for(DType::Q8_K, n).unwrap()];
                        quantize_activation(DType::Q8_K, &x, &mut a).unwrap();
                        a
                    })
                    .collect();
                for nr in 1..=4usize {
                    let xr: Vec<&[u8]> = expanded[..nr].iter().map(|w| w.as_slice()).collect();
                    for cols in 1..=TILE_COLS {
                        let ar: Vec<&[u8]> = acts[..cols].iter().map(|a| a.as_slice()).collect();
                        let mut out = vec![f32::NAN; nr * cols];
                        let mut panel = vec![0u8; quant::simd::iq::tile::panel_bytes(n, cols)];
                        quant::simd::iq::tile::pack_panel(n, &ar, &mut panel);
                        tile(n, &xr, &ar, &panel, &mut out);
                        assert_tile_bits(wt, n, reference, &rows[..nr], &ar, &out);
                    }
                }
            }
        }
    }
    let grids = [
        DType::IQ2_XXS,
        DType::IQ1_S,
        DType::IQ1_S_X,
        DType::IQ2_XXS_X,
    ];
    tally.assert_all(Column::Tile, &grids);
}

/// The grid group tiles (IQ2_XXS, IQ1_M, IQ1_S and their repacked forms) give every (row, column)
/// the reference dot's bits, for groups of 1, 2, 5, 15 and 16 rows (missing rows give 0) and
/// every column count 1..=8, with the largest scales and weights and saturated activations
/// included, over super-block counts 1, 2 and 5; each level's group expander writes the
/// reference expander's bytes.
#[test]
fn grid_group_tiles_match_the_reference_bit_for_bit() {
    use quant::simd::iq::group::{
        expand_group_iq1_m, expand_group_iq1_m_x, expand_group_iq1_s, expand_group_iq1_s_x,
        expand_group_iq2_xxs, expand_group_iq2_xxs_x, GROUP_ROWS, PANEL_COLS, SCALES_16, SCALES_32,
    };
    type Expand = fn(usize, &[&[u8]], &mut [u8]);
    let mut tally = Tally::default();
    let mut r = rng(0x16a2);
    let types = [
        DType::IQ2_XXS,
        DType::IQ2_XXS_X,
        DType::IQ1_M,
        DType::IQ1_M_X,
        DType::IQ1_S,
        DType::IQ1_S_X,
    ];
    for (wt, reference_expand, h) in [
        (types[0], expand_group_iq2_xxs as Expand, SCALES_32),
        (types[1], expand_group_iq2_xxs_x, SCALES_32),
        (types[2], expand_group_iq1_m, SCALES_16),
        (types[3], expand_group_iq1_m_x, SCALES_16),
        (types[4], expand_group_iq1_s, SCALES_32),
        (types[5], expand_group_iq1_s_x, SCALES_32),
    ] {
        let reference = wt.info().vec_dot.unwrap();
        let iq1m = matches!(wt, DType::IQ1_M | DType::IQ1_M_X);
        for (level, k) in kernels_of(wt, |r| r.tile) {
            tally.ran(wt, Column::Tile, level, &k);
            let (Tile::Grid { group: g, .. } | Tile::GridGroup(g)) = k.f else {
                panic!("{wt:?}'s tile has a group tile");
            };
            assert_eq!(g.scales, h, "{wt:?} scale groups");
            for nsb in [1usize, 2, 5] {
                let n = 256 * nsb;
                let rows: Vec<Vec<u8>> = (0..GROUP_ROWS)
                    .map(|i| {
                        let at: &[usize] = if iq1m { &[] } else { &[0] };
                        let mut w = random_blocks(&mut r, wt, n, at, 0.004);
                        if i == 1 && wt == DType::IQ2_XXS {
                            // every group's scale nibble at 15 (ls = 31) and grid index 0xff
                            for blk in w.chunks_exact_mut(66) {
                                for gq in blk[2..].chunks_exact_mut(8) {
                                    gq[7] |= 0xf0;
                                    gq[..4].fill(0xff);
                                }
                            }
                        }
                        if i == 1 && wt == DType::IQ1_M {
                            // every half scale 7 (ls = 15), every delta negative and high
                            // index bits 7: |ls·W| up to 15·9
                            for blk in w.chunks_exact_mut(56) {
                                blk[32..48].fill(0xff);
                                for sw in blk[48..56].chunks_exact_mut(2) {
                                    sw[0] = 0xff;
                                    sw[1] |= 0x0f;
                                }
                            }
                        }
                        if iq1m {
                            set_iq1m_scales(&mut r, &mut w, wt, 0.004);
                        }
                        w
                    })
                    .collect();
                let acts: Vec<Vec<u8>> = (0..PANEL_COLS)
                    .map(|c| {
                        let x = activations(&mut r, n, if c == 5 { 1e4 } else { 2.0 });
                        let mut a = vec![0u8; bytes_for(DType::Q8_K, n).unwrap()];
                        quantize_activation(DType::Q8_K, &x, &mut a).unwrap();
                        a
                    })
                    .collect();
                let k = grid_group_tile(g, reference_expand);
                assert_group_tile(&format!("{wt:?} {level}"), n, &rows, &acts, &k, reference);
            }
        }
    }
    tally.assert_all(Column::Tile, &types);
}

/// The IQ1 group tiles (IQ1_M's, IQ1_S's) take the reference's ×0.125 on each block's sum,
/// not on the row's at the end as IQ2_XXS's: the two orders differ only where the products
/// fall among the subnormals, so this test puts them there (super-scales that are f16
/// subnormals, one tiny activation a super-block), where a tile with the other order fails.
#[test]
fn iq1_group_tiles_keep_the_reference_bits_among_subnormals() {
    use quant::simd::iq::group::{
        expand_group_iq1_m, expand_group_iq1_s, GROUP_ROWS, PANEL_COLS, SCALES_16, SCALES_32,
    };
    type Expand = fn(usize, &[&[u8]], &mut [u8]);
    let mut r = rng(0x5ab);
    let mut tally = Tally::default();
    let n = 256 * 3;
    for (wt, expand_ref, h) in [
        (DType::IQ1_M, expand_group_iq1_m as Expand, SCALES_16),
        (DType::IQ1_S, expand_group_iq1_s, SCALES_32),
    ] {
        let reference = wt.info().vec_dot.unwrap();
        let rows: Vec<Vec<u8>> = (0..GROUP_ROWS)
            .map(|_| {
                let mut w = random_blocks(&mut r, wt, n, &[], 0.0);
                for blk in w.chunks_exact_mut(wt.type_size()) {
                    let bits = 1 + (r() % 63) as u16;
                    if wt == DType::IQ1_M {
                        common::set_iq1m_scale(blk, wt, bits);
                    } else {
                        blk[..2].copy_from_slice(&bits.to_le_bytes());
                    }
                }
                w
            })
            .collect();
        let acts: Vec<Vec<u8>> = (0..PANEL_COLS)
            .map(|_| {
                let mut x = vec![0f32; n];
                for sb in x.chunks_exact_mut(256) {
                    sb[(r() % 256) as usize] = 1e-36 * (1.0 + (r() % 64) as f32);
                }
                let mut a = vec![0u8; bytes_for(DType::Q8_K, n).unwrap()];
                quantize_activation(DType::Q8_K, &x, &mut a).unwrap();
                a
            })
            .collect();
        for (level, k) in kernels_of(wt, |r| r.tile) {
            tally.ran(wt, Column::Tile, level, &k);
            let (Tile::Grid { group: g, .. } | Tile::GridGroup(g)) = k.f else {
                panic!("{wt:?}'s tile has a group tile");
            };
            assert_eq!(g.scales, h, "{wt:?} scale groups");
            let k = grid_group_tile(g, expand_ref);
            assert_group_tile(&format!("{wt:?} {level}"), n, &rows, &acts, &k, reference);
        }
    }
    tally.assert_all(Column::Tile, &[DType::IQ1_M, DType::IQ1_S]);
}

/// The float tile kernels (f32 accumulation) stay within their documented bound of the f64
/// reference, (n/L + 4)·2⁻²⁴·Σ|w·a| with L the kernel's lanes (16 AVX-512, 8 AVX2), for
/// every row count 1..=4, column count 1..=4 and lengths with every 8-, 16- and 32-element
/// tail; every kernel this CPU can run (both BF16 forms on an AVX512-BF16 CPU).
#[test]
fn float_tile_kernels_stay_within_their_bound_of_the_reference() {
    use quant::simd::float::tile::TILE_COLS;
    let mut tally = Tally::default();
    let mut r = rng(0xf10a7);
    for wt in [DType::F32, DType::F16, DType::BF16] {
        for (level, k) in kernels_of(wt, |r| r.tile) {
            let Tile::Float(tile) = k.f else {
                panic!("{wt:?}'s tile is a float tile");
            };
            tally.ran(wt, Column::Tile, level, &k);
            let name = format!("{}@{level}", k.name);
            let lanes = quant::simd::float::tile::lanes(level) as f64;
            let reference = wt.info().vec_dot.unwrap();
            for n in [1usize, 7, 9, 15, 16, 17, 33, 100, 1000, 4096] {
                let quantized = |r: &mut dyn FnMut() -> u64, scale: f32| {
                    let x = activations(&mut || r(), n, scale);
                    let mut q = vec![0u8; bytes_for(wt, n).unwrap()];
                    quantize_activation(wt, &x, &mut q).unwrap();
                    let mut back = vec![0f32; n];
                    quant::dequantize_row(wt, &q, &mut back).unwrap();
                    (q, back)
                };
                let rows: Vec<(Vec<u8>, Vec<f32>)> =
                    (0..4).map(|_| quantized(&mut r, 1.0)).collect();
                let acts: Vec<(Vec<u8>, Vec<f32>)> =
                    (0..TILE_COLS).map(|_| quantized(&mut r, 3.0)).collect();
                for nr in 1..=4usize {
                    let wr: Vec<&[u8]> = rows[..nr].iter().map(|w| w.0.as_slice()).collect();
                    for cols in 1..=TILE_COLS {
                        let ar: Vec<&[u8]> = acts[..cols].iter().map(|a| a.0.as_slice()).collect();
                        let mut out = vec![f32::NAN; nr * cols];
                        tile(n, &wr, &ar, &mut out);
                        for ri in 0..nr {
                            for c in 0..cols {
                                let want = reference(n, &rows[ri].0, &acts[c].0);
                                let mag: f64 = rows[ri]
                                    .1
                                    .iter()
                                    .zip(&acts[c].1)
                                    .map(|(a, b)| (*a as f64 * *b as f64).abs())
                                    .sum();
                                let bound = (n as f64 / lanes + 4.0) * 2f64.powi(-24) * mag;
                                let got = out[ri * cols + c];
                                assert!(
                                ((got - want) as f64).abs() <= bound,
                                "{wt:?} {name} n={n} rows={nr} cols={cols} ({ri},{c}): {got} vs {want}"
                            );
                            }
                        }
                    }
                }
            }
        }
    }
    tally.assert_all(Column::Tile, &[DType::F32, DType::F16, DType::BF16]);
}

/// The tiled Q2_0 GEMM (on the Q8_0 panel) gives every (row, column) the reference's bits,
/// for every row count 1..=4 and column count 1..=8, on Q2_0 rows and on Q2_0_X rows.
#[test]
fn q2_0_tile_kernel_matches_the_reference_bit_for_bit() {
    use quant::simd::q8::tile::{pack_q8_0_panel, panel_bytes, TILE_COLS};
    let mut tally = Tally::default();
    // every level's panel tile of each layout (AVX2 has one for Q2_0 rows only)
    let panel_tiles = |t: DType, tally: &mut Tally| -> Vec<_> {
        kernels_of(t, |r| r.tile)
            .into_iter()
            .map(|(level, k)| {
                tally.ran(t, Column::Tile, level, &k);
                match k.f {
                    Tile::Panel(tile) => (level, tile),
                    _ => panic!("{t:?}'s tile is a panel tile"),
                }
            })
            .collect()
    };
    let tiles = (
        panel_tiles(DType::Q2_0, &mut tally),
        panel_tiles(DType::Q2_0_X, &mut tally),
    );
    tally.assert_all(Column::Tile, &[DType::Q2_0, DType::Q2_0_X]);
    let reference = DType::Q2_0.info().vec_dot.unwrap();
    let mut r = rng(0x2a0);
    // Q2_0 rows, then Q2_0_X rows (made from Q2_0 rows, against the source's reference)
    for (x_layout, nb) in [
        (false, 1usize),
        (false, 3),
        (false, 8),
        (false, 17),
        (true, 8),
        (true, 24),
    ] {
        let n = 64 * nb;
        let src: Vec<Vec<u8>> = (0..4)
            .map(|_| random_blocks(&mut r, DType::Q2_0, n, &[0], 0.004))
            .collect();
        let rows: Vec<Vec<u8>> = if x_layout {
            src.iter()
                .map(|w| {
                    let mut x = vec![0u8; w.len()];
                    quant::codec::repack::repack_q2_0_x(w, &mut x);
                    x
                })
                .collect()
        } else {
            src.clone()
        };
        let layout_tiles = if x_layout { &tiles.1 } else { &tiles.0 };
        let acts: Vec<Vec<u8>> = (0..TILE_COLS)
            .map(|c| {
                let x = activations(&mut r, n, if c == 6 { 1e3 } else { 2.0 });
                let mut a = vec![0u8; bytes_for(DType::Q8_0, n).unwrap()];
                quantize_activation(DType::Q8_0, &x, &mut a).unwrap();
                a
            })
            .collect();
        for &(level, tile) in layout_tiles {
            for nr in 1..=4usize {
                let wr: Vec<&[u8]> = rows[..nr].iter().map(|w| w.as_slice()).collect();
                for cols in 1..=TILE_COLS {
                    let ar: Vec<&[u8]> = acts[..cols].iter().map(|a| a.as_slice()).collect();
                    let mut panel = vec![0u8; panel_bytes(n, cols)];
                    pack_q8_0_panel(n, &ar, &mut panel);
                    let mut out = vec![f32::NAN; nr * cols];
                    tile(n, &wr, &panel, cols, &mut out);
                    for (ri, w) in src[..nr].iter().enumerate() {
                        for (c, a) in ar.iter().enumerate() {
                            let want = reference(n, w, a);
                            let got = out[ri * cols + c];
                            assert_eq!(
                                got.to_bits(),
                                want.to_bits(),
                                "{level} x={x_layout} n={n} rows={nr} cols={cols} ({ri},{c}): \
                                 {got} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// FP8's tile is the f32 tile on rows MUL_MAT has expanded to exact f32 (codes times their
/// tile scales): within the float tiles' bound of the F32 reference, every row and column
/// count and tail, on rows of E4M3 values.
#[test]
fn f8_tile_kernels_run_on_expanded_rows_within_the_bound() {
    use quant::simd::float::tile::TILE_COLS;
    let mut tally = Tally::default();
    let mut r = rng(0xf8f1);
    let wt = DType::F8_E4M3;
    let f32_dot = DType::F32.info().vec_dot.unwrap();
    for (level, k) in kernels_of(wt, |r| r.tile) {
        let Tile::Float(tile) = k.f else {
            panic!("F8_E4M3's tile is a float tile");
        };
        tally.ran(wt, Column::Tile, level, &k);
        let lanes = quant::simd::float::tile::lanes(level) as f64;
        for n in [1usize, 7, 9, 15, 16, 17, 33, 100, 1000, 4096] {
            let table = quant::fp8::e4m3_table();
            let row = |r: &mut dyn FnMut() -> u64| -> Vec<f32> {
                (0..n)
                    .map(|_| table[(r() as u8 & 0xF7) as usize] * 2f32.powi(-((r() % 8) as i32)))
                    .collect()
            };
            let rows: Vec<Vec<f32>> = (0..4).map(|_| row(&mut r)).collect();
            let acts: Vec<Vec<f32>> = (0..TILE_COLS)
                .map(|_| activations(&mut r, n, 3.0))
                .collect();
            let bytes = |v: &Vec<f32>| -> Vec<u8> { bytemuck::cast_slice(v).to_vec() };
            let (rb, ab): (Vec<_>, Vec<_>) = (
                rows.iter().map(bytes).collect(),
                acts.iter().map(bytes).collect(),
            );
            for nr in 1..=4usize {
                let wr: Vec<&[u8]> = rb[..nr].iter().map(|w| w.as_slice()).collect();
                for cols in 1..=TILE_COLS {
                    let ar: Vec<&[u8]> = ab[..cols].iter().map(|a| a.as_slice()).collect();
                    let mut out = vec![f32::NAN; nr * cols];
                    tile(n, &wr, &ar, &mut out);
                    for ri in 0..nr {
                        for c in 0..cols {
                            let want = f32_dot(n, &rb[ri], &ab[c]);
                            let mag: f64 = rows[ri]
                                .iter()
                                .zip(&acts[c])
                                .map(|(a, b)| (*a as f64 * *b as f64).abs())
                                .sum();
                            let bound = (n as f64 / lanes + 4.0) * 2f64.powi(-24) * mag;
                            let got = out[ri * cols + c];
                            assert!(
                                ((got - want) as f64).abs() <= bound,
                                "{} n={n} ({ri},{c}): {got} vs {want}",
                                k.name
                            );
                        }
                    }
                }
            }
        }
    }
    tally.assert_all(Column::Tile, &[wt]);
}

/// The Q8_0 panel packer writes its reference's bytes for every column count 1..=8 and
/// several block counts, on arbitrary bytes: every code from −128 to 127 and f16 scales of
/// every class (subnormal, infinite, NaN), so a wrong lane sum, scale or code run fails.
#[test]
fn q8_0_panel_packer_writes_the_reference_bytes() {
    use quant::simd::q8::tile::{pack_q8_0_panel, pack_q8_0_panel_ref, panel_bytes, TILE_COLS};
    let mut r = rng(0x9a4e1);
    for nb in [1usize, 2, 5, 33, 128] {
        let n = 32 * nb;
        let cols: Vec<Vec<u8>> = (0..TILE_COLS)
            .map(|_| (0..34 * nb).map(|_| (r() >> 24) as u8).collect())
            .collect();
        for c in 1..=TILE_COLS {
            let acts: Vec<&[u8]> = cols[..c].iter().map(|v| v.as_slice()).collect();
            let mut got = vec![0xA5u8; panel_bytes(n, c)];
            let mut want = vec![0x5Au8; panel_bytes(n, c)];
            pack_q8_0_panel(n, &acts, &mut got);
            pack_q8_0_panel_ref(n, &acts, &mut want);
            assert!(got == want, "{nb} blocks, {c} columns");
        }
    }
}
