//! The K-quants Q4_K, Q5_K and Q6_K · Q8_K: AVX2 one-row (and, for Q4_K / Q5_K, multi-row)
//! kernels (`avx2`) and the AVX-512 VNNI kernels (`avx512` for Q4_K and Q5_K, `q6_k`).

#[cfg(target_arch = "x86_64")]
pub(super) mod avx2;
#[cfg(target_arch = "x86_64")]
pub(super) mod avx2_multi;
#[cfg(target_arch = "x86_64")]
pub(super) mod avx512;
#[cfg(target_arch = "x86_64")]
pub(super) mod q6_k;
