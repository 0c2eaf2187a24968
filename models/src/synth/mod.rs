//! Random-weight DeepSeek-V4 GGUF files at real V4-Flash dimensions, for benchmarks
//! (`fathom synth`): llama.cpp's `deepseek4` metadata keys (same keys, types, values and
//! order), the tensor names, GGUF shapes and order of the tensor table
//! ([`crate::deepseek4::tensors`]), per-recipe types, and a placeholder vocabulary (129280
//! tokens `<tN>`, BOS/EOS specials, one merge), so llama.cpp and fathom load the same bytes.
//! It replaces `shared/tools/synth_dsv4_gguf.py` and keeps its contract; only the random
//! bytes differ from the script's (its numpy generator is not reproduced).
//!
//! **Random data.** Quantized tensors are random blocks: every byte random (codes, sub-block
//! scales, grid indices, signs), then the block's f16 super-scale(s) overwritten with a fixed
//! sane value (0.01, or 0.002 for the K-quants whose sub-scales multiply it; MXFP4's E8M0
//! exponent 120), so every dequantized weight is finite. F32 / F16 / BF16 tensors hold
//! approximately normal values (Irwin–Hall sum of four uniforms, bounded at ±3.5σ) times 0.02,
//! encoded with the quant crate's storage quantizers. `ffn_gate_tid2eid` (I32) holds 64 rows of
//! `expert_used_count` distinct expert ids tiled over the vocabulary, like the script.
//!
//! **Determinism.** The bytes depend only on the seed, the tensor's name and its shape/type:
//! each tensor is generated in fixed 8 MiB chunks, each from its own generator seeded by
//! (seed, FNV hash of the name, chunk index). A tensor present in two files with the same seed,
//! type and shape has the same bytes (e.g. `blk.0.*` with 1 layer and with 6).
//!
//! **Streaming.** [`GgufWriter`](crate::gguf::GgufWriter) wants every tensor's bytes up
//! front, so it is used for the header only: each tensor is queued as a borrowed slice of one
//! zero buffer as large as the largest tensor (allocated zeroed and never read, so the OS
//! never commits its pages), the writer is run once into a byte counter (total size) and once
//! into a sink keeping only the first `total − data section` bytes. Then a generator thread
//! produces the data chunk by chunk into a bounded channel (two chunks in flight) and the
//! caller's thread writes each chunk and the alignment padding after each tensor.

pub mod checkpoint;
mod gen;
mod write;

pub use gen::{random_weights, StGen};

use crate::deepseek4::tensors::{self, Role};
use crate::deepseek4::Hparams;
use crate::gguf::{Array, GgufError, Value};
use quant::DType;
use std::path::{Path, PathBuf};

/// Errors of writing a synthetic model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SynthError {
    /// The file could not be written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The GGUF header could not be encoded.
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// The plan is not writable.
    #[error("{0}")]
    Invalid(String),
}

/// Experts used per token (`expert_used_count`, and the row length of `ffn_gate_tid2eid`).
pub const EXPERTS_USED: usize = 6;
/// V4-Flash's hash-routed layers.
pub const HASH_LAYERS: usize = 3;
/// Distinct rows of the `ffn_gate_tid2eid` table (tiled over the vocabulary).
const TID2EID_ROWS: usize = 64;

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

/// The dimensions of a synthetic model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// DeepSeek-V4-Flash's.
    Flash,
    /// Tests: tiny dimensions (D 256, 4 heads of 128, q rank 256, 2 output groups of rank
    /// 128, expert width 256, indexer 2×64, window 16, RoPE 16, vocabulary 512; every row
    /// length a multiple of 256, so every recipe and override type works).
    Tiny,
}

/// Types of each tensor role.
#[derive(Clone, Copy, Debug)]
pub struct Recipe {
    /// The token embedding.
    pub embd: DType,
    /// The LM head.
    pub out: DType,
    /// The attention projections.
    pub attn: DType,
    /// The shared expert's gate and up.
    pub shexp_gu: DType,
    /// The shared expert's down.
    pub shexp_down: DType,
    /// Routed experts.
    pub exps: DType,
    /// Routed experts of layers 0 and 1.
    pub exps_anchor: DType,
    /// The indexer's query projection.
    pub idx_qb: DType,
    /// The router.
    pub router: DType,
    /// Compressors and the indexer's head weights.
    pub comp: DType,
}

