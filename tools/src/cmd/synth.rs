//! `fathom synth OUT.gguf --layers N --recipe seed|q4k|iq2 [--type PATTERN=TYPE ...]
//! [--experts E] [--seed S]`: write a random-weight DeepSeek-V4 GGUF at real V4-Flash
//! dimensions, for benchmarks.
//!
//! This is the Rust replacement of `shared/tools/synth_dsv4_gguf.py` and keeps its contract:
//! llama.cpp's `deepseek4` metadata keys (same keys, types, values and order), the same tensor
//! names, GGUF shapes and order, the same per-recipe types, the same placeholder vocabulary
//! (129280 tokens `<tN>`, BOS/EOS specials, one merge), so llama.cpp and fathom load the same
//! bytes. Only the random bytes differ from the script's (its numpy generator is not
//! reproduced).
//!
//! **Random data.** Quantized tensors are random blocks: every byte random (codes, sub-block
//! scales, grid indices, signs), then the block's f16 super-scale(s) overwritten with a fixed
//! sane value (0.01, or 0.002 for the K-quants whose sub-scales multiply it; MXFP4's E8M0
//! exponent 120), so every dequantized weight is finite. F32 / F16 / BF16 tensors hold
//! approximately normal values (Irwin–Hall sum of four uniforms, bounded at ±3.5σ) times 0.02,
//! encoded with the quant crate's storage quantizers. `ffn_gate_tid2eid` (I32) holds 64 rows of
//! `expert_used_count` distinct expert ids tiled over the vocabulary, like the script.
//!
//! **Determinism.** The bytes depend only on `--seed`, the tensor's name and its shape/type:
//! each tensor is generated in fixed 8 MiB chunks, each from its own generator seeded by
//! (seed, FNV hash of the name, chunk index). A tensor present in two files with the same seed,
//! type and shape has the same bytes (e.g. `blk.0.*` with `--layers 1` and `--layers 6`).
//!
//! **Streaming.** [`GgufWriter`] wants every tensor's bytes up front, so it is used for the
//! header only: each tensor is queued as a borrowed slice of one zero buffer as large as the
//! largest tensor (allocated zeroed and never read, so the OS never commits its pages), the
//! writer is run once into a byte counter (total size) and once into a sink keeping only the
//! first `total − data section` bytes (header, tensor infos, padding: exactly what the writer
//! would have written before the data). Then a generator thread produces the data chunk by
//! chunk into a bounded channel (two chunks in flight) and the main thread writes each chunk
//! and the alignment padding after each tensor. Resident memory stays under 100 MiB (67 MiB
//! peak for the 9.5 GB `--layers 6` file, most of it the 129280-token vocabulary and the
//! chunks in flight); the peak is printed at the end. On error the partial file is removed.
//!
//! **`--type PATTERN=TYPE`** (repeatable) sets the type of every tensor whose name matches
//! PATTERN, a regular expression searched anywhere in the name (so a plain substring such as
//! `_exps` works; anchor with `^…$` for exact names). Later options win over earlier ones. A
//! pattern matching no tensor, an unknown or non-weight type, or a type whose block size does
//! not divide the tensor's row length is an error naming the pattern or the tensor.
//!
//! **`--tiny`** (hidden, for tests only) keeps the layer structure, names, key set and recipes
//! but shrinks every dimension (D 256, 4 heads of 128, q rank 256, 2 output groups of rank 128,
//! expert width 256, indexer 2×64, window 16, RoPE 16, vocabulary 512) — every row length stays
//! a multiple of 256, so every recipe and override type works.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use models::gguf::{Array, GgufWriter, Value};
use quant::DType;
use regex::Regex;

use crate::mem;

