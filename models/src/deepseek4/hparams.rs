//! DeepSeek-V4 hyperparameters, read from GGUF metadata (every `deepseek4.*` key of spec §1.2,
//! including the YaRN betas that llama.cpp ignores — fathom honours them) or from a
//! checkpoint's `config.json` (official layout: `compress_ratios`, `num_hash_layers`,
//! `qk_rope_head_dim`, `rope_scaling`; and the transformers layout: `layer_types`,
//! `mlp_layer_types`, `partial_rotary_factor`, `rope_parameters`).
//!
//! Nothing here is special-cased to one model size: every dimension comes from the file and
//! is validated for consistency (head dims vs RoPE dims, per-layer arrays vs layer count,
//! compress ratios ∈ {0, 4, 128}, …) with errors that name the key.

use crate::gguf::{GgufFile, Value};
use serde_json::Value as Json;

/// Errors while reading hyperparameters.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
#[non_exhaustive]
pub enum HparamsError {
    /// A required key is absent.
    #[error("{source_name}: missing key '{key}'")]
    Missing {
        /// File or source.
        source_name: String,
        /// The key.
        key: String,
    },
    /// A key has an unusable value.
    #[error("{source_name}: key '{key}': {msg}")]
    Invalid {
        /// File or source.
        source_name: String,
        /// The key.
        key: String,
        /// What is wrong.
        msg: String,
    },
}

/// YaRN parameters of the compressed layers' RoPE (spec §5).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Yarn {
    /// Context extension factor s (16).
    pub factor: f32,
    /// Original training context L (65536).
    pub orig_ctx: u32,
    /// β_fast (32).
    pub beta_fast: f32,
    /// β_slow (1).
    pub beta_slow: f32,
}

/// Attention kind of one layer (spec §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttnKind {
    /// Sliding window only (ratio 0), main RoPE.
    Sliding,
    /// Compressed sparse attention (ratio 4, overlapping windows + Lightning Indexer).
    Csa,
    /// Heavily compressed attention (ratio 128).
    Hca,
}

/// All hyperparameters of a DeepSeek-V4 model.
#[derive(Debug, Clone, PartialEq)]
pub struct Hparams {
    /// Decoder layers (MTP excluded).
    pub n_layer: usize,
    /// Hidden size D.
    pub n_embd: usize,
    /// Vocabulary size.
    pub n_vocab: usize,
    /// Trained context length.
    pub n_ctx_train: usize,
    /// Query heads H.
    pub n_head: usize,
    /// Head dim d (K = V).
    pub head_dim: usize,
    /// RoPE dims r (trailing dims of each head).
    pub n_rot: usize,
    /// q LoRA rank.
    pub q_lora_rank: usize,
    /// Output groups G.
    pub o_groups: usize,
    /// o LoRA rank per group.
    pub o_lora_rank: usize,
    /// Sliding window W (includes the current token).
    pub window: usize,
    /// RMSNorm epsilon.
    pub rms_eps: f32,
    /// Main RoPE base.
    pub rope_theta: f32,
    /// Compressed layers' RoPE base.
    pub compress_rope_theta: f32,
    /// YaRN on compressed layers (None: plain RoPE there too).
    pub yarn: Option<Yarn>,
    /// Compress ratio per layer (0, 4 or 128).
    pub compress_ratios: Vec<u32>,
    /// Routed experts E.
    pub n_expert: usize,
    /// Experts per token K.
    pub n_expert_used: usize,
    /// Shared experts.
    pub n_expert_shared: usize,
    /// Expert FFN width I.
    pub expert_ff: usize,
    /// Normalise the top-k weights.
    pub norm_topk: bool,
    /// Routed scaling factor.
    pub routed_scale: f32,
    /// Hash-routed layers (the first ones).
    pub n_hash_layers: usize,
    /// SwiGLU clamp of routed experts, per layer.
    pub swiglu_limit: Vec<f32>,
    /// SwiGLU clamp of the shared expert, per layer.
    pub swiglu_limit_shared: Vec<f32>,
    /// HC streams.
    pub hc: usize,
    /// Sinkhorn iterations.
    pub hc_iters: usize,
    /// HC epsilon.
    pub hc_eps: f32,
    /// Indexer heads HI.
    pub idx_heads: usize,
    /// Indexer head dim dI.
    pub idx_dim: usize,
    /// Indexer top-k kI.
    pub idx_topk: usize,
    /// BOS id.
    pub bos: u32,
    /// EOS id.
    pub eos: u32,
}

