//! Test-ops cases: a small graph with named random inputs and one output `"out"`, run by the
//! executor at several thread counts and compared with the reference executor.

use graph::{Graph, GraphError, TensorDesc, TensorId, WeightData};
use quant::DType;

/// One test-ops case.
pub struct Case {
    /// Human-readable description (`"ADD f32{7,3} + f32{7,1}"`).
    pub name: String,
    /// The graph; its output `"out"` is compared.
    pub graph: Graph,
    /// Bytes for every named input.
    pub inputs: Vec<(String, Vec<u8>)>,
    /// Largest normalised mean squared error accepted against the reference.
    pub max_nmse: f64,
    /// Part of the quick set run by `cargo test` (large real-shape cases are not).
    pub quick: bool,
}

/// Deterministic generator for case data (xorshift64*).
#[derive(Debug, Clone)]
pub struct CaseRng(u64);

impl CaseRng {
    /// Seeded generator.
    pub fn new(seed: u64) -> CaseRng {
        CaseRng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// Next raw value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [-1, 1).
    pub fn uniform(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    /// `n` values uniform in [-scale, scale).
    pub fn f32s(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform() * scale).collect()
    }
    /// `n` values uniform in [lo, hi).
    pub fn f32s_in(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n)
            .map(|_| lo + (hi - lo) * (0.5 * self.uniform() + 0.5))
            .collect()
    }
}

/// Builder that collects inputs while a case graph is made.
pub struct CaseBuilder {
    /// The graph under construction.
    pub g: Graph,
    /// Input data.
    pub inputs: Vec<(String, Vec<u8>)>,
    /// Random source.
    pub rng: CaseRng,
}