/// Arguments of `fathom synth`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Output .gguf file (created or truncated; removed again if writing fails).
    pub out: PathBuf,
    /// Decoder layers (compress ratios follow V4-Flash: 0, 0, then 4 / 128 alternating).
    #[arg(long, default_value_t = 6)]
    pub layers: usize,
    /// Type recipe: `seed` (the project seed's CPU-tuned mix: IQ1_S experts, IQ2_XXS in
    /// layers 0–1, Q2_0 attention), `q4k` (all Q4_K, Q6_K output) or `iq2` (IQ2_XXS experts,
    /// Q8_0 dense).
    #[arg(long, default_value = "seed")]
    pub recipe: String,
    /// Override the type of the tensors whose name matches PATTERN (a regex searched anywhere
    /// in the name, so a substring works; later options win), e.g. `--type _exps=Q4_K` or
    /// `--type '^output\.weight$=Q8_0'`. Repeatable.
    #[arg(long = "type", value_name = "PATTERN=TYPE")]
    pub types: Vec<String>,
    /// Routed experts per layer (at least 6, the number used per token).
    #[arg(long, default_value_t = 256)]
    pub experts: usize,
    /// Seed of the random weights (the same seed gives the same bytes).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Tests only: tiny dimensions instead of V4-Flash's (same names, keys and recipes).
    #[arg(long, hide = true)]
    pub tiny: bool,
}

/// Model dimensions.
#[derive(Clone, Copy, Debug)]
struct Dims {
    d: u64,
    hc: u64,
    h: u64,
    hd: u64,
    qr: u64,
    og: u64,
    or: u64,
    i: u64,
    ih: u64,
    ihd: u64,
    itop: u64,
    win: u64,
    rope: u64,
    vocab: u64,
}

/// DeepSeek-V4-Flash.
const FLASH: Dims = Dims {
    d: 4096,
    hc: 4,
    h: 64,
    hd: 512,
    qr: 1024,
    og: 8,
    or: 1024,
    i: 2048,
    ih: 64,
    ihd: 128,
    itop: 512,
    win: 128,
    rope: 64,
    vocab: 129280,
};

/// `--tiny` (tests): every row length a multiple of 256.
const TINY: Dims = Dims {
    d: 256,
    hc: 4,
    h: 4,
    hd: 128,
    qr: 256,
    og: 2,
    or: 128,
    i: 256,
    ih: 2,
    ihd: 64,
    itop: 4,
    win: 16,
    rope: 16,
    vocab: 512,
};

/// Experts used per token (`expert_used_count`, and the row length of `ffn_gate_tid2eid`).
const EXPERTS_USED: usize = 6;
/// Hash-routed layers.
const HASH_LAYERS: usize = 3;
/// Distinct rows of the `ffn_gate_tid2eid` table (tiled over the vocabulary).
const TID2EID_ROWS: usize = 64;
/// Bytes generated per chunk (rounded down to whole blocks); fixed, so the bytes do not
/// depend on buffering.
const CHUNK_BYTES: usize = 8 << 20;

/// Types of each tensor role.
#[derive(Clone, Copy, Debug)]
struct Recipe {
    embd: DType,
    out: DType,
    attn: DType,
    shexp_gu: DType,
    shexp_down: DType,
    exps: DType,
    exps_anchor: DType,
    idx_qb: DType,
    router: DType,
    comp: DType,
}

/// The recipe names, for messages.
const RECIPES: &str = "seed, q4k, iq2";

fn recipe(name: &str) -> Option<Recipe> {
    use DType::*;
    Some(match name {
        // the recipe of the CPU-tuned V4-Flash build described in the project's seed
        "seed" => Recipe {
            embd: Q4_K,
            out: Q6_K,
            attn: Q2_0,
            shexp_gu: Q5_K,
            shexp_down: Q6_K,
            exps: IQ1_S,
            exps_anchor: IQ2_XXS,
            idx_qb: Q2_0,
            router: F32,
            comp: BF16,
        },
        // a common public 4-bit mix
        "q4k" => Recipe {
            embd: Q4_K,
            out: Q6_K,
            attn: Q4_K,
            shexp_gu: Q4_K,
            shexp_down: Q6_K,
            exps: Q4_K,
            exps_anchor: Q4_K,
            idx_qb: Q4_K,
            router: F32,
            comp: BF16,
        },
        // 2-bit experts, 8-bit dense (close to the converter's default dense type)
        "iq2" => Recipe {
            embd: Q8_0,
            out: Q8_0,
            attn: Q8_0,
            shexp_gu: Q8_0,
            shexp_down: Q8_0,
            exps: IQ2_XXS,
            exps_anchor: IQ2_XXS,
            idx_qb: Q8_0,
            router: F32,
            comp: BF16,
        },
        _ => return None,
    })
}

