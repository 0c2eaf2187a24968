//! MUL_MAT_ID kernels (routed experts, spec §4.9). Activation rows are converted to the weight
//! type's dot type exactly like MUL_MAT (so a MUL_MAT_ID slot equals the MUL_MAT of that expert
//! bit for bit); every output element is one reference `vec_dot`.
//!
//! The forward kernel needs no intra-node barrier: every thread converts all activation rows
//! and buckets the `(token, slot)` pairs per expert itself (both cheap next to streaming the
//! expert weights), then threads claim `(active expert, row chunk)` items from the node's
//! atomic counter, so all threads share the few experts of a decode step. An item writes the
//! chunk's columns of every output row routed to that expert — each output column range is
//! written by exactly one thread. Skipped (`−1`) and invalid ids are filled (zero / NaN) by the
//! thread owning that output row in the static split.
//!
//! Paged experts (the weight carries a [`graph::ExpertSource`]: the expert cache, or an
//! official checkpoint's FP4 experts used in place) are pinned per item: their bytes are
//! used as they are, or the in-place layout goes through `expert_rows` (the split kernels,
//! or rows converted to MXFP4 where a level has none). The tiled GEMMs of the grid types
//! with several tokens are in `mul_mat_id_tiles.rs`.

use crate::case::CaseBuilder;
use crate::expert_rows::{pinned_rows, split_rows};
use crate::mul_mat::WeightRows;
use crate::taper::Tapered;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::mul_mat_id::MulMatId;
use graph::{Pinned, TensorDesc, WeightData};
use quant::simd::Tile;
use quant::DType;
use tiles::{expert_groups, group_panels_bytes, groups_bytes, pack_group_panels};

#[path = "mul_mat_id_tiles.rs"]
mod tiles;

/// Weight rows per claimed chunk.
const CHUNK: usize = 16;

/// Weight rows per claimed chunk for the group tile of a prompt chunk: every item
/// streams its expert's token panels through the cache once, so 64 expanded rows (about
/// 300 KiB at K = 4096, in L2) stream them a quarter as often as 16 (iq2 pp512 on the Xeon of
/// issue 35, alternating: the experts' time over the dense Q8_0 time 0.94 → 0.88).
const GRID_CHUNK: usize = 64;

/// Fewest tokens on one expert for which IQ2_XXS and IQ1_S(_X) experts go through the tiled
/// GEMM (below it, expanding a row costs more than the multi-column kernel's per-token
/// overhead).
const TILED_MIN_TOKENS: usize = 4;

struct Shape {
    k: usize,
    n: usize,
    e: usize,
    b: usize,
    n_used: usize,
    t: usize,
    qrow: usize,
    dot: DType,
}

fn shape(w: &TensorRef, x: &TensorRef, ids: &TensorRef) -> Shape {
    let dot = w
        .desc
        .dtype
        .info()
        .dot_type
        .expect("validated at build time");
    let k = x.desc.ne[0];
    Shape {
        k,
        n: w.desc.ne[1],
        e: w.desc.ne[2],
        b: x.desc.ne[1],
        n_used: ids.desc.ne[0],
        t: ids.desc.ne[1],
        qrow: quant::bytes_for(dot, k).expect("validated at build time"),
        dot,
    }
}

/// What one `(slot, token)` pair does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// `id = −1`: output row of zeros.
    Skip,
    /// `id < −1` or `id ≥ E`: output row of NaN.
    Invalid,
    /// A valid expert.
    Expert(usize),
}

/// Decode `ids[u, t]` (any ids strides).
fn route(ids: &TensorRef, s: &Shape, u: usize, t: usize) -> Route {
    let off = u * ids.desc.nb[0] + t * ids.desc.nb[1];
    let b = &ids.bytes()[off..off + 4];
    match i32::from_le_bytes([b[0], b[1], b[2], b[3]]) {
        -1 => Route::Skip,
        id if id >= 0 && (id as usize) < s.e => Route::Expert(id as usize),
        _ => Route::Invalid,
    }
}

/// The weight rows of expert `e`.
fn expert_rows<'a>(w: &TensorRef<'a>, e: usize) -> WeightRows<'a> {
    WeightRows::at(w, e * w.desc.nb[2])
}

