//! Fast dot kernels chosen at run time by CPU features, each **bit-identical** to its scalar
//! reference in [`crate::dot`] (the reference already accumulates in ggml's x86 lane order,
//! and the K-/I-quant references form exact integer sub-block sums before one scalar float
//! combine, so a SIMD kernel doing the same integer sums and FMAs gives the same bits). Tested
//! against the reference on random inputs of every length (`quant/tests/simd.rs`).
//!
//! [`vec_dot_fn`] returns the best kernel for a type on this CPU, or the reference.
//! `FATHOM_FORCE_SCALAR=1` forces the reference everywhere (for bisecting).
//!
//! Files: `avx2_q8` (types dotted with Q8_0 activations), `avx2_k` (K-quants · Q8_K),
//! `avx2_iq` (IQ grids · Q8_K), `avx512` (AVX-512 BW/VNNI variants of the hottest kernels).

use crate::{DType, DotFn};
use std::sync::OnceLock;

#[cfg(target_arch = "x86_64")]
mod avx2_iq;
#[cfg(target_arch = "x86_64")]
mod avx2_k;
#[cfg(target_arch = "x86_64")]
mod avx2_q8;

/// Declares a safe entry point for an `unsafe` `#[target_feature]` kernel. The entry is only
/// handed out by [`kernels`] after the run-time feature check for its tier.
#[cfg(target_arch = "x86_64")]
macro_rules! entry {
    ($($entry:ident => $kernel:ident),* $(,)?) => {$(
        /// Safe entry point (see the module docs): only handed out after the feature check.
        pub fn $entry(n: usize, w: &[u8], a: &[u8]) -> f32 {
            // SAFETY: `kernels` returns this function only when the CPU reports the features
            // the kernel is compiled for (checked at run time just before).
            unsafe { $kernel(n, w, a) }
        }
    )*};
}
#[cfg(target_arch = "x86_64")]
use entry;

/// The fastest dot product for `dtype` on this CPU (the reference where no kernel exists).
pub fn vec_dot_fn(dtype: DType) -> Option<DotFn> {
    if force_scalar() {
        return dtype.info().vec_dot;
    }
    kernels(dtype).first().map(|k| k.1).or(dtype.info().vec_dot)
}

fn force_scalar() -> bool {
    static F: OnceLock<bool> = OnceLock::new();
    *F.get_or_init(|| std::env::var("FATHOM_FORCE_SCALAR").is_ok_and(|v| v == "1"))
}

/// Names of the kernels available for `dtype` on this CPU, best first, the scalar reference
/// last (for tests and tools).
pub fn available(dtype: DType) -> Vec<(&'static str, DotFn)> {
    let mut v = kernels(dtype);
    if let Some(r) = dtype.info().vec_dot {
        v.push(("scalar", r));
    }
    v
}

/// The SIMD kernels for `dtype` this CPU can run, best first (no reference).
fn kernels(dtype: DType) -> Vec<(&'static str, DotFn)> {
    #[allow(unused_mut)]
    let mut v: Vec<(&'static str, DotFn)> = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        if has_avx2_fma() {
            let k: Option<DotFn> = match dtype {
                DType::Q8_0 => Some(avx2_q8::dot_q8_0_avx2_entry),
                DType::MXFP4 => Some(avx2_q8::dot_mxfp4_avx2_entry),
                DType::Q2_0 => Some(avx2_q8::dot_q2_0_avx2_entry),
                DType::Q4_K => Some(avx2_k::dot_q4_k_avx2_entry),
                DType::Q5_K => Some(avx2_k::dot_q5_k_avx2_entry),
                DType::Q6_K => Some(avx2_k::dot_q6_k_avx2_entry),
                DType::IQ2_XXS => Some(avx2_iq::dot_iq2_xxs_avx2_entry),
                DType::IQ1_S => Some(avx2_iq::dot_iq1_s_avx2_entry),
                DType::IQ1_M => Some(avx2_iq::dot_iq1_m_avx2_entry),
                _ => None,
            };
            v.extend(k.map(|k| ("avx2", k)));
        }
    }
    v
}

/// AVX2 and FMA are present (the AVX2 tier's features).
#[cfg(target_arch = "x86_64")]
fn has_avx2_fma() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
}

/// Horizontal sum of 8 i32 lanes (exact).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn hsum_i32(v: std::arch::x86_64::__m256i) -> i32 {
    use std::arch::x86_64::*;
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
    _mm_cvtsi128_si32(s)
}
