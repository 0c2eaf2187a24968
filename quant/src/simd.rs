//! Fast dot kernels chosen at run time by CPU features, each **bit-identical** to its scalar
//! reference in [`crate::dot`] (the reference already accumulates in ggml's x86 lane order,
//! so a SIMD kernel doing the same integer lane sums and FMAs gives the same bits). Tested
//! against the reference on random inputs of every length (`quant/tests/simd.rs`).
//!
//! [`vec_dot_fn`] returns the best kernel for a type on this CPU, or the reference.
//! `FATHOM_FORCE_SCALAR=1` forces the reference everywhere (for bisecting).

use crate::{DType, DotFn};
use std::sync::OnceLock;

/// The fastest dot product for `dtype` on this CPU (the reference where no kernel exists).
pub fn vec_dot_fn(dtype: DType) -> Option<DotFn> {
    let reference = dtype.info().vec_dot;
    if force_scalar() {
        return reference;
    }
    #[cfg(target_arch = "x86_64")]
    {
        if x86::has_avx2_fma() {
            match dtype {
                DType::Q8_0 => return Some(x86::dot_q8_0_avx2_entry),
                DType::MXFP4 => return Some(x86::dot_mxfp4_avx2_entry),
                DType::Q4_K => return Some(x86::dot_q4_k_avx2_entry),
                DType::Q6_K => return Some(x86::dot_q6_k_avx2_entry),
                _ => {}
            }
        }
    }
    reference
}

fn force_scalar() -> bool {
    static F: OnceLock<bool> = OnceLock::new();
    *F.get_or_init(|| std::env::var("FATHOM_FORCE_SCALAR").is_ok_and(|v| v == "1"))
}

