//! The weight types dotted with Q8_0 activations: Q8_0, Q2_0 (and its load-time layout
//! Q2_0_X) and MXFP4. AVX2 one-row and multi-row kernels (`avx2`); Q2_0's AVX2 and AVX-VNNI
//! multi-row kernels (`q2_0_avx2`); AVX-512 kernels per type (`q8_0`, `q2_0`, `mxfp4`); the
//! prompt-chunk tiles: Q8_0's sixteen-row groups (`tile_x16`) and Q2_0 / Q2_0_X's tiles on
//! packed Q8_0 activation panels (`tile` the panel, `tile_q2`, `tile_q2_avx2`); and the
//! activation quantizers (`quantize`, Q8_0 and Q8_K with AVX-512 or AVX2, the scalar
//! quantizers' bytes).

#[cfg(target_arch = "x86_64")]
pub(super) mod avx2;
#[cfg(target_arch = "x86_64")]
mod fp4_row;
#[cfg(target_arch = "x86_64")]
pub(super) mod mxfp4;
#[cfg(target_arch = "x86_64")]
pub(super) mod q2_0;
#[cfg(target_arch = "x86_64")]
pub(super) mod q2_0_avx2;
#[cfg(target_arch = "x86_64")]
pub(super) mod q8_0;
#[cfg(target_arch = "x86_64")]
pub(crate) mod quantize;
pub mod tile;
pub(super) mod tile_q2;
pub(super) mod tile_q2_avx2;
pub mod tile_x16;
