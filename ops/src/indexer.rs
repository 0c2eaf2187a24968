//! DSA_INDEXER / DSA_SCORES kernels (Lightning Indexer, spec §4.6).
//!
//! Both DSA_INDEXER kernels compute each score with the same f32 function [`score`] (one FMA
//! chain per dot, heads summed in order, `−0 → +0`, NaN → `−∞`) — the forward kernel, on AVX2 and
//! AVX-512 CPUs, as its float operations on blocks of keys (`indexer_simd`) — so selections
//! agree bit for bit; the
//! reference then sorts all `n_kv` entries with a float comparator, the forward kernel keeps
//! only visible finite candidates as `u64` keys (order-preserving score bits, then the index)
//! and runs a partial selection (`select_nth_unstable` + sort of the top). Tokens are claimed
//! one at a time from the node's counter (later tokens see more keys). DSA_SCORES' reference
//! is an independent f64 evaluation; its forward claims `(token, 64-entry)` chunks so decode
//! (T = 1) uses every thread, with the same score function (so DSA_SELECT of its scores is
//! DSA_INDEXER's result, bit for bit).

use crate::case::CaseBuilder;
use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::indexer::{DsaIndexer, DsaScores};
use graph::{TensorDesc, TensorId, WeightData};
use quant::DType;

/// Entries per claimed DSA_SCORES chunk.
const ENTRY_CHUNK: usize = 64;

/// Floats per cache line: the SIMD key block starts on one.
const BLOCK_ALIGN: usize = 16;

/// Most keys in one pass of the SIMD scores (`BLOCKS` blocks of 16 lanes).
const MAX_SPAN: usize = 16 * crate::indexer_simd::BLOCKS;

struct Dims {
    heads: usize,
    tokens: usize,
    n_kv: usize,
}

fn dims(srcs: &[TensorRef]) -> Dims {
    Dims {
        heads: srcs[0].desc.ne[1],
        tokens: srcs[0].desc.ne[2],
        n_kv: srcs[1].desc.ne[1],
    }
}

/// `n_visible[t]` clamped to `[0, n_kv]`.
fn visible(nv: &TensorRef, t: usize, n_kv: usize) -> usize {
    (nv.i32s()[t].max(0) as usize).min(n_kv)
}

/// `S = Σ_h w[h]·max(0, q_h·k)` in f32 for token `t` (q rows `h + heads·t`), canonicalised:
/// NaN → `−∞`, `−0 → +0`.
pub fn score(q: &TensorRef, t: usize, heads: usize, k: &[f32], w: &[f32]) -> f32 {
    let mut s = 0f32;
    for (h, &wh) in w.iter().enumerate().take(heads) {
        s += wh * dot_fma(q.row_f32(h + heads * t), k).max(0.0);
    }
    canonical(s)
}

/// The indexer's query · key dot: one chain of fused multiply-adds in element order, from 0.
/// The SIMD scores (`indexer_simd`) run the same chain one key per lane, so both give these
/// bits; one chain (not eight, as until 2026-12-07) lets the SIMD blocks keep four heads'
/// dots over four key blocks in registers, so FMAs rather than loads bound them.
pub(crate) fn dot_fma(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).fold(0f32, |acc, (x, y)| x.mul_add(*y, acc))
}

/// A score's canonical form: NaN → `−∞`, `−0 → +0`.
pub(crate) fn canonical(s: f32) -> f32 {
    if s.is_nan() {
        f32::NEG_INFINITY
    } else if s == 0.0 {
        0.0
    } else {
        s
    }
}

/// Row `e` of `k` as f32: borrowed for f32 keys, converted into `buf` otherwise.
fn key_row<'a>(k: &TensorRef<'a>, e: usize, buf: &'a mut [f32]) -> &'a [f32] {
    if k.desc.dtype == DType::F32 {
        k.row_f32(e)
    } else {
        k.row_to_f32(e, buf);
        buf
    }
}

/// Sort key: ascending order = descending score, then ascending index.
pub(crate) fn desc_key(s: f32, e: usize) -> u64 {
    let b = s.to_bits();
    let ord = if b & 0x8000_0000 != 0 {
        !b
    } else {
        b | 0x8000_0000
    };
    (u64::from(!ord) << 32) | e as u64
}

