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
//! - `softmax_update`: one head's online-softmax step on two 16-lane registers, with
//!   `exp_avx512` (AVX-512F only; the scalar step otherwise): the scalar step's results but
//!   for a last bit of about one exp in a thousand.
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

/// [`crate::flash_attn::softmax_update`] for a block of at most 32 scores: with AVX-512F on
/// two 16-lane registers with a vector `exp` ([`exp_avx512`]: glibc's `expf` bits but for
/// about one value in a thousand, within one ulp) and the probabilities summed in key order,
/// so the step is the scalar one's up to those rare last bits; the scalar loop otherwise.
pub(crate) fn softmax_update(
    cpu: quant::simd::CpuLevel,
    s: &mut [f32],
    mask: &[f32],
    scale: f32,
    mx: &mut f32,
    l: &mut f32,
) -> Option<f32> {
    assert!(s.len() <= 32 && mask.len() == s.len());
    #[cfg(target_arch = "x86_64")]
    if wide(cpu) {
        // SAFETY: AVX-512F was detected; s and mask hold s.len() ≤ 32 floats (asserted).
        return unsafe { softmax_avx512(s, mask, scale, mx, l) };
    }
    crate::flash_attn::softmax_update(s, mask, scale, mx, l)
}

/// [`softmax_update`] on two masked 16-lane registers.
///
/// # Safety
/// The CPU must have AVX-512F; `s` and `mask` hold `s.len() ≤ 32` floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn softmax_avx512(
    s: &mut [f32],
    mask: &[f32],
    scale: f32,
    mx: &mut f32,
    l: &mut f32,
) -> Option<f32> {
    use std::arch::x86_64::*;
    let n = s.len();
    let lanes = |i: usize| -> __mmask16 {
        let k = n.saturating_sub(16 * i).min(16);
        ((1u32 << k) - 1) as __mmask16
    };
    let ninf = _mm512_set1_ps(f32::NEG_INFINITY);
    let mut v = [ninf; 2];
    let mut nan = 0u16;
    for (i, v) in v.iter_mut().enumerate() {
        let k = lanes(i);
        // SAFETY: the lanes of `k` are below n, inside `s` and `mask`.
        let (sv, m) = unsafe {
            (
                _mm512_maskz_loadu_ps(k, s.as_ptr().add(16 * i)),
                _mm512_maskz_loadu_ps(k, mask.as_ptr().add(16 * i)),
            )
        };
        let x = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(scale), sv), m);
        *v = _mm512_mask_mov_ps(ninf, k, x);
        nan |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(*v, *v);
    }
    let bm = if nan != 0 {
        f32::NAN
    } else {
        _mm512_reduce_max_ps(_mm512_max_ps(v[0], v[1]))
    };
    if bm == f32::NEG_INFINITY {
        s.fill(0.0);
        return None;
    }
    let up = crate::flash_attn::raise_max(bm, mx, l);
    let m = _mm512_set1_ps(*mx);
    for (i, &v) in v.iter().enumerate() {
        // −∞ scores (and the lanes past n) give 0
        let live = _mm512_cmp_ps_mask::<_CMP_NEQ_UQ>(v, ninf);
        let p = _mm512_maskz_mov_ps(live, exp_avx512(_mm512_sub_ps(v, m)));
        // SAFETY: the lanes below n are inside `s`.
        unsafe { _mm512_mask_storeu_ps(s.as_mut_ptr().add(16 * i), lanes(i), p) };
    }
    // summed in key order, as the scalar step does: a lane-tree sum rounds differently, and
    // a last-bit change in the normalizer can flip a quantized model's routing downstream
    for &p in s.iter() {
        *l += p;
    }
    up
}

