//! FLASH_ATTN_EXT kernels (formula in `graph::op::flash_attn`; K = V, one shared head).
//!
//! Reference: plain two-pass softmax in f64 — all logits of a row, max (sink included), sum of
//! exps, then `Σ P·kv` — reading every element with `get` (any strides).
//!
//! Forward: online (streaming) softmax in f32 over blocks of up to [`BLK`] *visible* keys.
//! Work items are `(token, head chunk)` pairs claimed from the node's counter; the chunk size
//! is chosen so that there are at least `nth` items where `T·H` allows (all heads of a token
//! form one item when `T ≥ nth`; decode with H = 64 on 16 threads gives chunks of 4 heads).
//! KV is not split across threads (no split-K), so decode parallelism is bounded by `T·H`.
//! Each item first lists its token's visible keys (mask ≠ −∞, the mask row read in place
//! where it is contiguous f32) and walks that list BLK at a time: a V4 CSA layer's mask shows
//! each token its window and the indexer's 512 picks among thousands of compressed entries,
//! so blocks of key *positions* held about 7 visible keys of 32 and their tiles ran mostly
//! empty. An f16 block is converted to f32 **once** and then used for every head of the chunk
//! (f32 rows are used in place). Per head it keeps a running max `m`, a running sum `l` and
//! an f32 accumulator, rescaled by `exp(m_old − m_new)` when a block raises the max
//! (`softmax_update`); the sink joins at the end (`M = max(m, sink)`). Dots use 8 f32
//! lanes. Unlike ggml (which rounds q to f16 for an f16 K and accumulates V in f16),
//! everything after the K/V load is f32. Blocks depend only on the token's visible keys, not
//! on the thread count, so results are identical at any `nth`.
//!
//! With AVX2+FMA or AVX-512F and a head size that is a multiple of 16 (V4: 512), each block is two
//! register-tiled products instead of per-(head, key) loops: `S = Q·Kᵀ` over the block's
//! visible keys for the whole head chunk, the softmax update per head, then `acc += P·V`
//! (`flash_attn_simd`); FMA accumulation, so not the scalar path's bits, but the same per-head
//! results at any thread count (a tile's heads are independent); the softmax step is
//! vectorized too (`flash_attn_softmax`: a vector `exp` with libm's bits but for about one in
//! a thousand, the sum in key order, so the scalar step's results). Measured on the iq2 synth
//! file's 512-token prefill: 5.1 → 1.6 ms per token; `cargo bench -p fathom-benches --bench
//! attention` times one CSA layer at depth (docs/kernels.md, "Flash attention at depth").

use crate::{Case, CpuKernel, KernelCx, TensorMut, TensorRef};
use graph::op::flash_attn::FlashAttnExt;
use quant::DType;

/// Keys per streamed block.
pub const BLK: usize = 32;

struct Dims {
    d: usize,
    h: usize,
    t: usize,
    n_kv: usize,
}

fn dims(op: &FlashAttnExt, srcs: &[TensorRef]) -> Dims {
    let (q, kv) = (&srcs[0].desc, &srcs[1].desc);
    Dims {
        d: q.ne[0],
        h: q.ne[1],
        t: q.ne[2],
        n_kv: kv.ne[1] + op.kv2_src().map_or(0, |i| srcs[i].desc.ne[1]),
    }
}

/// The key/value rows: `kv`'s, then `kv2`'s if the op has a second part (read in place).
struct KvRows<'s, 'a> {
    kv: &'s TensorRef<'a>,
    kv2: Option<&'s TensorRef<'a>>,
    n1: usize,
}

impl<'s, 'a> KvRows<'s, 'a> {
    fn new(op: &FlashAttnExt, srcs: &'s [TensorRef<'a>]) -> Self {
        let kv = &srcs[1];
        KvRows {
            kv,
            kv2: op.kv2_src().map(|i| &srcs[i]),
            n1: kv.desc.ne[1],
        }
    }
    /// The part holding key `j`, and `j`'s row in it.
    #[inline]
    fn part(&self, j: usize) -> (&'s TensorRef<'a>, usize) {
        match self.kv2 {
            Some(kv2) if j >= self.n1 => (kv2, j - self.n1),
            _ => (self.kv, j),
        }
    }
    /// Key `j`'s row, in place (f32 parts only).
    #[inline]
    fn row_f32(&self, j: usize) -> &'a [f32] {
        let (p, r) = self.part(j);
        p.row_f32(r)
    }
    /// Key `j`'s row converted to f32 into `out`.
    fn row_to_f32(&self, j: usize, out: &mut [f32]) {
        let (p, r) = self.part(j);
        p.row_to_f32(r, out);
    }
    /// Element `i` of key `j`.
    fn get(&self, i: usize, j: usize) -> f32 {
        let (p, r) = self.part(j);
        p.get(i, r, 0, 0)
    }
}

