//! [`DeepSeek4`]: the DeepSeek-V4 model behind the [`Model`] interface, from a GGUF file,
//! an official checkpoint, or any weight provider (tests).

use super::checkpoint::SafetensorsWeights;
use super::forward::cached::state_tensors;
use super::forward::{Builder, ChunkInputs, PrefillInputs};
use super::hparams::Hparams;
use super::tensors::{self, Role};
use crate::gguf::GgufFile;
use crate::model::{
    slots_of, Architecture, CachePart, ConvertedBytes, GraphKind, GraphSpec, LoadError,
    LoadOptions, Logits, Model, ModelError, ModelInfo, MoeShape, StateTensor, WeightBytes,
};
use crate::tokenizer::Tokenizer;
use crate::weights::experts::ExpertCacheError;
use crate::weights::policy::{Fp8Policy, StOptions};
use crate::weights::{
    ExpertCache, ExpertCacheConfig, ForwardError, GgufWeights, PagedSources, WeightMemo, Weights,
};
use graph::knobs::MoeKnobs;
use graph::Graph;
use std::path::Path;
use std::sync::Arc;

/// The registry entry of DeepSeek-V4 (GGUF `deepseek4`, config.json `deepseek_v4`).
pub const ARCHITECTURE: Architecture = Architecture {
    name: "deepseek4",
    model_types: &["deepseek_v4"],
    from_gguf: |file, opts| Ok(Box::new(DeepSeek4::from_gguf(file, opts)?)),
    from_checkpoint: |path, opts| Ok(Box::new(DeepSeek4::from_checkpoint(path, opts)?)),
};

/// Files above this size get their dense weights read in up front by [`Model::preload`].
const PRELOAD_MIN_BYTES: u64 = 1 << 30;

/// A DeepSeek-V4 model: hyperparameters, weights, tokenizer.
pub struct DeepSeek4 {
    hp: Hparams,
    info: ModelInfo,
    weights: WeightMemo,
    /// The tokenizer, or why there is none.
    tokenizer: Result<Tokenizer, String>,
    /// The GGUF file the weights come from, and its weight provider's repacks.
    gguf: Option<(Arc<GgufFile>, crate::weights::Repack, quant::simd::CpuLevel)>,
    /// What the checkpoint's conversions will own (see [`Model::converted_bytes`]).
    converted: Option<ConvertedBytes>,
    /// The cache the routed experts are read through ([`LoadOptions::experts`]).
    experts: Option<ExpertCache>,
    /// The errors of an official checkpoint's FP4 experts used in place.
    in_place_errors: Option<std::sync::Arc<super::checkpoint::InPlaceErrors>>,
    /// A checkpoint's weight bytes as loaded (a GGUF's come from its tensor table).
    checkpoint_bytes: Option<WeightBytes>,
}

impl std::fmt::Debug for DeepSeek4 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeepSeek4")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

fn info(hp: &Hparams) -> ModelInfo {
    let n_params = tensors::all(hp)
        .iter()
        .map(|s| s.ne.iter().product::<usize>() as u64)
        .sum();
    ModelInfo {
        arch: ARCHITECTURE.name,
        n_layer: hp.n_layer,
        n_embd: hp.n_embd,
        n_vocab: hp.n_vocab,
        n_ctx_train: hp.n_ctx_train,
        n_params,
        bos: hp.bos,
        eos: hp.eos,
        moe: Some(MoeShape {
            n_layer: hp.n_layer,
            n_expert_used: hp.n_expert_used,
            n_hash_layers: hp.n_hash_layers,
        }),
        hidden: [hp.hc, hp.n_embd],
    }
}

impl DeepSeek4 {
    /// A model over any weight provider (tensors by their GGUF names), with `tokenizer` or
    /// the reason there is none.
    pub fn new(
        hp: Hparams,
        weights: impl Weights + Send + 'static,
        tokenizer: Result<Tokenizer, String>,
    ) -> DeepSeek4 {
        DeepSeek4 {
            info: info(&hp),
            hp,
            weights: WeightMemo::new(Box::new(weights)),
            tokenizer,
            gguf: None,
            converted: None,
            experts: None,
            in_place_errors: None,
            checkpoint_bytes: None,
        }
    }