/// `exp(x)` lane-wise, evaluated in f64 and rounded once to f32: x = n·ln 2 + r (Cody–Waite,
/// |r| ≤ ln 2 / 2), e^r by its Taylor series to r¹³ (relative error below 10⁻¹⁷), scaled by
/// 2ⁿ (`vscalefpd`). So each result is the correctly rounded e^x but where e^x lies within
/// about 10⁻¹⁶ of a rounding boundary: in practice the bits of glibc's `expf` (0.502 ulp),
/// which the scalar step calls. Where they differ, a routing or top-k choice of a quantized
/// model can flip (the tiny MXFP4 model's KL against llama.cpp moved by a tenth with a
/// 2-ulp f32 polynomial). 0 below about −103.9, NaN for NaN.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn exp_avx512(x: std::arch::x86_64::__m512) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    // max(−110, x) keeps NaN (vmaxps returns its second operand then) and keeps n small
    let x = _mm512_max_ps(
        _mm512_set1_ps(-110.0),
        _mm512_min_ps(_mm512_set1_ps(89.0), x),
    );
    let lo = exp_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(x)));
    let hi = exp_pd(_mm512_cvtps_pd(_mm256_castpd_ps(
        _mm512_extractf64x4_pd::<1>(_mm512_castps_pd(x)),
    )));
    let lo = _mm512_castpd_ps(_mm512_castpd256_pd512(_mm256_castps_pd(_mm512_cvtpd_ps(
        lo,
    ))));
    _mm512_castpd_ps(_mm512_insertf64x4::<1>(
        _mm512_castps_pd(lo),
        _mm256_castps_pd(_mm512_cvtpd_ps(hi)),
    ))
}

