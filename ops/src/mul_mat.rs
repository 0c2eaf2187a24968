//! MUL_MAT kernels. The activation rows are converted once per node to the weight type's dot
//! type (Q8_0 / Q8_K / F16 / BF16 / F32, ggml's x86 rounding). The forward kernel splits
//! weight rows into chunks claimed from the node's atomic counter; per chunk:
//! - Q8_0 weights with two or more columns: the group tile
//!   (`quant::simd::q8::tile_x16`): a chunk's rows expanded sixteen at a time into per-thread
//!   scratch, every eight-column panel (packed once per node) against every group, the rows
//!   in a register's lanes; Q2_0 weights with two or more columns: the register-tiled VNNI
//!   GEMM on Q8_0 panels (`quant::simd::q8::tile_q2`, four rows × eight columns). Both with
//!   the reference's bits;
//! - F32 / F16 / BF16 weights with four or more columns: the float tile GEMM
//!   (`quant::simd::float::tile`; f32 accumulation, within its documented bound);
//! - otherwise each weight row is reused for all columns through the multi-column kernel
//!   where the type has one, else one `vec_dot` per output element (the reference's bits).
//!
//! A row mask (SwiGLU row skipping) always takes the last path: the tiles would read masked
//! rows.

use crate::case::CaseBuilder;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::mul_mat::MulMat;
use quant::simd::float::tile as tile_float;
use quant::simd::q8::tile::{pack_q8_0_panel, panel_bytes, TileFn, TILE_COLS, TILE_ROWS};
use quant::simd::q8::tile_x16::{self, GroupExpandFn, GroupTileFn, GROUP_ROWS, PANEL_COLS};
use quant::simd::{Tile, DOT_BATCH, DOT_ROWS};
use quant::DType;

use crate::taper::Tapered;

/// Most weight rows per claimed chunk (see [`chunk_rows`]).
pub(crate) const CHUNK: usize = 16;

/// Weight rows per claimed chunk for `n` rows, `batches` batches and `t` columns on `nth`
/// threads, starting from `c` ([`CHUNK`], or [`matvec_chunk`] for the multi-row kernels);
/// for a matvec (`t = 1`) halved (down to four) while there would be fewer than four chunks
/// per thread — the 24-row F32 HC mixes were two chunks of 16 and 8 rows, one thread idle a
/// third of the node. Measured and not done: 8-row chunks for big matvecs (about 10% slower
/// iq2 decode in alternating runs: each chunk restarts a DRAM stream), and small chunks for
/// prompt chunks (the float tile re-reads every column per chunk: MUL_MAT f32 0.48 →
/// 0.56–0.60 ms per prefill token).
pub(crate) fn chunk_rows(n: usize, batches: usize, t: usize, nth: usize, mut c: usize) -> usize {
    while t == 1 && c > 4 && n.div_ceil(c) * batches < 4 * nth {
        c /= 2;
    }
    c
}

/// Weight rows per claimed chunk for the panel and group tiles over two or more panels: every
/// chunk streams all of the node's panels through the cache once, so 64 rows (about 270 KiB
/// of Q2_0 / Q8_0 rows, or four Q8_0 groups of 72 KiB at K = 4096, which stay in L2 beside
/// one panel) stream them a quarter as often as 16. Measured on the tiles of 2026-12-06,
/// before the group tile (a 512-token chunk's lane-form Q8_0 panels were 6 MiB): on raw
/// rows (the old AVX2 Q8_0 tile, the Q2_0 tiles; iq2 pp512 on AVX2, dense Q8_0) 17.7 / 18.7
/// → 16.7 / 16.4 ms per token, alternating; on expanded rows (AVX-512 Q8_0, the Xeon of
/// issue 35) 7.87 / 8.17 → 6.82 / 6.66 / 6.57. 128 rows level with 64, 256 slower.
const TILE_CHUNK: usize = 64;

/// Bytes a matvec chunk of the multi-row kernels should span at least.
const MATVEC_CHUNK_BYTES: usize = 512 << 10;

/// Most rows in a matvec chunk.
const MATVEC_CHUNK_MAX_ROWS: usize = 1024;

/// Rows per chunk for the multi-row kernels with `row_bytes`-byte weight rows: at least
/// [`CHUNK`], and enough for [`MATVEC_CHUNK_BYTES`] (a power of two, at most
/// [`MATVEC_CHUNK_MAX_ROWS`]). Each chunk is one stretch of a thread's DRAM stream, and a
/// restarted stream costs more than the imbalance of long chunks (64 KiB chunks against 512
/// KiB: iq2 decode 11.9–12.2 against 13.3–13.5 tok/s, docs/kernels.md "Decode matvecs in
/// 512 KiB chunks"). [`chunk_rows`] still halves them below four chunks a thread.
pub(crate) fn matvec_chunk(row_bytes: usize) -> usize {
    MATVEC_CHUNK_BYTES
        .div_ceil(row_bytes.max(1))
        .next_power_of_two()
        .clamp(CHUNK, MATVEC_CHUNK_MAX_ROWS)
}