/// The recipe names, for messages.
pub const RECIPES: &str = "seed, q4k, iq2";

/// The recipe of a name (`seed`, `q4k`, `iq2`).
pub fn recipe(name: &str) -> Option<Recipe> {
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

/// One tensor of a synthetic model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    /// Its GGUF name.
    pub name: String,
    /// Its type.
    pub dtype: DType,
    /// Its shape, GGUF order.
    pub ne: Vec<u64>,
}

impl Planned {
    /// Elements.
    pub fn n_elements(&self) -> u64 {
        self.ne.iter().product()
    }
    /// Bytes.
    pub fn n_bytes(&self) -> u64 {
        self.n_elements() / self.dtype.block_size() as u64 * self.dtype.type_size() as u64
    }
}

/// Whether synth can generate tensors of type `t` (every weight type with a known block
/// layout; I32 only for the expert-id tables).
pub fn writable(t: DType) -> bool {
    gen::generator(t).is_some()
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

/// A synthetic model: its size, layers, experts and recipe.
#[derive(Clone, Copy, Debug)]
pub struct Synth {
    /// Dimensions.
    pub size: Size,
    /// Decoder layers.
    pub layers: usize,
    /// Routed experts per layer.
    pub experts: usize,
    /// The first layers routed by a token-id hash table (V4-Flash: 3; at most `layers`). A
    /// hash table spreads tokens over the experts evenly, where a random router does not:
    /// all layers hash-routed is the uniform routing a trained, load-balanced model comes
    /// close to (the worst case for an expert cache).
    pub hash_layers: usize,
    /// The types by role.
    pub recipe: Recipe,
}

impl Synth {
    fn dims(&self) -> Dims {
        match self.size {
            Size::Flash => FLASH,
            Size::Tiny => TINY,
        }
    }

    /// The hyperparameters its metadata describes.
    pub fn hparams(&self) -> Hparams {
        let dm = self.dims();
        let ratios = compress_ratios(self.layers);
        Hparams {
            n_layer: self.layers,
            n_embd: dm.d as usize,
            n_vocab: dm.vocab as usize,
            n_ctx_train: 1_048_576,
            n_head: dm.h as usize,
            head_dim: dm.hd as usize,
            n_rot: dm.rope as usize,
            q_lora_rank: dm.qr as usize,
            o_groups: dm.og as usize,
            o_lora_rank: dm.or as usize,
            window: dm.win as usize,
            rms_eps: 1e-6,
            rope_theta: 10000.0,
            compress_rope_theta: 160000.0,
            yarn: None,
            compress_ratios: ratios[..self.layers].iter().map(|&r| r as u32).collect(),
            n_expert: self.experts,
            n_expert_used: EXPERTS_USED,
            n_expert_shared: 1,
            expert_ff: dm.i as usize,
            norm_topk: true,
            routed_scale: 1.5,
            n_hash_layers: self.hash_layers.min(self.layers),
            swiglu_limit: vec![10.0; self.layers],
            swiglu_limit_shared: vec![10.0; self.layers],
            hc: dm.hc as usize,
            hc_iters: 20,
            hc_eps: 1e-6,
            idx_heads: dm.ih as usize,
            idx_dim: dm.ihd as usize,
            idx_topk: dm.itop as usize,
            bos: 0,
            eos: 1,
        }
    }

    /// Every tensor with the recipe's type for its role, in the tensor table's order.
    pub fn plan(&self) -> Vec<Planned> {
        let r = &self.recipe;
        tensors::all(&self.hparams())
            .into_iter()
            .map(|s| {
                let dtype = match s.tensor.role() {
                    Role::Embedding => r.embd,
                    Role::Head => r.out,
                    Role::Attention => r.attn,
                    Role::Compressor => r.comp,
                    Role::IndexerQuery => r.idx_qb,
                    Role::Router => r.router,
                    Role::Experts if s.layer.is_some_and(|l| l < 2) => r.exps_anchor,
                    Role::Experts => r.exps,
                    Role::SharedGateUp => r.shexp_gu,
                    Role::SharedDown => r.shexp_down,
                    Role::Small => DType::F32,
                    Role::Ids => DType::I32,
                };
                Planned {
                    name: s.name,
                    dtype,
                    ne: s.ne.iter().map(|&n| n as u64).collect(),
                }
            })
            .collect()
    }

    /// The metadata (general name `name`), in the script's order.
    pub fn metadata(&self, name: String) -> Vec<(String, Value)> {
        metadata(
            &self.dims(),
            (self.layers, self.hash_layers.min(self.layers)),
            self.experts,
            &compress_ratios(self.layers),
            name,
        )
    }

    /// Checks `specs` (a [`Synth::plan`], types possibly overridden) and encodes the header
    /// with `kv`: everything that can fail before a byte is written.
    pub fn prepare(
        &self,
        kv: Vec<(String, Value)>,
        specs: Vec<Planned>,
    ) -> Result<Prepared, SynthError> {
        for s in &specs {
            if !writable(s.dtype) {
                return Err(SynthError::Invalid(format!(
                    "tensor '{}': synth cannot generate {}",
                    s.name, s.dtype
                )));
            }
            if s.dtype == DType::I32 && !s.name.ends_with("ffn_gate_tid2eid.weight") {
                return Err(SynthError::Invalid(format!(
                    "tensor '{}': I32 is only generated for the expert-id tables",
                    s.name
                )));
            }
        }
        let (head, align, total) = write::encode_header(kv, &specs)?;
        Ok(Prepared {
            head,
            align,
            total,
            specs,
            experts: self.experts,
        })
    }
}

/// A synthetic model ready to be written ([`Synth::prepare`]).
#[derive(Debug)]
pub struct Prepared {
    head: Vec<u8>,
    align: u64,
    total: u64,
    specs: Vec<Planned>,
    experts: usize,
}

impl Prepared {
    /// The file's size.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The tensors.
    pub fn specs(&self) -> &[Planned] {
        &self.specs
    }

    /// Writes the file to `path`, the random bytes from `seed`; `progress(k, tensor,
    /// written, total)` after each tensor. On error the partial file is removed.
    pub fn write(
        &self,
        path: &Path,
        seed: u64,
        progress: &mut dyn FnMut(usize, &Planned, u64, u64),
    ) -> Result<(), SynthError> {
        // whole or not at all: a temporary file beside `path`, renamed when complete
        let mut failed = None;
        let r = crate::files::write_atomic(path, |f| {
            write::write_file(
                f,
                path,
                &self.head,
                self.align,
                self.total,
                &self.specs,
                (seed, self.experts),
                progress,
            )
            .map_err(|e| {
                let msg = e.to_string();
                failed = Some(e);
                std::io::Error::other(msg)
            })
        });
        match (r, failed) {
            (_, Some(e)) => Err(e),
            (Err(source), None) => Err(SynthError::Io {
                path: path.to_path_buf(),
                source,
            }),
            (Ok(()), None) => Ok(()),
        }
    }
}

/// The metadata, in the script's order.
fn metadata(
    dm: &Dims,
    (layers, hash_layers): (usize, usize),
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
        ("hash_layer_count", u(hash_layers as u64)),
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
    // a synthetic vocabulary of the real size: the chat format's control tokens, the 256
    // byte-level tokens (so the file's tokenizer loads and any text can be served), then
    // placeholders
    let n = dm.vocab as usize;
    let mut toks: Vec<String> = (0..n).map(|i| format!("<t{i}>")).collect();
    let mut types = vec![1i32; n];
    let control = [
        crate::chat::BOS_TOKEN,
        crate::chat::EOS_TOKEN,
        crate::chat::USER_TOKEN,
        crate::chat::ASSISTANT_TOKEN,
    ];
    for (i, c) in control.iter().enumerate().take(n) {
        toks[i] = (*c).into();
        types[i] = 3;
    }
    if n >= control.len() + 256 {
        for (i, c) in crate::tokenizer::byte_to_char().iter().enumerate() {
            toks[control.len() + i] = c.to_string();
        }
    }
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