/// Mask value of key `k` for token `t` (0 without a mask).
fn mask_at(op: &FlashAttnExt, srcs: &[TensorRef], k: usize, t: usize) -> f32 {
    op.mask_src().map_or(0.0, |i| srcs[i].get(k, t, 0, 0))
}

/// Sink logit of head `h`, if the op has sinks.
fn sink_of(op: &FlashAttnExt, srcs: &[TensorRef], h: usize) -> Option<f32> {
    op.sinks_src().map(|i| srcs[i].get(h, 0, 0, 0))
}

/// `Σ a_i·b_i` in 8 f32 lanes.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    let mut acc = [0f32; 8];
    for (x, y) in ca.zip(cb) {
        for ((s, x), y) in acc.iter_mut().zip(x).zip(y) {
            *s += x * y;
        }
    }
    acc.iter().sum::<f32>() + tail
}

/// `acc += p·v`.
fn axpy(acc: &mut [f32], p: f32, v: &[f32]) {
    for (a, &x) in acc.iter_mut().zip(v) {
        *a += p * x;
    }
}

/// Heads per work item for `nth` threads.
fn head_chunk(h: usize, t: usize, nth: usize) -> usize {
    let splits = nth.div_ceil(t.max(1)).clamp(1, h.max(1));
    h.div_ceil(splits).max(1)
}

/// The larger of a running maximum and a score, NaN once either is NaN (`f32::max` would
/// drop a NaN score, and a row of NaN scores would come out as zeros).
#[inline]
fn nan_max(m: f32, s: f32) -> f32 {
    if s > m || s.is_nan() {
        s
    } else {
        m
    }
}

/// One head's step of the online softmax over a block of scores `s` (the raw dots `q·k`):
/// `s ← scale·s + mask`; the running max `mx` rises to the block's maximum (NaN once any score
/// is NaN); `s ← exp(s − mx)` (0 where the score is −∞) and their sum is added to `l`. Returns
/// the factor the head's accumulator (and `l`, done here) takes when the max rose. A block
/// whose scores are all −∞ is zeroed and changes nothing.
pub(crate) fn softmax_update(
    s: &mut [f32],
    mask: &[f32],
    scale: f32,
    mx: &mut f32,
    l: &mut f32,
) -> Option<f32> {
    let mut bm = f32::NEG_INFINITY;
    for (sv, &m) in s.iter_mut().zip(mask) {
        *sv = scale * *sv + m;
        bm = nan_max(bm, *sv);
    }
    if bm == f32::NEG_INFINITY {
        s.fill(0.0);
        return None;
    }
    let up = raise_max(bm, mx, l);
    for sv in s.iter_mut() {
        let p = if *sv == f32::NEG_INFINITY {
            0.0
        } else {
            (*sv - *mx).exp()
        };
        *l += p;
        *sv = p;
    }
    up
}

/// The running max `mx` raised to a block's max `bm` (NaN wins): `l` rescaled, and the factor
/// the accumulator takes returned; `None` when the max stays.
pub(crate) fn raise_max(bm: f32, mx: &mut f32, l: &mut f32) -> Option<f32> {
    if bm > *mx || bm.is_nan() {
        let f = (*mx - bm).exp();
        *l *= f;
        *mx = bm;
        Some(f)
    } else {
        None
    }
}