/// Fewest activation columns for which MUL_MAT uses the tiled Q8_0 / Q2_0 GEMMs.
const TILED_MIN_COLS: usize = 2;

/// The tiled GEMM a MUL_MAT node runs: the Q2_0 panel tile, or Q8_0's group tile.
#[derive(Clone, Copy)]
enum Tiles {
    Panel(TileFn),
    Group(GroupTileFn, GroupExpandFn),
}

pub(crate) struct Shape {
    pub(crate) k: usize,
    pub(crate) n: usize,
    pub(crate) t: usize,
    pub(crate) batches: usize,
    pub(crate) qrow: usize,
    pub(crate) dot: DType,
}

pub(crate) fn shape(w: &TensorRef, x: &TensorRef) -> Shape {
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
        t: x.desc.ne[1],
        batches: x.desc.ne[2] * x.desc.ne[3],
        qrow: quant::bytes_for(dot, k).expect("validated at build time"),
        dot,
    }
}

/// Quantize every activation row into `buf` (row `j` = flat activation row `j`).
pub(crate) fn quantize_all(x: &TensorRef, s: &Shape, buf: &mut [u8]) {
    crate::quantize::activations_to(x, s.dot, s.t * s.batches, s.qrow, buf);
}

/// The rows of one weight matrix (at byte `base` of its tensor), with the offset and the row
/// length (a division) computed once for all of them: a matvec asks for every row, and per
/// row the lookup had cost about 40% of the time of a 1024-wide Q2_0_X matvec (288-byte
/// rows; `perf`, `--matvec --row 1024`). MUL_MAT_ID takes one per expert.
#[derive(Clone, Copy)]
pub(crate) struct WeightRows<'a> {
    bytes: &'a [u8],
    base: usize,
    stride: usize,
    len: usize,
    /// The first row number (rows staged from elsewhere start at the item's first row).
    first: usize,
}

