//! MUL_MAT over a block-scaled weight (an official checkpoint's FP8 E4M3 matrix used in
//! place, [`graph::BlockScales`]): the scales of one tile row (128 weight rows) are the same
//! for all its rows, one per 128 columns, so the activations are multiplied by them once per
//! tile row and the rows are dotted with the scaled activations by the weight type's plain
//! kernels (one row, several rows for decode, several columns for prompt chunks). The scales
//! are powers of two (E8M0), so scaling the activation instead of the weight changes no
//! product's rounding (barring values under 2⁻¹²⁶).
//!
//! Rows are claimed in chunks as MUL_MAT's are; a chunk is split where tile rows change,
//! and each thread rescales only when the tile row it works on changes. A batched weight
//! (a whole reshape of the scaled matrix: the grouped attention output projection) takes
//! the tile rows of its rows' places in the matrix.

use crate::case::CaseBuilder;
use crate::mul_mat::{
    chunk_rows, compute, matvec_chunk, quantize_all, reference_dot, shape, CHUNK,
};
use crate::{Case, KernelCx, TensorMut, TensorRef};
use graph::BlockScales;

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
    let kernels = if reference {
        (reference_dot(w), None, None)
    } else {
        let k = crate::kernels_for(cx, w.desc.dtype);
        (
            k.dot.f,
            k.multi.map(|m| m.f),
            k.rows.map(|r| r.f).filter(|_| s.t == 1),
        )
    };
    // the activations as the dot type (F32) and their scaled copy, in f32 scratch
    let mut f = std::mem::take(&mut cx.scratch.f32s);
    if f.len() < 2 * rows * s.k {
        f.resize(2 * rows * s.k, 0.0);
    }
    let (plain, rest) = f.split_at_mut(rows * s.k);
    let scaled = &mut rest[..rows * s.k];
    quantize_all(x, &s, bytemuck::cast_slice_mut(plain));
    let first = match kernels.2 {
        Some(_) => matvec_chunk(w.desc.row_bytes()),
        None => CHUNK,
    };
    let chunk = if reference {
        s.n
    } else {
        chunk_rows(s.n, s.batches, s.t, cx.nth, first)
    };
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
    let mut work = |item: usize, scaled: &mut [f32]| {
        let (b, c) = (item / nchunks, item % nchunks);
        let base = base_row(b);
        let mut r0 = c * chunk;
        let end = ((c + 1) * chunk).min(s.n);
        while r0 < end {
            let tile_row = (base + r0) / bs.rows;
            let r1 = ((tile_row + 1) * bs.rows - base).min(end);
            if tile_row != current {
                scale(plain, scaled, bs.of_row(base + r0), bs.cols, s.k);
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