impl CpuKernel for FlashAttnExt {
    fn reference(&self, _cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let Dims { d, h, t, n_kv } = dims(self, srcs);
        let (q, kv) = (&srcs[0], KvRows::new(self, srcs));
        let kvf: Vec<f64> = (0..n_kv * d).map(|i| kv.get(i % d, i / d) as f64).collect();
        let mut z = vec![0f64; n_kv];
        let mut o = vec![0f64; d];
        for tt in 0..t {
            for hh in 0..h {
                let qv: Vec<f64> = (0..d).map(|i| q.get(i, hh, tt, 0) as f64).collect();
                for (k, zk) in z.iter_mut().enumerate() {
                    let m = mask_at(self, srcs, k, tt) as f64;
                    let s: f64 = qv.iter().zip(&kvf[k * d..]).map(|(a, b)| a * b).sum();
                    *zk = if m == f64::NEG_INFINITY {
                        m
                    } else {
                        self.scale as f64 * s + m
                    };
                }
                let sink = sink_of(self, srcs, hh).map(f64::from);
                // NaN-propagating: a NaN score makes the row NaN (f64::max would drop it and
                // an all-NaN row would come out as zeros)
                let max = z
                    .iter()
                    .copied()
                    .chain(sink)
                    .fold(f64::NEG_INFINITY, |a, b| {
                        if a.is_nan() || b.is_nan() {
                            f64::NAN
                        } else {
                            a.max(b)
                        }
                    });
                let out = dst.row_f32_mut(hh + h * tt);
                if max == f64::NEG_INFINITY {
                    out.fill(0.0);
                    continue;
                }
                let mut den = sink.map_or(0.0, |s| (s - max).exp());
                o.fill(0.0);
                for (k, &zk) in z.iter().enumerate() {
                    if zk == f64::NEG_INFINITY {
                        continue; // masked: its value is never read
                    }
                    let p = (zk - max).exp();
                    den += p;
                    for (oi, &v) in o.iter_mut().zip(&kvf[k * d..(k + 1) * d]) {
                        *oi += p * v;
                    }
                }
                for (y, &oi) in out.iter_mut().zip(&o) {
                    *y = (oi / den) as f32;
                }
            }
        }
    }