/// Converted activation row feeding output row `j = t·n_used + u`.
fn act<'q>(q: &'q [u8], s: &Shape, j: usize) -> &'q [u8] {
    let (t, u) = (j / s.n_used, j % s.n_used);
    let r = t * s.b + u % s.b;
    &q[r * s.qrow..(r + 1) * s.qrow]
}

/// Tokens per multi-column kernel call ([`multi_columns`]): all of an expert's tokens in a
/// 512-token chunk (about twelve), so that each weight row is unpacked once for them.
const MULTI_COLS: usize = 16;

/// Output columns `rows` of an expert for the tokens of `group` through the multi-column
/// kernel, `multi(n, acts, out)` for weight row `n`: the tokens in batches of up to
/// [`MULTI_COLS`] (no batch of one unless the group is one token), each batch's activations
/// and output rows looked up once and then one kernel call per weight row.
fn multi_columns(
    multi: impl Fn(usize, &[&[u8]], &mut [f32]),
    s: &Shape,
    rows: std::ops::Range<usize>,
    group: &[u32],
    q: &[u8],
    dst: &TensorMut,
) {
    for batch in quant::simd::column_split(group.len(), MULTI_COLS) {
        let js = &group[batch];
        let mut acts: [&[u8]; MULTI_COLS] = [&[]; MULTI_COLS];
        let mut outs: [&mut [f32]; MULTI_COLS] = std::array::from_fn(|_| <&mut [f32]>::default());
        for ((a, o), &j) in acts.iter_mut().zip(outs.iter_mut()).zip(js) {
            *a = act(q, s, j as usize);
            *o = dst.row_range_f32_mut(j as usize, rows.clone());
        }
        let (acts, outs) = (&acts[..js.len()], &mut outs[..js.len()]);
        let mut res = [0f32; MULTI_COLS];
        for (i, n) in rows.clone().enumerate() {
            multi(n, acts, &mut res[..js.len()]);
            for (o, &r) in outs.iter_mut().zip(&res) {
                o[i] = r;
            }
        }
    }
}

/// NaN in columns `cols` of the output rows of `group`, whose paged expert could not be
/// read (the source reports why after the run).
fn unreadable(dst: &TensorMut, group: &[u32], cols: std::ops::Range<usize>) {
    for &j in group {
        dst.row_range_f32_mut(j as usize, cols.clone())
            .fill(f32::NAN);
    }
}

/// Fill the output row of a skipped / invalid pair; `false` for a valid expert.
fn fill_special(dst: &TensorMut, r: Route, j: usize) -> bool {
    match r {
        Route::Skip => dst.row_f32_mut(j).fill(0.0),
        Route::Invalid => dst.row_f32_mut(j).fill(f32::NAN),
        Route::Expert(_) => return false,
    }
    true
}

/// Per-thread bucketing of output rows by expert, laid out in one `u32` scratch region.
struct Buckets<'a> {
    /// `start[e]..start[e+1]` indexes `rows` for expert `e` (`E + 1` entries).
    start: &'a [u32],
    /// Output rows `t·n_used + u`, grouped by expert, in increasing order within a group.
    rows: &'a [u32],
    /// Experts with at least one row, increasing.
    active: &'a [u32],
}

/// `u32` entries the bucketing needs.
fn bucket_len(s: &Shape) -> usize {
    (s.e + 1) + s.e + s.n_used * s.t + s.e
}

fn bucket<'a>(ids: &TensorRef, s: &Shape, mem: &'a mut [u32]) -> Buckets<'a> {
    let (start, rest) = mem.split_at_mut(s.e + 1);
    let (cur, rest) = rest.split_at_mut(s.e);
    let (rows, active) = rest.split_at_mut(s.n_used * s.t);
    start.fill(0);
    for t in 0..s.t {
        for u in 0..s.n_used {
            if let Route::Expert(e) = route(ids, s, u, t) {
                start[e + 1] += 1;
            }
        }
    }
    let mut na = 0;
    for e in 0..s.e {
        if start[e + 1] > 0 {
            active[na] = e as u32;
            na += 1;
        }
        start[e + 1] += start[e];
        cur[e] = start[e];
    }
    for t in 0..s.t {
        for u in 0..s.n_used {
            if let Route::Expert(e) = route(ids, s, u, t) {
                rows[cur[e] as usize] = (t * s.n_used + u) as u32;
                cur[e] += 1;
            }
        }
    }
    let nrows = start[s.e] as usize;
    Buckets {
        start,
        rows: &rows[..nrows],
        active: &active[..na],
    }
}

