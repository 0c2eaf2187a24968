//! FLASH_ATTN_EXT's online-softmax step on SIMD registers (used by `flash_attn.rs` for every
//! head and block when the CPU has AVX2+FMA or AVX-512F): scale and mask the block's scores,
//! raise the running max, turn the scores into `exp(s − max)` and add them to the running sum
//! — the scalar [`crate::flash_attn::softmax_update`]'s operations, with a vector `exp`
//! evaluated in f64 and rounded once (glibc's `expf` bits but for about one value in a
//! thousand, within one ulp) and the sum in key order. A scalar step with libm's `expf` per
//! key was 30% of a CSA layer's attention at depth (kernels.md, "Flash attention at depth");
//! an f32 polynomial exp within 2 ulp moved the tiny MXFP4 model's KL against llama.cpp past
//! its gate (a last bit flips a near-tied routing choice), hence the f64 evaluation.

use quant::simd::CpuLevel;

/// ln 2 split: the high part has 32 trailing zero bits, so n·LN2_HI is exact for |n| < 2²⁰.
#[cfg(target_arch = "x86_64")]
const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
/// The rest of ln 2.
#[cfg(target_arch = "x86_64")]
const LN2_LO: f64 = std::f64::consts::LN_2 - LN2_HI;
/// 1 / k! for k ≤ 13: e^r's Taylor series to r¹³ (relative error below 10⁻¹⁷ for |r| ≤ ln 2 / 2).
#[cfg(target_arch = "x86_64")]
const INV_FACT: [f64; 14] = {
    let mut a = [1f64; 14];
    let mut k = 1;
    while k < 14 {
        a[k] = a[k - 1] / k as f64;
        k += 1;
    }
    a
};

/// [`crate::flash_attn::softmax_update`] for a block of at most 32 scores: with AVX-512F on
/// two 16-lane registers, with AVX2 and FMA on four 8-lane ones, each with a vector `exp`
/// ([`exp_avx512`], [`exp_avx2`]: glibc's `expf` bits but for about one value in a
/// thousand, within one ulp) and the probabilities summed in key order, so the step is the
/// scalar one's up to those rare last bits; the scalar loop otherwise.
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
    {
        let level = cpu.min(CpuLevel::detect());
        if level >= CpuLevel::Avx512 {
            // SAFETY: AVX-512F was detected; s and mask hold s.len() ≤ 32 floats (asserted).
            return unsafe { softmax_avx512(s, mask, scale, mx, l) };
        }
        if level >= CpuLevel::Avx2 {
            // SAFETY: AVX2 and FMA were detected (the Avx2 level has both); as above.
            return unsafe { softmax_avx2(s, mask, scale, mx, l) };
        }
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
    let n = _mm512_roundscale_pd::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
        _mm512_mul_pd(x, _mm512_set1_pd(std::f64::consts::LOG2_E)),
    );
    let r = _mm512_fnmadd_pd(n, _mm512_set1_pd(LN2_HI), x);
    let r = _mm512_fnmadd_pd(n, _mm512_set1_pd(LN2_LO), r);
    // Σ_{k ≤ 13} r^k / k!, Horner from the top
    let mut p = _mm512_set1_pd(INV_FACT[13]);
    for &c in INV_FACT[..13].iter().rev() {
        p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(c));
    }
    _mm512_scalef_pd(p, n)
}

/// [`softmax_update`] on four 8-lane registers.
///
/// # Safety
/// The CPU must have AVX2 and FMA; `s` and `mask` hold `s.len() ≤ 32` floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn softmax_avx2(
    s: &mut [f32],
    mask: &[f32],
    scale: f32,
    mx: &mut f32,
    l: &mut f32,
) -> Option<f32> {
    use std::arch::x86_64::*;
    let n = s.len();
    // padded copies: lanes past n are masked to −∞ below
    let (mut sb, mut mb) = ([0f32; 32], [0f32; 32]);
    sb[..n].copy_from_slice(s);
    mb[..n].copy_from_slice(mask);
    let ninf = _mm256_set1_ps(f32::NEG_INFINITY);
    let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let mut v = [ninf; 4];
    let mut nan = 0;
    let mut top = ninf;
    for (i, v) in v.iter_mut().enumerate() {
        // SAFETY: sb and mb hold 32 floats, i < 4.
        let (sv, m) = unsafe {
            (
                _mm256_loadu_ps(sb.as_ptr().add(8 * i)),
                _mm256_loadu_ps(mb.as_ptr().add(8 * i)),
            )
        };
        let x = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(scale), sv), m);
        let live = _mm256_cmpgt_epi32(_mm256_set1_epi32(n as i32 - 8 * i as i32), lane);
        *v = _mm256_blendv_ps(ninf, x, _mm256_castsi256_ps(live));
        nan |= _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_UNORD_Q>(*v, *v));
        top = _mm256_max_ps(top, *v);
    }
    let bm = if nan != 0 {
        f32::NAN
    } else {
        let t = _mm_max_ps(_mm256_castps256_ps128(top), _mm256_extractf128_ps::<1>(top));
        let t = _mm_max_ps(t, _mm_movehl_ps(t, t));
        _mm_cvtss_f32(_mm_max_ss(t, _mm_shuffle_ps::<1>(t, t)))
    };
    if bm == f32::NEG_INFINITY {
        s.fill(0.0);
        return None;
    }
    let up = crate::flash_attn::raise_max(bm, mx, l);
    let m = _mm256_set1_ps(*mx);
    for (i, &v) in v.iter().enumerate() {
        // −∞ scores (and the lanes past n) give 0
        let live = _mm256_cmp_ps::<_CMP_NEQ_UQ>(v, ninf);
        let p = _mm256_and_ps(live, exp_avx2(_mm256_sub_ps(v, m)));
        // SAFETY: sb holds 32 floats, i < 4.
        unsafe { _mm256_storeu_ps(sb.as_mut_ptr().add(8 * i), p) };
    }
    s.copy_from_slice(&sb[..n]);
    // summed in key order, as the scalar step does
    for &p in s.iter() {
        *l += p;
    }
    up
}