/// The picks of one token from its candidates (`desc_key`s of its finite scores) into `out`:
/// the `min(top_k, len)` best in order, then `−1`. Shared with DSA_SELECT.
pub(crate) fn pick(cand: &mut [u64], top_k: usize, out: &mut [i32]) {
    let take = top_k.min(cand.len());
    if take > 0 && take < cand.len() {
        cand.select_nth_unstable(take - 1);
    }
    cand[..take].sort_unstable();
    for (slot, o) in out.iter_mut().enumerate() {
        *o = if slot < take {
            (cand[slot] & 0xffff_ffff) as i32
        } else {
            -1
        };
    }
}

/// The reference picks from every entry's `(score, index)`: a full sort with a float
/// comparator (scores are canonical: never NaN). Shared with DSA_SELECT.
pub(crate) fn reference_pick(mut sc: Vec<(f32, usize)>, out: &mut [i32]) {
    sc.sort_by(|a, b| {
        b.0.partial_cmp(&a.0)
            .expect("scores are never NaN")
            .then(a.1.cmp(&b.1))
    });
    for (slot, o) in out.iter_mut().enumerate() {
        *o = match sc.get(slot) {
            Some(&(v, e)) if v > f32::NEG_INFINITY => e as i32,
            _ => -1,
        };
    }
}

/// One thread's scoring state: the canonical scores of a token's keys, on blocks of keys
/// (`indexer_simd`) where the CPU allows, else with [`score`] — the same bits either way.
struct Scorer<'b> {
    lanes: usize,
    d: usize,
    heads: usize,
    /// Key rows converted from F16/BF16 (up to a pass's keys).
    kbuf: &'b mut [f32],
    /// The query rows of token `qtok`, back to back (SIMD only).
    qbuf: &'b mut [f32],
    qtok: Option<usize>,
    /// Up to `indexer_simd::BLOCKS` transposed key blocks and their scores (SIMD only).
    blk: &'b mut [f32],
    sc: &'b mut [f32],
}

impl<'b> Scorer<'b> {
    /// f32 scratch the scorer needs (with room to align the key block).
    fn need(cpu: quant::simd::CpuLevel, d: usize, heads: usize) -> usize {
        let nb = crate::indexer_simd::BLOCKS;
        match crate::indexer_simd::lanes(cpu) {
            None => d,
            Some(l) => nb * l * d + BLOCK_ALIGN + heads * d + nb * l * (d + 1),
        }
    }

    fn new(cpu: quant::simd::CpuLevel, d: usize, heads: usize, f32s: &'b mut [f32]) -> Self {
        let lanes = crate::indexer_simd::lanes(cpu).unwrap_or(0);
        let nb = crate::indexer_simd::BLOCKS;
        let (kbuf, rest) = f32s.split_at_mut(d * (nb * lanes).max(1));
        let (qbuf, rest) = rest.split_at_mut(if lanes > 0 { heads * d } else { 0 });
        // the block on a cache line: its rows are whole-register loads, and split loads
        // made one executor's scorer 30% slower than another's
        let pad = if lanes > 0 {
            rest.as_ptr().align_offset(4 * BLOCK_ALIGN).min(BLOCK_ALIGN)
        } else {
            0
        };
        let (blk, rest) = rest[pad..].split_at_mut(nb * lanes * d);
        Scorer {
            lanes,
            d,
            heads,
            kbuf,
            qbuf,
            qtok: None,
            blk,
            sc: &mut rest[..nb * lanes],
        }
    }