impl CpuKernel for MulMatId {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let (w, x, ids) = (&srcs[0], &srcs[1], &srcs[2]);
        let s = shape(w, x, ids);
        let dot = w
            .desc
            .dtype
            .info()
            .vec_dot
            .expect("validated at build time");
        let q = cx.scratch.bytes(s.qrow * s.b * s.t);
        let q = crate::quantize::activations(x, s.dot, s.b * s.t, s.qrow, q);
        let valid = (0..s.t * s.n_used)
            .filter(|&j| matches!(route(ids, &s, j % s.n_used, j / s.n_used), Route::Expert(_)))
            .count();
        self.evaluated
            .fetch_add(valid as u64, std::sync::atomic::Ordering::Relaxed);
        for t in 0..s.t {
            for u in 0..s.n_used {
                let j = t * s.n_used + u;
                let r = route(ids, &s, u, t);
                if fill_special(dst, r, j) {
                    continue;
                }
                let Route::Expert(e) = r else { unreachable!() };
                let qa = act(q, &s, j);
                let mask = srcs.get(3).map(|m| m.row_f32(j));
                let pin = cx.experts.map(|src| {
                    src.request(&[e as u32]);
                    src.pin(e)
                });
                let mut stage = vec![0u8; if pin.is_some() { s.n * w.desc.nb[1] } else { 0 }];
                let rows = match &pin {
                    None => Some(expert_rows(w, e)),
                    Some(Some(p)) => pinned_rows(w, s.k, s.n, p, 0..s.n, &mut stage),
                    Some(None) => None,
                };
                let Some(rows) = rows else {
                    dst.row_f32_mut(j).fill(f32::NAN);
                    continue;
                };
                for (n, o) in dst.row_f32_mut(j).iter_mut().enumerate() {
                    *o = if mask.is_some_and(|m| m[n] == 0.0) {
                        0.0
                    } else {
                        dot(s.k, rows.row(n), qa)
                    };
                }
            }
        }
    }

    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let (w, x, ids) = (&srcs[0], &srcs[1], &srcs[2]);
        let s = shape(w, x, ids);
        let kernels = crate::kernels_for(cx, w.desc.dtype);
        let dot = kernels.dot.f;
        let multi = kernels.multi.map(|k| k.f);
        // zero / NaN rows: each owned by one thread of the static split
        for j in cx.my_rows(s.n_used * s.t) {
            fill_special(dst, route(ids, &s, j % s.n_used, j / s.n_used), j);
        }
        // grid-type experts (IQ2_XXS, IQ1_S, IQ1_M and their repacked forms) with several
        // tokens go through the group tile (not with a row mask: it would read masked rows);
        // the table's AMX tile is not run: on the AMX host measured on 2026-12-07 the group
        // tile took a prompt chunk's experts 1.2–1.6× faster (docs/kernels.md)
        let grid = match kernels.tile.map(|k| k.f) {
            Some(Tile::Grid { group, .. } | Tile::GridGroup(group)) if srcs.len() == 3 => {
                Some(group)
            }
            _ => None,
        };
        // rows the expansion scratch holds
        let ex_rows = if grid.is_some() { GRID_CHUNK } else { CHUNK };
        // expanded rows of one item
        let exbytes = grid.map_or(0, |g| groups_bytes(g, ex_rows, s.k));
        // one expert's panels: at most one row per token
        let pbytes = grid.map_or(0, |g| group_panels_bytes(&s, g.scales));
        let qbytes = s.qrow * s.b * s.t;
        // the rows of one item converted from the official FP4 layout (paged MXFP4 experts
        // on a level without the split kernels only)
        let rows_dot = kernels.rows.map(|k| k.f).filter(|_| s.t == 1);
        let max_chunk = rows_dot.map_or(ex_rows, |_| {
            crate::mul_mat::matvec_chunk(w.desc.row_bytes())
        });
        let converts =
            cx.experts.is_some() && w.desc.dtype == DType::MXFP4 && kernels.split.is_none();
        let sbytes = if converts {
            max_chunk * w.desc.nb[1]
        } else {
            0
        };
        let need = qbytes + exbytes + pbytes + sbytes + 4 * bucket_len(&s) + 4;
        let mut buf = std::mem::take(&mut cx.scratch.bytes);
        if buf.len() < need {
            buf.resize(need, 0);
        }
        let (q, rest) = buf.split_at_mut(qbytes);
        let (ex, rest) = rest.split_at_mut(exbytes);
        let (panels, rest) = rest.split_at_mut(pbytes);
        let (stage, rest) = rest.split_at_mut(sbytes);
        // the expert whose panels `panels` holds (items are claimed expert by expert, so a
        // thread packs each expert's panels about once)
        let mut packed: Option<usize> = None;
        let (_, mem, _) = bytemuck::pod_align_to_mut::<u8, u32>(rest);
        let bk = bucket(ids, &s, &mut mem[..bucket_len(&s)]);
        if cx.ith == 0 {
            self.evaluated
                .fetch_add(bk.rows.len() as u64, std::sync::atomic::Ordering::Relaxed);
            if let Some(src) = cx.experts {
                src.request(bk.active);
            }
        }
        // a paged expert stays pinned while this thread claims items of it (items come
        // expert by expert)
        let mut pin: Option<Pinned> = None;
        let q = crate::quantize::activations(x, s.dot, s.b * s.t, s.qrow, q);
        // one token (decode): four rows per kernel call, in longer chunks for short rows,
        // halved while the active experts would give fewer than four items per thread
        let split = kernels.split.map(|k| k.f);
        let mut chunk = max_chunk;
        while chunk > CHUNK && bk.active.len() * s.n.div_ceil(chunk) < 4 * cx.nth {
            chunk /= 2;
        }
        let nchunks = s.n.div_ceil(chunk);
        let total = bk.active.len() * nchunks;
        // one token: the node's last chunks are cut small, so that no thread waits a whole
        // chunk
        let taper = Tapered::new(total, cx.nth, rows_dot.is_some());
        let chunk_of = |item: usize| {
            let c = item % nchunks;
            c * chunk..((c + 1) * chunk).min(s.n)
        };
        while let Some(items) = cx.claim(taper.items(), 1) {
            for item in items {
                let (item, cols) = taper.item(item, chunk_of);
                if cols.is_empty() {
                    continue;
                }
                let e = bk.active[item / nchunks] as usize;
                let group = &bk.rows[bk.start[e] as usize..bk.start[e + 1] as usize];
                let wrows = match cx.experts {
                    None => expert_rows(w, e),
                    Some(src) => {
                        if pin.as_ref().map(Pinned::expert) != Some(e) {
                            // the previous expert is released before waiting for this one
                            drop(pin.take());
                            pin = src.pin(e);
                        }
                        // an expert in the official FP4 layout: its codes and scales straight
                        // through the split kernels, by the paths below (several tokens
                        // without a mask: multi-column; else multi-row per token)
                        let rows = pin.as_ref().and_then(|p| split_rows(p, s.k, s.n));
                        if let (Some(row), Some(split)) = (rows, split) {
                            let mask = srcs.get(3);
                            if group.len() > 1 && mask.is_none() {
                                let multi = |n, acts: &[&[u8]], out: &mut [f32]| {
                                    let (c, sc) = row(n);
                                    (split.multi)(s.k, c, sc, acts, out)
                                };
                                multi_columns(multi, &s, cols.clone(), group, q, dst);
                                continue;
                            }
                            for &j in group {
                                let j = j as usize;
                                let m = mask.map(|m| m.row_f32(j));
                                crate::mul_mat::dot_rows(
                                    split.rows,
                                    s.k,
                                    row,
                                    |n| m.is_some_and(|m| m[n] == 0.0),
                                    act(q, &s, j),
                                    cols.clone(),
                                    dst.row_range_f32_mut(j, cols.clone()),
                                );
                            }
                            continue;
                        }
                        match pin
                            .as_ref()
                            .and_then(|p| pinned_rows(w, s.k, s.n, p, cols.clone(), stage))
                        {
                            Some(rows) => rows,
                            None => {
                                unreadable(dst, group, cols);
                                continue;
                            }
                        }
                    }
                };
                // (a group longer than the token count — an expert chosen twice by one token —
                // would not fit the panel scratch; it takes the multi-column path; the expansion
                // scratch holds `ex_rows` rows)
                let fits = (TILED_MIN_TOKENS..=s.t).contains(&group.len()) && chunk <= ex_rows;
                if let (Some(g), true) = (grid, fits) {
                    if packed != Some(e) {
                        pack_group_panels(&s, group, q, panels, g.scales);
                        packed = Some(e);
                    }
                    expert_groups(g, &s, &wrows, cols, group, panels, ex, dst);
                    continue;
                }
                if let (Some(multi), true, None) = (multi, group.len() > 1, srcs.get(3)) {
                    // several tokens chose this expert: each weight row is unpacked once for
                    // up to `MULTI_COLS` of them (same bits as one at a time)
                    let multi =
                        |n, acts: &[&[u8]], out: &mut [f32]| multi(s.k, wrows.row(n), acts, out);
                    multi_columns(multi, &s, cols.clone(), group, q, dst);
                    continue;
                }
                if let (Some(multi), true) = (multi, group.len() > 1) {
                    // the same with a row mask (a masked row is not read for that token)
                    for n in cols.clone() {
                        crate::mul_mat::dot_row_columns(
                            multi,
                            s.k,
                            wrows.row(n),
                            n,
                            group.iter().map(|&j| j as usize),
                            |j| act(q, &s, j),
                            |j| srcs.get(3).is_some_and(|mk| mk.row_f32(j)[n] == 0.0),
                            dst,
                        );
                    }
                    continue;
                }
                for &j in group {
                    let j = j as usize;
                    let qa = act(q, &s, j);
                    let mask = srcs.get(3).map(|m| m.row_f32(j));
                    let out = dst.row_range_f32_mut(j, cols.clone());
                    if let Some(rows_dot) = rows_dot {
                        crate::mul_mat::dot_rows(
                            rows_dot,
                            s.k,
                            |n| wrows.row(n),
                            |n| mask.is_some_and(|m| m[n] == 0.0),
                            qa,
                            cols.clone(),
                            out,
                        );
                        continue;
                    }
                    for (o, n) in out.iter_mut().zip(cols.clone()) {
                        *o = if mask.is_some_and(|m| m[n] == 0.0) {
                            0.0
                        } else {
                            dot(s.k, wrows.row(n), qa)
                        };
                    }
                }
            }
        }
        cx.scratch.bytes = buf;
    }

    fn cases() -> Vec<Case> {
        let mut v = Vec::new();
        let (k, n, e, n_used) = (256usize, 37usize, 5usize, 3usize);
        // repeated experts within a token, skips (−1), and every expert touched for T = 4
        let ids_t1: &[i32] = &[3, -1, 3];
        // one token on distinct experts: decode's multi-row path
        let ids_t1b: &[i32] = &[3, -1, 1];
        let ids_t4: &[i32] = &[0, 4, 0, 2, -1, 1, 4, 4, 4, -1, -1, 3];
        for t in [
            DType::Q8_0,
            DType::Q4_K,
            DType::IQ2_XXS,
            DType::IQ1_M,
            DType::IQ1_M_X,
            DType::MXFP4,
            DType::F32,
            DType::BF16,
        ] {
            for ids in [ids_t1, ids_t1b, ids_t4] {
                for bsz in [1, n_used] {
                    let tt = ids.len() / n_used;
                    let mut b = CaseBuilder::new(21);
                    let w = b.weight("w", t, &[k, n, e], 0.5).expect("case");
                    let x = b.input_f32("x", &[k, bsz, tt], 1.0).expect("case");
                    let idd = TensorDesc::new(DType::I32, &[n_used, tt]).expect("case");
                    let idt = b
                        .input_data("ids", idd, bytemuck::cast_slice(ids).to_vec())
                        .expect("case");
                    let out = b.g.mul_mat_id(w, x, idt).expect("case");
                    v.push(
                        b.finish(
                            format!(
                                "MUL_MAT_ID {t}{{{k},{n},{e}}} · f32{{{k},{bsz},{tt}}} ids{ids:?}"
                            ),
                            out,
                            0.0,
                            true,
                        )
                        .expect("case"),
                    );
                }
            }
        }
        // experts chosen by many tokens: of 11, 9, 6 and 7 (the tiled grid path, with a
        // column-chunk tail and a row tail at N = 37); of 23, 19, 12 and 16 (panels of 8 + 8 +
        // 7 and 8 + 8 + 3 tokens)
        for (nt, first) in [(11usize, 9usize), (23, 19)] {
            let ids_many: Vec<i32> = (0..nt)
                .flat_map(|t| {
                    [
                        if t < first { 0 } else { 2 },
                        if t % 2 == 0 { 1 } else { 2 },
                    ]
                })
                .collect();
            for t in [
                DType::IQ2_XXS,
                DType::IQ2_XXS_X,
                DType::IQ1_S,
                DType::IQ1_S_X,
                DType::IQ1_M,
                DType::IQ1_M_X,
                DType::Q8_0,
            ] {
                for bsz in [1usize, 2] {
                    let mut b = CaseBuilder::new(25);
                    let w = b.weight("w", t, &[512, 37, 3], 0.5).expect("case");
                    let x = b.input_f32("x", &[512, bsz, nt], 1.0).expect("case");
                    let idd = TensorDesc::new(DType::I32, &[2, nt]).expect("case");
                    let idt = b
                        .input_data("ids", idd, bytemuck::cast_slice(&ids_many).to_vec())
                        .expect("case");
                    let out = b.g.mul_mat_id(w, x, idt).expect("case");
                    v.push(
                        b.finish(
                            format!(
                                "MUL_MAT_ID {t}{{512,37,3}} · f32{{512,{bsz},{nt}}} many tokens"
                            ),
                            out,
                            0.0,
                            true,
                        )
                        .expect("case"),
                    );
                }
            }
        }
        // invalid ids → NaN rows; ids as a non-contiguous (transposed) view
        let mut b = CaseBuilder::new(22);
        let w = b.weight("w", DType::Q8_0, &[64, 9, 4], 0.5).expect("case");
        // stored {T = 4, n_used = 2} and transposed to {n_used, T}: ids[u, t] = raw[t + 4u]
        let raw: &[i32] = &[1, 7, 3, -3, 0, 2, 3, -1];
        let idd = TensorDesc::new(DType::I32, &[4, 2]).expect("case");
        let ids = b
            .input_data("ids", idd, bytemuck::cast_slice(raw).to_vec())
            .expect("case");
        let ids = b.g.transpose(ids).expect("case");
        let x = b.input_f32("x", &[64, 2, 4], 1.0).expect("case");
        let out = b.g.mul_mat_id(w, x, ids).expect("case");
        v.push(
            b.finish(
                "MUL_MAT_ID q8_0{64,9,4} invalid + transposed ids".into(),
                out,
                0.0,
                true,
            )
            .expect("case"),
        );
        v.extend(real_cases());
        v
    }
}