/// e^x on eight f64 lanes for |x| ≤ 110 or NaN (see [`exp_avx512`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
fn exp_pd(x: std::arch::x86_64::__m512d) -> std::arch::x86_64::__m512d {
    use std::arch::x86_64::*;
    /// ln 2 split: the high part has 32 trailing zero bits, so n·LN2_HI is exact.
    const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
    const LN2_LO: f64 = std::f64::consts::LN_2 - LN2_HI;
    let n = _mm512_roundscale_pd::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
        _mm512_mul_pd(x, _mm512_set1_pd(std::f64::consts::LOG2_E)),
    );
    let r = _mm512_fnmadd_pd(n, _mm512_set1_pd(LN2_HI), x);
    let r = _mm512_fnmadd_pd(n, _mm512_set1_pd(LN2_LO), r);
    /// 1 / k! for k ≤ 13.
    const INV_FACT: [f64; 14] = {
        let mut a = [1f64; 14];
        let mut k = 1;
        while k < 14 {
            a[k] = a[k - 1] / k as f64;
            k += 1;
        }
        a
    };
    // Σ_{k ≤ 13} r^k / k!, Horner from the top
    let mut p = _mm512_set1_pd(INV_FACT[13]);
    for &c in INV_FACT[..13].iter().rev() {
        p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(c));
    }
    _mm512_scalef_pd(p, n)
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
    use quant::simd::CpuLevel;

    /// xorshift values in `[lo, hi)`.
    fn values(seed: u64, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                lo + (hi - lo) * ((s >> 40) as f32 / (1u64 << 24) as f32)
            })
            .collect()
    }

    fn close(a: f32, b: f32, rel: f32) -> bool {
        (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= rel * a.abs().max(b.abs())
    }

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
                    let qv = values(seed, nh * d, -1.0, 1.0);
                    let kv = values(seed + 1000, nk * d, -1.0, 1.0);
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
                    let p = values(seed + 2000, nh * lds, 0.0, 1.0);
                    let acc0 = values(seed + 3000, nh * d, -1.0, 1.0);
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

    /// The vector exp against `f32::exp` (glibc's `expf`, 0.502 ulp): within one ulp
    /// everywhere and the same bits but for one value in a thousand (both are nearly
    /// correctly rounded; the old f32 polynomial differed in about a third).
    #[test]
    fn vector_exp_is_libm_exp_nearly_everywhere() {
        if !wide(CpuLevel::detect()) {
            return;
        }
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::*;
            let mut xs = values(7, 1 << 16, -110.0, 0.0);
            xs.extend(values(8, 4096, -1.0, 1.0));
            xs.extend(values(9, 4096, -1e-3, 1e-3));
            xs.extend([
                0.0,
                -0.0,
                -87.3,
                -103.9,
                -104.5,
                -200.0,
                f32::NEG_INFINITY,
                80.0,
            ]);
            xs.extend([f32::NAN, -1e30, 1e-30, -1e-30, f32::MIN_POSITIVE]);
            let mut differ = 0;
            for c in xs.chunks(16) {
                let mut buf = [0f32; 16];
                buf[..c.len()].copy_from_slice(c);
                let mut out = [0f32; 16];
                // SAFETY: AVX-512F was detected; both buffers hold 16 floats.
                unsafe {
                    let v = exp_avx512(_mm512_loadu_ps(buf.as_ptr()));
                    _mm512_storeu_ps(out.as_mut_ptr(), v);
                }
                for (&x, &y) in c.iter().zip(&out) {
                    let want = x.exp();
                    if want.is_nan() {
                        assert!(y.is_nan(), "exp({x}) = {y}, want NaN");
                        continue;
                    }
                    let ulps = (y.to_bits() as i64 - want.to_bits() as i64).abs();
                    assert!(ulps <= 1, "exp({x}) = {y}, want {want}");
                    differ += usize::from(ulps != 0);
                }
            }
            assert!(differ * 1000 < xs.len(), "{differ} of {} differ", xs.len());
        }
    }

    #[test]
    fn vector_softmax_update_matches_the_scalar_one() {
        if !wide(CpuLevel::detect()) {
            return;
        }
        let inf = f32::INFINITY;
        let mut seed = 1;
        for n in 1..=32 {
            for case in 0..8 {
                seed += 1;
                let mut s = values(seed, n, -30.0, 30.0);
                let mut mask = vec![0f32; n];
                match case {
                    1 => mask.iter_mut().step_by(3).for_each(|m| *m = -inf),
                    2 => mask.fill(-inf),
                    3 => s[n / 2] = f32::NAN,
                    4 => s[n - 1] = inf,
                    5 => mask
                        .iter_mut()
                        .enumerate()
                        .for_each(|(i, m)| *m = -(i as f32)),
                    _ => {}
                }
                for (mx0, l0) in [
                    (f32::NEG_INFINITY, 0.0),
                    (5.0, 2.5),
                    (100.0, 7.0),
                    (f32::NAN, 1.0),
                ] {
                    let (mut a, mut b) = (s.clone(), s.clone());
                    let (mut mxa, mut la, mut mxb, mut lb) = (mx0, l0, mx0, l0);
                    let ua =
                        crate::flash_attn::softmax_update(&mut a, &mask, 0.7, &mut mxa, &mut la);
                    let ub =
                        softmax_update(CpuLevel::detect(), &mut b, &mask, 0.7, &mut mxb, &mut lb);
                    let what = format!("n={n} case={case} mx0={mx0}");
                    assert!(
                        mxa.to_bits() == mxb.to_bits() || (mxa.is_nan() && mxb.is_nan()),
                        "{what}: max"
                    );
                    assert_eq!(ua.is_some(), ub.is_some(), "{what}: rescale");
                    if let (Some(x), Some(y)) = (ua, ub) {
                        assert!(close(x, y, 0.0), "{what}: factor {x} vs {y}");
                    }
                    assert!(close(la, lb, 1e-5), "{what}: sum {la} vs {lb}");
                    for (x, y) in a.iter().zip(&b) {
                        // subnormal probabilities: absolute error
                        let tiny = x.abs() < 1.2e-38 && y.abs() < 1.2e-38;
                        assert!(
                            close(*x, *y, 8.0 * f32::EPSILON) || tiny,
                            "{what}: p {x} vs {y}"
                        );
                    }
                }
            }
        }
    }
}