/// Most decoder layers accepted (V4-Flash has 43).
pub const MAX_LAYERS: usize = 1024;
/// Largest hidden size, rank, head size or expert width accepted (V4: at most 4096).
pub const MAX_WIDTH: usize = 1 << 16;
/// Largest vocabulary accepted (V4: 129280).
pub const MAX_VOCAB: usize = 1 << 22;
/// Longest trained context accepted (V4: 1M).
pub const MAX_CTX: usize = 1 << 26;
/// Most attention / indexer heads or output groups (V4: 64).
pub const MAX_HEADS: usize = 4096;
/// Longest sliding window (V4: 128).
pub const MAX_WINDOW: usize = 1 << 16;
/// Most routed experts (V4: 256).
pub const MAX_EXPERTS: usize = 1 << 16;
/// Most shared experts (V4: 1).
pub const MAX_SHARED: usize = 64;
/// Most residual streams (V4: 4; the graph implements 4).
pub const MAX_HC: usize = 64;
/// Most Sinkhorn iterations of the HC mixes (V4: 20): a bound on the time of every layer.
pub const MAX_SINKHORN: usize = 1000;
/// Largest indexer top-k (V4: 512).
pub const MAX_TOPK: usize = 1 << 20;
/// Largest product of two dimensions that size one tensor.
pub const MAX_PRODUCT: usize = 1 << 34;

/// Which spelling of the keys an error names: GGUF metadata (`deepseek4.block_count`) or
/// config.json (`num_hidden_layers`). Validation speaks GGUF's short names.
#[derive(Clone, Copy)]
enum Keys {
    Gguf,
    ConfigJson,
}

impl Keys {
    fn name(self, gguf: &str) -> String {
        match self {
            Keys::Gguf if gguf.starts_with("tokenizer.") => gguf.into(),
            Keys::Gguf => format!("deepseek4.{gguf}"),
            Keys::ConfigJson => JSON_KEYS
                .iter()
                .find(|(g, _)| *g == gguf)
                .map_or(gguf, |(_, j)| j)
                .into(),
        }
    }
}

/// GGUF short key → config.json key.
const JSON_KEYS: &[(&str, &str)] = &[
    ("block_count", "num_hidden_layers"),
    ("embedding_length", "hidden_size"),
    ("vocab_size", "vocab_size"),
    ("context_length", "max_position_embeddings"),
    ("attention.head_count", "num_attention_heads"),
    ("attention.key_length", "head_dim"),
    ("attention.q_lora_rank", "q_lora_rank"),
    ("attention.output_group_count", "o_groups"),
    ("attention.output_lora_rank", "o_lora_rank"),
    ("attention.sliding_window", "sliding_window"),
    ("expert_count", "n_routed_experts"),
    ("expert_used_count", "num_experts_per_tok"),
    ("expert_shared_count", "n_shared_experts"),
    ("expert_feed_forward_length", "moe_intermediate_size"),
    ("hash_layer_count", "num_hash_layers"),
    ("hyper_connection.count", "hc_mult"),
    ("hyper_connection.sinkhorn_iterations", "hc_sinkhorn_iters"),
    ("attention.indexer.head_count", "index_n_heads"),
    ("attention.indexer.key_length", "index_head_dim"),
    ("attention.indexer.top_k", "index_topk"),
    ("attention.layer_norm_rms_epsilon", "rms_norm_eps"),
    ("rope.freq_base", "rope_theta"),
    ("attention.compress_rope_freq_base", "compress_rope_theta"),
    ("expert_weights_scale", "routed_scaling_factor"),
    ("hyper_connection.epsilon", "hc_eps"),
    ("rope.scaling.factor", "rope_scaling.factor"),
    ("rope.scaling.yarn_beta_fast", "rope_scaling.beta_fast"),
    ("rope.scaling.yarn_beta_slow", "rope_scaling.beta_slow"),
    (
        "rope.scaling.original_context_length",
        "rope_scaling.original_max_position_embeddings",
    ),
    ("swiglu_clamp_exp", "swiglu_limit"),
    ("swiglu_clamp_shexp", "swiglu_limit"),
    ("attention.compress_ratios", "compress_ratios"),
    ("rope.dimension_count", "qk_rope_head_dim"),
    ("tokenizer.ggml.bos_token_id", "bos_token_id"),
    ("tokenizer.ggml.eos_token_id", "eos_token_id"),
];

