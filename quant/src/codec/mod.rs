//! Reference (scalar) dequantizers and quantizers, one module per format family.
//!
//! Each function has the shape of [`crate::DequantFn`] / [`crate::QuantizeFn`] and assumes
//! lengths already checked by the callers in the crate root. The arithmetic follows ggml's
//! reference code operation for operation in f32 without fused multiply-add, which is what
//! makes the outputs bit-exact (spec §15.8).

pub mod float;
pub mod fp4;
pub mod iquants;
pub mod kquants;
pub mod legacy;
pub mod lowbit;
pub mod q8;
pub mod repack;
