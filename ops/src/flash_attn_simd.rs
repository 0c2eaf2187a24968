//! Register tiles for FLASH_ATTN_EXT's two products per KV block (used by `flash_attn.rs`
//! when the CPU has AVX2+FMA or AVX-512F and the head size is a multiple of 16):
//!
//! - [`qk`]: `S[h][j] = q_h · k_j` for a chunk of heads against the block's visible keys,
//!   4 heads × 4 keys per tile: each 16-float step of the head dimension loads four q and four
//!   k vectors and issues 16 FMAs into 16 accumulators (one per pair), which are reduced at the
//!   end by a transposing tree (`lane_sums4`). The plain per-pair loop loads two vectors per
//!   FMA and is bound by the load ports. The tiles use no closures: a closure does not inherit
//!   `#[target_feature]`, and the lane sums written as `map` closures were out-of-line calls
//!   passing each register through memory (more time than the tile's FMAs).
//! - [`pv`]: `acc[h] += Σ_j P[h][j]·v_j`, 4 heads × 64 floats of the head dimension per tile:
//!   the accumulators stay in registers over the block's keys, each key's four v vectors are
//!   loaded once for the four heads, the probabilities are broadcast; column slices outer,
//!   heads inner, so a slice of the block's v rows stays in L1 for every head.
//!
//! The softmax step between them is `flash_attn_softmax`'s.
//!
//! Both accumulate in f32 with FMA; the sums are the same as the scalar path's up to
//! rounding (tested against the f64 reference by test-ops). With AVX2 only (sixteen 256-bit
//! registers) the tiles are 4 heads × 2 keys for QK and 4 heads × 16 floats for PV
//! (`avx2`); without either the caller keeps its scalar loops. Decode at depth on an AVX2
//! host: the CSA layers' top-k keys made attention 10.1 ms of a token at 4096 cached tokens
//! (iq2 synth file) in the scalar loops.

/// Heads and keys per QK tile, heads per PV tile.
const TILE: usize = 4;
/// Floats of the head dimension per PV tile (four 16-float registers).
const PV_WIDTH: usize = 64;

/// True when the kernels of this file can run at CPU level `cpu` (AVX2 and FMA, or
/// AVX-512F; never above the level this CPU has).
pub(crate) fn available(cpu: quant::simd::CpuLevel) -> bool {
    cfg!(target_arch = "x86_64")
        && cpu.min(quant::simd::CpuLevel::detect()) >= quant::simd::CpuLevel::Avx2
}

/// Whether the AVX-512 tiles (rather than the AVX2 ones) run at `cpu`.
fn wide(cpu: quant::simd::CpuLevel) -> bool {
    cpu.min(quant::simd::CpuLevel::detect()) >= quant::simd::CpuLevel::Avx512
}

