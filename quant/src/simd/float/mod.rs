//! The float weight types F32, F16 and BF16 against activations of the same type: one-row
//! and multi-row kernels for AVX2 (`avx2`) and AVX-512 (`avx512`), and the prompt-chunk
//! register tile (`tile`); FP8 E4M3 weights against F32 activations (`f8` for AVX2,
//! `f8_avx512`). Their sums are reordered against the f64 reference (see `avx2`).

#[cfg(target_arch = "x86_64")]
pub(super) mod avx2;
#[cfg(target_arch = "x86_64")]
pub(super) mod avx512;
#[cfg(target_arch = "x86_64")]
pub(super) mod f8;
#[cfg(target_arch = "x86_64")]
pub(super) mod f8_avx512;
pub mod tile;
