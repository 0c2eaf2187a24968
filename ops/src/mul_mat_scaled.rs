//! MUL_MAT over a block-scaled weight (an official checkpoint's FP8 E4M3 matrix used in
//! place, [`graph::BlockScales`]): the scales of one tile row (128 weight rows) are the same
//! for all its rows, one per 128 columns, so the activations are multiplied by them once per
//! tile row and the rows are dotted with the scaled activations by the weight type's plain
//! kernels (one row, several rows for decode, several columns for prompt chunks). The scales
//! are powers of two (E8M0), so scaling the activation instead of the weight changes no
//! product's rounding (barring values under 2⁻¹²⁶).
//!
//! Rows are claimed in chunks as MUL_MAT's are; a chunk is split where tile rows change.
//! One activation column (decode) is rescaled whole when the tile row changes. Prompt chunks
//! go by blocks of [`COLS`] columns: each block is scaled into a small buffer (16 columns of
//! a 4096-wide row are 256 KiB: it stays in L2) and every row of the piece is dotted with it
//! by the multi-column kernel — scaling all 512 columns of a chunk at once made an 8 MiB
//! buffer that each row then streamed from L3 (2-layer checkpoint pp512: FP8 MUL_MAT 17 ms
//! of a 31 ms token). A batched weight (a whole reshape of the scaled matrix: the grouped
//! attention output projection) takes the tile rows of its rows' places in the matrix.

use crate::case::CaseBuilder;
use crate::mul_mat::{
    chunk_rows, compute, compute_float_tiles, dot_row_columns, matvec_chunk, quantize_all,
    reference_dot, shape, WeightRows, CHUNK, COLS,
};
use crate::{Case, KernelCx, TensorMut, TensorRef};
use graph::BlockScales;
use quant::simd::float::tile::TILE_COLS;
use quant::simd::Tile;

/// Weight rows per claimed chunk of a prompt chunk: a scaled block of columns is made once
/// per chunk piece and read by every row of it.
const PROMPT_CHUNK: usize = 16;

/// `scaled[j][c] = plain[j][c] · tile[c / cols]` for every activation row `j` of `k`
/// elements.
fn scale(plain: &[f32], scaled: &mut [f32], tile: &[f32], cols: usize, k: usize) {
    for (p, s) in plain.chunks_exact(k).zip(scaled.chunks_exact_mut(k)) {
        for ((pc, sc), &f) in p.chunks(cols).zip(s.chunks_mut(cols)).zip(tile) {
            for (a, b) in pc.iter().zip(sc) {
                *b = a * f;
            }
        }
    }
}

