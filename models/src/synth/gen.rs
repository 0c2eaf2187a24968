//! The random bytes of a synthetic model: each tensor generated chunk by chunk from a
//! generator seeded by (seed, name, chunk), its scales made sane for its block type.

use super::{Planned, TID2EID_ROWS};
use quant::DType;

/// Bytes generated per chunk (rounded down to whole blocks); fixed, so the bytes do not
/// depend on buffering.
const CHUNK_BYTES: usize = 8 << 20;

/// How a block type's scale bytes are made sane after the block is filled with random bytes.
#[derive(Clone, Copy, Debug)]
pub(super) enum Scales {
    /// f16 values at these byte offsets of the block.
    F16(&'static [(usize, f32)]),
    /// IQ1_M: the f16 super-scale lives in the top nibbles of the four u16 scale words
    /// (bytes 48..56).
    Iq1m(f32),
    /// MXFP4: the E8M0 exponent byte at offset 0.
    E8m0(u8),
}

/// How a tensor's bytes are generated.
#[derive(Clone, Copy, Debug)]
pub(super) enum Gen {
    /// Approximately normal × 0.02, through the type's storage quantizer (F32, F16, BF16).
    Float,
    /// Random blocks with fixed scales.
    Blocks(Scales),
    /// Expert ids (`ffn_gate_tid2eid`, I32).
    Ids,
}

/// The generator of a type, `None` for types synth cannot write (activation-only, integer
/// other than the id table, or without a known block layout).
pub(super) fn generator(t: DType) -> Option<Gen> {
    use DType::*;
    const D01: &[(usize, f32)] = &[(0, 0.01)];
    const K_DDMIN: &[(usize, f32)] = &[(0, 0.002), (2, 0.002)];
    Some(match t {
        F32 | F16 | BF16 => Gen::Float,
        I32 => Gen::Ids,
        Q4_0 | Q5_0 | Q8_0 | IQ4_NL | Q1_0 | Q2_0 => Gen::Blocks(Scales::F16(D01)),
        IQ2_XXS | IQ2_XS | IQ2_S | IQ3_XXS | IQ3_S | IQ1_S | IQ4_XS => {
            Gen::Blocks(Scales::F16(D01))
        }
        // d and the min m: x = d·q + m, q ∈ 0..16 (0..32 for Q5_1)
        Q4_1 => Gen::Blocks(Scales::F16(&[(0, 0.01), (2, -0.08)])),
        Q5_1 => Gen::Blocks(Scales::F16(&[(0, 0.005), (2, -0.08)])),
        Q4_K | Q5_K => Gen::Blocks(Scales::F16(K_DDMIN)),
        Q2_K => Gen::Blocks(Scales::F16(&[(80, 0.002), (82, 0.002)])),
        Q3_K => Gen::Blocks(Scales::F16(&[(108, 0.002)])),
        Q6_K => Gen::Blocks(Scales::F16(&[(208, 0.002)])),
        TQ1_0 => Gen::Blocks(Scales::F16(&[(52, 0.01)])),
        TQ2_0 => Gen::Blocks(Scales::F16(&[(64, 0.01)])),
        IQ1_M => Gen::Blocks(Scales::Iq1m(0.01)),
        MXFP4 => Gen::Blocks(Scales::E8m0(120)),
        _ => return None,
    })
}

/// Random weights of `dtype` with `n_elements` elements (whole blocks), generated as synth
/// writes a tensor of that type (sane scales at the layout's scale offsets); `None` for a
/// type synth cannot write. Used by `fathom bench --matvec`.
pub fn random_weights(dtype: DType, n_elements: u64, seed: u64) -> Option<Vec<u8>> {
    if dtype == DType::I32 || generator(dtype).is_none() {
        return None;
    }
    let spec = Planned {
        name: format!("matvec.{}", dtype.name()),
        dtype,
        ne: vec![n_elements],
    };
    let g = TensorGen::new(&spec, seed, 0);
    let mut out = Vec::with_capacity(spec.n_bytes() as usize);
    let (mut buf, mut floats) = (Vec::new(), Vec::new());
    for c in 0..g.n_chunks() {
        g.chunk(c, &mut buf, &mut floats);
        out.extend_from_slice(&buf);
    }
    Some(out)
}

/// SplitMix64 finalizer (seed mixing).
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// FNV-1a of a tensor name.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// wyrand: fast, small, good enough for random weights.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(splitmix(seed))
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0xa076_1d64_78bd_642f);
        let t = u128::from(self.0) * u128::from(self.0 ^ 0xe703_7ed1_a0b4_28db);
        (t >> 64) as u64 ^ t as u64
    }
    fn fill(&mut self, buf: &mut [u8]) {
        let mut it = buf.chunks_exact_mut(8);
        for c in &mut it {
            c.copy_from_slice(&self.next().to_le_bytes());
        }
        let rest = it.into_remainder();
        let n = rest.len();
        rest.copy_from_slice(&self.next().to_le_bytes()[..n]);
    }
    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
    /// Approximately standard normal: the sum of four uniforms, centred and scaled to unit
    /// variance (bounded at ±2√3).
    fn normal(&mut self) -> f32 {
        let x = self.next();
        let s: u32 = (0..4).map(|k| ((x >> (16 * k)) & 0xffff) as u32).sum();
        (s as f32 / 65536.0 - 2.0) * 3f32.sqrt()
    }
}