/// Names of the kernels available for `dtype` on this CPU, best first (for tests and tools).
pub fn available(dtype: DType) -> Vec<(&'static str, DotFn)> {
    let mut v: Vec<(&'static str, DotFn)> = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        if x86::has_avx2_fma() {
            match dtype {
                DType::Q8_0 => v.push(("avx2", x86::dot_q8_0_avx2_entry)),
                DType::MXFP4 => v.push(("avx2", x86::dot_mxfp4_avx2_entry)),
                DType::Q4_K => v.push(("avx2", x86::dot_q4_k_avx2_entry)),
                DType::Q6_K => v.push(("avx2", x86::dot_q6_k_avx2_entry)),
                _ => {}
            }
        }
    }
    if let Some(r) = dtype.info().vec_dot {
        v.push(("scalar", r));
    }
    v
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use crate::blocks::{view, BlockMXFP4, BlockQ4K, BlockQ6K, BlockQ8K, BlockQ8_0};
    use crate::codec::kquants::scale_min_k4;
    use crate::dot::hsum8;
    use crate::grids::KVALUES_MXFP4;
    use crate::scalar::{e8m0_to_f32_half, le_f16};
    use std::arch::x86_64::*;

    pub fn has_avx2_fma() -> bool {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }

    /// Safe entry point: only handed out by `vec_dot_fn` after the feature check.
    pub fn dot_q8_0_avx2_entry(n: usize, w: &[u8], a: &[u8]) -> f32 {
        // SAFETY: this function is only returned by `vec_dot_fn`/`available` when the CPU
        // reports AVX2 and FMA (checked at run time just before).
        unsafe { dot_q8_0_avx2(n, w, a) }
    }

    /// Safe entry point: only handed out after the feature check.
    pub fn dot_q4_k_avx2_entry(n: usize, w: &[u8], a: &[u8]) -> f32 {
        // SAFETY: only returned by `vec_dot_fn`/`available` when AVX2 and FMA are present.
        unsafe { dot_q4_k_avx2(n, w, a) }
    }

    /// Horizontal sum of 8 i32 lanes (exact).
    #[target_feature(enable = "avx2")]
    unsafe fn hsum_i32(v: __m256i) -> i32 {
        let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
        _mm_cvtsi128_si32(s)
    }

    /// Q4_K · Q8_K with AVX2: the integer sub-block sums Σ q·y come from `vpmaddubsw` (codes
    /// 0..15 are unsigned, no saturation) and `vpmaddwd`; everything after them is the
    /// reference's scalar arithmetic, so the result is the reference's bits.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn dot_q4_k_avx2(_n: usize, w: &[u8], a: &[u8]) -> f32 {
        let ones = _mm256_set1_epi16(1);
        let m4 = _mm256_set1_epi8(0x0F);
        let mut s = 0f32;
        for (x, y) in view::<BlockQ4K>(w).iter().zip(view::<BlockQ8K>(a)) {
            let (mut isc, mut imin) = (0i32, 0i32);
            for c in 0..4 {
                // SAFETY: 32 code bytes per chunk and 64 activation bytes per chunk are inside
                // the blocks (unaligned loads).
                let (q, ylo, yhi) = unsafe {
                    (
                        _mm256_loadu_si256(x.qs.as_ptr().add(32 * c).cast()),
                        _mm256_loadu_si256(y.qs.as_ptr().add(64 * c).cast()),
                        _mm256_loadu_si256(y.qs.as_ptr().add(64 * c + 32).cast()),
                    )
                };
                let lo = _mm256_and_si256(q, m4);
                let hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                // SAFETY: AVX2 is enabled for this function.
                let (s_lo, s_hi) = unsafe {
                    (
                        hsum_i32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo, ylo), ones)),
                        hsum_i32(_mm256_madd_epi16(_mm256_maddubs_epi16(hi, yhi), ones)),
                    )
                };
                for (j, isum) in [(2 * c, s_lo), (2 * c + 1, s_hi)] {
                    let (sc, m) = scale_min_k4(j, &x.scales);
                    imin += m as i32 * (y.bsum(2 * j) as i32 + y.bsum(2 * j + 1) as i32);
                    isc += sc as i32 * isum;
                }
            }
            let dy = y.d();
            s += dy * (le_f16(x.d) * isc as f32) - dy * (le_f16(x.dmin) * imin as f32);
        }
        s
    }

    /// Safe entry point: only handed out after the feature check.
    pub fn dot_q6_k_avx2_entry(n: usize, w: &[u8], a: &[u8]) -> f32 {
        // SAFETY: only returned by `vec_dot_fn`/`available` when AVX2 and FMA are present.
        unsafe { dot_q6_k_avx2(n, w, a) }
    }

    /// Q6_K · Q8_K with AVX2: the 6-bit codes are rebuilt unsigned (0..63), the 16-element
    /// sub-block sums Σ u·y come from `vpmaddubsw`/`vpmaddwd`, and Σ q·y = Σ u·y − 32·bsum;
    /// the float combine is the reference's, so the result is the reference's bits.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn dot_q6_k_avx2(_n: usize, w: &[u8], a: &[u8]) -> f32 {
        let ones = _mm256_set1_epi16(1);
        let m4 = _mm256_set1_epi8(0x0F);
        let m2 = _mm256_set1_epi8(0x03);
        let half_sums = |v: __m256i| -> (i32, i32) {
            let mut l = [0i32; 8];
            // SAFETY: room for 8 i32.
            unsafe { _mm256_storeu_si256(l.as_mut_ptr().cast(), v) };
            (l[0] + l[1] + l[2] + l[3], l[4] + l[5] + l[6] + l[7])
        };
        let mut s = 0f32;
        for (x, y) in view::<BlockQ6K>(w).iter().zip(view::<BlockQ8K>(a)) {
            let mut isc = 0i32;
            for h in 0..2 {
                // SAFETY: 64 `ql`, 32 `qh` and 128 activation bytes of this half are inside the
                // blocks (unaligned loads).
                let (ql0, ql1, qh) = unsafe {
                    (
                        _mm256_loadu_si256(x.ql.as_ptr().add(64 * h).cast()),
                        _mm256_loadu_si256(x.ql.as_ptr().add(64 * h + 32).cast()),
                        _mm256_loadu_si256(x.qh.as_ptr().add(32 * h).cast()),
                    )
                };
                let hi = |shift: i32| -> __m256i {
                    let v = match shift {
                        0 => qh,
                        2 => _mm256_srli_epi16(qh, 2),
                        4 => _mm256_srli_epi16(qh, 4),
                        _ => _mm256_srli_epi16(qh, 6),
                    };
                    _mm256_slli_epi16(_mm256_and_si256(v, m2), 4)
                };
                let u = [
                    _mm256_or_si256(_mm256_and_si256(ql0, m4), hi(0)),
                    _mm256_or_si256(_mm256_and_si256(ql1, m4), hi(2)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), hi(4)),
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), hi(6)),
                ];
                for (k, uk) in u.iter().enumerate() {
                    // SAFETY: 32 activation bytes at 128h + 32k.
                    let yk =
                        unsafe { _mm256_loadu_si256(y.qs.as_ptr().add(128 * h + 32 * k).cast()) };
                    let (sa, sb) =
                        half_sums(_mm256_madd_epi16(_mm256_maddubs_epi16(*uk, yk), ones));
                    let sub = 8 * h + 2 * k;
                    isc += x.scales[sub] as i32 * (sa - 32 * y.bsum(sub) as i32);
                    isc += x.scales[sub + 1] as i32 * (sb - 32 * y.bsum(sub + 1) as i32);
                }
            }
            s += y.d() * le_f16(x.d) * isc as f32;
        }
        s
    }

    /// Safe entry point: only handed out after the feature check.
    pub fn dot_mxfp4_avx2_entry(n: usize, w: &[u8], a: &[u8]) -> f32 {
        // SAFETY: only returned by `vec_dot_fn`/`available` when AVX2 and FMA are present.
        unsafe { dot_mxfp4_avx2(n, w, a) }
    }

    /// 8 lanes of integer partial sums of one 32-element int8 × int8 block (lane k =
    /// elements 4k..4k+3), via the sign trick, `vpmaddubsw` and `vpmaddwd`.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn lanes(qx: __m256i, qy: __m256i) -> __m256 {
        let ax = _mm256_sign_epi8(qx, qx);
        let sy = _mm256_sign_epi8(qy, qx);
        let p16 = _mm256_maddubs_epi16(ax, sy);
        _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)))
    }

    /// MXFP4 · Q8_0 with AVX2 in the reference's order: codes → int8 through a 16-entry
    /// `vpshufb` table, blocks in pairs into two accumulators, an odd last block in scalar code.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn dot_mxfp4_avx2(_n: usize, w: &[u8], a: &[u8]) -> f32 {
        let xs = view::<BlockMXFP4>(w);
        let ys = view::<BlockQ8_0>(a);
        // SAFETY: KVALUES_MXFP4 has 16 bytes.
        let table = unsafe { _mm_loadu_si128(KVALUES_MXFP4.as_ptr().cast()) };
        let m4 = _mm_set1_epi8(0x0F);
        let decode = |x: &BlockMXFP4| -> __m256i {
            // SAFETY: 16 code bytes per block (unaligned load).
            let q = unsafe { _mm_loadu_si128(x.qs.as_ptr().cast()) };
            let lo = _mm_shuffle_epi8(table, _mm_and_si128(q, m4));
            let hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(q, 4), m4));
            _mm256_set_m128i(hi, lo) // elements 0..15 then 16..31
        };
        let (mut acc1, mut acc2) = (_mm256_setzero_ps(), _mm256_setzero_ps());
        let pairs = xs.len() / 2;
        for p in 0..pairs {
            for (acc, ib) in [(&mut acc1, 2 * p), (&mut acc2, 2 * p + 1)] {
                let (x, y) = (&xs[ib], &ys[ib]);
                // SAFETY: 32 activation code bytes per block.
                let qy = unsafe { _mm256_loadu_si256(y.qs.as_ptr().cast()) };
                // SAFETY: AVX2/FMA are enabled for this function.
                let l = unsafe { lanes(decode(x), qy) };
                let d = _mm256_set1_ps(le_f16(y.d) * e8m0_to_f32_half(x.e));
                *acc = _mm256_fmadd_ps(d, l, *acc);
            }
        }
        let mut l1 = [0f32; 8];
        let mut l2 = [0f32; 8];
        // SAFETY: room for 8 f32 each.
        unsafe {
            _mm256_storeu_ps(l1.as_mut_ptr(), acc1);
            _mm256_storeu_ps(l2.as_mut_ptr(), acc2);
        }
        let sum: [f32; 8] = std::array::from_fn(|k| l1[k] + l2[k]);
        let mut s = hsum8(&sum);
        for ib in 2 * pairs..xs.len() {
            let (x, y) = (&xs[ib], &ys[ib]);
            let d = le_f16(y.d) * e8m0_to_f32_half(x.e);
            let mut sumi = 0i32;
            for j in 0..16 {
                sumi += KVALUES_MXFP4[(x.qs[j] & 0xF) as usize] as i32 * y.qs[j] as i32;
                sumi += KVALUES_MXFP4[(x.qs[j] >> 4) as usize] as i32 * y.qs[j + 16] as i32;
            }
            s += d * sumi as f32;
        }
        s
    }

    /// Q8_0 · Q8_0 with AVX2: per block the 8 lanes of 4-byte integer partial sums (sign
    /// trick + `vpmaddubsw` + `vpmaddwd`), converted to f32 and FMA'd with `dw·dy`, then the
    /// same horizontal sum as the reference — the reference's bits exactly.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn dot_q8_0_avx2(_n: usize, w: &[u8], a: &[u8]) -> f32 {
        let xs = view::<BlockQ8_0>(w);
        let ys = view::<BlockQ8_0>(a);
        let ones = _mm256_set1_epi16(1);
        let mut acc = _mm256_setzero_ps();
        for (x, y) in xs.iter().zip(ys) {
            // SAFETY: each block's 32 code bytes are readable (blocks are 34 bytes, alignment 1;
            // unaligned loads).
            let (qx, qy) = unsafe {
                (
                    _mm256_loadu_si256(x.qs.as_ptr().cast()),
                    _mm256_loadu_si256(y.qs.as_ptr().cast()),
                )
            };
            let ax = _mm256_sign_epi8(qx, qx); // |x| as unsigned (x = −128 → 128)
            let sy = _mm256_sign_epi8(qy, qx); // y·sign(x)
            let p16 = _mm256_maddubs_epi16(ax, sy); // pairs, ≤ 2·128·127 < 2^15
            let p32 = _mm256_madd_epi16(p16, ones); // lane k = Σ bytes 4k..4k+3
            let d = _mm256_set1_ps(le_f16(x.d) * le_f16(y.d));
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p32), acc);
        }
        let mut lanes = [0f32; 8];
        // SAFETY: `lanes` has room for 8 f32.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
        hsum8(&lanes)
    }
}