impl CaseBuilder {
    /// New builder with a seed.
    pub fn new(seed: u64) -> CaseBuilder {
        CaseBuilder {
            g: Graph::new(),
            inputs: Vec::new(),
            rng: CaseRng::new(seed),
        }
    }
    /// A named f32 input with uniform data in ±scale.
    pub fn input_f32(
        &mut self,
        name: &str,
        ne: &[usize],
        scale: f32,
    ) -> Result<TensorId, GraphError> {
        let d = TensorDesc::f32(ne)?;
        let v = self.rng.f32s(d.nelements(), scale);
        self.input_data(name, d, bytemuck::cast_slice(&v).to_vec())
    }
    /// A named input with explicit bytes.
    pub fn input_data(
        &mut self,
        name: &str,
        d: TensorDesc,
        bytes: Vec<u8>,
    ) -> Result<TensorId, GraphError> {
        let id = self.g.input(name, d)?;
        self.inputs.push((name.to_string(), bytes));
        Ok(id)
    }
    /// A named i32 input.
    pub fn input_i32(&mut self, name: &str, v: &[i32]) -> Result<TensorId, GraphError> {
        let d = TensorDesc::new(DType::I32, &[v.len()])?;
        self.input_data(name, d, bytemuck::cast_slice(v).to_vec())
    }
    /// A weight of `dtype` `{k, n}` quantized from random f32 (types with a quantizer, or
    /// repacked from such a type) or random valid blocks.
    pub fn weight(
        &mut self,
        name: &str,
        dtype: DType,
        ne: &[usize],
        scale: f32,
    ) -> Result<TensorId, GraphError> {
        let d = TensorDesc::new(dtype, ne)?;
        let n = d.nelements();
        let x = self.rng.f32s(n, scale);
        let mut bytes = vec![0u8; d.nbytes()];
        let repacked = quant::codec::repack::repack_source(dtype)
            .filter(|(src, _)| src.info().quantize.is_some());
        match (dtype.info().quantize, repacked) {
            (Some(q), _) => q(&x, &mut bytes),
            // a load-time layout of a quantizable type (Q2_0_X): quantized, then converted
            (None, Some((src, convert))) => {
                let mut s = vec![0u8; TensorDesc::new(src, ne)?.nbytes()];
                (src.info().quantize.expect("filtered"))(&x, &mut s);
                convert(&s, &mut bytes);
            }
            (None, None) => {
                for b in bytes.iter_mut() {
                    *b = self.rng.next_u64() as u8;
                }
                // keep f16 super-scales small and finite
                let (off, ts) = (scale_offset(dtype), dtype.type_size());
                if let Some(o) = off {
                    for blk in bytes.chunks_exact_mut(ts) {
                        blk[o..o + 2].copy_from_slice(
                            &quant::scalar::f32_to_f16(scale / 64.0).to_le_bytes(),
                        );
                    }
                }
                let h = quant::scalar::f32_to_f16(scale / 64.0);
                for blk in bytes.chunks_exact_mut(ts) {
                    match dtype {
                        // IQ1_M's f16 scale is spread over the high nibbles of its last 8 bytes
                        DType::IQ1_M | DType::IQ1_M_X => {
                            for i in 0..4 {
                                let at = ts - 8 + 2 * i + 1;
                                blk[at] = (blk[at] & 0x0F) | (((h >> (4 * i)) as u8 & 0xF) << 4);
                            }
                        }
                        // MXFP4's E8M0 scale: 2^-15..2^8 (0xFF would be NaN)
                        DType::MXFP4 => blk[0] = 112 + blk[0] % 24,
                        _ => {}
                    }
                }
            }
        }
        self.g.weight(name, d, WeightData::from_vec(bytes))
    }
    /// A block-scaled FP8 E4M3 weight `{K, N}` (random codes of values in ±`scale`) with
    /// `tile`×`tile` power-of-two scales 2⁻³…2³ (an official checkpoint's dense matrix).
    pub fn weight_block_scaled(
        &mut self,
        name: &str,
        ne: [usize; 2],
        tile: usize,
        scale: f32,
    ) -> Result<TensorId, GraphError> {
        let d = TensorDesc::new(DType::F8_E4M3, &ne)?;
        let x = self.rng.f32s(d.nelements(), scale);
        let mut bytes = vec![0u8; d.nbytes()];
        quant::codec::float::quant_e4m3(&x, &mut bytes);
        let per_row = ne[0].div_ceil(tile);
        let values = (0..ne[1].div_ceil(tile) * per_row)
            .map(|_| 2f32.powi((self.rng.next_u64() % 7) as i32 - 3))
            .collect();
        let bs = graph::BlockScales {
            rows: tile,
            cols: tile,
            per_row,
            values,
        };
        let data = WeightData::from_vec(bytes).with_block_scales(std::sync::Arc::new(bs));
        self.g.weight(name, d, data)
    }
    /// Finish with output `out`.
    pub fn finish(
        mut self,
        name: String,
        out: TensorId,
        max_nmse: f64,
        quick: bool,
    ) -> Result<Case, GraphError> {
        self.g.output("out", out)?;
        Ok(Case {
            name,
            graph: self.g,
            inputs: self.inputs,
            max_nmse,
            quick,
        })
    }
}

fn scale_offset(t: DType) -> Option<usize> {
    match t {
        DType::IQ2_XXS
        | DType::IQ2_XS
        | DType::IQ1_S
        | DType::IQ1_S_X
        | DType::IQ2_XXS_X
        | DType::IQ4_XS => Some(0),
        DType::Q2_K => Some(80),
        _ => None,
    }
}

/// Normalised mean squared error `Σ(a−b)² / Σb²` (0 when both are zero).
pub fn nmse(got: &[f32], want: &[f32]) -> f64 {
    let (mut num, mut den) = (0f64, 0f64);
    for (&a, &b) in got.iter().zip(want) {
        if a.is_finite() && b.is_finite() {
            num += ((a - b) as f64).powi(2);
            den += (b as f64).powi(2);
        }
    }
    if den == 0.0 {
        num
    } else {
        num / den
    }
}