    /// The model of a GGUF file (hyperparameters and tokenizer from its metadata), its
    /// weights used in place but for `opts.repack`'s conversions.
    pub fn from_gguf(file: Arc<GgufFile>, opts: &LoadOptions) -> Result<DeepSeek4, LoadError> {
        let fail = |message: String| LoadError::Model {
            path: file.path().to_path_buf(),
            message,
        };
        let hp = Hparams::from_gguf(&file).map_err(|e| fail(e.to_string()))?;
        for t in file.tensors() {
            if let Some(why) = tensors::misplaced(&hp, &t.name) {
                return Err(fail(format!("tensor '{}' {why}", t.name)));
            }
            // every shape as the hyperparameters say, before anything is built
            if let Some((kind, layer)) = tensors::parse(&t.name) {
                let want = kind.shape(&hp, layer.unwrap_or(0));
                let mut got: Vec<usize> = t.ne.iter().map(|&d| d as usize).collect();
                while got.len() > want.len().max(1) && got.last() == Some(&1) {
                    got.pop();
                }
                if got != want {
                    let dims = |d: &[usize]| {
                        d.iter()
                            .map(usize::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    };
                    return Err(fail(format!(
                        "tensor '{}': shape [{}], the hyperparameters need [{}]",
                        t.name,
                        dims(&got),
                        dims(&want)
                    )));
                }
            }
            // the small float tables (norms, biases, sinks, HC bases): a NaN or infinity in a
            // router bias would only change which experts are picked, never reaching the
            // logits, so they are checked here (the large matrices carry a NaN to the logits)
            if matches!(
                t.dtype,
                quant::DType::F32 | quant::DType::F16 | quant::DType::BF16
            ) && t.n_bytes <= 64 << 20
            {
                let bytes = file.tensor_bytes(t).map_err(|e| fail(e.to_string()))?;
                let bad = match t.dtype {
                    quant::DType::F32 => bytes
                        .chunks_exact(4)
                        .position(|c| !f32::from_le_bytes([c[0], c[1], c[2], c[3]]).is_finite()),
                    quant::DType::F16 => bytes
                        .chunks_exact(2)
                        .position(|c| u16::from_le_bytes([c[0], c[1]]) & 0x7C00 == 0x7C00),
                    _ => bytes
                        .chunks_exact(2)
                        .position(|c| u16::from_le_bytes([c[0], c[1]]) & 0x7F80 == 0x7F80),
                };
                if let Some(i) = bad {
                    return Err(fail(format!(
                        "tensor '{}': element {i} is not a finite number",
                        t.name
                    )));
                }
            }
            // the hash-routing tables, checked as the checkpoint loader checks them
            if tensors::parse(&t.name).is_some_and(|(k, _)| k == tensors::Tensor::FfnGateTid2eid) {
                if t.dtype != quant::DType::I32 {
                    return Err(fail(format!(
                        "tensor '{}': type {}, expected I32",
                        t.name, t.dtype
                    )));
                }
                let bytes = file.tensor_bytes(t).map_err(|e| fail(e.to_string()))?;
                let ids = bytes
                    .chunks_exact(4)
                    .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64);
                tensors::check_expert_ids(ids, hp.n_expert)
                    .map_err(|why| fail(format!("tensor '{}': {why}", t.name)))?;
            }
        }
        let tokenizer = Tokenizer::from_gguf(&file).map_err(|e| e.to_string());
        let level = opts.exec.cpu;
        let mut w = GgufWeights::with_repack_at(file.clone(), opts.repack, level);
        let cache = match opts.experts {
            Some(cfg) => {
                let (cache, paged) =
                    page_experts(&file, &hp, cfg).map_err(|e| fail(e.to_string()))?;
                w = w.with_paged_experts(paged);
                Some(cache)
            }
            None => None,
        };
        let mut m = DeepSeek4::new(hp, w, tokenizer);
        m.gguf = Some((file, opts.repack, level));
        m.experts = cache;
        Ok(m)
    }