impl Hparams {
    /// Attention kind of layer `l`.
    pub fn attn_kind(&self, l: usize) -> AttnKind {
        match self.compress_ratios[l] {
            0 => AttnKind::Sliding,
            4 => AttnKind::Csa,
            _ => AttnKind::Hca,
        }
    }
    /// Whether layer `l` routes with the token-id hash table.
    pub fn is_hash_layer(&self, l: usize) -> bool {
        l < self.n_hash_layers
    }

    fn validate(self, src: &str, keys: Keys) -> Result<Hparams, HparamsError> {
        let bad = |key: &str, msg: String| HparamsError::Invalid {
            source_name: src.into(),
            key: keys.name(key),
            msg,
        };
        // every size within its limit (far above any DeepSeek-V4: the limits keep a damaged or
        // hostile file's sizes from reaching an allocator), each named by its key
        let sizes = [
            ("block_count", self.n_layer, 1, MAX_LAYERS),
            ("embedding_length", self.n_embd, 1, MAX_WIDTH),
            ("vocab_size", self.n_vocab, 1, MAX_VOCAB),
            ("context_length", self.n_ctx_train, 1, MAX_CTX),
            ("attention.head_count", self.n_head, 1, MAX_HEADS),
            ("attention.key_length", self.head_dim, 1, MAX_WIDTH),
            ("attention.q_lora_rank", self.q_lora_rank, 1, MAX_WIDTH),
            ("attention.output_group_count", self.o_groups, 1, MAX_HEADS),
            ("attention.output_lora_rank", self.o_lora_rank, 1, MAX_WIDTH),
            ("attention.sliding_window", self.window, 1, MAX_WINDOW),
            ("expert_count", self.n_expert, 1, MAX_EXPERTS),
            ("expert_used_count", self.n_expert_used, 1, self.n_expert),
            ("expert_shared_count", self.n_expert_shared, 1, MAX_SHARED),
            ("expert_feed_forward_length", self.expert_ff, 1, MAX_WIDTH),
            ("hash_layer_count", self.n_hash_layers, 0, self.n_layer),
            (
                "hyper_connection.sinkhorn_iterations",
                self.hc_iters,
                1,
                MAX_SINKHORN,
            ),
            ("attention.indexer.head_count", self.idx_heads, 0, MAX_HEADS),
            ("attention.indexer.key_length", self.idx_dim, 0, MAX_WIDTH),
            ("attention.indexer.top_k", self.idx_topk, 0, MAX_TOPK),
        ];
        for (key, v, lo, hi) in sizes {
            if v < lo || v > hi {
                return Err(bad(key, format!("{v} is not between {lo} and {hi}")));
            }
        }
        if self.hc != 4 {
            return Err(bad(
                "hyper_connection.count",
                format!("{} streams (the HC mixes implement 4)", self.hc),
            ));
        }
        // the products the graph sizes its tensors with
        for (ka, a, kb, b) in [
            (
                "attention.head_count",
                self.n_head,
                "attention.key_length",
                self.head_dim,
            ),
            (
                "expert_count",
                self.n_expert,
                "expert_feed_forward_length",
                self.expert_ff,
            ),
            ("embedding_length", self.n_embd, "vocab_size", self.n_vocab),
            (
                "attention.indexer.head_count",
                self.idx_heads,
                "attention.indexer.key_length",
                self.idx_dim,
            ),
        ] {
            if a.checked_mul(b).is_none_or(|p| p > MAX_PRODUCT) {
                return Err(bad(ka, format!("{a} × {} {b} is too large", keys.name(kb))));
            }
        }
        if self.window > self.n_ctx_train {
            return Err(bad(
                "attention.sliding_window",
                format!(
                    "{} exceeds the trained context {} ({})",
                    self.window,
                    self.n_ctx_train,
                    keys.name("context_length")
                ),
            ));
        }
        // every float finite and in range
        let mut floats = vec![
            ("attention.layer_norm_rms_epsilon", self.rms_eps, 0.0, 1.0),
            ("rope.freq_base", self.rope_theta, 0.0, f32::MAX),
            (
                "attention.compress_rope_freq_base",
                self.compress_rope_theta,
                0.0,
                f32::MAX,
            ),
            ("expert_weights_scale", self.routed_scale, 0.0, f32::MAX),
            ("hyper_connection.epsilon", self.hc_eps, 0.0, 1.0),
        ];
        if let Some(y) = self.yarn {
            floats.extend([
                ("rope.scaling.factor", y.factor, 0.0, f32::MAX),
                ("rope.scaling.yarn_beta_fast", y.beta_fast, 0.0, f32::MAX),
                ("rope.scaling.yarn_beta_slow", y.beta_slow, 0.0, f32::MAX),
            ]);
            if y.orig_ctx == 0 {
                return Err(bad(
                    "rope.scaling.original_context_length",
                    "must be at least 1".into(),
                ));
            }
        }
        for (key, v, lo, hi) in floats {
            if !(v.is_finite() && v > lo && v <= hi) {
                return Err(bad(
                    key,
                    format!("{v} (must be finite, above {lo}, at most {hi:e})"),
                ));
            }
        }
        for (key, limits) in [
            ("swiglu_clamp_exp", &self.swiglu_limit),
            ("swiglu_clamp_shexp", &self.swiglu_limit_shared),
        ] {
            if limits.len() < self.n_layer {
                return Err(bad(
                    key,
                    format!("{} entries for {} layers", limits.len(), self.n_layer),
                ));
            }
            if let Some((l, v)) = limits
                .iter()
                .enumerate()
                .find(|(_, v)| !(v.is_finite() && **v > 0.0))
            {
                return Err(bad(
                    key,
                    format!("layer {l}: {v} (must be finite and above 0)"),
                ));
            }
        }
        // entries past the main layers describe the MTP block(s), which are not run
        if self.compress_ratios.len() < self.n_layer {
            return Err(bad(
                "attention.compress_ratios",
                format!(
                    "{} entries for {} layers",
                    self.compress_ratios.len(),
                    self.n_layer
                ),
            ));
        }
        if let Some((l, r)) = self
            .compress_ratios
            .iter()
            .enumerate()
            .find(|(_, r)| ![0, 4, 128].contains(*r))
        {
            return Err(bad(
                "attention.compress_ratios",
                format!("layer {l}: ratio {r} (allowed: 0, 4, 128)"),
            ));
        }
        if self.n_rot == 0 || self.n_rot > self.head_dim || !self.n_rot.is_multiple_of(2) {
            return Err(bad(
                "rope.dimension_count",
                format!(
                    "{} rope dims for head dim {} (must be even, 2 to the head dim)",
                    self.n_rot, self.head_dim
                ),
            ));
        }
        if !self.n_head.is_multiple_of(self.o_groups) {
            return Err(bad(
                "attention.output_group_count",
                format!(
                    "{} groups do not divide {} heads",
                    self.o_groups, self.n_head
                ),
            ));
        }
        for (key, id) in [
            ("tokenizer.ggml.bos_token_id", self.bos),
            ("tokenizer.ggml.eos_token_id", self.eos),
        ] {
            if id as usize >= self.n_vocab {
                return Err(bad(
                    key,
                    format!("{id} is not an id of the {}-token vocabulary", self.n_vocab),
                ));
            }
        }
        let has_csa = self
            .compress_ratios
            .iter()
            .take(self.n_layer)
            .any(|&r| r == 4);
        if has_csa {
            for (key, v) in [
                ("attention.indexer.head_count", self.idx_heads),
                ("attention.indexer.key_length", self.idx_dim),
                ("attention.indexer.top_k", self.idx_topk),
            ] {
                if v == 0 {
                    return Err(bad(key, "CSA layers (ratio 4) need it above 0".into()));
                }
            }
            if self.idx_dim < self.n_rot {
                return Err(bad(
                    "attention.indexer.key_length",
                    format!("{} is below the {} rope dims", self.idx_dim, self.n_rot),
                ));
            }
        }
        let mut h = self;
        h.compress_ratios.truncate(h.n_layer);
        h.swiglu_limit.truncate(h.n_layer);
        h.swiglu_limit_shared.truncate(h.n_layer);
        Ok(h)
    }

