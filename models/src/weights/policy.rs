//! How the weights of an official DeepSeek checkpoint (FP8 E4M3 dense weights with block
//! scales, FP4 e2m1 routed experts with per-32 scales, BF16 and F32 tensors) are stored once
//! loaded: part of [`crate::model::LoadOptions`], applied by the checkpoint loader.

/// How FP8 (E4M3 + block scale) dense weights are stored in the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fp8Policy {
    /// Used in place from the memory map (default; 1 byte per weight): MUL_MAT scales the
    /// activations by the 128×128 tile scales and runs the FP8 kernels against F32
    /// activations (exact products, as [`Fp8Policy::F32`] computes them). FP8 routed experts
    /// (not V4's, which are FP4) are stacked as F32.
    #[default]
    InPlace,
    /// Exact dequantization to F32 (4 bytes per weight).
    F32,
    /// Dequantize, then ggml's reference Q8_0 quantizer (what llama.cpp's converter does; the
    /// memory-sane choice for the real model, lossy). Falls back to F32 for a matrix whose
    /// input dimension is not a multiple of 32.
    Q8_0,
}

/// How FP4 (e2m1 + per-32 E8M0 scale) routed experts are stored in the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fp4Policy {
    /// Used in place from the memory map (default): each expert's codes and scales are read
    /// where they lie, and MUL_MAT_ID converts a few rows at a time to MXFP4 just before its
    /// kernels (the same bits as [`Fp4Policy::Mxfp4`], without the copy; memory after load
    /// is the non-expert weights).
    #[default]
    InPlace,
    /// Lossless repack into a stacked copy of ggml MXFP4 blocks at load (17 bytes per 32
    /// weights, all in memory the OS cannot page back to the file).
    Mxfp4,
    /// Exact dequantization to F32.
    F32,
}

/// How BF16 / F16 matrices (rank ≥ 2) are stored in the graph. 1-D ones always become F32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HalfPolicy {
    /// Used in place from the memory map (default).
    #[default]
    ZeroCopy,
    /// Upcast to F32 (exact; the matmuls then run in fp32 instead of rounding the activations).
    F32,
}

/// How a checkpoint's weights are stored once loaded (`--st-weights`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StOptions {
    /// FP8 dense weights.
    pub fp8: Fp8Policy,
    /// FP4 routed experts.
    pub fp4: Fp4Policy,
    /// BF16 / F16 matrices.
    pub half: HalfPolicy,
}

impl StOptions {
    /// Every matrix in F32 (all conversions exact): the graph computes in fp32 end to end, like
    /// the transformers reference.
    pub fn fp32() -> StOptions {
        StOptions {
            fp8: Fp8Policy::F32,
            fp4: Fp4Policy::F32,
            half: HalfPolicy::F32,
        }
    }
}
