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

    fn validate(self, src: &str) -> Result<Hparams, HparamsError> {
        let bad = |key: &str, msg: String| HparamsError::Invalid {
            source_name: src.into(),
            key: key.into(),
            msg,
        };
        if self.n_layer == 0 || self.n_embd == 0 || self.n_head == 0 || self.n_vocab == 0 {
            return Err(bad(
                "block_count/embedding_length/head_count/vocab",
                "must be positive".into(),
            ));
        }
        if self.compress_ratios.len() < self.n_layer {
            return Err(bad(
                "compress_ratios",
                format!(
                    "{} entries for {} layers",
                    self.compress_ratios.len(),
                    self.n_layer
                ),
            ));
        }
        if let Some(r) = self
            .compress_ratios
            .iter()
            .take(self.n_layer)
            .find(|r| ![0, 4, 128].contains(*r))
        {
            return Err(bad(
                "compress_ratios",
                format!("ratio {r} (allowed: 0, 4, 128)"),
            ));
        }
        if self.n_rot == 0 || self.n_rot > self.head_dim || !self.n_rot.is_multiple_of(2) {
            return Err(bad(
                "rope.dimension_count",
                format!("{} rope dims for head dim {}", self.n_rot, self.head_dim),
            ));
        }
        if self.o_groups == 0 || !self.n_head.is_multiple_of(self.o_groups) {
            return Err(bad(
                "attention.output_group_count",
                format!("{} groups for {} heads", self.o_groups, self.n_head),
            ));
        }
        if self.n_expert_used == 0 || self.n_expert_used > self.n_expert {
            return Err(bad(
                "expert_used_count",
                format!("{} of {} experts", self.n_expert_used, self.n_expert),
            ));
        }
        if self.swiglu_limit.len() < self.n_layer || self.swiglu_limit_shared.len() < self.n_layer {
            return Err(bad("swiglu_clamp_exp", "fewer entries than layers".into()));
        }
        if self.hc == 0 || self.window == 0 {
            return Err(bad(
                "hyper_connection.count/sliding_window",
                "must be positive".into(),
            ));
        }
        let has_csa = self
            .compress_ratios
            .iter()
            .take(self.n_layer)
            .any(|&r| r == 4);
        if has_csa
            && (self.idx_heads == 0
                || self.idx_dim == 0
                || self.idx_topk == 0
                || self.idx_dim < self.n_rot)
        {
            return Err(bad(
                "attention.indexer.*",
                "CSA layers need indexer heads, key length ≥ rope dims and top-k".into(),
            ));
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
        let n_layer = u("block_count")?;
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
                orig_ctx: u("rope.scaling.original_context_length")? as u32,
                beta_fast: fl_or("rope.scaling.yarn_beta_fast", 32.0)?,
                beta_slow: fl_or("rope.scaling.yarn_beta_slow", 1.0)?,
            }),
            Some("none") | None => None,
            Some(t) => return Err(bad(&k("rope.scaling.type"), format!("unsupported '{t}'"))),
        };
        let swiglu =
            per_layer("swiglu_clamp_exp")?.ok_or_else(|| missing(&k("swiglu_clamp_exp")))?;
        let swiglu_sh = per_layer("swiglu_clamp_shexp")?.unwrap_or_else(|| swiglu.clone());
        let n_vocab = match f.get("tokenizer.ggml.tokens").and_then(Value::as_array) {
            Some(a) => a.len(),
            None => u("vocab_size")?,
        };
        let tok_u = |key: &str, d: u32| {
            f.get(key)
                .and_then(Value::as_u64)
                .map(|x| x as u32)
                .unwrap_or(d)
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
            norm_topk: f
                .get(&k("expert_weights_norm"))
                .and_then(Value::as_bool)
                .unwrap_or(true),
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
            bos: tok_u("tokenizer.ggml.bos_token_id", 0),
            eos: tok_u("tokenizer.ggml.eos_token_id", 1),
        }
        .validate(&src)
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
                .map(|x| x as usize)
                .ok_or_else(|| bad(key, format!("expected an unsigned integer, got {v}")))
        };
        let u_or = |key: &str, d: usize| if get(key).is_some() { u(key) } else { Ok(d) };
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
        let head_dim = u("head_dim")?;
        // layer schedule: official `compress_ratios`, or transformers `layer_types`
        let ratios: Vec<u32> = if let Some(a) = get("compress_ratios").and_then(Json::as_array) {
            a.iter()
                .map(|v| {
                    v.as_u64()
                        .map(|x| x as u32)
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
        } else if let Some(p) = get("partial_rotary_factor").and_then(Json::as_f64) {
            (head_dim as f64 * p).round() as usize
        } else {
            return Err(missing("qk_rope_head_dim"));
        };
        // RoPE: official `rope_theta` + `compress_rope_theta` + `rope_scaling`; transformers
        // `rope_parameters.{main,compress}`
        let rp = get("rope_parameters");
        let compress = rp.and_then(|p| p.get("compress"));
        let main_theta = match rp
            .and_then(|p| p.get("main"))
            .and_then(|m| m.get("rope_theta"))
            .and_then(Json::as_f64)
        {
            Some(t) => t as f32,
            None => fl_or("rope_theta", 10000.0)?,
        };
        let compress_theta = match compress
            .and_then(|c| c.get("rope_theta"))
            .and_then(Json::as_f64)
        {
            Some(t) => t as f32,
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
                let num = |k: &str, d: f64| s.get(k).and_then(Json::as_f64).unwrap_or(d);
                Some(Yarn {
                    factor: num("factor", 1.0) as f32,
                    orig_ctx: num("original_max_position_embeddings", 65536.0) as u32,
                    beta_fast: num("beta_fast", 32.0) as f32,
                    beta_slow: num("beta_slow", 1.0) as f32,
                })
            }
            _ => None,
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
            norm_topk: get("norm_topk_prob")
                .and_then(Json::as_bool)
                .unwrap_or(true),
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
            bos: u_or("bos_token_id", 0)? as u32,
            eos: u_or("eos_token_id", 1)? as u32,
        }
        .validate(src)
    }
}