/// How a block type's scale bytes are made sane after the block is filled with random bytes.
#[derive(Clone, Copy, Debug)]
enum Scales {
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
enum Gen {
    /// Approximately normal × 0.02, through the type's storage quantizer (F32, F16, BF16).
    Float,
    /// Random blocks with fixed scales.
    Blocks(Scales),
    /// Expert ids (`ffn_gate_tid2eid`, I32).
    Ids,
}

/// The generator of a type, `None` for types synth cannot write (activation-only, integer
/// other than the id table, or without a known block layout).
fn generator(t: DType) -> Option<Gen> {
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
pub(crate) fn random_weights(dtype: DType, n_elements: u64, seed: u64) -> Option<Vec<u8>> {
    if dtype == DType::I32 || generator(dtype).is_none() {
        return None;
    }
    let spec = Spec {
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

/// Types accepted by `--type` (every weight type with a generator; not I32).
fn override_types() -> String {
    DType::ALL
        .iter()
        .filter(|&&t| t != DType::I32 && generator(t).is_some())
        .map(|t| t.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// One tensor of the plan.
#[derive(Clone, Debug)]
struct Spec {
    name: String,
    dtype: DType,
    ne: Vec<u64>,
}

impl Spec {
    fn n_elements(&self) -> u64 {
        self.ne.iter().product()
    }
    fn n_bytes(&self) -> u64 {
        self.n_elements() / self.dtype.block_size() as u64 * self.dtype.type_size() as u64
    }
}

/// V4-Flash's compress ratios: layers 0 and 1 sliding, then 4 / 128 alternating up to layer
/// 42, then 0; at least 44 entries (like the script), zero-padded to the layer count.
fn compress_ratios(layers: usize) -> Vec<i32> {
    let mut r = vec![0, 0];
    r.extend((2..43).map(|i| if i % 2 == 0 { 4 } else { 128 }));
    r.push(0);
    r.resize(layers.max(44), 0);
    r
}

/// The tensors, in the script's order, with the recipe's types.
fn plan(dm: &Dims, layers: usize, experts: u64, r: &Recipe, ratios: &[i32]) -> Vec<Spec> {
    let mut v = Vec::new();
    let mut t = |name: String, dtype: DType, ne: &[u64]| {
        v.push(Spec {
            name,
            dtype,
            ne: ne.to_vec(),
        })
    };
    let Dims {
        d,
        hc,
        h,
        hd,
        qr,
        og,
        or,
        i,
        ih,
        ihd,
        vocab,
        ..
    } = *dm;
    use DType::{F32, I32};
    t("token_embd.weight".into(), r.embd, &[d, vocab]);
    for (il, &ratio) in ratios.iter().enumerate().take(layers) {
        let p = format!("blk.{il}.");
        for part in ["attn", "ffn"] {
            t(
                format!("{p}hc_{part}_fn.weight"),
                F32,
                &[hc * d, (2 + hc) * hc],
            );
            t(format!("{p}hc_{part}_base.weight"), F32, &[(2 + hc) * hc]);
            t(format!("{p}hc_{part}_scale.weight"), F32, &[3]);
        }
        t(format!("{p}attn_norm.weight"), F32, &[d]);
        t(format!("{p}attn_q_a.weight"), r.attn, &[d, qr]);
        t(format!("{p}attn_q_a_norm.weight"), F32, &[qr]);
        t(format!("{p}attn_q_b.weight"), r.attn, &[qr, h * hd]);
        t(format!("{p}attn_kv.weight"), r.attn, &[d, hd]);
        t(format!("{p}attn_kv_a_norm.weight"), F32, &[hd]);
        t(format!("{p}attn_sinks.weight"), F32, &[h]);
        t(
            format!("{p}attn_output_a.weight"),
            r.attn,
            &[h * hd / og, og * or],
        );
        t(format!("{p}attn_output_b.weight"), r.attn, &[og * or, d]);
        let ratio = ratio as u64;
        if ratio != 0 {
            let coff = if ratio == 4 { 2 } else { 1 };
            t(
                format!("{p}attn_compressor_kv.weight"),
                r.comp,
                &[d, coff * hd],
            );
            t(
                format!("{p}attn_compressor_gate.weight"),
                r.comp,
                &[d, coff * hd],
            );
            t(
                format!("{p}attn_compressor_ape.weight"),
                F32,
                &[coff * hd, ratio],
            );
            t(format!("{p}attn_compressor_norm.weight"), F32, &[hd]);
        }
        if ratio == 4 {
            t(
                format!("{p}indexer.attn_q_b.weight"),
                r.idx_qb,
                &[qr, ih * ihd],
            );
            t(format!("{p}indexer.proj.weight"), r.comp, &[d, ih]);
            t(
                format!("{p}indexer_compressor_kv.weight"),
                r.comp,
                &[d, 2 * ihd],
            );
            t(
                format!("{p}indexer_compressor_gate.weight"),
                r.comp,
                &[d, 2 * ihd],
            );
            t(
                format!("{p}indexer_compressor_ape.weight"),
                F32,
                &[2 * ihd, 4],
            );
            t(format!("{p}indexer_compressor_norm.weight"), F32, &[ihd]);
        }
        t(format!("{p}ffn_norm.weight"), F32, &[d]);
        t(format!("{p}ffn_gate_inp.weight"), r.router, &[d, experts]);
        if il < HASH_LAYERS {
            t(
                format!("{p}ffn_gate_tid2eid.weight"),
                I32,
                &[EXPERTS_USED as u64, vocab],
            );
        } else {
            t(format!("{p}exp_probs_b.bias"), F32, &[experts]);
        }
        let ex = if il < 2 { r.exps_anchor } else { r.exps };
        t(format!("{p}ffn_gate_exps.weight"), ex, &[d, i, experts]);
        t(format!("{p}ffn_up_exps.weight"), ex, &[d, i, experts]);
        t(format!("{p}ffn_down_exps.weight"), ex, &[i, d, experts]);
        t(format!("{p}ffn_gate_shexp.weight"), r.shexp_gu, &[d, i]);
        t(format!("{p}ffn_up_shexp.weight"), r.shexp_gu, &[d, i]);
        t(format!("{p}ffn_down_shexp.weight"), r.shexp_down, &[i, d]);
    }
    t("output_hc_fn.weight".into(), F32, &[hc * d, hc]);
    t("output_hc_base.weight".into(), F32, &[hc]);
    t("output_hc_scale.weight".into(), F32, &[1]);
    t("output_norm.weight".into(), F32, &[d]);
    t("output.weight".into(), r.out, &[d, vocab]);
    v
}

/// The metadata, in the script's order.
fn metadata(
    dm: &Dims,
    layers: usize,
    experts: usize,
    ratios: &[i32],
    name: String,
) -> Vec<(String, Value)> {
    let u = |x: u64| Value::U32(x as u32);
    let f = Value::F32;
    let mut kv: Vec<(String, Value)> = vec![
        (
            "general.architecture".into(),
            Value::Str("deepseek4".into()),
        ),
        ("general.name".into(), Value::Str(name)),
    ];
    let arch = [
        ("context_length", u(1_048_576)),
        ("embedding_length", u(dm.d)),
        ("block_count", u(layers as u64)),
        ("attention.head_count", u(dm.h)),
        ("attention.head_count_kv", u(1)),
        ("attention.key_length", u(dm.hd)),
        ("attention.value_length", u(dm.hd)),
        ("rope.dimension_count", u(dm.rope)),
        ("attention.q_lora_rank", u(dm.qr)),
        ("attention.output_group_count", u(dm.og)),
        ("attention.output_lora_rank", u(dm.or)),
        ("attention.sliding_window", u(dm.win)),
        ("attention.layer_norm_rms_epsilon", f(1e-6)),
        ("rope.freq_base", f(10000.0)),
        ("attention.compress_rope_freq_base", f(160000.0)),
        ("rope.scaling.type", Value::Str("yarn".into())),
        ("rope.scaling.factor", f(16.0)),
        ("rope.scaling.original_context_length", u(65536)),
        ("rope.scaling.yarn_beta_fast", f(32.0)),
        ("rope.scaling.yarn_beta_slow", f(1.0)),
        (
            "attention.compress_ratios",
            Value::Array(Array::I32(ratios.to_vec())),
        ),
        ("expert_count", u(experts as u64)),
        ("expert_used_count", u(EXPERTS_USED as u64)),
        ("expert_shared_count", u(1)),
        ("expert_feed_forward_length", u(dm.i)),
        ("expert_gating_func", u(4)),
        ("expert_weights_norm", Value::Bool(true)),
        ("expert_weights_scale", f(1.5)),
        ("hash_layer_count", u(HASH_LAYERS as u64)),
        (
            "swiglu_clamp_exp",
            Value::Array(Array::F32(vec![10.0; layers])),
        ),
        (
            "swiglu_clamp_shexp",
            Value::Array(Array::F32(vec![10.0; layers])),
        ),
        ("hyper_connection.count", u(dm.hc)),
        ("hyper_connection.sinkhorn_iterations", u(20)),
        ("hyper_connection.epsilon", f(1e-6)),
        ("attention.indexer.head_count", u(dm.ih)),
        ("attention.indexer.key_length", u(dm.ihd)),
        ("attention.indexer.top_k", u(dm.itop)),
    ];
    kv.extend(arch.into_iter().map(|(k, v)| (format!("deepseek4.{k}"), v)));
    // a synthetic placeholder vocabulary of the real size
    let n = dm.vocab as usize;
    let mut toks: Vec<String> = (0..n).map(|i| format!("<t{i}>")).collect();
    toks[0] = "<｜begin▁of▁sentence｜>".into();
    toks[1] = "<｜end▁of▁sentence｜>".into();
    let mut types = vec![1i32; n];
    types[0] = 3;
    types[1] = 3;
    let s = |x: &str| Value::Str(x.into());
    kv.extend([
        ("tokenizer.ggml.model".into(), s("gpt2")),
        ("tokenizer.ggml.pre".into(), s("deepseek-v3")),
        (
            "tokenizer.ggml.tokens".into(),
            Value::Array(Array::Str(toks)),
        ),
        (
            "tokenizer.ggml.token_type".into(),
            Value::Array(Array::I32(types)),
        ),
        (
            "tokenizer.ggml.merges".into(),
            Value::Array(Array::Str(vec!["< t".into()])),
        ),
        ("tokenizer.ggml.bos_token_id".into(), Value::U32(0)),
        ("tokenizer.ggml.eos_token_id".into(), Value::U32(1)),
    ]);
    kv
}

/// Parse `PATTERN=TYPE` (split at the last `=`).
fn parse_override(s: &str) -> Result<(Regex, DType)> {
    let Some((pat, ty)) = s.rsplit_once('=') else {
        bail!("--type {s}: expected PATTERN=TYPE, e.g. --type _exps=Q4_K");
    };
    ensure!(!pat.is_empty(), "--type {s}: empty PATTERN");
    let re = Regex::new(pat).with_context(|| format!("--type {s}: bad regular expression"))?;
    let dtype = DType::from_name(ty).filter(|&t| t != DType::I32 && generator(t).is_some());
    let Some(dtype) = dtype else {
        bail!(
            "--type {s}: unknown or unsupported type '{ty}' (supported: {})",
            override_types()
        );
    };
    Ok((re, dtype))
}

// ---------------------------------------------------------------------------------------------
// random numbers

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
struct TensorGen {
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
    fn new(spec: &Spec, seed: u64, experts: usize) -> TensorGen {
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

    fn n_chunks(&self) -> u64 {
        self.n_elements.div_ceil(self.chunk_elems)
    }

    /// Fill `buf` with chunk `c`; `floats` is scratch space.
    fn chunk(&self, c: u64, buf: &mut Vec<u8>, floats: &mut Vec<f32>) {
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

// ---------------------------------------------------------------------------------------------
// header via GgufWriter

/// A sink that only counts bytes.
struct Count(u64);

impl Write for Count {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A sink keeping the first `limit` bytes (never reading past them).
struct Prefix {
    buf: Vec<u8>,
    limit: usize,
}

impl Write for Prefix {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = self.limit - self.buf.len();
        self.buf.extend_from_slice(&buf[..buf.len().min(room)]);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The encoded header (everything before the first tensor's data, padding included), the
/// alignment and the total file size, as [`GgufWriter`] would write them.
fn encode_header(kv: Vec<(String, Value)>, specs: &[Spec]) -> Result<(Vec<u8>, u64, u64)> {
    let max = specs.iter().map(Spec::n_bytes).max().unwrap_or(0);
    // zeroed and never read: the pages are never committed
    let zeros = vec![0u8; usize::try_from(max).context("tensor too large")?];
    let mut w = GgufWriter::new();
    for (k, v) in kv {
        w.add_kv(k, v)?;
    }
    for s in specs {
        let data = &zeros[..s.n_bytes() as usize];
        w.add_tensor(s.name.clone(), s.dtype, &s.ne, Cow::Borrowed(data))?;
    }
    let align = w.alignment();
    let total = w.write_to(Count(0))?;
    let data: u64 = specs
        .iter()
        .map(|s| s.n_bytes().div_ceil(align) * align)
        .sum();
    let head_len = total - data;
    let mut head = Prefix {
        buf: Vec::with_capacity(head_len as usize),
        limit: head_len as usize,
    };
    w.write_to(&mut head)?;
    Ok((head.buf, align, total))
}

// ---------------------------------------------------------------------------------------------

fn human(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    if v < 1024.0 {
        return format!("{n} B");
    }
    let mut u = 0;
    v /= 1024.0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

/// Run the command.
pub fn run(args: &Args) -> Result<()> {
    let Some(r) = recipe(&args.recipe) else {
        bail!(
            "--recipe {}: unknown recipe (choose one of {RECIPES})",
            args.recipe
        );
    };
    ensure!(args.layers >= 1, "--layers must be at least 1");
    ensure!(
        args.experts >= EXPERTS_USED && args.experts <= i32::MAX as usize,
        "--experts {}: need at least {EXPERTS_USED} (the experts used per token)",
        args.experts
    );
    let overrides = args
        .types
        .iter()
        .map(|s| parse_override(s))
        .collect::<Result<Vec<_>>>()?;
    let dims = if args.tiny { TINY } else { FLASH };
    let ratios = compress_ratios(args.layers);
    let mut specs = plan(&dims, args.layers, args.experts as u64, &r, &ratios);
    for ((re, dtype), text) in overrides.iter().zip(&args.types) {
        let mut hit = false;
        for s in specs.iter_mut().filter(|s| re.is_match(&s.name)) {
            s.dtype = *dtype;
            hit = true;
        }
        ensure!(hit, "--type {text}: the pattern matches no tensor");
    }
    for s in &specs {
        if matches!(generator(s.dtype), Some(Gen::Ids)) {
            ensure!(
                s.name.ends_with("ffn_gate_tid2eid.weight"),
                "tensor '{}': I32 is only generated for the expert-id tables",
                s.name
            );
        }
    }
    let mut name = format!(
        "synthetic DeepSeek-V4-Flash dims, {} layers, recipe {}",
        args.layers, args.recipe
    );
    if args.tiny {
        name = name.replacen("DeepSeek-V4-Flash dims", "tiny (test) dims", 1);
    }
    if !args.types.is_empty() {
        name.push_str(&format!(", types {}", args.types.join(" ")));
    }
    let kv = metadata(&dims, args.layers, args.experts, &ratios, name);
    let (head, align, total) =
        encode_header(kv, &specs).with_context(|| format!("{}: header", args.out.display()))?;

    eprintln!(
        "synth: {}: {} layers, recipe {}, {} experts, seed {}: {} tensors, {}",
        args.out.display(),
        args.layers,
        args.recipe,
        args.experts,
        args.seed,
        specs.len(),
        human(total)
    );
    let t0 = Instant::now();
    let res = write_file(&args.out, &head, align, total, &specs, args, t0);
    if res.is_err() {
        let _ = std::fs::remove_file(&args.out);
    }
    res?;
    let secs = t0.elapsed().as_secs_f64();
    let peak = mem::rss().peak.map_or_else(|| "n/a".into(), human);
    eprintln!(
        "wrote {}: {} tensors, {} ({total} bytes) in {secs:.1} s ({:.0} MiB/s), peak RSS {peak}",
        args.out.display(),
        specs.len(),
        human(total),
        total as f64 / (1 << 20) as f64 / secs.max(1e-9),
    );
    Ok(())
}

/// Stream the header and the generated tensors to `path`.
fn write_file(
    path: &Path,
    head: &[u8],
    align: u64,
    total: u64,
    specs: &[Spec],
    args: &Args,
    t0: Instant,
) -> Result<()> {
    let ctx = || format!("{}: write", path.display());
    let file = File::create(path).with_context(|| format!("{}: create", path.display()))?;
    let mut f = BufWriter::with_capacity(1 << 20, file);
    f.write_all(head).with_context(ctx)?;
    let mut written = head.len() as u64;
    let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(2);
    let (back_tx, back_rx) = mpsc::channel::<Vec<u8>>();
    let (seed, experts) = (args.seed, args.experts);
    std::thread::scope(|scope| -> Result<()> {
        scope.spawn(move || {
            let mut floats = Vec::new();
            for s in specs {
                let g = TensorGen::new(s, seed, experts);
                for c in 0..g.n_chunks() {
                    let mut buf = back_rx.try_recv().unwrap_or_default();
                    g.chunk(c, &mut buf, &mut floats);
                    if tx.send(buf).is_err() {
                        return; // the writer stopped
                    }
                }
            }
        });
        // rx and back_tx are moved in here, so an early return stops the generator
        let (rx, back_tx) = (rx, back_tx);
        let width = specs.len().to_string().len();
        for (k, s) in specs.iter().enumerate() {
            let n = s.n_bytes();
            let mut left = n;
            while left > 0 {
                let buf = rx.recv().context("the generator thread stopped")?;
                f.write_all(&buf).with_context(ctx)?;
                left -= buf.len() as u64;
                let _ = back_tx.send(buf);
            }
            let pad = n.div_ceil(align) * align - n;
            f.write_all(&vec![0u8; pad as usize]).with_context(ctx)?;
            written += n + pad;
            eprintln!(
                "  [{:>width$}/{}] {:5.1}% {:6.1}s  {:42} {:8} {:?} {}",
                k + 1,
                specs.len(),
                100.0 * written as f64 / total as f64,
                t0.elapsed().as_secs_f64(),
                s.name,
                s.dtype.name(),
                s.ne,
                human(n)
            );
        }
        Ok(())
    })?;
    f.flush().with_context(ctx)?;
    ensure!(
        written == total,
        "{}: wrote {written} bytes, expected {total}",
        path.display()
    );
    Ok(())
}