    fn forward(&self, cx: &mut KernelCx, dst: &TensorMut, srcs: &[TensorRef]) {
        let Dims { d, h, t, n_kv } = dims(self, srcs);
        let (q, kv) = (&srcs[0], KvRows::new(self, srcs));
        let direct = kv.kv.desc.dtype == DType::F32;
        let hc = head_chunk(h, t, cx.nth);
        let nsplit = h.div_ceil(hc);
        let kvlen = if direct { 0 } else { BLK * d };
        let simd = crate::flash_attn_simd::available(cx.cpu) && d.is_multiple_of(16);
        let slen = if simd { hc * BLK } else { 0 };
        let need = kvlen + hc * d + 2 * hc + n_kv + BLK + slen;
        let mut scratch = std::mem::take(&mut cx.scratch.f32s);
        if scratch.len() < need {
            scratch.resize(need, 0.0);
        }
        let mut bytes = std::mem::take(&mut cx.scratch.bytes);
        let bneed = 4 * n_kv + 4;
        if bytes.len() < bneed {
            bytes.resize(bneed, 0);
        }
        let (_, vis, _) = bytemuck::pod_align_to_mut::<u8, u32>(&mut bytes[..bneed]);
        let buf = &mut scratch[..need];
        let (kvbuf, rest) = buf.split_at_mut(kvlen);
        let (acc, rest) = rest.split_at_mut(hc * d);
        let (mx, rest) = rest.split_at_mut(hc);
        let (l, rest) = rest.split_at_mut(hc);
        let (mvis, rest) = rest.split_at_mut(n_kv);
        let (s, sblk) = rest.split_at_mut(BLK);
        // the mask's rows in place where they are contiguous f32
        let mask_rows = self
            .mask_src()
            .map(|i| &srcs[i])
            .filter(|m| n_kv > 0 && m.desc.dtype == DType::F32 && m.desc.rows_contiguous());
        let mut qrows: Vec<&[f32]> = Vec::with_capacity(hc);
        while let Some(items) = cx.claim(t * nsplit, 1) {
            for item in items {
                let (tt, c) = (item / nsplit, item % nsplit);
                let heads = c * hc..((c + 1) * hc).min(h);
                acc.fill(0.0);
                mx.fill(f32::NEG_INFINITY);
                l.fill(0.0);
                if simd {
                    // the item's query rows, for every block's QK tiles
                    qrows.clear();
                    qrows.extend(heads.clone().map(|head| q.row_f32(head + h * tt)));
                }
                // the token's visible keys (mask ≠ −∞) in key order, with their mask values;
                // blocks are runs of BLK *visible* keys, so a sparse mask (the indexer's
                // top-k among thousands of compressed entries) gives full tiles
                let mut nvis = 0;
                let mut see = |j: usize, m: f32| {
                    if m != f32::NEG_INFINITY {
                        vis[nvis] = j as u32;
                        mvis[nvis] = m;
                        nvis += 1;
                    }
                };
                match mask_rows {
                    Some(mr) => {
                        for (j, &m) in mr.row_f32(tt)[..n_kv].iter().enumerate() {
                            see(j, m);
                        }
                    }
                    None => (0..n_kv).for_each(|j| see(j, mask_at(self, srcs, j, tt))),
                }
                for g0 in (0..nvis).step_by(BLK) {
                    let nb = BLK.min(nvis - g0);
                    let (keys, mk) = (&vis[g0..g0 + nb], &mvis[g0..g0 + nb]);
                    if !direct {
                        for (&j, out) in keys.iter().zip(kvbuf.chunks_exact_mut(d)) {
                            kv.row_to_f32(j as usize, out);
                        }
                    }
                    let kvbuf = &*kvbuf;
                    let row = |i: usize| -> &[f32] {
                        if direct {
                            kv.row_f32(keys[i] as usize)
                        } else {
                            &kvbuf[i * d..(i + 1) * d]
                        }
                    };
                    if simd {
                        // tiled: S = Q·Kᵀ over the block, softmax update per head,
                        // acc += P·V (see `flash_attn_simd`)
                        let krows: [&[f32]; BLK] = std::array::from_fn(|i| row(i.min(nb - 1)));
                        crate::flash_attn_simd::qk(cx.cpu, &qrows, &krows[..nb], d, sblk, BLK);
                        for hi in 0..heads.len() {
                            let srow = &mut sblk[hi * BLK..hi * BLK + nb];
                            let (m, sum) = (&mut mx[hi], &mut l[hi]);
                            let up = crate::flash_attn_softmax::softmax_update(
                                cx.cpu, srow, mk, self.scale, m, sum,
                            );
                            if let Some(f) = up {
                                acc[hi * d..(hi + 1) * d].iter_mut().for_each(|x| *x *= f);
                            }
                        }
                        crate::flash_attn_simd::pv(
                            cx.cpu,
                            sblk,
                            BLK,
                            &krows[..nb],
                            acc,
                            d,
                            heads.len(),
                        );
                        continue;
                    }
                    for (hi, head) in heads.clone().enumerate() {
                        let qr = q.row_f32(head + h * tt);
                        for (i, sj) in s[..nb].iter_mut().enumerate() {
                            *sj = dot(qr, row(i));
                        }
                        let a = &mut acc[hi * d..(hi + 1) * d];
                        let up =
                            softmax_update(&mut s[..nb], mk, self.scale, &mut mx[hi], &mut l[hi]);
                        if let Some(f) = up {
                            a.iter_mut().for_each(|x| *x *= f);
                        }
                        for (i, &p) in s[..nb].iter().enumerate() {
                            if p != 0.0 {
                                axpy(a, p, row(i));
                            }
                        }
                    }
                }
                for (hi, head) in heads.enumerate() {
                    let out = dst.row_f32_mut(head + h * tt);
                    let (mut m, mut sum) = (mx[hi], l[hi]);
                    let a = &mut acc[hi * d..(hi + 1) * d];
                    if let Some(sk) = sink_of(self, srcs, head) {
                        let big = m.max(sk);
                        if big != f32::NEG_INFINITY && m != f32::NEG_INFINITY {
                            let f = (m - big).exp();
                            a.iter_mut().for_each(|x| *x *= f);
                            sum = sum * f + (sk - big).exp();
                            m = big;
                        }
                    }
                    if m == f32::NEG_INFINITY {
                        out.fill(0.0);
                        continue;
                    }
                    let inv = 1.0 / sum;
                    for (y, &x) in out.iter_mut().zip(a.iter()) {
                        *y = x * inv;
                    }
                }
            }
        }
        (cx.scratch.f32s, cx.scratch.bytes) = (scratch, bytes);
    }