/// `s[h·lds + j] = q[h] · k[j]` for every `h < q.len()`, `j < k.len()`. Every row has length
/// `d`, a multiple of 16; `k.len() ≤ lds`. Only called when [`available`].
pub(crate) fn qk(
    cpu: quant::simd::CpuLevel,
    q: &[&[f32]],
    k: &[&[f32]],
    d: usize,
    s: &mut [f32],
    lds: usize,
) {
    assert!(d.is_multiple_of(16) && k.len() <= lds && s.len() >= q.len() * lds);
    assert!(q.iter().chain(k).all(|r| r.len() >= d));
    #[cfg(target_arch = "x86_64")]
    if available(cpu) && !wide(cpu) {
        // SAFETY: AVX2 and FMA were detected; every row has ≥ d floats (asserted).
        qk_tiles(q, k, s, lds, |qc, kc| unsafe { avx2::qk_tile(qc, kc, d) });
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if wide(cpu) {
        // SAFETY: AVX-512F was detected; every row has ≥ d floats (asserted).
        qk_tiles(q, k, s, lds, |qc, kc| unsafe { qk_tile(qc, kc, d) });
        return;
    }
    unreachable!("flash_attn_simd::qk called without AVX2 or AVX-512F");
}

/// `S = Q·Kᵀ` tile by tile: `tile` gives an `H` heads × `K` keys tile (up to `H` q rows and
/// `K` k rows), whose valid part is copied into `s` (stride `lds`).
fn qk_tiles<const H: usize, const K: usize>(
    q: &[&[f32]],
    k: &[&[f32]],
    s: &mut [f32],
    lds: usize,
    tile: impl Fn(&[&[f32]], &[&[f32]]) -> [[f32; K]; H],
) {
    for (h0, qc) in q.chunks(H).enumerate() {
        for (j0, kc) in k.chunks(K).enumerate() {
            let t = tile(qc, kc);
            for (hi, row) in t.iter().enumerate().take(qc.len()) {
                let base = (H * h0 + hi) * lds + K * j0;
                s[base..base + kc.len()].copy_from_slice(&row[..kc.len()]);
            }
        }
    }
}

/// One QK tile: up to four q rows against up to four k rows (missing ones read as the first
/// row and are discarded by the caller).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn qk_tile(q: &[&[f32]], k: &[&[f32]], d: usize) -> [[f32; TILE]; TILE] {
    use std::arch::x86_64::*;
    // No closures below: a closure does not inherit `target_feature`, so an intrinsic inside
    // one is a call that passes registers through memory (the lane sums as closures took
    // more time than the tile's FMAs).
    let mut qp = [q[0].as_ptr(); TILE];
    let mut kp = [k[0].as_ptr(); TILE];
    for i in 0..TILE {
        qp[i] = q[i.min(q.len() - 1)].as_ptr();
        kp[i] = k[i.min(k.len() - 1)].as_ptr();
    }
    let mut acc = [[_mm512_setzero_ps(); TILE]; TILE];
    for e in (0..d).step_by(16) {
        let mut qv = [_mm512_setzero_ps(); TILE];
        let mut kv = [_mm512_setzero_ps(); TILE];
        for i in 0..TILE {
            // SAFETY: e + 16 ≤ d and every row has ≥ d floats (the caller's assert).
            unsafe {
                qv[i] = _mm512_loadu_ps(qp[i].add(e));
                kv[i] = _mm512_loadu_ps(kp[i].add(e));
            }
        }
        for h in 0..TILE {
            for j in 0..TILE {
                acc[h][j] = _mm512_fmadd_ps(qv[h], kv[j], acc[h][j]);
            }
        }
    }
    let mut out = [[0f32; TILE]; TILE];
    for h in 0..TILE {
        out[h] = lane_sums4(acc[h]);
    }
    out
}

/// The lane sums of four vectors, by a transposing tree (fewer shuffles than four separate
/// reductions): 128-bit quarters added across the four inputs, then within each quarter.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
fn lane_sums4(a: [std::arch::x86_64::__m512; 4]) -> [f32; 4] {
    use std::arch::x86_64::*;
    // quarters 0+2 and 1+3 of a0 | a1 and of a2 | a3
    let t0 = _mm512_add_ps(
        _mm512_shuffle_f32x4::<0x44>(a[0], a[1]),
        _mm512_shuffle_f32x4::<0xEE>(a[0], a[1]),
    );
    let t1 = _mm512_add_ps(
        _mm512_shuffle_f32x4::<0x44>(a[2], a[3]),
        _mm512_shuffle_f32x4::<0xEE>(a[2], a[3]),
    );
    // quarter i: four partial sums of a_i
    let u = _mm512_add_ps(
        _mm512_shuffle_f32x4::<0x88>(t0, t1),
        _mm512_shuffle_f32x4::<0xDD>(t0, t1),
    );
    let u = _mm512_add_ps(u, _mm512_permute_ps::<0x4E>(u));
    let u = _mm512_add_ps(u, _mm512_permute_ps::<0xB1>(u));
    // element 0 of each quarter
    let r = _mm512_castps512_ps128(_mm512_permutexvar_ps(
        _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        u,
    ));
    let mut out = [0f32; 4];
    // SAFETY: `out` holds four floats.
    unsafe { _mm_storeu_ps(out.as_mut_ptr(), r) };
    out
}