impl<'a> WeightRows<'a> {
    /// The matrix at byte `base` of `w`.
    pub(crate) fn at(w: &TensorRef<'a>, base: usize) -> WeightRows<'a> {
        WeightRows {
            bytes: w.bytes(),
            base,
            stride: w.desc.nb[1],
            len: w.desc.row_bytes(),
            first: 0,
        }
    }

    /// The matrix of `w`'s layout whose bytes are `bytes` (an expert paged in by an
    /// [`graph::ExpertSource`]).
    pub(crate) fn of_bytes(w: &TensorRef, bytes: &'a [u8]) -> WeightRows<'a> {
        WeightRows::staged(w, bytes, 0)
    }

    /// Rows `first..` of a matrix of `w`'s layout, whose bytes `bytes` begin at row `first`
    /// (rows converted into a buffer for one item).
    pub(crate) fn staged(w: &TensorRef, bytes: &'a [u8], first: usize) -> WeightRows<'a> {
        WeightRows {
            bytes,
            base: 0,
            stride: w.desc.nb[1],
            len: w.desc.row_bytes(),
            first,
        }
    }

    /// The matrix of `w` that activation batch `b` of `x` multiplies (batches broadcast).
    pub(crate) fn of_batch(w: &TensorRef<'a>, x: &TensorRef, b: usize) -> WeightRows<'a> {
        let (b2, b3) = (b % x.desc.ne[2], b / x.desc.ne[2]);
        let (w2, w3) = (
            b2 / (x.desc.ne[2] / w.desc.ne[2]),
            b3 / (x.desc.ne[3] / w.desc.ne[3]),
        );
        WeightRows::at(w, w2 * w.desc.nb[2] + w3 * w.desc.nb[3])
    }

    /// Row `n`.
    #[inline]
    pub(crate) fn row(&self, n: usize) -> &'a [u8] {
        let off = self.base + (n - self.first) * self.stride;
        &self.bytes[off..off + self.len]
    }
}

/// The dot kernels of a MUL_MAT's row path: single row and column, several columns (prompt
/// chunks), several rows (matvecs).
pub(crate) type Kernels = (
    quant::DotFn,
    Option<quant::simd::MultiDotFn>,
    Option<quant::simd::RowsDotFn>,
);

/// The order in which [`dot_rows`] takes the `len` rows of a chunk, as offsets: with
/// `q = len / 4`, groups `{i, i + q, i + 2q, i + 3q}` for `i < q`, then the last `len % 4`
/// rows in order. The four rows of a group lie a quarter chunk apart, so each is its own
/// sequential stream through its own pages, and each quarter is read front to back over the
/// chunk. Four adjacent rows instead (one or two 4 KiB pages for short rows) measured
/// slower than one row at a time: 1024×32768 Q8_0 0.82× the single-row path, 1.13× with
/// this order.
fn quarter_order(len: usize) -> impl Iterator<Item = usize> {
    let q = len / DOT_ROWS;
    (0..DOT_ROWS * q)
        .map(move |i| i / DOT_ROWS + (i % DOT_ROWS) * q)
        .chain(DOT_ROWS * q..len)
}

/// Outputs `out` (weight rows `rows`) of one activation row `qa`: up to [`DOT_BATCH`]
/// unmasked weight rows per multi-row kernel call (which takes them [`DOT_ROWS`] at a time,
/// and may prepare its activation side once for all of them), in [`quarter_order`] (a
/// masked row gives 0 and is not read). The kernels prefetch each of their four streams a
/// fixed distance ahead (`quant::simd::prefetch_distance`), which carries the stream on into
/// the next row of its quarter; prefetching the whole next group here at once measured slower (12.0 → 10.5
/// GiB/s on a 512 MiB node), and no prefetch at all left the hardware prefetchers short of
/// the latency on a VM (Q6_K 8.8 → 16.3 GB/s with the kernels' prefetch, alternating).
pub(crate) fn dot_rows<W: Copy + Default>(
    kernel: impl Fn(usize, &[W], &[u8], &mut [f32]),
    k: usize,
    row: impl Fn(usize) -> W,
    masked: impl Fn(usize) -> bool,
    qa: &[u8],
    rows: std::ops::Range<usize>,
    out: &mut [f32],
) {
    let start = rows.start;
    let mut idx = [0usize; DOT_BATCH];
    let mut ws: [W; DOT_BATCH] = [W::default(); DOT_BATCH];
    let mut m = 0;
    let flush = |idx: &[usize], ws: &[W], out: &mut [f32]| {
        let mut o = [0f32; DOT_BATCH];
        kernel(k, ws, qa, &mut o[..ws.len()]);
        for (&i, &v) in idx.iter().zip(&o) {
            out[i] = v;
        }
    };
    for i in quarter_order(rows.len()) {
        if masked(start + i) {
            out[i] = 0.0;
            continue;
        }
        idx[m] = i;
        ws[m] = row(start + i);
        m += 1;
        if m == DOT_BATCH {
            flush(&idx, &ws, out);
            m = 0;
        }
    }
    if m > 0 {
        flush(&idx[..m], &ws[..m], out);
    }
}

/// Output rows `rows` of batch `b` for every activation column (`srcs` = `[w, x, mask?]`).
/// With a multi-column kernel each weight row is unpacked once for up to eight columns; with
/// a multi-row kernel (and one column at a time) four weight rows are streamed side by side;
/// either way every output element has the single-column kernel's bits.
pub(crate) fn compute(
    srcs: &[TensorRef],
    (dot, multi, rows_dot): Kernels,
    s: &Shape,
    q: &[u8],
    dst: &TensorMut,
    b: usize,
    rows: std::ops::Range<usize>,
) {
    let (w, x, mask) = (&srcs[0], &srcs[1], srcs.get(2));
    let wrows = WeightRows::of_batch(w, x, b);
    if let (Some(multi), true) = (multi, s.t > 1) {
        for n in rows {
            if n + 1 < s.n {
                quant::simd::prefetch(wrows.row(n + 1));
            }
            let wr = wrows.row(n);
            let masked = |j: usize| mask.is_some_and(|mk| mk.row_f32(j)[n] == 0.0);
            let act = |j: usize| &q[j * s.qrow..(j + 1) * s.qrow];
            dot_row_columns(
                multi,
                s.k,
                wr,
                n,
                (0..s.t).map(|t| b * s.t + t),
                act,
                masked,
                dst,
            );
        }
        return;
    }
    for t in 0..s.t {
        let j = b * s.t + t;
        let qa = &q[j * s.qrow..(j + 1) * s.qrow];
        let out = dst.row_range_f32_mut(j, rows.clone());
        let m = mask.map(|m| m.row_f32(j));
        if let Some(rows_dot) = rows_dot {
            let masked = |n: usize| m.is_some_and(|m| m[n] == 0.0);
            let row = |n: usize| wrows.row(n);
            dot_rows(rows_dot, s.k, row, masked, qa, rows.clone(), out);
            continue;
        }
        for (o, n) in out.iter_mut().zip(rows.clone()) {
            if t == 0 && n + 1 < s.n {
                quant::simd::prefetch(wrows.row(n + 1));
            }
            *o = if m.is_some_and(|m| m[n] == 0.0) {
                0.0
            } else {
                dot(s.k, wrows.row(n), qa)
            };
        }
    }
}

/// Output rows `rows` of batch `b` for every activation column with the Q2_0 / Q2_0_X tiled
/// GEMM on Q8_0 panels: each packed eight-column panel of `panels` (built by
/// [`pack_panels`]) against the chunk's rows four at a time. Panels outer, rows inner: the
/// chunk's weight rows stay in L2 while one panel at a time is hot (all panels of a
/// 512-token ubatch would not fit). Every output has the reference's bits.
fn compute_tiles(
    srcs: &[TensorRef],
    tile: TileFn,
    s: &Shape,
    panels: &[u8],
    dst: &TensorMut,
    b: usize,
    rows: std::ops::Range<usize>,
) {
    let wrows = WeightRows::of_batch(&srcs[0], &srcs[1], b);
    let groups = s.t.div_ceil(TILE_COLS);
    let stride = panel_bytes(s.k, TILE_COLS);
    if rows.end < s.n {
        // the next chunk's rows, while this chunk computes
        for i in rows.end..(rows.end + CHUNK).min(s.n) {
            quant::simd::prefetch(wrows.row(i));
        }
    }
    for g in 0..groups {
        let cols = (s.t - g * TILE_COLS).min(TILE_COLS);
        let off = (b * groups + g) * stride;
        let panel = &panels[off..off + panel_bytes(s.k, cols)];
        let mut n0 = rows.start;
        while n0 < rows.end {
            let nr = (rows.end - n0).min(TILE_ROWS);
            let wr: [&[u8]; TILE_ROWS] = std::array::from_fn(|i| wrows.row(n0 + i.min(nr - 1)));
            let mut out = [0f32; TILE_ROWS * TILE_COLS];
            tile(s.k, &wr[..nr], panel, cols, &mut out[..nr * cols]);
            for c in 0..cols {
                let d = dst.row_range_f32_mut(b * s.t + g * TILE_COLS + c, n0..n0 + nr);
                for (r, o) in d.iter_mut().enumerate() {
                    *o = out[r * cols + c];
                }
            }
            n0 += nr;
        }
    }
}

/// Output rows `rows` of batch `b` for every activation column with Q8_0's group tile: the
/// chunk's rows expanded sixteen at a time into `ex` (once per chunk), then every panel of
/// `panels` ([`pack_panels`]) against every group, each column's sixteen outputs
/// stored whole. Every output has the reference's bits.
#[allow(clippy::too_many_arguments)]
fn compute_groups(
    srcs: &[TensorRef],
    (tile, expand): (GroupTileFn, GroupExpandFn),
    s: &Shape,
    panels: &[u8],
    ex: &mut [u8],
    dst: &TensorMut,
    b: usize,
    rows: std::ops::Range<usize>,
) {
    let wrows = WeightRows::of_batch(&srcs[0], &srcs[1], b);
    let gb = tile_x16::group_bytes(s.k);
    let ngroups = rows.len().div_ceil(GROUP_ROWS);
    assert!(
        ex.len() >= ngroups * gb,
        "group scratch for {ngroups} groups"
    );
    for (g, gx) in ex.chunks_exact_mut(gb).take(ngroups).enumerate() {
        let n0 = rows.start + g * GROUP_ROWS;
        let nr = (rows.end - n0).min(GROUP_ROWS);
        let wr: [&[u8]; GROUP_ROWS] = std::array::from_fn(|i| wrows.row(n0 + i.min(nr - 1)));
        expand(s.k, &wr[..nr], gx);
    }
    if rows.end < s.n {
        // the next chunk's rows, while this chunk computes
        for i in rows.end..(rows.end + CHUNK).min(s.n) {
            quant::simd::prefetch(wrows.row(i));
        }
    }
    let npanels = s.t.div_ceil(PANEL_COLS);
    let stride = tile_x16::panel_bytes(s.k, PANEL_COLS);
    for p in 0..npanels {
        let cols = (s.t - p * PANEL_COLS).min(PANEL_COLS);
        let off = (b * npanels + p) * stride;
        let panel = &panels[off..off + tile_x16::panel_bytes(s.k, cols)];
        for (g, gx) in ex.chunks_exact(gb).take(ngroups).enumerate() {
            let n0 = rows.start + g * GROUP_ROWS;
            let nr = (rows.end - n0).min(GROUP_ROWS);
            let mut out = [[0f32; GROUP_ROWS]; PANEL_COLS];
            tile(s.k, gx, panel, cols, &mut out[..cols]);
            for (c, o) in out[..cols].iter().enumerate() {
                dst.row_range_f32_mut(b * s.t + p * PANEL_COLS + c, n0..n0 + nr)
                    .copy_from_slice(&o[..nr]);
            }
        }
    }
}

/// Output rows `rows` of batch `b` for the activation columns `cols` with the float tile
/// GEMM (F32/F16/BF16; f32 accumulation, within the bound `quant::simd::float::tile`
/// documents): four columns at a time outer, four weight rows inner. `row(n)` is weight row
/// `n` in the tile's element type (the tensor's rows, or rows a caller expanded).
#[allow(clippy::too_many_arguments)]
pub(crate) fn compute_float_tiles<'w>(
    tile: tile_float::TileFn,
    s: &Shape,
    row: impl Fn(usize) -> &'w [u8],
    q: &[u8],
    dst: &TensorMut,
    b: usize,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
) {
    const R: usize = tile_float::TILE_ROWS;
    const C: usize = tile_float::TILE_COLS;
    let mut t0 = cols.start;
    while t0 < cols.end {
        let cols = (cols.end - t0).min(C);
        let acts: [&[u8]; C] = std::array::from_fn(|c| {
            let j = b * s.t + t0 + c.min(cols - 1);
            &q[j * s.qrow..(j + 1) * s.qrow]
        });
        let mut n0 = rows.start;
        while n0 < rows.end {
            let nr = (rows.end - n0).min(R);
            let wr: [&[u8]; R] = std::array::from_fn(|i| row(n0 + i.min(nr - 1)));
            let mut out = [0f32; R * C];
            tile(s.k, &wr[..nr], &acts[..cols], &mut out[..nr * cols]);
            for c in 0..cols {
                let d = dst.row_range_f32_mut(b * s.t + t0 + c, n0..n0 + nr);
                for (r, o) in d.iter_mut().enumerate() {
                    *o = out[r * cols + c];
                }
            }
            n0 += nr;
        }
        t0 += cols;
    }
}

/// A panel layout: its packer (`n`, the columns, the panel) and its bytes for `cols` columns
/// of `n` elements.
type PanelLayout = (fn(usize, &[&[u8]], &mut [u8]), fn(usize, usize) -> usize);

impl Tiles {
    /// The activation panel layout of the tile (eight columns a panel either way).
    fn panel(self) -> PanelLayout {
        match self {
            Tiles::Panel(_) => (pack_q8_0_panel, panel_bytes),
            Tiles::Group(..) => (tile_x16::pack_panel, tile_x16::panel_bytes),
        }
    }
}

/// Bytes of the panels [`pack_panels`] writes for `tiles`.
fn panels_bytes(s: &Shape, tiles: Tiles) -> usize {
    s.batches * s.t.div_ceil(TILE_COLS) * (tiles.panel().1)(s.k, TILE_COLS)
}

/// Packs the quantized activation rows `q` into `tiles`' eight-column panels per batch (the
/// last one of a batch narrower) at a fixed stride, for [`compute_tiles`] and
/// [`compute_groups`].
fn pack_panels(s: &Shape, tiles: Tiles, q: &[u8], panels: &mut [u8]) {
    const _: () = assert!(TILE_COLS == PANEL_COLS);
    let (pack, bytes) = tiles.panel();
    let groups = s.t.div_ceil(TILE_COLS);
    let stride = bytes(s.k, TILE_COLS);
    for b in 0..s.batches {
        for g in 0..groups {
            let cols = (s.t - g * TILE_COLS).min(TILE_COLS);
            let acts: [&[u8]; TILE_COLS] = std::array::from_fn(|c| {
                let j = b * s.t + g * TILE_COLS + c.min(cols - 1);
                &q[j * s.qrow..(j + 1) * s.qrow]
            });
            let off = (b * groups + g) * stride;
            pack(s.k, &acts[..cols], &mut panels[off..off + bytes(s.k, cols)]);
        }
    }
}

/// Activation columns per multi-column kernel call: up to sixteen, so that a kernel that
/// unpacks a weight block once per call (AVX2 IQ2_XXS) serves all of an MoE expert's
/// tokens in a 512-token chunk (about twelve); kernels with fewer columns per pass split the
/// call themselves.
pub(crate) const COLS: usize = 16;

/// Output column `n` (weight row `wr`) for the activation rows `js`, up to [`COLS`] per
/// multi-column kernel call: `dst[j][n] = dot(wr, act(j))`, or 0 where `masked(j)` (a
/// masked row is not read for that activation; it is not read at all if every one masks it).
/// The calls are split by [`quant::simd::column_split`]: no call has a single column unless
/// only one activation is unmasked (nine columns are 7 + 2, not 8 + 1).
#[allow(clippy::too_many_arguments)]
pub(crate) fn dot_row_columns<'q>(
    multi: quant::simd::MultiDotFn,
    k: usize,
    wr: &[u8],
    n: usize,
    js: impl Iterator<Item = usize>,
    act: impl Fn(usize) -> &'q [u8],
    masked: impl Fn(usize) -> bool,
    dst: &TensorMut,
) {
    // up to two calls' worth are held back, so that the last ones can be split evenly
    let mut cols = [0usize; 2 * COLS];
    let mut acts: [&[u8]; 2 * COLS] = [&[]; 2 * COLS];
    let mut m = 0;
    let flush = |cols: &[usize], acts: &[&[u8]]| {
        let mut out = [0f32; COLS];
        multi(k, wr, acts, &mut out[..acts.len()]);
        for (&j, &o) in cols.iter().zip(&out) {
            dst.row_range_f32_mut(j, n..n + 1)[0] = o;
        }
    };
    for j in js {
        if masked(j) {
            dst.row_range_f32_mut(j, n..n + 1)[0] = 0.0;
            continue;
        }
        if m == 2 * COLS {
            // a full call, with a full one still held back
            flush(&cols[..COLS], &acts[..COLS]);
            cols.copy_within(COLS.., 0);
            acts.copy_within(COLS.., 0);
            m = COLS;
        }
        cols[m] = j;
        acts[m] = act(j);
        m += 1;
    }
    for r in quant::simd::column_split(m, COLS) {
        flush(&cols[r.clone()], &acts[r]);
    }
}

/// The scalar reference dot of the weight type.
pub(crate) fn reference_dot(w: &TensorRef) -> quant::DotFn {
    w.desc
        .dtype
        .info()
        .vec_dot
        .expect("validated at build time")
}

impl CpuKernel for MulMat {
    fn reference(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        if let Some(bs) = cx.block_scales {
            return crate::mul_mat_scaled::run(cx, dst, srcs, bs, true);
        }
        let (w, x) = (&srcs[0], &srcs[1]);
        let s = shape(w, x);
        let q = cx.scratch.bytes(s.qrow * s.t * s.batches);
        let q = crate::quantize::activations(x, s.dot, s.t * s.batches, s.qrow, q);
        for b in 0..s.batches {
            compute(
                srcs,
                (reference_dot(&srcs[0]), None, None),
                &s,
                q,
                dst,
                b,
                0..s.n,
            );
        }
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        if let Some(bs) = cx.block_scales {
            return crate::mul_mat_scaled::run(cx, dst, srcs, bs, false);
        }
        let (w, x) = (&srcs[0], &srcs[1]);
        let s = shape(w, x);
        let kernels = crate::kernels_for(cx, w.desc.dtype);
        // matvecs stream four weight rows at a time, in longer chunks for short rows
        let rows_dot = kernels.rows.map(|k| k.f).filter(|_| s.t == 1);
        // every thread converts the activations itself: no intra-node barrier, and for decode
        // (one row) the cost is negligible next to streaming the weights
        let mut scratch = std::mem::take(&mut cx.scratch.bytes);
        let qbytes = s.qrow * s.t * s.batches;
        // prompt chunks (and several decode streams) of Q2_0 weights go through the tiled GEMM
        // on activation panels, of Q8_0 weights through the group tile (not with a row mask:
        // they would read masked rows)
        let tiles = match kernels.tile.map(|k| k.f) {
            Some(Tile::Panel(tile)) if s.t >= TILED_MIN_COLS => Some(Tiles::Panel(tile)),
            Some(Tile::Q8Group { tile, expand }) if s.t >= TILED_MIN_COLS => {
                Some(Tiles::Group(tile, expand))
            }
            _ => None,
        }
        .filter(|_| srcs.len() == 2);
        let first = match (rows_dot, tiles) {
            (Some(_), _) => matvec_chunk(w.desc.row_bytes()),
            (None, Some(_)) if s.t > TILE_COLS => TILE_CHUNK,
            _ => CHUNK,
        };
        let chunk = chunk_rows(s.n, s.batches, s.t, cx.nth, first);
        let nchunks = s.n.div_ceil(chunk);
        let total = nchunks * s.batches;
        let pbytes = tiles.map_or(0, |t| panels_bytes(&s, t));
        // the expanded groups of one chunk, 64-byte aligned (hence the slack)
        let ebytes = match tiles {
            Some(Tiles::Group(..)) => chunk.div_ceil(GROUP_ROWS) * tile_x16::group_bytes(s.k) + 64,
            _ => 0,
        };
        let need = qbytes + pbytes + ebytes;
        if scratch.len() < need {
            scratch.resize(need, 0);
        }
        let (q, rest) = scratch.split_at_mut(qbytes);
        let (panels, ex) = rest.split_at_mut(pbytes);
        let off = ex.as_ptr().align_offset(64).min(ex.len());
        let ex = &mut ex[off..];
        let q = crate::quantize::activations(x, s.dot, s.t * s.batches, s.qrow, q);
        if let Some(t) = tiles {
            pack_panels(&s, t, q, panels);
        }
        let multi = kernels.multi.map(|k| k.f);
        let float_tile = match kernels.tile.map(|k| k.f) {
            Some(Tile::Float(f)) => Some(f),
            _ => None,
        }
        .filter(|_| s.t >= tile_float::TILE_COLS && srcs.len() == 2);
        // a prompt chunk of few weight rows (the 24-row HC mixes: two chunks) also splits its
        // columns for the float tiles, so that every thread gets work; the same activation
        // bytes are read either way (each block of columns once per row chunk)
        let per = match float_tile {
            Some(_) if total < 4 * cx.nth => {
                s.t.div_ceil((4 * cx.nth).div_ceil(total))
                    .next_multiple_of(tile_float::TILE_COLS)
            }
            _ => s.t,
        };
        let col_blocks = s.t.div_ceil(per.max(1)).max(1);
        // a decode matvec's last chunks are cut small, so that no thread waits a whole chunk
        let matvec = rows_dot.is_some() && tiles.is_none() && s.t == 1;
        let taper = Tapered::new(total * col_blocks, cx.nth, matvec);
        let chunk_of = |item: usize| {
            let c = (item / col_blocks) % nchunks;
            c * chunk..((c + 1) * chunk).min(s.n)
        };
        while let Some(items) = cx.claim(taper.items(), 1) {
            for item in items {
                let (item, rows) = taper.item(item, chunk_of);
                if rows.is_empty() {
                    continue;
                }
                let (rest, cb) = (item / col_blocks, item % col_blocks);
                let b = rest / nchunks;
                let cols = cb * per..((cb + 1) * per).min(s.t);
                match (tiles, float_tile) {
                    (Some(Tiles::Panel(t)), _) => compute_tiles(srcs, t, &s, panels, dst, b, rows),
                    (Some(Tiles::Group(t, e)), _) => {
                        compute_groups(srcs, (t, e), &s, panels, ex, dst, b, rows)
                    }
                    (_, Some(ft)) => {
                        let wrows = WeightRows::of_batch(w, x, b);
                        if rows.end < s.n {
                            // the next chunk's rows, while this chunk computes
                            for i in rows.end..(rows.end + CHUNK).min(s.n) {
                                quant::simd::prefetch(wrows.row(i));
                            }
                        }
                        let row = |n| wrows.row(n);
                        compute_float_tiles(ft, &s, row, q, dst, b, rows, cols)
                    }
                    _ => compute(srcs, (kernels.dot.f, multi, rows_dot), &s, q, dst, b, rows),
                }
            }
        }
        cx.scratch.bytes = scratch;
    }
    fn cases() -> Vec<Case> {
        let mut v = Vec::new();
        let types = [
            DType::F32,
            DType::F16,
            DType::BF16,
            DType::Q8_0,
            DType::Q2_0,
            DType::Q2_0_X,
            DType::Q1_0,
            DType::MXFP4,
            DType::Q2_K,
            DType::Q4_K,
            DType::Q5_K,
            DType::Q6_K,
            DType::IQ2_XXS,
            DType::IQ2_XS,
            DType::IQ1_S,
            DType::IQ1_S_X,
            DType::IQ2_XXS_X,
            DType::IQ1_M,
            DType::IQ1_M_X,
            DType::IQ4_XS,
        ];
        for t in types {
            for (k, n, tt, quick) in [
                (256usize, 37usize, 1usize, true),
                (512, 19, 3, true),
                (256, 21, 11, true),
                (4096, 64, 2, false),
                (1024, 21, 11, true),
                (256, 150, 17, true),
            ] {
                // rows of whole blocks only (Q2_0_X: 512 elements), and the extra shapes only
                // for the layouts that need them (150 rows: several 64-row items of the panel
                // tiles and a short last one, over three panels)
                let panel_tiles = matches!(t, DType::Q8_0 | DType::Q2_0);
                if !k.is_multiple_of(t.block_size())
                    || (k == 1024 && t != DType::Q2_0_X)
                    || (n == 150 && !panel_tiles)
                {
                    continue;
                }
                let mut b = CaseBuilder::new(9);
                let w = b.weight("w", t, &[k, n], 0.5).expect("case");
                let x = b.input_f32("x", &[k, tt], 1.0).expect("case");
                let out = b.g.mul_mat(w, x).expect("case");
                v.push(
                    b.finish(
                        format!("MUL_MAT {t}{{{k},{n}}} · f32{{{k},{tt}}}"),
                        out,
                        1e-10,
                        quick,
                    )
                    .expect("case"),
                );
            }
        }
        // batched weights broadcast over activation batches
        let mut b = CaseBuilder::new(10);
        let w = b.weight("w", DType::Q8_0, &[64, 5, 2], 0.5).expect("case");
        let x = b.input_f32("x", &[64, 3, 4], 1.0).expect("case");
        let out = b.g.mul_mat(w, x).expect("case");
        v.push(
            b.finish(
                "MUL_MAT q8_0{64,5,2} · f32{64,3,4} (broadcast)".into(),
                out,
                1e-10,
                true,
            )
            .expect("case"),
        );
        v.extend(crate::mul_mat_scaled::cases());
        v
    }
}

#[cfg(test)]
mod tests {
    use super::{chunk_rows, dot_row_columns, matvec_chunk, quarter_order, CHUNK, COLS};
    use std::cell::RefCell;

