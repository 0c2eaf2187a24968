//! Random-weight DeepSeek-V4 models in the **official checkpoint layout** (`fathom synth
//! --format checkpoint`), for measuring the checkpoint path at real V4-Flash dimensions: a
//! directory with `config.json`, `model.safetensors.index.json` and safetensors shards
//! `model-0000i-of-0000n.safetensors`, holding the tensors of [`crate::deepseek4::tensors`]
//! under their official names with the official storage:
//!
//! - FP8 E4M3 `[out, in]` + `.scale` F8_E8M0 `[⌈out/128⌉, ⌈in/128⌉]`: the attention
//!   projections, the indexer's query projection and the shared expert;
//! - FP4 e2m1 as I8 `[out, in/2]` (two codes per byte, low nibble the even column) + `.scale`
//!   F8_E8M0 `[out, in/32]`, one pair per routed expert and matrix (`experts.{E}.w1|w2|w3`);
//! - BF16: the embedding, the head, the router, the compressors and indexer heads, and the
//!   RMSNorm weights; F32: the other small tensors (HC mixes, sinks, APE, router bias);
//! - I64 `tid2eid` `[vocab, experts used]` in the hash-routed layers.
//!
//! **Random data**, chosen so every weight is finite and near the GGUF synth's scale (±0.02):
//! FP8 codes with a random sign and mantissa and an exponent field of 4..=8 (0.125..3.75)
//! under the scale 2⁻⁷; FP4 codes (every nibble valid) under 2⁻⁸; BF16 and F32 approximately
//! normal × 0.02 (the GGUF synth's generator); id rows of distinct experts tiled over the
//! vocabulary. Deterministic: each tensor's bytes come from (seed, name, chunk) as in the
//! GGUF synth. **Streaming**: each shard's header is written first, then its tensors chunk by
//! chunk, so resident memory stays small whatever the size.

use super::gen::{st_chunk, StGen, ST_CHUNK};
use super::{Synth, SynthError};
use crate::deepseek4::tensors::{self, Official, Role};
use crate::deepseek4::Hparams;
use serde_json::{json, Map, Value as Json};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Default bytes per shard (the official checkpoint's 46 shards hold about 3.5 GB each).
pub const SHARD_BYTES: u64 = 4 << 30;

/// One tensor of a synthetic checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StPlanned {
    /// Official name.
    pub name: String,
    /// How its bytes are made (and its safetensors dtype).
    pub gen: StGen,
    /// Shape, safetensors (row-major) order.
    pub shape: Vec<u64>,
}

impl StPlanned {
    /// Bytes of the tensor's data.
    pub fn n_bytes(&self) -> u64 {
        self.shape.iter().product::<u64>() * self.gen.elem_bytes()
    }
}

/// The official dtype of a tensor the table gives (`gguf` its GGUF name, for the small ones).
fn storage(role: Role, gguf: &str, experts: usize) -> StGen {
    match role {
        Role::Attention | Role::IndexerQuery | Role::SharedGateUp | Role::SharedDown => StGen::Fp8,
        Role::Experts => StGen::Fp4,
        Role::Embedding | Role::Head | Role::Router | Role::Compressor => StGen::Bf16,
        Role::Small if gguf.ends_with("norm.weight") => StGen::Bf16,
        Role::Small => StGen::F32,
        Role::Ids => StGen::Ids(experts as u32),
    }
}