/// `acc[h·d + e] += Σ_j p[h·ldp + j]·v[j][e]` for every `h < nh`, `e < d` (a multiple of 16),
/// `j < v.len() ≤ ldp`. Only called when [`available`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn pv(
    cpu: quant::simd::CpuLevel,
    p: &[f32],
    ldp: usize,
    v: &[&[f32]],
    acc: &mut [f32],
    d: usize,
    nh: usize,
) {
    assert!(d.is_multiple_of(16) && v.len() <= ldp && p.len() >= nh * ldp && acc.len() >= nh * d);
    assert!(v.iter().all(|r| r.len() >= d));
    #[cfg(target_arch = "x86_64")]
    if available(cpu) && !wide(cpu) {
        for h0 in (0..nh).step_by(avx2::PV_HEADS) {
            let hn = avx2::PV_HEADS.min(nh - h0);
            for e0 in (0..d).step_by(16) {
                let (pt, at) = (&p[h0 * ldp..], &mut acc[h0 * d..]);
                // SAFETY: AVX2 and FMA were detected; the tile's heads, keys and columns are
                // in bounds (h0 + hn ≤ nh, e0 + 16 ≤ d, rows ≥ d floats).
                unsafe {
                    match hn {
                        4 => avx2::pv_tile::<4>(pt, ldp, v, at, d, e0),
                        3 => avx2::pv_tile::<3>(pt, ldp, v, at, d, e0),
                        2 => avx2::pv_tile::<2>(pt, ldp, v, at, d, e0),
                        _ => avx2::pv_tile::<1>(pt, ldp, v, at, d, e0),
                    }
                }
            }
        }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if wide(cpu) {
        // columns outer: a 64-float slice of the block's v rows (8 KiB for 32 keys) stays
        // in L1 for every head, where whole rows (64 KiB) were re-read from L2 per 4 heads
        for e0 in (0..d).step_by(PV_WIDTH) {
            let w = PV_WIDTH.min(d - e0);
            for h0 in (0..nh).step_by(TILE) {
                let hn = TILE.min(nh - h0);
                let (pt, at) = (&p[h0 * ldp..], &mut acc[h0 * d..]);
                macro_rules! tile {
                    ($($h:literal $r:literal),*) => {
                        match (hn, w / 16) {
                            // SAFETY: AVX-512F was detected; the tile's heads, keys and columns
                            // are in bounds (h0 + hn ≤ nh, e0 + w ≤ d, rows ≥ d floats).
                            $(($h, $r) => unsafe { pv_tile::<$h, $r>(pt, ldp, v, at, d, e0) },)*
                            _ => unreachable!("tile shape"),
                        }
                    };
                }
                tile!(4 4, 4 3, 4 2, 4 1, 3 4, 3 3, 3 2, 3 1, 2 4, 2 3, 2 2, 2 1, 1 4, 1 3, 1 2, 1 1);
            }
        }
        return;
    }
    unreachable!("flash_attn_simd::pv called without AVX2 or AVX-512F");
}

/// One PV tile: heads `0..HN` of `p`/`acc`, columns `e0..e0 + 16·R`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn pv_tile<const HN: usize, const R: usize>(
    p: &[f32],
    ldp: usize,
    v: &[&[f32]],
    acc: &mut [f32],
    d: usize,
    e0: usize,
) {
    use std::arch::x86_64::*;
    let ap = acc.as_mut_ptr();
    let mut a = [[_mm512_setzero_ps(); R]; HN];
    for (h, a) in a.iter_mut().enumerate() {
        for (c, a) in a.iter_mut().enumerate() {
            // SAFETY: h < HN and e0 + 16c + 16 ≤ d: inside `acc` (the caller's bounds).
            *a = unsafe { _mm512_loadu_ps(ap.add(h * d + e0 + 16 * c)) };
        }
    }
    for (j, row) in v.iter().enumerate() {
        let rp = row.as_ptr();
        let mut vv = [_mm512_setzero_ps(); R];
        for (c, v) in vv.iter_mut().enumerate() {
            // SAFETY: e0 + 16c + 16 ≤ d ≤ the row's length.
            *v = unsafe { _mm512_loadu_ps(rp.add(e0 + 16 * c)) };
        }
        for (h, a) in a.iter_mut().enumerate() {
            let pb = _mm512_set1_ps(p[h * ldp + j]);
            for (a, vv) in a.iter_mut().zip(&vv) {
                *a = _mm512_fmadd_ps(pb, *vv, *a);
            }
        }
    }
    for (h, a) in a.iter().enumerate() {
        for (c, a) in a.iter().enumerate() {
            // SAFETY: as for the loads above.
            unsafe { _mm512_storeu_ps(ap.add(h * d + e0 + 16 * c), *a) };
        }
    }
}