    thread_local! {
        /// The column counts of the fake multi-column kernel's calls on this thread.
        static CALLS: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
    }

    /// A multi-column kernel that records its column count and writes `100·call + c`.
    fn fake_multi(_k: usize, _w: &[u8], acts: &[&[u8]], out: &mut [f32]) {
        CALLS.with(|c| {
            let mut c = c.borrow_mut();
            for (i, (o, a)) in out.iter_mut().zip(acts).enumerate() {
                *o = (100 * c.len() + i) as f32 + a[0] as f32 * 1000.0;
            }
            c.push(acts.len());
        });
    }

    /// `dot_row_columns` hands the multi-column kernel passes of two to `COLS` columns (one
    /// only when a single activation is unmasked), as few as `div_ceil(COLS)`, and writes
    /// each output to its own row (masked rows 0).
    #[test]
    fn row_columns_are_split_without_single_columns() {
        let acts: Vec<[u8; 1]> = (0..40u8).map(|j| [j % 7]).collect();
        for n in 1..=40usize {
            for mask_every in [0usize, 3, 5] {
                let masked = |j: usize| mask_every > 0 && j % mask_every == 1;
                let live = (0..n).filter(|&j| !masked(j)).count();
                let desc = graph::TensorDesc::f32(&[1, n]).unwrap();
                let mut bytes = vec![0xFFu8; 4 * n];
                let dst = crate::tensor::TensorMut::new(desc, &mut bytes);
                CALLS.with(|c| c.borrow_mut().clear());
                dot_row_columns(fake_multi, 32, &[], 0, 0..n, |j| &acts[j][..], masked, &dst);
                let calls = CALLS.with(|c| c.borrow().clone());
                assert_eq!(calls.iter().sum::<usize>(), live, "n={n}");
                assert_eq!(calls.len(), live.div_ceil(COLS), "n={n} {calls:?}");
                assert!(calls.iter().all(|&c| c <= COLS), "n={n} {calls:?}");
                if live >= 2 {
                    assert!(calls.iter().all(|&c| c >= 2), "n={n} {calls:?}");
                }
                // every live row got a value of its own activation, masked rows 0
                for (j, a) in acts[..n].iter().enumerate() {
                    let v = dst.row_range_f32_mut(j, 0..1)[0];
                    if masked(j) {
                        assert_eq!(v, 0.0);
                    } else {
                        assert_eq!((v / 1000.0).floor() as u8, a[0], "n={n} row {j}");
                    }
                }
            }
        }
    }

