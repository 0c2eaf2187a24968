//! The grid types IQ2_XXS, IQ1_S, IQ1_M and their load-time layouts IQ2_XXS_X, IQ1_S_X and
//! IQ1_M_X · Q8_K: AVX2 one-row kernels (`avx2`), the AVX-512 VNNI kernels (`avx512`, one
//! child per type), the prompt-chunk tile on expanded rows for MoE experts (`tile`) and the
//! AMX tile (`amx`), and the sixteen-row group tile for IQ2_XXS experts (`group`).

pub mod amx;
#[cfg(target_arch = "x86_64")]
pub(super) mod avx2;
#[cfg(target_arch = "x86_64")]
pub(super) mod avx512;
pub mod group;
pub mod tile;