    /// `emit(e, score)` for every key `e` of `keys`, in order, for token `t` (canonical
    /// scores: NaN → `−∞`, `−0 → +0`).
    fn run(
        &mut self,
        cpu: quant::simd::CpuLevel,
        (q, k, w): (&TensorRef, &TensorRef, &TensorRef),
        t: usize,
        keys: std::ops::Range<usize>,
        mut emit: impl FnMut(usize, f32),
    ) {
        let (l, d, heads) = (self.lanes, self.d, self.heads);
        let wr = w.row_f32(t);
        if l == 0 {
            for e in keys {
                emit(e, score(q, t, heads, key_row(k, e, self.kbuf), wr));
            }
            return;
        }
        if self.qtok != Some(t) {
            for h in 0..heads {
                self.qbuf[h * d..h * d + d].copy_from_slice(&q.row_f32(h + heads * t)[..d]);
            }
            self.qtok = Some(t);
        }
        // up to BLOCKS blocks of l keys a pass, transposed element-major (row c holds
        // element c of every key of the pass) in register tiles; keys past the range are
        // not scored
        let span = l * crate::indexer_simd::BLOCKS;
        for b0 in keys.clone().step_by(span) {
            let nk = span.min(keys.end - b0);
            let mut rows: [&[f32]; MAX_SPAN] = [&[]; MAX_SPAN];
            let bufs = self.kbuf.chunks_exact_mut(d);
            for ((r, buf), e) in rows.iter_mut().zip(bufs).take(nk).zip(b0..) {
                *r = &key_row(k, e, buf)[..d];
            }
            crate::indexer_simd::transpose(cpu, &rows[..nk], d, self.blk);
            crate::indexer_simd::scores(
                cpu,
                (self.qbuf, wr),
                heads,
                d,
                (self.blk, nk.div_ceil(l)),
                self.sc,
            );
            for (j, &v) in self.sc[..nk].iter().enumerate() {
                emit(b0 + j, canonical(v));
            }
        }
    }
}

impl CpuKernel for DsaIndexer {
    fn reference(&self, _cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let (q, k, w, nv) = (&srcs[0], &srcs[1], &srcs[2], &srcs[3]);
        let s = dims(srcs);
        let mut kb = vec![0f32; k.desc.ne[0]];
        for t in 0..s.tokens {
            let vis = visible(nv, t, s.n_kv);
            let sc: Vec<(f32, usize)> = (0..s.n_kv)
                .map(|e| {
                    if e < vis {
                        k.row_to_f32(e, &mut kb);
                        (score(q, t, s.heads, &kb, w.row_f32(t)), e)
                    } else {
                        (f32::NEG_INFINITY, e)
                    }
                })
                .collect();
            reference_pick(sc, dst.row_i32_mut(t));
        }
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let (q, k, w, nv) = (&srcs[0], &srcs[1], &srcs[2], &srcs[3]);
        let s = dims(srcs);
        let d = k.desc.ne[0];
        let (mut f32s, mut bytes) = (
            std::mem::take(&mut cx.scratch.f32s),
            std::mem::take(&mut cx.scratch.bytes),
        );
        let fneed = Scorer::need(cx.cpu, d, s.heads);
        if f32s.len() < fneed {
            f32s.resize(fneed, 0.0);
        }
        let need = 8 * s.n_kv + 8;
        if bytes.len() < need {
            bytes.resize(need, 0);
        }
        let mut scorer = Scorer::new(cx.cpu, d, s.heads, &mut f32s[..fneed]);
        let (_, keys, _) = bytemuck::pod_align_to_mut::<u8, u64>(&mut bytes[..need]);
        // tokens claimed one at a time: with causal visibility a token's work grows with its
        // position, so a static split gave the last thread most of it (in a 512-token prompt
        // one of two threads waited ~48 ms per call)
        while let Some(ts) = cx.claim(s.tokens, 1) {
            let t = ts.start;
            let vis = visible(nv, t, s.n_kv);
            let mut m = 0;
            scorer.run(cx.cpu, (q, k, w), t, 0..vis, |e, v| {
                if v > f32::NEG_INFINITY {
                    keys[m] = desc_key(v, e);
                    m += 1;
                }
            });
            pick(&mut keys[..m], self.top_k, dst.row_i32_mut(t));
        }
        (cx.scratch.f32s, cx.scratch.bytes) = (f32s, bytes);
    }
    fn cases() -> Vec<Case> {
        ix_cases(true)
    }
}

