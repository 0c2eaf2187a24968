//! The AMX grid GEMM (`quant::simd::iq::amx`): its layout is lossless (the scalar dot on
//! AMX-expanded rows returns each grid format's reference bits) and the reference direct
//! expanders write the split bytes, on every CPU; on a CPU at the kernel table's AMX level,
//! the AVX-512 splitter and direct expanders write the references' bytes and the tile kernel
//! returns the reference's bits for every row count 1..=16 and column count 1..=16, random
//! and worst-case inputs alike.

mod common;

use common::{assert_tile_bits, kernels_of, q8k, rng, Tally};
use fathom_quant as quant;
use quant::simd::iq::amx::{
    amx_bytes, amx_expand_iq1_s_x, amx_expand_iq2_xxs_x, dot_amx_reference, pack_panel,
    split_expanded, GridKind, TILE_COLS, TILE_ROWS,
};
use quant::simd::iq::tile::{
    expand_iq1_s, expand_iq1_s_x, expand_iq2_xxs, expand_iq2_xxs_x, expanded_bytes,
};
use quant::simd::table::{AmxTile, Column};
use quant::simd::{CpuLevel, Tile};
use quant::{bytes_for, DType};

/// The reference grid expander of `wt`.
fn grid_expand(wt: DType) -> fn(&[u8], &mut [u8]) {
    match wt {
        DType::IQ2_XXS => expand_iq2_xxs,
        DType::IQ2_XXS_X => expand_iq2_xxs_x,
        DType::IQ1_S => expand_iq1_s,
        _ => expand_iq1_s_x,
    }
}

/// The AMX tile the kernel table gives `wt` on this CPU, with its level's name, recorded
/// in `tally` (none below the AMX level).
fn amx_of(wt: DType, tally: &mut Tally) -> Option<AmxTile> {
    let mut amx = None;
    for (level, k) in kernels_of(wt, |r| r.tile) {
        if let Tile::Grid { amx: Some(a), .. } = k.f {
            tally.ran(wt, Column::Tile, level, &k);
            amx = Some(a);
        }
    }
    amx
}

const GRIDS: [DType; 4] = [
    DType::IQ2_XXS,
    DType::IQ2_XXS_X,
    DType::IQ1_S,
    DType::IQ1_S_X,
];

/// Random grid rows: random bytes with a small f16 super-block scale at offset 0.
fn random_row(r: &mut impl FnMut() -> u64, wt: DType, n: usize) -> Vec<u8> {
    let mut w = vec![0u8; bytes_for(wt, n).unwrap()];
    for blk in w.chunks_exact_mut(wt.info().type_size) {
        blk.iter_mut().for_each(|b| *b = r() as u8);
        blk[..2].copy_from_slice(&quant::scalar::f32_to_f16(0.004).to_le_bytes());
    }
    w
}

/// The worst case for the integer sums: a Q8_K row whose codes are ±127 with the sign of
/// the folded weight `64·h + l` of AMX-expanded row `amx`, so that every product adds.
fn adversarial_act(amx: &[u8]) -> Vec<u8> {
    let mut a = Vec::new();
    for sb in amx.chunks_exact(quant::simd::iq::amx::AMX_SB) {
        let qs: Vec<i8> = (0..256)
            .map(|e| {
                let w = 64 * (sb[e] as i8 as i32) + sb[256 + e] as i8 as i32;
                if w < 0 {
                    -127
                } else {
                    127
                }
            })
            .collect();
        a.extend_from_slice(&1.0f32.to_le_bytes());
        a.extend(qs.iter().map(|&q| q as u8));
        for j in 0..16 {
            let s: i32 = qs[16 * j..16 * j + 16].iter().map(|&q| q as i32).sum();
            a.extend_from_slice(&(s as i16).to_le_bytes());
        }
    }
    a
}

/// Rows expanded by the grid expander and split by the reference splitter (checking the fast
/// splitter's bytes against it on the way).
fn amx_rows(wt: DType, rows: &[Vec<u8>], n: usize) -> Vec<Vec<u8>> {
    let kind = GridKind::of(wt).unwrap();
    rows.iter()
        .map(|w| {
            let mut ex = vec![0u8; expanded_bytes(n)];
            grid_expand(wt)(w, &mut ex);
            let mut want = vec![0u8; amx_bytes(n)];
            split_expanded(kind, &ex, &mut want);
            if let Some(amx) = amx_of(wt, &mut Tally::default()) {
                let mut got = vec![0xAAu8; amx_bytes(n)];
                (amx.split)(kind, &ex, &mut got);
                assert_eq!(got, want, "{wt:?}: splitters differ, n={n}");
            }
            want
        })
        .collect()
}