    /// Read from GGUF metadata (`general.architecture` must be `deepseek4`).
    pub fn from_gguf(f: &GgufFile) -> Result<Hparams, HparamsError> {
        let src = f.path().display().to_string();
        let missing = |key: &str| HparamsError::Missing {
            source_name: src.clone(),
            key: key.into(),
        };
        let bad = |key: &str, msg: String| HparamsError::Invalid {
            source_name: src.clone(),
            key: key.into(),
            msg,
        };
        match f.get("general.architecture").and_then(Value::as_str) {
            Some("deepseek4") => {}
            Some(a) => {
                return Err(bad(
                    "general.architecture",
                    format!("'{a}' is not deepseek4"),
                ))
            }
            None => return Err(missing("general.architecture")),
        }
        let k = |name: &str| format!("deepseek4.{name}");
        let u = |name: &str| -> Result<usize, HparamsError> {
            let key = k(name);
            let v = f.get(&key).ok_or_else(|| missing(&key))?;
            v.as_u64()
                .and_then(|x| usize::try_from(x).ok())
                .ok_or_else(|| bad(&key, format!("expected an unsigned integer, got {v}")))
        };
        let u_or = |name: &str, d: usize| -> Result<usize, HparamsError> {
            if f.get(&k(name)).is_some() {
                u(name)
            } else {
                Ok(d)
            }
        };
        let fl = |name: &str| -> Result<f32, HparamsError> {
            let key = k(name);
            let v = f.get(&key).ok_or_else(|| missing(&key))?;
            v.as_f64()
                .map(|x| x as f32)
                .ok_or_else(|| bad(&key, format!("expected a float, got {v}")))
        };
        let fl_or = |name: &str, d: f32| -> Result<f32, HparamsError> {
            if f.get(&k(name)).is_some() {
                fl(name)
            } else {
                Ok(d)
            }
        };
        let nextn = u_or("nextn_predict_layers", 0)?;
        if nextn != 0 {
            return Err(bad(
                &k("nextn_predict_layers"),
                format!("{nextn}: this is an MTP (next-token prediction) file, not a main model"),
            ));
        }
        let n_layer = u("block_count")?;
        if n_layer == 0 || n_layer > MAX_LAYERS {
            return Err(bad(
                &k("block_count"),
                format!("{n_layer} is not between 1 and {MAX_LAYERS}"),
            ));
        }
        // per-layer float arrays (or a scalar applying to all layers)
        let per_layer = |name: &str| -> Result<Option<Vec<f32>>, HparamsError> {
            let key = k(name);
            let Some(v) = f.get(&key) else {
                return Ok(None);
            };
            if let Some(x) = v.as_f64() {
                return Ok(Some(vec![x as f32; n_layer]));
            }
            let a = v
                .as_array()
                .ok_or_else(|| bad(&key, format!("expected f32 or array, got {v}")))?;
            let vals: Vec<f32> = match (a.as_f32(), a.as_f64()) {
                (Some(x), _) => x.to_vec(),
                (_, Some(x)) => x.iter().map(|&y| y as f32).collect(),
                _ => return Err(bad(&key, format!("expected array<f32>, got {a}"))),
            };
            Ok(Some(vals))
        };
        let ratios_key = k("attention.compress_ratios");
        let ratios = f.get(&ratios_key).ok_or_else(|| missing(&ratios_key))?;
        let ratios: Vec<u32> = match ratios.as_array() {
            Some(a) => {
                let ints: Option<Vec<i64>> = a
                    .as_i32()
                    .map(|v| v.iter().map(|&x| x as i64).collect())
                    .or_else(|| a.as_u32().map(|v| v.iter().map(|&x| x as i64).collect()))
                    .or_else(|| a.as_i64().map(|v| v.to_vec()));
                let ints = ints
                    .ok_or_else(|| bad(&ratios_key, format!("expected integer array, got {a}")))?;
                ints.iter()
                    .map(|&x| {
                        u32::try_from(x)
                            .map_err(|_| bad(&ratios_key, format!("negative ratio {x}")))
                    })
                    .collect::<Result<_, _>>()?
            }
            None => return Err(bad(&ratios_key, format!("expected an array, got {ratios}"))),
        };
        let gating = u_or("expert_gating_func", 4)?;
        if gating != 4 {
            return Err(bad(
                &k("expert_gating_func"),
                format!("{gating} (only 4 = sqrtsoftplus is DeepSeek-V4)"),
            ));
        }
        let yarn = match f.get(&k("rope.scaling.type")).and_then(Value::as_str) {
            Some("yarn") => Some(Yarn {
                factor: fl("rope.scaling.factor")?,
                orig_ctx: u32::try_from(u("rope.scaling.original_context_length")?).map_err(
                    |_| {
                        bad(
                            &k("rope.scaling.original_context_length"),
                            "too large".into(),
                        )
                    },
                )?,
                beta_fast: fl_or("rope.scaling.yarn_beta_fast", 32.0)?,
                beta_slow: fl_or("rope.scaling.yarn_beta_slow", 1.0)?,
            }),
            Some("none") | None => None,
            Some(t) => return Err(bad(&k("rope.scaling.type"), format!("unsupported '{t}'"))),
        };
        let swiglu =
            per_layer("swiglu_clamp_exp")?.ok_or_else(|| missing(&k("swiglu_clamp_exp")))?;
        let swiglu_sh = per_layer("swiglu_clamp_shexp")?.unwrap_or_else(|| swiglu.clone());
        let n_vocab = match f.get("tokenizer.ggml.tokens") {
            Some(v) => v.as_array().map(|a| a.len()).ok_or_else(|| {
                bad(
                    "tokenizer.ggml.tokens",
                    format!("expected an array, got {v}"),
                )
            })?,
            None if f.get(&k("vocab_size")).is_some() => u("vocab_size")?,
            None => {
                return Err(HparamsError::Missing {
                    source_name: src.clone(),
                    key: "tokenizer.ggml.tokens (the vocabulary)".into(),
                })
            }
        };
        let tok_u = |key: &str, d: u32| -> Result<u32, HparamsError> {
            match f.get(key) {
                None => Ok(d),
                Some(v) => v
                    .as_u64()
                    .and_then(|x| u32::try_from(x).ok())
                    .ok_or_else(|| bad(key, format!("expected a token id, got {v}"))),
            }
        };
        Hparams {
            n_layer,
            n_embd: u("embedding_length")?,
            n_vocab,
            n_ctx_train: u("context_length")?,
            n_head: u("attention.head_count")?,
            head_dim: u("attention.key_length")?,
            n_rot: u("rope.dimension_count")?,
            q_lora_rank: u("attention.q_lora_rank")?,
            o_groups: u("attention.output_group_count")?,
            o_lora_rank: u("attention.output_lora_rank")?,
            window: u("attention.sliding_window")?,
            rms_eps: fl("attention.layer_norm_rms_epsilon")?,
            rope_theta: fl_or("rope.freq_base", 10000.0)?,
            compress_rope_theta: fl("attention.compress_rope_freq_base")?,
            yarn,
            compress_ratios: ratios,
            n_expert: u("expert_count")?,
            n_expert_used: u("expert_used_count")?,
            n_expert_shared: u_or("expert_shared_count", 1)?,
            expert_ff: u("expert_feed_forward_length")?,
            norm_topk: match f.get(&k("expert_weights_norm")) {
                None => true,
                Some(v) => v.as_bool().ok_or_else(|| {
                    bad(
                        &k("expert_weights_norm"),
                        format!("expected a bool, got {v}"),
                    )
                })?,
            },
            routed_scale: fl_or("expert_weights_scale", 1.0)?,
            n_hash_layers: u_or("hash_layer_count", 0)?,
            swiglu_limit: swiglu,
            swiglu_limit_shared: swiglu_sh,
            hc: u("hyper_connection.count")?,
            hc_iters: u("hyper_connection.sinkhorn_iterations")?,
            hc_eps: fl("hyper_connection.epsilon")?,
            idx_heads: u_or("attention.indexer.head_count", 0)?,
            idx_dim: u_or("attention.indexer.key_length", 0)?,
            idx_topk: u_or("attention.indexer.top_k", 0)?,
            bos: tok_u("tokenizer.ggml.bos_token_id", 0)?,
            eos: tok_u("tokenizer.ggml.eos_token_id", 1)?,
        }
        .validate(&src, Keys::Gguf)
    }