    fn cases() -> Vec<Case> {
        crate::flash_attn_cases::cases()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::CaseRng;
    use graph::{OpDef, TensorDesc};

    fn run(op: &FlashAttnExt, srcs: &[(TensorDesc, Vec<u8>)], fwd: bool) -> Vec<f32> {
        let descs: Vec<&TensorDesc> = srcs.iter().map(|(d, _)| d).collect();
        let od = op.infer(&descs).unwrap();
        let mut ob = vec![0u8; od.nbytes()];
        let dst = TensorMut::new(od, &mut ob);
        let refs: Vec<TensorRef> = srcs.iter().map(|(d, b)| TensorRef::new(*d, b)).collect();
        crate::dsv4_testutil::run_one(op, &dst, &refs, fwd);
        bytemuck::cast_slice(&ob).to_vec()
    }

    fn f32s(ne: &[usize], v: &[f32]) -> (TensorDesc, Vec<u8>) {
        (
            TensorDesc::f32(ne).unwrap(),
            bytemuck::cast_slice(v).to_vec(),
        )
    }

    fn f16s(ne: &[usize], v: &[f32]) -> (TensorDesc, Vec<u8>) {
        let b = v
            .iter()
            .flat_map(|&x| quant::scalar::f32_to_f16(x).to_le_bytes())
            .collect();
        (TensorDesc::new(DType::F16, ne).unwrap(), b)
    }

    #[test]
    fn equals_explicit_softmax_times_v() {
        // D = 40, H = 3, T = 2, n_kv = 70 (> 2 blocks), f16 kv, causal-ish mask, sinks
        let (d, h, t, n) = (40usize, 3usize, 2usize, 70usize);
        let mut rng = CaseRng::new(9);
        let q = rng.f32s(d * h * t, 2.0);
        // values exactly representable in f16 so the explicit sum below sees the same kv
        let kv: Vec<f32> = rng
            .f32s(d * n, 1.0)
            .iter()
            .map(|&x| quant::scalar::f16_to_f32(quant::scalar::f32_to_f16(x)))
            .collect();
        let inf = f32::NEG_INFINITY;
        let mask: Vec<f32> = (0..n * t)
            .map(|i| {
                if (i % n) > 40 + 20 * (i / n) {
                    inf
                } else {
                    0.0
                }
            })
            .collect();
        let sinks = [0.5f32, -1.0, 3.0];
        let scale = 0.3f32;
        let op = FlashAttnExt {
            scale,
            has_mask: true,
            has_sinks: true,
            has_kv2: false,
        };
        let srcs = [
            f32s(&[d, h, t], &q),
            f16s(&[d, n], &kv),
            f16s(&[n, t], &mask),
            f32s(&[h], &sinks),
        ];
        // explicit: P = exp(z) / (Σ exp(z) + exp(sink)), o = P·V, no max subtraction
        let mut want = vec![0f64; d * h * t];
        for tt in 0..t {
            for hh in 0..h {
                let qr = &q[(tt * h + hh) * d..][..d];
                let p: Vec<f64> = (0..n)
                    .map(|k| {
                        let s: f64 = (0..d).map(|i| qr[i] as f64 * kv[k * d + i] as f64).sum();
                        (scale as f64 * s + mask[tt * n + k] as f64).exp()
                    })
                    .collect();
                let den: f64 = p.iter().sum::<f64>() + (sinks[hh] as f64).exp();
                for i in 0..d {
                    let o: f64 = (0..n).map(|k| p[k] * kv[k * d + i] as f64).sum();
                    want[(tt * h + hh) * d + i] = o / den;
                }
            }
        }
        for fwd in [false, true] {
            let got = run(&op, &srcs, fwd);
            for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                assert!((g as f64 - w).abs() < 1e-5, "fwd={fwd} {i}: {g} vs {w}");
            }
        }
        // without the sink the weights of each row sum to one: attention over a constant
        // value row returns that constant
        let ones = vec![0.25f32; d * n];
        let op = FlashAttnExt {
            has_sinks: false,
            ..op
        };
        let srcs = [srcs[0].clone(), f32s(&[d, n], &ones), srcs[2].clone()];
        for fwd in [false, true] {
            let got = run(&op, &srcs, fwd);
            assert!(got.iter().all(|&g| (g - 0.25).abs() < 1e-6), "fwd={fwd}");
        }
    }