    /// The model of an official checkpoint (a directory, its index `.json` or a
    /// `.safetensors`; `config.json` and, for the tokenizer, `tokenizer.json` beside it),
    /// its weights stored as `opts.checkpoint` says.
    pub fn from_checkpoint(path: &Path, opts: &LoadOptions) -> Result<DeepSeek4, LoadError> {
        let fail = |message: String| LoadError::Model {
            path: path.to_path_buf(),
            message,
        };
        let (mut w, hp) = SafetensorsWeights::open_with(path, opts.checkpoint)
            .map_err(|e| fail(e.to_string()))?;
        // routed experts through the cache: read from their own tensors when used, never
        // stacked in memory
        let cache = match opts.experts {
            Some(cfg) => {
                let cache = ExpertCache::new(cfg);
                w.page_experts(&cache).map_err(|e| fail(e.to_string()))?;
                Some(cache)
            }
            None => None,
        };
        let wb = w.weight_bytes(hp.n_expert_used);
        let dir = crate::model::checkpoint_dir(path);
        let tokenizer = Tokenizer::from_dir(dir).map_err(|e| format!("{}: {e}", dir.display()));
        let q8 = StOptions {
            fp8: Fp8Policy::Q8_0,
            ..opts.checkpoint
        };
        let converted = ConvertedBytes {
            bytes: w.converted_bytes(),
            with_q8_0: (opts.checkpoint.fp8 != Fp8Policy::Q8_0)
                .then(|| w.converted_bytes_with(&q8)),
        };
        let in_place_errors = w.in_place_errors();
        let mut m = DeepSeek4::new(hp, w, tokenizer);
        m.in_place_errors = Some(in_place_errors);
        m.converted = Some(converted);
        m.experts = cache;
        m.checkpoint_bytes = Some(wb);
        Ok(m)
    }

    /// Asks the weight provider for every tensor of the model once (a checkpoint's
    /// conversions are made then, and remembered for every graph), calling `progress(done,
    /// total)` with the bytes handed out so far (capped at `total`).
    fn load_every_tensor(&mut self, total: u64, progress: &mut dyn FnMut(u64, u64)) {
        let names: Vec<String> = tensors::all(&self.hp).into_iter().map(|s| s.name).collect();
        let mut g = graph::Graph::new();
        self.weights.new_graph();
        let mut done = 0u64;
        for name in names {
            // an error here is met again, and reported, by the first graph
            if let Ok(Some(id)) = self.weights.try_get(&mut g, &name) {
                done += g.desc(id).nbytes() as u64;
            }
            progress(done.min(total), total);
        }
        self.weights.new_graph();
    }

    /// The hyperparameters.
    pub fn hparams(&self) -> &Hparams {
        &self.hp
    }
}

/// An expert cache over the routed-expert tensors of `file` (each layer's gate, up and down
/// stacks one group; they are read in the file's layout, not repacked), and each tensor's
/// source.
fn page_experts(
    file: &GgufFile,
    hp: &Hparams,
    cfg: ExpertCacheConfig,
) -> Result<(ExpertCache, PagedSources), ExpertCacheError> {
    let cache = ExpertCache::new(cfg);
    let mut paged = PagedSources::new();
    let e = hp.n_expert.max(1) as u64;
    for t in file.tensors() {
        let Some((kind, Some(layer))) = tensors::parse(&t.name) else {
            continue;
        };
        if kind.role() != Role::Experts {
            continue;
        }
        let shard = &file.shards()[t.shard];
        let len = t.n_bytes / e;
        let src = cache.add_tensor(
            &t.name,
            shard.path(),
            shard.data_offset() + t.offset,
            len,
            len,
            e as u32,
            layer as u32,
        )?;
        paged.insert(t.name.clone(), src);
    }
    Ok((cache, paged))
}

impl Model for DeepSeek4 {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn converted_bytes(&self) -> Option<ConvertedBytes> {
        self.converted
    }

    fn expert_cache(&self) -> Option<&ExpertCache> {
        self.experts.as_ref()
    }

    fn take_expert_error(&self) -> Option<String> {
        self.experts
            .as_ref()
            .and_then(|c| c.take_error())
            .or_else(|| self.in_place_errors.as_ref().and_then(|e| e.take()))
    }

    fn tokenizer(&self) -> Result<&Tokenizer, ModelError> {
        self.tokenizer
            .as_ref()
            .map_err(|e| ModelError::NoTokenizer(e.clone()))
    }