impl CpuKernel for DsaScores {
    fn reference(&self, _cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let (q, k, w, nv) = (&srcs[0], &srcs[1], &srcs[2], &srcs[3]);
        let s = dims(srcs);
        let d = k.desc.ne[0];
        for t in 0..s.tokens {
            let vis = visible(nv, t, s.n_kv);
            let out = dst.row_f32_mut(t);
            for (e, o) in out.iter_mut().enumerate() {
                if e >= vis {
                    *o = f32::NEG_INFINITY;
                    continue;
                }
                let mut acc = 0f64;
                for h in 0..s.heads {
                    let qr = q.row_f32(h + s.heads * t);
                    let dp: f64 = (0..d)
                        .map(|c| qr[c] as f64 * k.get(c, e, 0, 0) as f64)
                        .sum();
                    acc += w.get(h, t, 0, 0) as f64 * dp.max(0.0);
                }
                *o = if acc.is_nan() {
                    f32::NEG_INFINITY
                } else {
                    acc as f32
                };
            }
        }
    }
    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let (q, k, w, nv) = (&srcs[0], &srcs[1], &srcs[2], &srcs[3]);
        let s = dims(srcs);
        let d = k.desc.ne[0];
        let mut f32s = std::mem::take(&mut cx.scratch.f32s);
        let fneed = Scorer::need(cx.cpu, d, s.heads);
        if f32s.len() < fneed {
            f32s.resize(fneed, 0.0);
        }
        let mut scorer = Scorer::new(cx.cpu, d, s.heads, &mut f32s[..fneed]);
        let nc = s.n_kv.div_ceil(ENTRY_CHUNK);
        while let Some(items) = cx.claim(nc * s.tokens, 1) {
            for item in items {
                let (t, c) = (item / nc, item % nc);
                let cols = c * ENTRY_CHUNK..((c + 1) * ENTRY_CHUNK).min(s.n_kv);
                let vis = visible(nv, t, s.n_kv).clamp(cols.start, cols.end);
                let out = dst.row_range_f32_mut(t, cols.clone());
                out[vis - cols.start..].fill(f32::NEG_INFINITY);
                scorer.run(cx.cpu, (q, k, w), t, cols.start..vis, |e, v| {
                    out[e - cols.start] = v;
                });
            }
        }
        cx.scratch.f32s = f32s;
    }
    fn cases() -> Vec<Case> {
        ix_cases(false)
    }
}

/// One indexer test shape.
struct IxCase {
    d: usize,
    heads: usize,
    n_kv: usize,
    top_k: usize,
    kt: DType,
    q_perm: bool,
    k_view: bool,
    nv: Vec<i32>,
    quick: bool,
}

/// Map I32 indices to f32 through a `{1, n_kv}` table holding `e` at row `e` (`−1` → NaN), so
/// the f32 test harness compares them exactly.
pub(crate) fn indices_as_f32(b: &mut CaseBuilder, idx: TensorId, n_kv: usize) -> TensorId {
    let vals: Vec<f32> = (0..n_kv).map(|e| e as f32).collect();
    let d = TensorDesc::f32(&[1, n_kv]).expect("case");
    let tab =
        b.g.weight(
            "index_table",
            d,
            WeightData::from_vec(bytemuck::cast_slice(&vals).to_vec()),
        )
        .expect("case");
    let n = b.g.desc(idx).nelements();
    let flat = b.g.reshape(idx, &[n]).expect("case");
    b.g.get_rows(tab, flat).expect("case")
}