    /// Read a checkpoint's `config.json` (official DeepSeek-V4 or transformers layout).
    pub fn from_config_json(text: &str, src: &str) -> Result<Hparams, HparamsError> {
        let missing = |key: &str| HparamsError::Missing {
            source_name: src.into(),
            key: key.into(),
        };
        let bad = |key: &str, msg: String| HparamsError::Invalid {
            source_name: src.into(),
            key: key.into(),
            msg,
        };
        let j: Json = serde_json::from_str(text).map_err(|e| bad("<json>", e.to_string()))?;
        let get = |key: &str| j.get(key).filter(|v| !v.is_null());
        let u = |key: &str| -> Result<usize, HparamsError> {
            let v = get(key).ok_or_else(|| missing(key))?;
            v.as_u64()
                .and_then(|x| usize::try_from(x).ok())
                .ok_or_else(|| bad(key, format!("expected an unsigned integer, got {v}")))
        };
        let u_or = |key: &str, d: usize| if get(key).is_some() { u(key) } else { Ok(d) };
        let u32_or = |key: &str, d: u32| -> Result<u32, HparamsError> {
            u32::try_from(u_or(key, d as usize)?)
                .map_err(|_| bad(key, "too large for a 32-bit value".into()))
        };
        let fl = |key: &str| -> Result<f32, HparamsError> {
            let v = get(key).ok_or_else(|| missing(key))?;
            v.as_f64()
                .map(|x| x as f32)
                .ok_or_else(|| bad(key, format!("expected a number, got {v}")))
        };
        let fl_or = |key: &str, d: f32| if get(key).is_some() { fl(key) } else { Ok(d) };
        if let Some(t) = get("model_type").and_then(Json::as_str) {
            if t != "deepseek_v4" {
                return Err(bad("model_type", format!("'{t}' is not deepseek_v4")));
            }
        }
        if let Some(s) = get("scoring_func").and_then(Json::as_str) {
            if s != "sqrtsoftplus" {
                return Err(bad("scoring_func", format!("'{s}' (only sqrtsoftplus)")));
            }
        }
        let n_layer = u("num_hidden_layers")?;
        if n_layer == 0 || n_layer > MAX_LAYERS {
            return Err(bad(
                "num_hidden_layers",
                format!("{n_layer} is not between 1 and {MAX_LAYERS}"),
            ));
        }
        let head_dim = u("head_dim")?;
        // layer schedule: official `compress_ratios`, or transformers `layer_types`
        let ratios: Vec<u32> = if let Some(a) = get("compress_ratios").and_then(Json::as_array) {
            a.iter()
                .map(|v| {
                    v.as_u64()
                        .and_then(|x| u32::try_from(x).ok())
                        .ok_or_else(|| bad("compress_ratios", format!("bad entry {v}")))
                })
                .collect::<Result<_, _>>()?
        } else if let Some(a) = get("layer_types").and_then(Json::as_array) {
            a.iter()
                .map(|v| match v.as_str() {
                    Some("sliding_attention") => Ok(0),
                    Some("compressed_sparse_attention") => Ok(4),
                    Some("heavily_compressed_attention") => Ok(128),
                    _ => Err(bad("layer_types", format!("unknown layer type {v}"))),
                })
                .collect::<Result<_, _>>()?
        } else {
            // transformers would silently default to the V4-Pro schedule (spec §1.1 trap)
            return Err(missing("compress_ratios"));
        };
        let n_hash = if get("num_hash_layers").is_some() {
            u("num_hash_layers")?
        } else if let Some(a) = get("mlp_layer_types").and_then(Json::as_array) {
            a.iter()
                .take_while(|v| v.as_str() == Some("hash_moe"))
                .count()
        } else {
            0
        };
        let n_rot = if get("qk_rope_head_dim").is_some() {
            u("qk_rope_head_dim")?
        } else if let Some(v) = get("partial_rotary_factor") {
            match v.as_f64() {
                Some(p) if p > 0.0 && p <= 1.0 => (head_dim as f64 * p).round() as usize,
                _ => {
                    return Err(bad(
                        "partial_rotary_factor",
                        format!("{v} is not a fraction above 0, at most 1"),
                    ))
                }
            }
        } else {
            return Err(missing("qk_rope_head_dim"));
        };
        // RoPE: official `rope_theta` + `compress_rope_theta` + `rope_scaling`; transformers
        // `rope_parameters.{main,compress}`
        let rp = get("rope_parameters");
        let compress = rp.and_then(|p| p.get("compress"));
        let theta = |part: Option<&Json>, key: &str| -> Result<Option<f32>, HparamsError> {
            match part.and_then(|p| p.get("rope_theta")) {
                None => Ok(None),
                Some(v) => v
                    .as_f64()
                    .map(|t| Some(t as f32))
                    .ok_or_else(|| bad(key, format!("expected a number, got {v}"))),
            }
        };
        let main_theta = match theta(
            rp.and_then(|p| p.get("main")),
            "rope_parameters.main.rope_theta",
        )? {
            Some(t) => t,
            None => fl_or("rope_theta", 10000.0)?,
        };
        let compress_theta = match theta(compress, "rope_parameters.compress.rope_theta")? {
            Some(t) => t,
            None => fl("compress_rope_theta")?,
        };
        let scaling = compress.or_else(|| get("rope_scaling"));
        let yarn = match scaling {
            Some(s)
                if s.get("type")
                    .or_else(|| s.get("rope_type"))
                    .and_then(Json::as_str)
                    == Some("yarn") =>
            {
                let num = |k: &str, d: f64| -> Result<f64, HparamsError> {
                    match s.get(k).filter(|v| !v.is_null()) {
                        None => Ok(d),
                        Some(v) => v.as_f64().ok_or_else(|| {
                            bad(
                                &format!("rope_scaling.{k}"),
                                format!("expected a number, got {v}"),
                            )
                        }),
                    }
                };
                let orig = num("original_max_position_embeddings", 65536.0)?;
                if !(orig.is_finite() && orig >= 1.0 && orig <= u32::MAX as f64) {
                    return Err(bad(
                        "rope_scaling.original_max_position_embeddings",
                        format!("{orig} is not a context length"),
                    ));
                }
                Some(Yarn {
                    factor: num("factor", 1.0)? as f32,
                    orig_ctx: orig as u32,
                    beta_fast: num("beta_fast", 32.0)? as f32,
                    beta_slow: num("beta_slow", 1.0)? as f32,
                })
            }
            Some(s) => match s.get("type").or_else(|| s.get("rope_type")) {
                None => None,
                Some(t) if matches!(t.as_str(), Some("default" | "none")) => None,
                Some(t) => {
                    return Err(bad(
                        "rope_scaling.type",
                        format!("unsupported {t} (yarn, default or none)"),
                    ))
                }
            },
            None => None,
        };
        let limit = fl_or("swiglu_limit", 10.0)?;
        Hparams {
            n_layer,
            n_embd: u("hidden_size")?,
            n_vocab: u("vocab_size")?,
            n_ctx_train: u_or("max_position_embeddings", 1 << 20)?,
            n_head: u("num_attention_heads")?,
            head_dim,
            n_rot,
            q_lora_rank: u("q_lora_rank")?,
            o_groups: u("o_groups")?,
            o_lora_rank: u("o_lora_rank")?,
            window: u("sliding_window")?,
            rms_eps: fl_or("rms_norm_eps", 1e-6)?,
            rope_theta: main_theta,
            compress_rope_theta: compress_theta,
            yarn,
            compress_ratios: ratios,
            n_expert: u("n_routed_experts")?,
            n_expert_used: u("num_experts_per_tok")?,
            n_expert_shared: u_or("n_shared_experts", 1)?,
            expert_ff: u("moe_intermediate_size")?,
            norm_topk: match get("norm_topk_prob") {
                None => true,
                Some(v) => v.as_bool().ok_or_else(|| {
                    bad("norm_topk_prob", format!("expected true or false, got {v}"))
                })?,
            },
            routed_scale: fl_or("routed_scaling_factor", 1.0)?,
            n_hash_layers: n_hash,
            swiglu_limit: vec![limit; n_layer],
            swiglu_limit_shared: vec![limit; n_layer],
            hc: u_or("hc_mult", 4)?,
            hc_iters: u_or("hc_sinkhorn_iters", 20)?,
            hc_eps: fl_or("hc_eps", 1e-6)?,
            idx_heads: u_or("index_n_heads", 0)?,
            idx_dim: u_or("index_head_dim", 0)?,
            idx_topk: u_or("index_topk", 0)?,
            bos: u32_or("bos_token_id", 0)?,
            eos: u32_or("eos_token_id", 1)?,
        }
        .validate(src, Keys::ConfigJson)
    }
}