impl Synth {
    /// Every tensor of the checkpoint, in the tensor table's order (each expert's `w1`, `w2`,
    /// `w3` in expert order; each FP8 / FP4 weight followed by its `.scale`).
    pub fn checkpoint_plan(&self) -> Vec<StPlanned> {
        let hp = self.hparams();
        let mut v = Vec::new();
        for s in tensors::all(&hp) {
            let gen = storage(s.tensor.role(), &s.name, self.experts);
            // GGUF order → row-major: `[in, out]` → `[out, in]`
            let shape: Vec<u64> = s.ne.iter().rev().map(|&n| n as u64).collect();
            let official = tensors::official_name(&s.name).expect("the table's own names");
            match (s.tensor.official(), gen) {
                (Official::Experts(_), _) => {
                    // GGUF `[in, out, E]`: one `[out, in]` FP4 matrix per expert
                    let (e, out, inp) = (shape[0], shape[1], shape[2]);
                    for x in 0..e {
                        let name = official.replace("{E}", &x.to_string());
                        let stem = name.trim_end_matches(".weight").to_string();
                        v.push(StPlanned {
                            name,
                            gen: StGen::Fp4,
                            shape: vec![out, inp / 2],
                        });
                        v.push(StPlanned {
                            name: format!("{stem}.scale"),
                            gen: StGen::Scale(FP4_SCALE),
                            shape: vec![out, inp / 32],
                        });
                    }
                }
                (_, StGen::Fp8) => {
                    let stem = official.trim_end_matches(".weight").to_string();
                    let (out, inp) = (shape[0], shape[1]);
                    v.push(StPlanned {
                        name: official,
                        gen,
                        shape: shape.clone(),
                    });
                    v.push(StPlanned {
                        name: format!("{stem}.scale"),
                        gen: StGen::Scale(FP8_SCALE),
                        shape: vec![out.div_ceil(128), inp.div_ceil(128)],
                    });
                }
                (_, StGen::Ids(_)) => v.push(StPlanned {
                    name: official,
                    gen,
                    // GGUF `[used, vocab]` → `[vocab, used]`
                    shape,
                }),
                _ => v.push(StPlanned {
                    name: official,
                    gen,
                    shape,
                }),
            }
        }
        v
    }

    /// Writes the checkpoint into `dir` (created if missing): shards of at most
    /// `shard_bytes` (a tensor larger than that gets a shard of its own), the index and
    /// `config.json`. `progress(done, total)` is called after every chunk. On error the
    /// files written so far are removed.
    pub fn write_checkpoint(
        &self,
        dir: &Path,
        shard_bytes: u64,
        seed: u64,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<(), SynthError> {
        let plan = self.checkpoint_plan();
        let shards = split_shards(&plan, shard_bytes);
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| SynthError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let names: Vec<String> = (1..=shards.len())
            .map(|i| format!("model-{i:05}-of-{:05}.safetensors", shards.len()))
            .collect();
        let mut written: Vec<PathBuf> = Vec::new();
        let r = (|| {
            let total: u64 = plan.iter().map(StPlanned::n_bytes).sum();
            let mut done = 0u64;
            let mut map = Map::new();
            for (range, name) in shards.iter().zip(&names) {
                let path = dir.join(name);
                written.push(path.clone());
                let part = &plan[range.clone()];
                write_shard(&path, part, seed, &mut |n| {
                    done += n;
                    progress(done, total);
                })?;
                for t in part {
                    map.insert(t.name.clone(), Json::String(name.clone()));
                }
            }
            let index = json!({ "metadata": { "total_size": total }, "weight_map": map });
            for (file, text) in [
                ("model.safetensors.index.json", index.to_string()),
                ("config.json", config_json(&self.hparams())),
            ] {
                let path = dir.join(file);
                written.push(path.clone());
                std::fs::write(&path, text).map_err(io(&path))?;
            }
            Ok(())
        })();
        if r.is_err() {
            for p in &written {
                let _ = std::fs::remove_file(p);
            }
        }
        r
    }
}

/// E8M0 byte of the FP8 weights' block scales: 2⁻⁷.
const FP8_SCALE: u8 = 127 - 7;
/// E8M0 byte of the FP4 experts' scales: 2⁻⁸.
const FP4_SCALE: u8 = 127 - 8;

/// The plan's tensors in shards of at most `max` bytes, in order.
fn split_shards(plan: &[StPlanned], max: u64) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0u64);
    for (i, t) in plan.iter().enumerate() {
        if i > start && bytes + t.n_bytes() > max {
            out.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes += t.n_bytes();
    }
    if start < plan.len() {
        out.push(start..plan.len());
    }
    out
}