/// f16 bytes of `x`, through the quant crate's F16 storage quantizer.
fn f16_bytes(x: f32) -> [u8; 2] {
    let mut b = [0u8; 2];
    quant::quantize_row(DType::F16, &[x], &mut b).expect("one f16 element");
    b
}

/// Generates the bytes of one tensor, chunk by chunk.
pub(super) struct TensorGen {
    dtype: DType,
    gen: Gen,
    seed: u64,
    /// Elements per chunk (whole blocks).
    chunk_elems: u64,
    n_elements: u64,
    /// Scale patches as (offset, bytes).
    patches: Vec<(usize, [u8; 2])>,
    /// The id table (rows of `ne[0]` ids) for [`Gen::Ids`].
    ids: Vec<Vec<i32>>,
    /// Row length (for [`Gen::Ids`]).
    ne0: u64,
}

impl TensorGen {
    pub(super) fn new(spec: &Planned, seed: u64, experts: usize) -> TensorGen {
        let dtype = spec.dtype;
        let gen = generator(dtype).expect("plan types are checked");
        let seed = splitmix(seed ^ splitmix(fnv(&spec.name)));
        let per_chunk_blocks = (CHUNK_BYTES / dtype.type_size()).max(1) as u64;
        let patches = match gen {
            Gen::Blocks(Scales::F16(v)) => v.iter().map(|&(o, x)| (o, f16_bytes(x))).collect(),
            _ => Vec::new(),
        };
        let ne0 = spec.ne[0];
        let ids = match gen {
            Gen::Ids => {
                let mut rng = Rng::new(seed);
                (0..TID2EID_ROWS)
                    .map(|_| {
                        // partial Fisher–Yates: ne0 distinct ids of 0..experts
                        let mut all: Vec<i32> = (0..experts as i32).collect();
                        for k in 0..ne0 as usize {
                            let j = k + rng.below((experts - k) as u64) as usize;
                            all.swap(k, j);
                        }
                        all.truncate(ne0 as usize);
                        all
                    })
                    .collect()
            }
            _ => Vec::new(),
        };
        TensorGen {
            dtype,
            gen,
            seed,
            chunk_elems: per_chunk_blocks * dtype.block_size() as u64,
            n_elements: spec.n_elements(),
            patches,
            ids,
            ne0,
        }
    }

    pub(super) fn n_chunks(&self) -> u64 {
        self.n_elements.div_ceil(self.chunk_elems)
    }

    /// Fill `buf` with chunk `c`; `floats` is scratch space.
    pub(super) fn chunk(&self, c: u64, buf: &mut Vec<u8>, floats: &mut Vec<f32>) {
        let start = c * self.chunk_elems;
        let n = self.chunk_elems.min(self.n_elements - start) as usize;
        let bs = self.dtype.block_size();
        let ts = self.dtype.type_size();
        buf.clear();
        buf.resize(n / bs * ts, 0);
        let mut rng = Rng::new(self.seed ^ splitmix(c.wrapping_add(1)));
        match self.gen {
            Gen::Float => {
                floats.clear();
                floats.extend((0..n).map(|_| rng.normal() * 0.02));
                quant::quantize_row(self.dtype, floats, buf).expect("float chunk sizes");
            }
            Gen::Ids => {
                for (k, out) in buf.chunks_exact_mut(4).enumerate() {
                    let e = start + k as u64;
                    let row = &self.ids[((e / self.ne0) % TID2EID_ROWS as u64) as usize];
                    out.copy_from_slice(&row[(e % self.ne0) as usize].to_le_bytes());
                }
            }
            Gen::Blocks(scales) => {
                rng.fill(buf);
                for b in buf.chunks_exact_mut(ts) {
                    match scales {
                        Scales::F16(_) => {
                            for &(o, v) in &self.patches {
                                b[o..o + 2].copy_from_slice(&v);
                            }
                        }
                        Scales::Iq1m(x) => {
                            let h = u16::from_le_bytes(f16_bytes(x));
                            for k in 0..4 {
                                let nib = ((h >> (4 * k)) & 0xf) as u8;
                                let hi = 48 + 2 * k + 1;
                                b[hi] = (b[hi] & 0x0f) | (nib << 4);
                            }
                        }
                        Scales::E8m0(e) => b[0] = e,
                    }
                }
            }
        }
    }
}