    /// Prompt chunks and big matvecs keep 16-row chunks; small matvecs get down to four rows
    /// so that every thread has work; never below four. Multi-row matvec chunks start from
    /// their own size and are halved the same way.
    #[test]
    fn chunk_sizes() {
        let c = |n, b, t, nth| chunk_rows(n, b, t, nth, CHUNK);
        assert_eq!(c(4096, 1, 1, 2), 16);
        assert_eq!(c(4096, 1, 512, 2), 16);
        assert_eq!(c(24, 1, 1, 2), 4);
        assert_eq!(c(24, 1, 512, 2), 16);
        assert_eq!(c(256, 1, 1, 16), 4);
        assert_eq!(c(256, 1, 1, 2), 16);
        assert_eq!(c(48, 1, 1, 2), 4);
        assert_eq!(c(64, 1, 1, 2), 8);
        assert_eq!(c(1, 1, 1, 1), 4);
        assert_eq!(c(5, 4, 1, 2), 4);
        assert_eq!(chunk_rows(32768, 1, 1, 2, 64), 64);
        assert_eq!(chunk_rows(512, 1, 1, 2, 64), 64);
        assert_eq!(chunk_rows(256, 1, 1, 2, 64), 32);
        assert_eq!(chunk_rows(512, 1, 1, 16, 256), 8);
    }