fn ix_cases(select: bool) -> Vec<Case> {
    let c = |d, heads, n_kv, top_k, kt, q_perm, k_view, nv: &[i32], quick| IxCase {
        d,
        heads,
        n_kv,
        top_k,
        kt,
        q_perm,
        k_view,
        nv: nv.to_vec(),
        quick,
    };
    let all = [
        c(8, 3, 13, 5, DType::F32, false, false, &[0, 1, 7, 13], true),
        c(8, 3, 13, 16, DType::F16, true, false, &[13, 20, 5], true),
        c(32, 4, 40, 16, DType::BF16, false, true, &[40, 17], true),
        c(128, 8, 64, 32, DType::F16, true, true, &[64, 33, -2], true),
        c(
            128,
            64,
            1024,
            512,
            DType::F16,
            false,
            true,
            &[1024, 700, 300],
            false,
        ),
        c(128, 64, 1024, 512, DType::F32, true, false, &[1024], false),
    ];
    let mut v = Vec::new();
    for x in all {
        let t = x.nv.len();
        let mut b = CaseBuilder::new(51);
        let q = if x.q_perm {
            let q = b.input_f32("q", &[x.d, t, x.heads], 1.0).expect("case");
            b.g.permute(q, [0, 2, 1, 3]).expect("case")
        } else {
            b.input_f32("q", &[x.d, x.heads, t], 1.0).expect("case")
        };
        let k = if x.k_view {
            let cache = b.weight("k", x.kt, &[x.d, x.n_kv + 7], 1.0).expect("case");
            let cd = *b.g.desc(cache);
            b.g.view(cache, [x.d, x.n_kv, 1, 1], cd.nb, 0)
                .expect("case")
        } else {
            b.weight("k", x.kt, &[x.d, x.n_kv], 1.0).expect("case")
        };
        let ws = 1.0 / ((x.d * x.heads) as f32).sqrt();
        let w = b.input_f32("w", &[x.heads, t], ws).expect("case");
        let nv = b.input_i32("n_visible", &x.nv).expect("case");
        let layout = format!(
            "{}{}",
            if x.q_perm { " q permuted" } else { "" },
            if x.k_view { " k view" } else { "" }
        );
        let (name, out) = if select {
            let idx = b.g.dsa_indexer(q, k, w, nv, x.top_k).expect("case");
            let out = indices_as_f32(&mut b, idx, x.n_kv);
            let name = format!(
                "DSA_INDEXER dI={} HI={} n_kv={} k={} top_k={} n_visible={:?}{layout}",
                x.d, x.heads, x.n_kv, x.kt, x.top_k, x.nv
            );
            (name, out)
        } else {
            let out = b.g.dsa_scores(q, k, w, nv).expect("case");
            let name = format!(
                "DSA_SCORES dI={} HI={} n_kv={} k={} n_visible={:?}{layout}",
                x.d, x.heads, x.n_kv, x.kt, x.nv
            );
            (name, out)
        };
        let tol = if select { 0.0 } else { 1e-10 };
        v.push(b.finish(name, out, tol, x.quick).expect("case"));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsv4_testutil::{as_f32, as_i32, run, Src};
    use graph::OpDef;

    /// dI = 2, HI = 2, n_kv = 3: heads q0 = [1,0], q1 = [0,1]; keys [1,2], [−1,3], [2,−1];
    /// w = [0.5, 2] → S = [0.5·1 + 2·2, 0 + 2·3, 0.5·2 + 0] = [4.5, 6, 1].
    fn hand(nv: i32) -> [Src; 4] {
        [
            Src::f32(&[2, 2, 1], &[1.0, 0.0, 0.0, 1.0]),
            Src::f32(&[2, 3], &[1.0, 2.0, -1.0, 3.0, 2.0, -1.0]),
            Src::f32(&[2, 1], &[0.5, 2.0]),
            Src::i32(&[nv]),
        ]
    }

    fn picks(top_k: usize, s: &[Src], fwd: bool, nth: usize) -> Vec<i32> {
        let srcs: Vec<&Src> = s.iter().collect();
        as_i32(&run(&DsaIndexer { top_k }, &srcs, fwd, nth).1)
    }

    #[test]
    fn scores_match_hand_values() {
        for fwd in [false, true] {
            let s = hand(3);
            let got = as_f32(&run(&DsaScores, &s.iter().collect::<Vec<_>>(), fwd, 1).1);
            assert_eq!(got, vec![4.5, 6.0, 1.0]);
            let s = hand(2);
            let got = as_f32(&run(&DsaScores, &s.iter().collect::<Vec<_>>(), fwd, 1).1);
            assert_eq!(got, vec![4.5, 6.0, f32::NEG_INFINITY]);
        }
    }

    #[test]
    fn top_k_orders_by_score_and_pads_with_minus_one() {
        for fwd in [false, true] {
            assert_eq!(picks(2, &hand(3), fwd, 1), vec![1, 0]);
            assert_eq!(picks(5, &hand(3), fwd, 1), vec![1, 0, 2, -1, -1]);
            assert_eq!(picks(5, &hand(2), fwd, 1), vec![1, 0, -1, -1, -1]);
            assert_eq!(picks(3, &hand(9), fwd, 1), vec![1, 0, 2]);
            assert_eq!(picks(2, &hand(0), fwd, 1), vec![-1, -1]);
            assert_eq!(picks(2, &hand(-4), fwd, 1), vec![-1, -1]);
        }
    }

    #[test]
    fn ties_go_to_the_lower_index() {
        // scores [2, 2, 4, 2, 0]
        let s = [
            Src::f32(&[2, 2, 1], &[1.0, 0.0, 0.0, 1.0]),
            Src::f32(
                &[2, 5],
                &[1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 1.0, 1.0, -1.0, -1.0],
            ),
            Src::f32(&[2, 1], &[1.0, 1.0]),
            Src::i32(&[5]),
        ];
        for fwd in [false, true] {
            assert_eq!(picks(3, &s, fwd, 1), vec![2, 0, 1]);
            assert_eq!(picks(5, &s, fwd, 1), vec![2, 0, 1, 3, 4]);
        }
    }

    #[test]
    fn selection_agrees_with_f64_scores() {
        let (d, heads, n_kv, t) = (16usize, 4usize, 200usize, 3usize);
        let mut rng = crate::case::CaseRng::new(7);
        let s = [
            Src::f32(&[d, heads, t], &rng.f32s(d * heads * t, 1.0)),
            Src::f32(&[d, n_kv], &rng.f32s(d * n_kv, 1.0)),
            Src::f32(&[heads, t], &rng.f32s(heads * t, 1.0)),
            Src::i32(&[200, 150, 40]),
        ];
        let srcs: Vec<&Src> = s.iter().collect();
        let sc = as_f32(&run(&DsaScores, &srcs, false, 1).1); // f64 oracle
        let top_k = 64;
        for (fwd, nth) in [(false, 1), (true, 1), (true, 3)] {
            let p = as_i32(&run(&DsaIndexer { top_k }, &srcs, fwd, nth).1);
            for tok in 0..t {
                let row = &sc[tok * n_kv..(tok + 1) * n_kv];
                let pr = &p[tok * top_k..(tok + 1) * top_k];
                let nvis = [200, 150, 40][tok].min(n_kv);
                let n_pick = top_k.min(nvis);
                assert!(pr[..n_pick].iter().all(|&e| e >= 0 && (e as usize) < nvis));
                assert!(pr[n_pick..].iter().all(|&e| e == -1));
                for w in pr[..n_pick].windows(2) {
                    assert!(row[w[0] as usize] >= row[w[1] as usize] - 1e-5);
                }
                let min_pick = pr[..n_pick]
                    .iter()
                    .map(|&e| row[e as usize])
                    .fold(f32::INFINITY, f32::min);
                for (e, &v) in row.iter().enumerate().take(nvis) {
                    if !pr.contains(&(e as i32)) {
                        assert!(v <= min_pick + 1e-5, "entry {e} should be picked");
                    }
                }
            }
        }
    }

    #[test]
    fn infer_rejects_bad_sources() {
        let s = hand(3);
        let d: Vec<&TensorDesc> = s.iter().map(|s| &s.desc).collect();
        assert!(DsaIndexer { top_k: 4 }.infer(&d).is_ok());
        assert!(DsaIndexer { top_k: 0 }.infer(&d).is_err());
        let nv2 = TensorDesc::new(DType::I32, &[2]).unwrap();
        let mut bad = d.clone();
        bad[3] = &nv2;
        assert!(DsaScores.infer(&bad).is_err());
        let kq = TensorDesc::new(DType::Q8_0, &[32, 3]).unwrap();
        bad = d.clone();
        bad[1] = &kq;
        assert!(DsaScores.infer(&bad).is_err());
        let wf = TensorDesc::f32(&[3, 1]).unwrap();
        bad = d.clone();
        bad[2] = &wf;
        assert!(DsaScores.infer(&bad).is_err());
    }
}