/// MUL_MAT `srcs` (`[w, x, mask?]`, `w` block-scaled by `bs`) into `dst`, with the reference
/// dot (`reference`: one thread) or the kernel table's.
pub(crate) fn run(
    cx: &mut KernelCx,
    dst: &TensorMut,
    srcs: &[TensorRef],
    bs: &BlockScales,
    reference: bool,
) {
    let (w, x) = (&srcs[0], &srcs[1]);
    let s = shape(w, x);
    let rows = s.t * s.batches;
    let table = (!reference).then(|| crate::kernels_for(cx, w.desc.dtype));
    let kernels = match &table {
        None => (reference_dot(w), None, None),
        Some(k) => (
            k.dot.f,
            k.multi.map(|m| m.f),
            k.rows.map(|r| r.f).filter(|_| s.t == 1),
        ),
    };
    // prompt chunks without a row mask: rows expanded to exact f32, then the f32 tile
    let float_tile = match table.and_then(|k| k.tile).map(|k| k.f) {
        Some(Tile::Float(f)) => Some(f),
        _ => None,
    }
    .filter(|_| s.t >= TILE_COLS && srcs.len() == 2);
    let first = match (kernels.2, kernels.1.filter(|_| s.t > 1)) {
        _ if float_tile.is_some() => CHUNK,
        (Some(_), _) => matvec_chunk(w.desc.row_bytes()),
        // prompt chunks: each scaled column block serves PROMPT_CHUNK rows
        (None, Some(_)) => PROMPT_CHUNK,
        (None, None) => CHUNK,
    };
    let chunk = if reference {
        s.n
    } else {
        chunk_rows(s.n, s.batches, s.t, cx.nth, first)
    };
    // the activations as the dot type (F32), and room for their scaled copy (or a chunk's
    // rows expanded to f32, for the tile), in f32 scratch
    let second = if float_tile.is_some() { chunk } else { rows };
    let mut f = std::mem::take(&mut cx.scratch.f32s);
    if f.len() < (rows + second) * s.k {
        f.resize((rows + second) * s.k, 0.0);
    }
    let (plain, rest) = f.split_at_mut(rows * s.k);
    let scaled = &mut rest[..second * s.k];
    quantize_all(x, &s, bytemuck::cast_slice_mut(plain));
    let nchunks = s.n.div_ceil(chunk.max(1));
    // a batched weight (a whole reshape of the scaled matrix) is the root's rows, batch
    // after batch: weight batch (w2, w3) of activation batch `b` starts at this flat row
    let (xd, wd) = (&x.desc, &w.desc);
    let base_row = |b: usize| {
        let (b2, b3) = (b % xd.ne[2], b / xd.ne[2]);
        let (w2, w3) = (b2 / (xd.ne[2] / wd.ne[2]), b3 / (xd.ne[3] / wd.ne[3]));
        (w2 * wd.nb[2] + w3 * wd.nb[3]) / wd.nb[1]
    };
    let mut current = usize::MAX;
    let multi = kernels.1.filter(|_| s.t > 1);
    let mask = srcs.get(2);
    let table = quant::fp8::e4m3_table();
    let mut work = |item: usize, scaled: &mut [f32]| {
        let (b, c) = (item / nchunks, item % nchunks);
        let base = base_row(b);
        let mut r0 = c * chunk;
        let end = ((c + 1) * chunk).min(s.n);
        if let Some(tile) = float_tile {
            let wrows = WeightRows::of_batch(w, x, b);
            let ex = &mut scaled[..(end - r0) * s.k];
            for (i, n) in (r0..end).enumerate() {
                let t = bs.of_row(base + n);
                let row = &mut ex[i * s.k..(i + 1) * s.k];
                for (c, (o, &code)) in row.iter_mut().zip(wrows.row(n)).enumerate() {
                    *o = table[code as usize] * t[c / bs.cols];
                }
            }
            let ex = &*ex;
            let row = |i: usize| -> &[u8] {
                let e = i - r0;
                bytemuck::cast_slice(&ex[e * s.k..(e + 1) * s.k])
            };
            let q = bytemuck::cast_slice(plain);
            compute_float_tiles(tile, &s, row, q, dst, b, r0..end, 0..s.t);
            return;
        }
        while r0 < end {
            let tile_row = (base + r0) / bs.rows;
            let r1 = ((tile_row + 1) * bs.rows - base).min(end);
            let tile = bs.of_row(base + r0);
            if let Some(multi) = multi {
                // prompt chunks: a block of columns at a time, scaled into L2-sized scratch
                let wrows = WeightRows::of_batch(w, x, b);
                for c0 in (0..s.t).step_by(COLS) {
                    let c1 = (c0 + COLS).min(s.t);
                    let (j0, j1) = (b * s.t + c0, b * s.t + c1);
                    let blk = &mut scaled[..(j1 - j0) * s.k];
                    scale(&plain[j0 * s.k..j1 * s.k], blk, tile, bs.cols, s.k);
                    let blk = &*blk;
                    for n in r0..r1 {
                        let masked = |j: usize| mask.is_some_and(|mk| mk.row_f32(j)[n] == 0.0);
                        let act = |j: usize| -> &[u8] {
                            bytemuck::cast_slice(&blk[(j - j0) * s.k..(j - j0 + 1) * s.k])
                        };
                        dot_row_columns(multi, s.k, wrows.row(n), n, j0..j1, act, masked, dst);
                    }
                }
                r0 = r1;
                continue;
            }
            if tile_row != current {
                scale(plain, scaled, tile, bs.cols, s.k);
                current = tile_row;
            }
            compute(
                srcs,
                kernels,
                &s,
                bytemuck::cast_slice(scaled),
                dst,
                b,
                r0..r1,
            );
            r0 = r1;
        }
    };
    if reference {
        for item in 0..nchunks * s.batches {
            work(item, scaled);
        }
    } else {
        while let Some(items) = cx.claim(nchunks * s.batches, 1) {
            for item in items {
                work(item, scaled);
            }
        }
    }
    cx.scratch.f32s = f;
}

/// Test-ops cases: partial tiles in both directions (small tiles, so that the chunks cross
/// tile rows), decode and prompt-chunk column counts, and a row mask.
pub(crate) fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    for (k, n, t, tile) in [
        (256usize, 37usize, 1usize, 16usize),
        (300, 61, 3, 32),
        (128, 130, 11, 128),
        (4096, 64, 2, 128),
    ] {
        let mut b = CaseBuilder::new(11);
        let w = b.weight_block_scaled("w", [k, n], tile, 0.5).expect("case");
        let x = b.input_f32("x", &[k, t], 1.0).expect("case");
        let out = b.g.mul_mat(w, x).expect("case");
        let name = format!("MUL_MAT f8_e4m3{{{k},{n}}}/{tile} · f32{{{k},{t}}}");
        v.push(b.finish(name, out, 1e-10, k < 4096).expect("case"));
    }
    let mut b = CaseBuilder::new(12);
    let w = b
        .weight_block_scaled("w", [200, 40], 32, 0.5)
        .expect("case");
    let x = b.input_f32("x", &[200, 5], 1.0).expect("case");
    let mask: Vec<f32> = (0..40 * 5).map(|i| (i % 3 != 1) as u8 as f32).collect();
    let m = b
        .input_data(
            "m",
            graph::TensorDesc::f32(&[40, 5]).expect("case"),
            bytemuck::cast_slice(&mask).to_vec(),
        )
        .expect("case");
    let out = b.g.mul_mat_masked(w, x, m).expect("case");
    v.push(
        b.finish("MUL_MAT f8_e4m3{200,40}/32 masked".into(), out, 1e-10, true)
            .expect("case"),
    );
    v
}