/// One safetensors file: the header (8-byte length, JSON padded with spaces to 8 bytes),
/// then every tensor's data in order, streamed chunk by chunk. `step(n)` after each chunk.
fn write_shard(
    path: &Path,
    part: &[StPlanned],
    seed: u64,
    step: &mut dyn FnMut(u64),
) -> Result<(), SynthError> {
    let io = |source| SynthError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut header = Map::new();
    header.insert("__metadata__".into(), json!({ "format": "pt" }));
    let mut off = 0u64;
    for t in part {
        let end = off + t.n_bytes();
        header.insert(
            t.name.clone(),
            json!({ "dtype": t.gen.dtype(), "shape": t.shape, "data_offsets": [off, end] }),
        );
        off = end;
    }
    let mut text = Json::Object(header).to_string().into_bytes();
    text.resize(text.len().next_multiple_of(8), b' ');
    let file = std::fs::File::create(path).map_err(io)?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    w.write_all(&(text.len() as u64).to_le_bytes())
        .map_err(io)?;
    w.write_all(&text).map_err(io)?;
    let mut buf = Vec::with_capacity(ST_CHUNK);
    for t in part {
        let n = t.n_bytes();
        for c in 0..n.div_ceil(ST_CHUNK as u64) {
            let len = (n - c * ST_CHUNK as u64).min(ST_CHUNK as u64) as usize;
            st_chunk(t, seed, c, len, &mut buf);
            w.write_all(&buf).map_err(io)?;
            step(len as u64);
        }
    }
    w.into_inner()
        .map_err(|e| io(e.into_error()))?
        .sync_all()
        .map_err(io)
}

/// The official `config.json` of `hp` (the keys [`Hparams::from_config_json`] reads; one
/// `swiglu_limit`, the first layer's).
pub fn config_json(hp: &Hparams) -> String {
    let mut j = json!({
        "architectures": ["DeepseekV4ForCausalLM"],
        "model_type": "deepseek_v4",
        "torch_dtype": "bfloat16",
        "num_hidden_layers": hp.n_layer,
        "hidden_size": hp.n_embd,
        "vocab_size": hp.n_vocab,
        "max_position_embeddings": hp.n_ctx_train,
        "num_attention_heads": hp.n_head,
        "num_key_value_heads": 1,
        "head_dim": hp.head_dim,
        "qk_rope_head_dim": hp.n_rot,
        "q_lora_rank": hp.q_lora_rank,
        "o_groups": hp.o_groups,
        "o_lora_rank": hp.o_lora_rank,
        "sliding_window": hp.window,
        "rms_norm_eps": hp.rms_eps,
        "rope_theta": hp.rope_theta,
        "compress_rope_theta": hp.compress_rope_theta,
        "compress_ratios": hp.compress_ratios,
        "n_routed_experts": hp.n_expert,
        "num_experts_per_tok": hp.n_expert_used,
        "n_shared_experts": hp.n_expert_shared,
        "moe_intermediate_size": hp.expert_ff,
    });
    let more = json!({
        "norm_topk_prob": hp.norm_topk,
        "routed_scaling_factor": hp.routed_scale,
        "scoring_func": "sqrtsoftplus",
        "topk_method": "noaux_tc",
        "num_hash_layers": hp.n_hash_layers,
        "swiglu_limit": hp.swiglu_limit.first().copied().unwrap_or(10.0),
        "hc_mult": hp.hc,
        "hc_sinkhorn_iters": hp.hc_iters,
        "hc_eps": hp.hc_eps,
        "index_n_heads": hp.idx_heads,
        "index_head_dim": hp.idx_dim,
        "index_topk": hp.idx_topk,
        "bos_token_id": hp.bos,
        "eos_token_id": hp.eos,
        "num_nextn_predict_layers": 0,
        "tie_word_embeddings": false,
        "quantization_config": {
            "quant_method": "fp8",
            "fmt": "e4m3",
            "scale_fmt": "ue8m0",
            "weight_block_size": [128, 128],
        },
    });
    if let (Json::Object(a), Json::Object(b)) = (&mut j, more) {
        a.extend(b);
    }
    if let Some(y) = &hp.yarn {
        j["rope_scaling"] = json!({
            "type": "yarn",
            "factor": y.factor,
            "original_max_position_embeddings": y.orig_ctx,
            "beta_fast": y.beta_fast,
            "beta_slow": y.beta_slow,
        });
    }
    serde_json::to_string_pretty(&j).expect("a JSON value")
}