#[test]
fn amx_layout_is_lossless_and_the_splitters_agree() {
    let mut r = rng(0xa3c5);
    for wt in GRIDS {
        let kind = GridKind::of(wt).unwrap();
        let reference = wt.info().vec_dot.unwrap();
        for nsb in [1usize, 2, 3, 7] {
            let n = 256 * nsb;
            let rows: Vec<Vec<u8>> = (0..6).map(|_| random_row(&mut r, wt, n)).collect();
            let amx = amx_rows(wt, &rows, n);
            for (w, x) in rows.iter().zip(&amx) {
                let mut acts: Vec<Vec<u8>> = (0..4)
                    .map(|c| q8k(&mut r, n, if c == 3 { 1e4 } else { 2.0 }))
                    .collect();
                acts.push(adversarial_act(x));
                for a in &acts {
                    let want = reference(n, w, a);
                    let got = dot_amx_reference(kind, n, x, a);
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{wt:?} n={n}: {got} vs {want}"
                    );
                }
            }
        }
    }
}

/// Repacked blocks (IQ2_XXS_X when `signs`, else IQ1_S_X) covering every (group nibble,
/// level code, sign) combination: block `i` has nibble `i / 8` in every group, level
/// `(i / 2) % 4` everywhere (3 is a code the repackers never write) and, with `signs`, all
/// signs set when `i` is odd.
fn every_direct_index(signs: bool) -> Vec<u8> {
    let mut w = Vec::new();
    for i in 0..128usize {
        let (nib, level, neg) = ((i / 8) as u32, (i / 2 % 4) as u8, i % 2 == 1);
        w.extend_from_slice(&quant::scalar::f32_to_f16(0.25).to_le_bytes());
        w.extend_from_slice(&(nib * 0x1111_1111).to_le_bytes());
        w.extend(std::iter::repeat_n(level * 0x55, 64));
        if signs {
            w.extend(std::iter::repeat_n(if neg { 0xFF } else { 0 }, 32));
        }
    }
    w
}

#[test]
fn direct_expanders_write_the_split_bytes() {
    let mut r = rng(0x51d3);
    for (wt, reference, signs) in [
        (
            DType::IQ2_XXS_X,
            amx_expand_iq2_xxs_x as fn(&[u8], &mut [u8]),
            true,
        ),
        (DType::IQ1_S_X, amx_expand_iq1_s_x, false),
    ] {
        let fast = amx_of(wt, &mut Tally::default()).and_then(|a| a.direct);
        let bs = wt.info().type_size;
        let mut rows: Vec<Vec<u8>> = [1usize, 2, 3, 16]
            .iter()
            .map(|&nsb| random_row(&mut r, wt, 256 * nsb))
            .collect();
        rows.push(every_direct_index(signs));
        for w in &rows {
            let n = w.len() / bs * 256;
            let want = &amx_rows(wt, std::slice::from_ref(w), n)[0];
            let mut got = vec![0xAAu8; amx_bytes(n)];
            reference(w, &mut got);
            assert_eq!(&got, want, "{wt:?}: reference direct expander, n={n}");
            if let Some(fast) = fast {
                let mut got = vec![0x55u8; amx_bytes(n)];
                fast(w, &mut got);
                assert_eq!(&got, want, "{wt:?}: fast direct expander, n={n}");
            }
        }
    }
    for wt in [DType::IQ2_XXS, DType::IQ1_S] {
        let direct = amx_of(wt, &mut Tally::default()).and_then(|a| a.direct);
        assert!(direct.is_none(), "{wt:?} has no direct expander");
    }
}

#[test]
fn amx_tile_kernel_matches_the_reference_bit_for_bit() {
    let mut tally = Tally::default();
    let mut r = rng(0x7a3e);
    for wt in GRIDS {
        let Some(amx) = amx_of(wt, &mut tally) else {
            continue;
        };
        let tile = amx.tile;
        let reference = wt.info().vec_dot.unwrap();
        for nsb in [1usize, 2, 5] {
            let n = 256 * nsb;
            let rows: Vec<Vec<u8>> = (0..TILE_ROWS).map(|_| random_row(&mut r, wt, n)).collect();
            let amx = amx_rows(wt, &rows, n);
            let mut acts: Vec<Vec<u8>> = (0..TILE_COLS - 1)
                .map(|c| q8k(&mut r, n, if c == 5 { 1e4 } else { 2.0 }))
                .collect();
            acts.insert(3, adversarial_act(&amx[2]));
            for nr in [1usize, 2, 3, 8, 15, 16] {
                let packed: Vec<u8> = amx[..nr].concat();
                for cols in [1usize, 2, 3, 5, 8, 11, 16] {
                    let ar: Vec<&[u8]> = acts[..cols].iter().map(|a| a.as_slice()).collect();
                    let mut panel = vec![0u8; quant::simd::iq::amx::panel_bytes(n, cols)];
                    pack_panel(n, &ar, &mut panel);
                    let mut out = vec![f32::NAN; nr * cols];
                    tile(n, &packed, nr, &panel, cols, &mut out);
                    assert_tile_bits(wt, n, reference, &rows[..nr], &ar, &out);
                }
            }
        }
    }
    // the lower levels' grid tiles are checked in `simd.rs`, every AMX one here
    tally.assert_level(Column::Tile, &GRIDS, CpuLevel::Amx);
}