    fn state_tensors(&self, ctx: usize) -> Vec<StateTensor> {
        state_tensors(&self.hp, ctx)
            .into_iter()
            .map(|(name, ne)| StateTensor { name, ne })
            .collect()
    }

    /// The caches of spec §6.1 by part: the sliding-window rings (`l{l}.kv`), the compressed
    /// entries (`l{l}.comp`), the indexer keys (`l{l}.idx`) and the compressors' pending rows
    /// (`*_a`, `*_z`).
    fn cache_parts(&self, ctx: usize) -> Vec<CachePart> {
        let mut parts = [
            ("sliding window", 0u64),
            ("compressed entries", 0),
            ("indexer keys", 0),
            ("compressor state", 0),
        ];
        for s in self.state_tensors(ctx) {
            let i = match s.name.rsplit('.').next().unwrap_or("") {
                "kv" => 0,
                "comp" => 1,
                "idx" => 2,
                _ => 3,
            };
            parts[i].1 += s.bytes();
        }
        parts
            .into_iter()
            .map(|(name, bytes)| CachePart { name, bytes })
            .collect()
    }

    fn build(
        &mut self,
        spec: &GraphSpec,
        knobs: Option<&Arc<MoeKnobs>>,
    ) -> Result<Graph, ForwardError> {
        self.weights.new_graph();
        let t = spec.tokens;
        let b = match spec.kind {
            GraphKind::Cached { ctx, span } => {
                Builder::new_cached(&self.hp, &mut self.weights, t, ctx, span)
            }
            GraphKind::Stateless => Builder::new(&self.hp, &mut self.weights, t),
            GraphKind::Slots {
                ctx,
                span,
                n_slots,
                active,
            } => {
                let active: Vec<usize> = slots_of(active).collect();
                if active.len() != t || spec.logits != Logits::All || spec.hidden {
                    return Err(ForwardError::Unsupported(format!(
                        "a batched step evaluates one token of each of its {} slots, with \
                         their logits (asked: {t} tokens)",
                        active.len()
                    )));
                }
                Builder::new_slots(&self.hp, &mut self.weights, ctx, span, n_slots, &active)
            }
        }?;
        let b = match knobs {
            Some(k) => b.with_moe_knobs(k.clone()),
            None => b,
        };
        let b = b.with_prefetch(self.experts.is_some());
        match (spec.logits, spec.hidden) {
            (Logits::Last, false) => b.model_last(),
            (Logits::All, hidden) => b.model(hidden),
            (Logits::Last, true) => Err(ForwardError::Unsupported(
                "the residual states come with every position's logits only".into(),
            )),
        }
    }

    fn inputs(
        &self,
        spec: &GraphSpec,
        starts: &[usize],
    ) -> Result<Vec<(String, Vec<u8>)>, ForwardError> {
        let p0 = starts.first().copied().unwrap_or(0);
        match spec.kind {
            GraphKind::Cached { ctx, span } => {
                Ok(ChunkInputs::new(&self.hp, p0, spec.tokens, ctx, span)?.values)
            }
            GraphKind::Slots {
                ctx, span, active, ..
            } => {
                let slots: Vec<usize> = slots_of(active).collect();
                if slots.len() != starts.len() {
                    return Err(ForwardError::Unsupported(format!(
                        "{} positions for {} slots",
                        starts.len(),
                        slots.len()
                    )));
                }
                Ok(ChunkInputs::slots(&self.hp, &slots, starts, ctx, span)?.values)
            }
            GraphKind::Stateless if p0 == 0 => Ok(PrefillInputs::new(&self.hp, spec.tokens).values),
            GraphKind::Stateless => Err(ForwardError::Unsupported(format!(
                "a stateless graph starts at position 0, not {p0}"
            ))),
        }
    }