/// The AVX2 tiles (sixteen 256-bit registers: smaller tiles than AVX-512's).
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// Heads per QK tile (8 accumulators, 4 q and 2 k vectors live).
    pub(super) const QK_HEADS: usize = 4;
    /// Keys per QK tile.
    pub(super) const QK_KEYS: usize = 2;
    /// Heads per PV tile (16 floats of the head dimension each: 8 accumulators).
    pub(super) const PV_HEADS: usize = 4;

    /// One QK tile: up to four q rows against up to two k rows (missing ones read as the
    /// first row and are discarded by the caller).
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA; every row has at least `d` floats, `d` a multiple of 8.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn qk_tile(
        q: &[&[f32]],
        k: &[&[f32]],
        d: usize,
    ) -> [[f32; QK_KEYS]; QK_HEADS] {
        // no closures: see the AVX-512 `qk_tile`
        let mut qp = [q[0].as_ptr(); QK_HEADS];
        let mut kp = [k[0].as_ptr(); QK_KEYS];
        for (i, p) in qp.iter_mut().enumerate() {
            *p = q[i.min(q.len() - 1)].as_ptr();
        }
        for (i, p) in kp.iter_mut().enumerate() {
            *p = k[i.min(k.len() - 1)].as_ptr();
        }
        let mut acc = [[_mm256_setzero_ps(); QK_KEYS]; QK_HEADS];
        for e in (0..d).step_by(8) {
            let mut qv = [_mm256_setzero_ps(); QK_HEADS];
            let mut kv = [_mm256_setzero_ps(); QK_KEYS];
            for (v, p) in qv.iter_mut().zip(&qp) {
                // SAFETY: e + 8 ≤ d and every row has ≥ d floats (the caller's contract).
                *v = unsafe { _mm256_loadu_ps(p.add(e)) };
            }
            for (v, p) in kv.iter_mut().zip(&kp) {
                // SAFETY: as above.
                *v = unsafe { _mm256_loadu_ps(p.add(e)) };
            }
            for (a, qv) in acc.iter_mut().zip(&qv) {
                for (a, kv) in a.iter_mut().zip(&kv) {
                    *a = _mm256_fmadd_ps(*qv, *kv, *a);
                }
            }
        }
        let mut out = [[0f32; QK_KEYS]; QK_HEADS];
        for (o, a) in out.iter_mut().zip(&acc) {
            for (o, a) in o.iter_mut().zip(a) {
                *o = hsum(*a);
            }
        }
        out
    }

    /// The sum of a vector's eight lanes.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn hsum(a: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)))
    }

    /// One PV tile: heads `0..HN` of `p`/`acc`, columns `e0..e0 + 16`.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA; `HN` heads of `p` (stride `ldp`, `v.len()` keys) and
    /// of `acc` (stride `d`) and columns `e0..e0 + 16` of `acc` and of every `v` row exist.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn pv_tile<const HN: usize>(
        p: &[f32],
        ldp: usize,
        v: &[&[f32]],
        acc: &mut [f32],
        d: usize,
        e0: usize,
    ) {
        let ap = acc.as_mut_ptr();
        let mut a = [[_mm256_setzero_ps(); 2]; HN];
        for (h, a) in a.iter_mut().enumerate() {
            for (c, a) in a.iter_mut().enumerate() {
                // SAFETY: h < HN and e0 + 8c + 8 ≤ e0 + 16 ≤ d: inside `acc`.
                *a = unsafe { _mm256_loadu_ps(ap.add(h * d + e0 + 8 * c)) };
            }
        }
        for (j, row) in v.iter().enumerate() {
            let rp = row.as_ptr();
            let mut vv = [_mm256_setzero_ps(); 2];
            for (c, v) in vv.iter_mut().enumerate() {
                // SAFETY: e0 + 16 ≤ d ≤ the row's length.
                *v = unsafe { _mm256_loadu_ps(rp.add(e0 + 8 * c)) };
            }
            for (h, a) in a.iter_mut().enumerate() {
                let pb = _mm256_set1_ps(p[h * ldp + j]);
                for (a, vv) in a.iter_mut().zip(&vv) {
                    *a = _mm256_fmadd_ps(pb, *vv, *a);
                }
            }
        }
        for (h, a) in a.iter().enumerate() {
            for (c, a) in a.iter().enumerate() {
                // SAFETY: as for the loads above.
                unsafe { _mm256_storeu_ps(ap.add(h * d + e0 + 8 * c), *a) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::CaseRng;
    use quant::simd::CpuLevel;

    /// The QK and PV tiles at every level this CPU has, against f64 sums, for head and key
    /// counts around the tile sizes and head sizes of one, three and 32 vectors.
    #[test]
    fn tiles_match_f64_sums_at_every_level() {
        for level in [CpuLevel::Avx2, CpuLevel::Avx512] {
            if !available(level) || level > CpuLevel::detect() {
                continue;
            }
            let mut seed = 100;
            for d in [16, 48, 512] {
                for (nh, nk) in [(1, 1), (3, 5), (4, 4), (5, 9), (9, 32), (64, 7)] {
                    seed += 1;
                    let qv = CaseRng::new(seed).f32s_in(nh * d, -1.0, 1.0);
                    let kv = CaseRng::new(seed + 1000).f32s_in(nk * d, -1.0, 1.0);
                    let q: Vec<&[f32]> = qv.chunks(d).collect();
                    let k: Vec<&[f32]> = kv.chunks(d).collect();
                    let lds = 32;
                    let mut sv = vec![f32::NAN; nh * lds];
                    qk(level, &q, &k, d, &mut sv, lds);
                    for (h, qr) in q.iter().enumerate() {
                        for (j, kr) in k.iter().enumerate() {
                            let (want, mag) =
                                qr.iter()
                                    .zip(kr.iter())
                                    .fold((0f64, 0f64), |(s, m), (&a, &b)| {
                                        (s + a as f64 * b as f64, m + (a as f64 * b as f64).abs())
                                    });
                            let got = sv[h * lds + j] as f64;
                            assert!(
                                (got - want).abs() <= 1e-6 * mag,
                                "{level:?} qk d={d} h={h} j={j}: {got} vs {want}"
                            );
                        }
                    }
                    let p = CaseRng::new(seed + 2000).f32s_in(nh * lds, 0.0, 1.0);
                    let acc0 = CaseRng::new(seed + 3000).f32s_in(nh * d, -1.0, 1.0);
                    let mut acc = acc0.clone();
                    pv(level, &p, lds, &k, &mut acc, d, nh);
                    for h in 0..nh {
                        for e in 0..d {
                            let mut want = acc0[h * d + e] as f64;
                            let mut mag = want.abs();
                            for (j, kr) in k.iter().enumerate() {
                                let t = p[h * lds + j] as f64 * kr[e] as f64;
                                want += t;
                                mag += t.abs();
                            }
                            let got = acc[h * d + e] as f64;
                            assert!(
                                (got - want).abs() <= 1e-6 * mag,
                                "{level:?} pv d={d} h={h} e={e}: {got} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }
}