    /// Q8_0 rows of 1024, 2048 and 4096 elements: 512, 256 and 128 rows (IQ2_XXS rows of
    /// 4096 and 2048: 512 and 1024); 1 MiB rows take the floor of 16, tiny ones the cap.
    #[test]
    fn matvec_chunk_sizes() {
        assert_eq!(matvec_chunk(1088), 512);
        assert_eq!(matvec_chunk(2176), 256);
        assert_eq!(matvec_chunk(4352), 128);
        assert_eq!(matvec_chunk(1056), 512);
        assert_eq!(matvec_chunk(528), 1024);
        assert_eq!(matvec_chunk(1 << 20), 16);
        assert_eq!(matvec_chunk(34), 1024);
        assert_eq!(matvec_chunk(0), 1024);
    }

    /// Every row exactly once; groups of four a quarter apart, the remainder last in order.
    #[test]
    fn quarter_order_is_a_permutation() {
        assert_eq!(
            quarter_order(10).collect::<Vec<_>>(),
            [0, 2, 4, 6, 1, 3, 5, 7, 8, 9]
        );
        assert_eq!(quarter_order(3).collect::<Vec<_>>(), [0, 1, 2]);
        for len in 0..70 {
            let mut v: Vec<usize> = quarter_order(len).collect();
            v.sort_unstable();
            assert_eq!(v, (0..len).collect::<Vec<_>>(), "len {len}");
        }
    }
}