    /// From the GGUF file's tensor table: every dense tensor, one row of the token
    /// embedding, `n_expert_used / n_expert` of each expert stack.
    /// For a checkpoint: every tensor as loaded ([`SafetensorsWeights::weight_bytes`]).
    fn weight_bytes(&self) -> Option<WeightBytes> {
        if let Some(b) = self.checkpoint_bytes {
            return Some(b);
        }
        let (file, repack, level) = self.gguf.as_ref()?;
        let (e, k) = (self.hp.n_expert.max(1) as u64, self.hp.n_expert_used as u64);
        let mut b = WeightBytes {
            total: 0,
            per_token: 0,
            per_token_loaded: 0,
        };
        for t in file.tensors() {
            let row = t.ne.first().copied().unwrap_or(1);
            let role = tensors::parse(&t.name).map(|p| p.0.role());
            // experts read through a cache stay in the file's layout
            let loaded = if self.experts.is_some() && role == Some(Role::Experts) {
                t.n_bytes
            } else {
                repack.loaded_bytes(t.dtype, row, t.n_bytes, *level)
            };
            let share = |n: u64| match role {
                Some(Role::Experts) => n / e * k,
                Some(Role::Embedding) => n / t.ne.get(1).copied().unwrap_or(1).max(1),
                _ => n,
            };
            b.total += t.n_bytes;
            b.per_token += share(t.n_bytes);
            b.per_token_loaded += share(loaded);
        }
        Some(b)
    }

    /// Touches every page of the non-expert tensors of a GGUF file over 1 GiB (attention,
    /// HC, shared experts, embeddings, head: read for every token), so that the first token
    /// is not stalled by page faults. Routed experts stay demand-paged: a token touches only
    /// the few it routes to. A checkpoint over 1 GiB has every tensor loaded now (its
    /// conversions made — the expert stacks without `--ram` take minutes at V4-Flash's size —
    /// and its FP8 codes checked, which reads them), with progress, instead of inside the
    /// first prompt.
    fn preload(&mut self, progress: &mut dyn FnMut(u64, u64)) {
        if let Some(wb) = self.checkpoint_bytes {
            if wb.total >= PRELOAD_MIN_BYTES {
                self.load_every_tensor(wb.total, progress);
            }
            return;
        }
        let Some((file, ..)) = &self.gguf else {
            return;
        };
        let dense: Vec<_> = file
            .tensors()
            .iter()
            .filter(|t| tensors::parse(&t.name).map(|p| p.0.role()) != Some(Role::Experts))
            .collect();
        let total: u64 = dense.iter().map(|t| t.n_bytes).sum();
        let file_bytes: u64 = file.shards().iter().map(|s| s.bytes().len() as u64).sum();
        if file_bytes < PRELOAD_MIN_BYTES || total == 0 {
            return;
        }
        let (mut done, mut acc) = (0u64, 0u8);
        for t in dense {
            let Ok(bytes) = file.tensor_bytes(t) else {
                continue;
            };
            for page in bytes.chunks(4096) {
                acc ^= std::hint::black_box(page[0]);
            }
            done += t.n_bytes;
            progress(done, total);
        }
        std::hint::black_box(acc);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::weights::ForwardError;

    /// Loading every tensor of a checkpoint up front reports progress up to the weights'
    /// size as loaded, and the model then runs as it would have.
    #[test]
    fn a_checkpoint_loads_every_tensor_with_progress() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/dsv4-tiny-fp8");
        let opts = LoadOptions::default();
        let mut m = DeepSeek4::from_checkpoint(Path::new(dir), &opts).unwrap();
        let total = m.weight_bytes().unwrap().total;
        let mut seen = Vec::new();
        m.load_every_tensor(total, &mut |done, t| seen.push((done, t)));
        assert_eq!(seen.len(), tensors::all(&m.hp).len());
        assert!(seen.windows(2).all(|w| w[0].0 <= w[1].0 && w[1].1 == total));
        // every byte handed out: the dense part and the expert stacks as loaded
        let last = seen.last().unwrap().0;
        assert!(last * 10 >= total * 9 && last <= total, "{last} of {total}");
        let mut s = crate::session::Session::new(Box::new(m), opts.exec, 16).unwrap();
        assert!(s
            .prefill(&[0, 266, 85])
            .unwrap()
            .iter()
            .all(|v| v.is_finite()));
    }