/// V4-Flash expert projections with E = 16 (real K, N; MXFP4 like the GGUF): gate/up
/// `{4096, 2048, 16}` with `B = 1` and down `{2048, 4096, 16}` with `B = 6`. Both share one
/// buffer of random blocks (same byte size), filled 8 bytes at a time to keep construction
/// cheap, since every `cases()` call builds it.
fn real_cases() -> Vec<Case> {
    let (e, n_used, tt) = (16usize, 6usize, 2usize);
    let d_gate = TensorDesc::new(DType::MXFP4, &[4096, 2048, e]).expect("case");
    let d_down = TensorDesc::new(DType::MXFP4, &[2048, 4096, e]).expect("case");
    let mut rng = crate::case::CaseRng::new(23);
    let mut bytes = vec![0u8; d_gate.nbytes()];
    for c in bytes.chunks_mut(8) {
        let r = rng.next_u64().to_le_bytes();
        c.copy_from_slice(&r[..c.len()]);
    }
    for blk in bytes.chunks_exact_mut(DType::MXFP4.type_size()) {
        blk[0] = 118 + blk[0] % 4; // E8M0 exponents 2^-10 .. 2^-7
    }
    let data = WeightData::from_vec(bytes);
    let ids: &[i32] = &[5, 12, 0, 7, 3, 15, 12, 1, 9, 5, 14, 2];
    let mut v = Vec::new();
    for (name, d, bsz) in [("gate", d_gate, 1usize), ("down", d_down, n_used)] {
        let mut b = CaseBuilder::new(24);
        let w = b.g.weight("w", d, data.clone()).expect("case");
        let x = b.input_f32("x", &[d.ne[0], bsz, tt], 1.0).expect("case");
        let idd = TensorDesc::new(DType::I32, &[n_used, tt]).expect("case");
        let idt = b
            .input_data("ids", idd, bytemuck::cast_slice(ids).to_vec())
            .expect("case");
        let out = b.g.mul_mat_id(w, x, idt).expect("case");
        v.push(
            b.finish(
                format!("MUL_MAT_ID V4 {name} {} B={bsz} T={tt}", d.shape_str()),
                out,
                0.0,
                false,
            )
            .expect("case"),
        );
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run the reference and the forward kernel (as a single thread) on f32 data.
    fn run(w: &[f32], wne: [usize; 3], x: &[f32], xne: [usize; 3], ids: &[i32]) -> [Vec<f32>; 2] {
        let wd = TensorDesc::f32(&wne).unwrap();
        let xd = TensorDesc::f32(&xne).unwrap();
        let idd = TensorDesc::new(DType::I32, &[ids.len() / xne[2], xne[2]]).unwrap();
        let od = TensorDesc::f32(&[wne[1], idd.ne[0], xne[2]]).unwrap();
        let srcs = [
            TensorRef::new(wd, bytemuck::cast_slice(w)),
            TensorRef::new(xd, bytemuck::cast_slice(x)),
            TensorRef::new(idd, bytemuck::cast_slice(ids)),
        ];
        let mut res = [Vec::new(), Vec::new()];
        for (i, r) in res.iter_mut().enumerate() {
            let mut out = vec![0u8; od.nbytes()];
            let dst = TensorMut::new(od, &mut out);
            crate::dsv4_testutil::run_one(&MulMatId::new(), &dst, &srcs, i != 0);
            *r = bytemuck::cast_slice(&out).to_vec();
        }
        res
    }

    #[test]
    fn hand_computed() {
        // K = 2, N = 2, E = 3: expert e = [[e+1, 0], [0, 1]] rows (row n = weights of output n)
        #[rustfmt::skip]
        let w = [1.0, 0.0, 0.0, 1.0,   2.0, 0.0, 0.0, 1.0,   3.0, 1.0, 1.0, -1.0];
        // B = 1, T = 2: x_0 = (1, 2), x_1 = (−1, 4)
        let x = [1.0, 2.0, -1.0, 4.0];
        // token 0 → experts 2, 0; token 1 → −1 (skip), 9 (invalid)
        let ids = [2, 0, -1, 9];
        for got in run(&w, [2, 2, 3], &x, [2, 1, 2], &ids) {
            assert_eq!(&got[..4], &[5.0, -1.0, 1.0, 2.0]);
            assert_eq!(&got[4..6], &[0.0, 0.0]);
            assert!(got[6..].iter().all(|v| v.is_nan()));
        }
        // B = n_used = 2: slot u reads x[:, u, t]; repeated expert 1 in token 0
        let x = [1.0, 2.0, 3.0, 5.0, 1.0, 1.0, 0.5, -2.0];
        let ids = [1, 1, 2, 0];
        for got in run(&w, [2, 2, 3], &x, [2, 2, 2], &ids) {
            assert_eq!(got, vec![2.0, 2.0, 6.0, 5.0, 4.0, 0.0, 0.5, -2.0]);
        }
    }

    #[test]
    fn bucketing_groups_rows_by_expert() {
        let s = Shape {
            k: 32,
            n: 1,
            e: 4,
            b: 1,
            n_used: 3,
            t: 2,
            qrow: 0,
            dot: DType::F32,
        };
        let ids: [i32; 6] = [3, 1, 3, -1, 3, 7];
        let idd = TensorDesc::new(DType::I32, &[3, 2]).unwrap();
        let r = TensorRef::new(idd, bytemuck::cast_slice(&ids));
        let mut mem = vec![0u32; bucket_len(&s)];
        let bk = bucket(&r, &s, &mut mem);
        assert_eq!(bk.active, &[1, 3]);
        assert_eq!(bk.start, &[0, 0, 1, 1, 4]);
        assert_eq!(bk.rows, &[1, 0, 2, 4]);
    }
}