/// Bytes per generated chunk of a checkpoint tensor (fixed, so the bytes do not depend on
/// buffering).
pub(super) const ST_CHUNK: usize = 8 << 20;

/// How a synthetic checkpoint tensor's bytes are made (see [`super::checkpoint`]), which also
/// fixes its safetensors dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StGen {
    /// BF16, approximately normal × 0.02.
    Bf16,
    /// F32, approximately normal × 0.02.
    F32,
    /// FP8 E4M3 codes with exponent fields 4..=8.
    Fp8,
    /// FP4 e2m1 codes, two per byte (I8).
    Fp4,
    /// E8M0 scale bytes, all this value.
    Scale(u8),
    /// I64 expert ids below this count: rows of distinct ids (the row length is the shape's
    /// last dimension), 64 rows tiled over the vocabulary.
    Ids(u32),
}

impl StGen {
    /// The safetensors dtype name.
    pub fn dtype(self) -> &'static str {
        match self {
            StGen::Bf16 => "BF16",
            StGen::F32 => "F32",
            StGen::Fp8 => "F8_E4M3",
            StGen::Fp4 => "I8",
            StGen::Scale(_) => "F8_E8M0",
            StGen::Ids(_) => "I64",
        }
    }

    /// Bytes per element (of the stored shape).
    pub fn elem_bytes(self) -> u64 {
        match self {
            StGen::Bf16 => 2,
            StGen::F32 => 4,
            StGen::Fp8 | StGen::Fp4 | StGen::Scale(_) => 1,
            StGen::Ids(_) => 8,
        }
    }
}

/// Chunk `c` (`len` bytes, starting at byte `c·ST_CHUNK`) of checkpoint tensor `t` into `out`.
pub(super) fn st_chunk(
    t: &super::checkpoint::StPlanned,
    seed: u64,
    c: u64,
    len: usize,
    out: &mut Vec<u8>,
) {
    let seed = splitmix(seed ^ splitmix(fnv(&t.name)));
    let mut rng = Rng::new(seed ^ splitmix(c.wrapping_add(1)));
    out.clear();
    out.resize(len, 0);
    match t.gen {
        StGen::Bf16 => {
            let x: Vec<f32> = (0..len / 2).map(|_| rng.normal() * 0.02).collect();
            quant::quantize_row(DType::BF16, &x, out).expect("bf16 chunk");
        }
        StGen::F32 => {
            for o in out.chunks_exact_mut(4) {
                o.copy_from_slice(&(rng.normal() * 0.02).to_le_bytes());
            }
        }
        StGen::Fp8 => {
            rng.fill(out);
            for b in out.iter_mut() {
                let e = 4 + ((*b >> 3) & 0xF) % 5;
                *b = (*b & 0x87) | (e << 3);
            }
        }
        StGen::Fp4 => rng.fill(out),
        StGen::Scale(v) => out.fill(v),
        StGen::Ids(experts) => {
            let used = *t.shape.last().unwrap_or(&1) as usize;
            let mut rows = Rng::new(seed);
            let table: Vec<Vec<i64>> = (0..TID2EID_ROWS)
                .map(|_| {
                    // partial Fisher–Yates: `used` distinct ids of 0..experts
                    let mut all: Vec<i64> = (0..i64::from(experts)).collect();
                    for k in 0..used.min(all.len()) {
                        let j = k + rows.below((all.len() - k) as u64) as usize;
                        all.swap(k, j);
                    }
                    all.truncate(used);
                    all
                })
                .collect();
            let first = c * (ST_CHUNK as u64 / 8);
            for (k, o) in out.chunks_exact_mut(8).enumerate() {
                let e = first + k as u64;
                let row = &table[((e / used as u64) % TID2EID_ROWS as u64) as usize];
                o.copy_from_slice(&row[(e % used as u64) as usize].to_le_bytes());
            }
        }
    }
}