    /// V4-Flash dimensions (spec §1.1, §2).
    pub(crate) fn flash() -> Hparams {
        let mut ratios = vec![0u32, 0];
        for i in 2..43 {
            ratios.push(if i % 2 == 0 { 4 } else { 128 });
        }
        ratios[42] = 4;
        Hparams {
            n_layer: 43,
            n_embd: 4096,
            n_vocab: 129280,
            n_ctx_train: 1 << 20,
            n_head: 64,
            head_dim: 512,
            n_rot: 64,
            q_lora_rank: 1024,
            o_groups: 8,
            o_lora_rank: 1024,
            window: 128,
            rms_eps: 1e-6,
            rope_theta: 10000.0,
            compress_rope_theta: 160000.0,
            yarn: None,
            compress_ratios: ratios,
            n_expert: 256,
            n_expert_used: 6,
            n_expert_shared: 1,
            expert_ff: 2048,
            norm_topk: true,
            routed_scale: 1.5,
            n_hash_layers: 3,
            swiglu_limit: vec![10.0; 43],
            swiglu_limit_shared: vec![10.0; 43],
            hc: 4,
            hc_iters: 20,
            hc_eps: 1e-6,
            idx_heads: 64,
            idx_dim: 128,
            idx_topk: 512,
            bos: 0,
            eos: 1,
        }
    }

    /// A provider with no tensors (the cache layout does not need any).
    struct NoWeights;
    impl Weights for NoWeights {
        fn try_get(
            &mut self,
            _: &mut graph::Graph,
            _: &str,
        ) -> Result<Option<graph::TensorId>, ForwardError> {
            Ok(None)
        }
    }

    fn part(m: &DeepSeek4, ctx: usize, name: &str) -> u64 {
        m.cache_parts(ctx)
            .into_iter()
            .find(|p| p.name == name)
            .unwrap()
            .bytes
    }

    #[test]
    fn flash_caches_match_the_spec() {
        let m = DeepSeek4::new(flash(), NoWeights, Err("none".into()));
        let hp = m.hparams();
        assert_eq!(hp.compress_ratios.iter().filter(|&&r| r == 4).count(), 21);
        assert_eq!(hp.compress_ratios.iter().filter(|&&r| r == 128).count(), 20);
        let window = part(&m, 4096, "sliding window");
        assert_eq!(window, 43 * 128 * 512 * 4);
        // spec §6.1: 3440 elements per token of context (CSA 2688 + indexer 672 + HCA 80)
        let per_token = |ctx| part(&m, ctx, "compressed entries") + part(&m, ctx, "indexer keys");
        assert_eq!(per_token(4096), 4096 * 3440 * 4);
        assert_eq!(part(&m, 4096, "indexer keys"), 21 * 1024 * 128 * 4);
        assert_eq!(
            part(&m, 4096, "compressor state"),
            21 * (2 * 8 * 1024 + 2 * 8 * 256) * 4 + 20 * (2 * 128 * 512) * 4
        );
        // the per-token part grows linearly, the rest is fixed
        assert_eq!(per_token(8192), 2 * per_token(4096));
        assert_eq!(part(&m, 8192, "sliding window"), window);
        // a short context still has the whole ring and one entry per compressed layer
        assert_eq!(part(&m, 3, "compressed entries"), 41 * 512 * 4);
        assert_eq!(part(&m, 3, "indexer keys"), 21 * 128 * 4);
        let total: u64 = m.cache_parts(4096).iter().map(|p| p.bytes).sum();
        let tensors: u64 = m.state_tensors(4096).iter().map(|s| s.bytes()).sum();
        assert_eq!(total, tensors);
    }

    /// The tensor table at V4-Flash's dimensions: 284B parameters, of which the routed
    /// experts are all but about 7B (the published 284B total, 13B active per token).
    #[test]
    fn flash_has_its_published_size() {
        let m = DeepSeek4::new(flash(), NoWeights, Err("none".into()));
        let n = m.info().n_params as f64 / 1e9;
        assert!((283.0..286.0).contains(&n), "{n}B");
        let experts: u64 = tensors::all(m.hparams())
            .iter()
            .filter(|s| s.tensor.role() == Role::Experts)
            .map(|s| s.ne.iter().product::<usize>() as u64)
            .sum();
        let active = m.info().n_params - experts + experts / 256 * 6;
        let active = active as f64 / 1e9;
        assert!((12.0..15.0).contains(&active), "{active}B active");
    }
}