/// `exp(x)` on eight lanes with AVX2 and FMA, as [`exp_avx512`] computes it (f64, rounded
/// once), 2ⁿ built in the exponent field instead of `vscalefpd`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(crate) fn exp_avx2(x: std::arch::x86_64::__m256) -> std::arch::x86_64::__m256 {
    use std::arch::x86_64::*;
    // max(−110, x) keeps NaN (vmaxps returns its second operand then) and keeps n small
    let x = _mm256_max_ps(
        _mm256_set1_ps(-110.0),
        _mm256_min_ps(_mm256_set1_ps(89.0), x),
    );
    let lo = exp_pd_avx2(_mm256_cvtps_pd(_mm256_castps256_ps128(x)));
    let hi = exp_pd_avx2(_mm256_cvtps_pd(_mm256_extractf128_ps::<1>(x)));
    _mm256_insertf128_ps::<1>(
        _mm256_castps128_ps256(_mm256_cvtpd_ps(lo)),
        _mm256_cvtpd_ps(hi),
    )
}

/// e^x on four f64 lanes for |x| ≤ 110 or NaN (see [`exp_avx2`]): 2ⁿ as the bits
/// (n + 1023) << 52, a normal double for every n here (−159..129); a NaN x gives a NaN
/// polynomial, and NaN times any scale stays NaN.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[inline]
fn exp_pd_avx2(x: std::arch::x86_64::__m256d) -> std::arch::x86_64::__m256d {
    use std::arch::x86_64::*;
    let n = _mm256_round_pd::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_pd(
        x,
        _mm256_set1_pd(std::f64::consts::LOG2_E),
    ));
    let r = _mm256_fnmadd_pd(n, _mm256_set1_pd(LN2_HI), x);
    let r = _mm256_fnmadd_pd(n, _mm256_set1_pd(LN2_LO), r);
    let mut p = _mm256_set1_pd(INV_FACT[13]);
    for &c in INV_FACT[..13].iter().rev() {
        p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(c));
    }
    let e = _mm256_add_epi64(
        _mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(n)),
        _mm256_set1_epi64x(1023),
    );
    _mm256_mul_pd(p, _mm256_castsi256_pd(_mm256_slli_epi64::<52>(e)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::CaseRng;

    fn close(a: f32, b: f32, rel: f32) -> bool {
        (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= rel * a.abs().max(b.abs())
    }

    /// The vector exp against `f32::exp` (glibc's `expf`, 0.502 ulp): within one ulp
    /// everywhere and the same bits but for one value in a thousand (both are nearly
    /// correctly rounded; the old f32 polynomial differed in about a third).
    #[test]
    fn vector_exp_is_libm_exp_nearly_everywhere() {
        #[cfg(target_arch = "x86_64")]
        for level in [CpuLevel::Avx2, CpuLevel::Avx512] {
            if level > CpuLevel::detect() {
                continue;
            }
            use std::arch::x86_64::*;
            let mut xs = CaseRng::new(7).f32s_in(1 << 16, -110.0, 0.0);
            xs.extend(CaseRng::new(8).f32s_in(4096, -1.0, 1.0));
            xs.extend(CaseRng::new(9).f32s_in(4096, -1e-3, 1e-3));
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
                if level == CpuLevel::Avx512 {
                    // SAFETY: AVX-512F was detected; both buffers hold 16 floats.
                    unsafe {
                        let v = exp_avx512(_mm512_loadu_ps(buf.as_ptr()));
                        _mm512_storeu_ps(out.as_mut_ptr(), v);
                    }
                } else {
                    for h in 0..2 {
                        // SAFETY: AVX2 and FMA were detected; 8 floats at 8·h of each.
                        unsafe {
                            let v = exp_avx2(_mm256_loadu_ps(buf.as_ptr().add(8 * h)));
                            _mm256_storeu_ps(out.as_mut_ptr().add(8 * h), v);
                        }
                    }
                }
                for (&x, &y) in c.iter().zip(&out) {
                    let want = x.exp();
                    if want.is_nan() {
                        assert!(y.is_nan(), "exp({x}) = {y}, want NaN");
                        continue;
                    }
                    let ulps = (y.to_bits() as i64 - want.to_bits() as i64).abs();
                    assert!(ulps <= 1, "{level:?}: exp({x}) = {y}, want {want}");
                    differ += usize::from(ulps != 0);
                }
            }
            assert!(differ * 1000 < xs.len(), "{differ} of {} differ", xs.len());
        }
    }

    #[test]
    fn vector_softmax_update_matches_the_scalar_one() {
        for level in [CpuLevel::Avx2, CpuLevel::Avx512] {
            if level > CpuLevel::detect() {
                continue;
            }
            softmax_matches_at(level);
        }
    }

    fn softmax_matches_at(level: CpuLevel) {
        let inf = f32::INFINITY;
        let mut seed = 1;
        for n in 1..=32 {
            for case in 0..8 {
                seed += 1;
                let mut s = CaseRng::new(seed).f32s_in(n, -30.0, 30.0);
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
                    let ub = softmax_update(level, &mut b, &mask, 0.7, &mut mxb, &mut lb);
                    let what = format!("{level:?} n={n} case={case} mx0={mx0}");
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