    #[test]
    fn empty_and_fully_masked_rows_are_zero() {
        let inf = f32::NEG_INFINITY;
        let op = FlashAttnExt {
            scale: 1.0,
            has_mask: true,
            has_sinks: true,
            has_kv2: false,
        };
        // n_kv = 0
        let srcs = [
            f32s(&[8, 2, 1], &[1.0; 16]),
            f32s(&[8, 0], &[]),
            f32s(&[0, 1], &[]),
            f32s(&[2], &[0.0, 1.0]),
        ];
        for fwd in [false, true] {
            assert!(run(&op, &srcs, fwd).iter().all(|&x| x == 0.0));
        }
        // every key masked for token 0, visible for token 1
        let srcs = [
            f32s(&[8, 2, 2], &[1.0; 32]),
            f32s(&[8, 3], &[2.0; 24]),
            f32s(&[3, 2], &[inf, inf, inf, 0.0, 0.0, inf]),
            f32s(&[2], &[0.0, 1.0]),
        ];
        for fwd in [false, true] {
            let y = run(&op, &srcs, fwd);
            assert!(y[..16].iter().all(|&x| x == 0.0));
            // token 1, head 0: two equal logits 16, sink 0 → 2·e^16/(2e^16 + 1) · 2
            let e = 16f64.exp();
            let want = 2.0 * 2.0 * e / (2.0 * e + 1.0);
            assert!((y[16] as f64 - want).abs() < 1e-6);
        }
    }

    #[test]
    fn two_parts_give_the_bits_of_one() {
        // a sparse mask over 70 keys split after 23 (blocks of visible keys straddle the
        // parts); the same keys as one tensor must give the same bits on both paths
        let (d, h, t, n, n1) = (64, 3, 2, 70, 23);
        let mut rng = CaseRng::new(7);
        let q = rng.f32s(d * h * t, 2.0);
        let kv = rng.f32s(d * n, 1.0);
        let mask: Vec<f32> = rng
            .f32s(n * t, 1.0)
            .iter()
            .map(|&x| if x > 0.2 { f32::NEG_INFINITY } else { 0.0 })
            .collect();
        let sinks = rng.f32s(h, 1.0);
        let one = FlashAttnExt {
            scale: 0.125,
            has_mask: true,
            has_sinks: true,
            has_kv2: false,
        };
        let two = FlashAttnExt {
            has_kv2: true,
            ..one.clone()
        };
        for half in [false, true] {
            let rows = |a: usize, b: usize| {
                if half {
                    f16s(&[d, b - a], &kv[a * d..b * d])
                } else {
                    f32s(&[d, b - a], &kv[a * d..b * d])
                }
            };
            let common = [f32s(&[d, h, t], &q), rows(0, n)];
            let tail = [f32s(&[n, t], &mask), f32s(&[h], &sinks)];
            let whole: Vec<_> = common.iter().chain(&tail).cloned().collect();
            let parts = [
                common[0].clone(),
                rows(0, n1),
                tail[0].clone(),
                tail[1].clone(),
                rows(n1, n),
            ];
            for fwd in [false, true] {
                let (a, b) = (run(&one, &whole, fwd), run(&two, &parts, fwd));
                assert!(a.iter().any(|&x| x != 0.0));
                let same = a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same, "half={half} fwd={fwd}");
            }
        }
        // a second part must match the first's type and row size, and the mask both parts
        let descs = |p: &[(TensorDesc, Vec<u8>)]| p.iter().map(|(d, _)| *d).collect::<Vec<_>>();
        let mut bad = vec![f32s(&[d, h, t], &q), f32s(&[d, n1], &kv[..n1 * d])];
        bad.extend([f32s(&[n, t], &mask), f32s(&[h], &sinks)]);
        bad.push(f16s(&[d, n - n1], &kv[n1 * d..]));
        assert!(two.infer(&descs(&bad).iter().collect::<Vec<_>>()).is_err());
        bad[4] = f32s(&[d, n - n1 - 1], &kv[n1 * d..(n - 1) * d]);
        let e = two.infer(&descs(&bad).iter().collect::<Vec<_>>());
        assert!(e.unwrap_err().to_string().contains("mask"));
    }

    #[test]
    fn head_chunks_cover_all_heads() {
        for (h, t, nth) in [(64, 1, 16), (3, 5, 3), (1, 1, 1), (64, 100, 2), (4, 1, 3)] {
            let hc = head_chunk(h, t, nth);
            assert!(hc >= 1 && hc <= h);
            assert!(h.div_ceil(hc) * hc >= h);
        }
        assert_eq!(head_chunk(64, 1, 16), 4);
        assert_eq!(head_chunk(64, 16, 16), 64);
        assert_eq!(head_chunk(3, 1, 3), 1);
    }
}
