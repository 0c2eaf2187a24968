//! The model interface: what [`crate::session::Session`] and the commands need from a model,
//! whatever its architecture, and the one way to open one ([`open`]).
//!
//! A [`Model`] builds the graph of one chunk of tokens ([`GraphSpec`]), says which state
//! tensors it carries from one chunk to the next (its decode caches) and computes the
//! per-chunk inputs (positions, masks, cache slots); it also holds its hyperparameters
//! ([`ModelInfo`]), its tokenizer and its chat format. The session owns the executors,
//! the state buffer and the chunk loop, so a new architecture (DeepSeek-V4.1, an MTP head)
//! is a new module with an [`Architecture`] entry in [`ARCHITECTURES`], nothing else.
//!
//! [`open`] takes any model path fathom reads — a GGUF file (single, or the first shard of
//! a split file), a checkpoint directory, its `model.safetensors.index.json` or a
//! `.safetensors` file — finds the architecture (GGUF `general.architecture`, config.json
//! `model_type`) and opens it with one [`LoadOptions`].

use crate::chat::ChatTemplate;
use crate::gguf::{GgufError, GgufFile};
use crate::tokenizer::Tokenizer;
use crate::weights::{ForwardError, Repack};
use backends::ExecConfig;
use graph::knobs::MoeKnobs;
use graph::Graph;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The graph input holding the chunk's token ids (I32 `{T}`).
pub const TOKENS: &str = "tokens";

/// The graph output holding the logits (`{V, 1}` for [`Logits::Last`], `{V, T}` for
/// [`Logits::All`]).
pub const LOGITS: &str = "logits";

/// The graph output holding layer `l`'s residual state ([`GraphSpec::hidden`]).
pub fn hidden_output(l: usize) -> String {
    format!("hidden.{l}")
}

/// Default context length when none is asked for (capped by the model's trained context).
pub const DEFAULT_CTX: usize = 4096;

/// What the session and the commands need to know of a model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    /// The architecture ([`Architecture::name`]).
    pub arch: &'static str,
    /// Decoder layers.
    pub n_layer: usize,
    /// Hidden size.
    pub n_embd: usize,
    /// Vocabulary size (token ids are below it).
    pub n_vocab: usize,
    /// Trained context length.
    pub n_ctx_train: usize,
    /// Parameters (elements of every weight tensor).
    pub n_params: u64,
    /// BOS id of the metadata.
    pub bos: u32,
    /// EOS id of the metadata.
    pub eos: u32,
    /// The routed-expert layout, for live MoE control (`None`: not an MoE model).
    pub moe: Option<MoeShape>,
    /// The per-token shape of the [`hidden_output`]s (`[streams, n_embd]`).
    pub hidden: [usize; 2],
}

/// The routed-expert layout live MoE control works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoeShape {
    /// Layers (every one has routed experts).
    pub n_layer: usize,
    /// Experts per token.
    pub n_expert_used: usize,
    /// The first layers, routed by a token-id hash table instead of a learned router (live
    /// control leaves them alone).
    pub n_hash_layers: usize,
}

impl MoeShape {
    /// Whether layer `l` is hash-routed.
    pub fn is_hash_layer(&self, l: usize) -> bool {
        l < self.n_hash_layers
    }
}

/// One state tensor a model carries between chunks (an f32 matrix `{ne[0], ne[1]}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateTensor {
    /// Its name in the graph.
    pub name: String,
    /// Its shape.
    pub ne: [usize; 2],
}

impl StateTensor {
    /// Bytes it occupies in the state buffer (f32, each tensor 64-byte aligned).
    pub fn bytes(&self) -> u64 {
        ((self.ne[0] * self.ne[1] * 4) as u64).div_ceil(64) * 64
    }
}

/// A named part of a model's decode caches and its size, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachePart {
    /// What it is (`sliding window`, …).
    pub name: &'static str,
    /// Bytes.
    pub bytes: u64,
}

/// How a graph evaluates its chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GraphKind {
    /// Through the decode caches of a `ctx`-token context, at any position below `span`.
    Cached {
        /// The context length the caches are sized for.
        ctx: usize,
        /// Positions the graph attends over ([`span_for`]): the chunk ends at or before it.
        /// A step's attention cost follows the tokens in the cache, not the context.
        span: usize,
    },
    /// Stateless: the chunk is the whole sequence, at positions `0..T`.
    Stateless,
    /// One token of each of several sequences at once (a server's batched decode step):
    /// the state buffer holds `n_slots` sequences' caches back to back, each laid out as
    /// one sequence's ([`Model::state_tensors`]), and the graph reads and writes those of
    /// the slots in `active` (bit `k` = slot `k`; [`GraphSpec::tokens`] is how many, at
    /// least 2), in slot order. Every position's logits come out, one per slot.
    Slots {
        /// The context length each slot's caches are sized for.
        ctx: usize,
        /// Positions the graph attends over ([`span_for`] of the furthest slot).
        span: usize,
        /// Slots in the state buffer (at most [`MAX_SLOTS`]).
        n_slots: usize,
        /// The slots evaluated, a bit each.
        active: u64,
    },
}

/// The fewest positions a cached graph attends over ([`span_for`]).
pub const MIN_SPAN: usize = 64;

/// The positions a cached graph for a chunk ending at position `end` (exclusive) attends
/// over: `end` rounded up to a power of two, at least [`MIN_SPAN`], at most `ctx`. The
/// caches are sized for the whole context, but a step reads and scores only the entries of
/// its span, so its cost follows the tokens in the cache; one graph per power of two.
pub fn span_for(ctx: usize, end: usize) -> usize {
    end.max(MIN_SPAN).next_power_of_two().min(ctx)
}

/// Most sequences one [`GraphKind::Slots`] state buffer holds.
pub const MAX_SLOTS: usize = 64;

/// The slots of a [`GraphKind::Slots`] mask, in order.
pub fn slots_of(active: u64) -> impl Iterator<Item = usize> {
    (0..MAX_SLOTS).filter(move |k| active >> k & 1 == 1)
}

/// Which positions' logits a graph computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Logits {
    /// The last position's (generation: a prompt chunk skips T − 1 rows of the LM head).
    Last,
    /// Every position's (evaluation).
    All,
}

/// The graph of one chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GraphSpec {
    /// Tokens in the chunk.
    pub tokens: usize,
    /// Cached or stateless.
    pub kind: GraphKind,
    /// Which logits.
    pub logits: Logits,
    /// Also output every layer's residual state ([`hidden_output`]).
    pub hidden: bool,
}

/// A model's weight bytes: all of them, and those one decode token reads (every dense
/// weight once, one row of the token embedding, and of each routed-expert stack only the
/// used experts' share).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeightBytes {
    /// Every weight, as the file stores them.
    pub total: u64,
    /// Per decode token, as the file stores them.
    pub per_token: u64,
    /// Per decode token, as loaded (a repacked tensor can be larger).
    pub per_token_loaded: u64,
}

/// Memory a model's weight conversions will own ([`Model::converted_bytes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConvertedBytes {
    /// Under the load options it was opened with.
    pub bytes: u64,
    /// With its FP8 weights stored as Q8_0 instead (`--st-weights q8_0`), where that is not
    /// already the choice.
    pub with_q8_0: Option<u64>,
}

/// A model (see the module docs).
pub trait Model: Send + std::fmt::Debug {
    /// Hyperparameters and sizes.
    fn info(&self) -> &ModelInfo;

    /// The tokenizer; an error saying why where the model has none (a checkpoint without
    /// `tokenizer.json`).
    fn tokenizer(&self) -> Result<&Tokenizer, ModelError>;

    /// The chat format.
    fn chat_template(&self) -> Result<ChatTemplate, ModelError> {
        Ok(ChatTemplate::for_tokenizer(self.tokenizer()?))
    }

    /// Every state tensor of a `ctx`-token context, in declaration order (the layout every
    /// cached graph of one sequence shares).
    fn state_tensors(&self, ctx: usize) -> Vec<StateTensor>;

    /// The same bytes by part, for messages.
    fn cache_parts(&self, ctx: usize) -> Vec<CachePart>;

    /// Builds the graph of `spec` (with `knobs`, live MoE control, read at run time).
    fn build(
        &mut self,
        spec: &GraphSpec,
        knobs: Option<&Arc<MoeKnobs>>,
    ) -> Result<Graph, ForwardError>;

    /// The values of every input of `spec`'s graph but [`TOKENS`], as `(name, bytes)`, for
    /// the chunk starting at position `starts[0]` (0 for a stateless graph); for a
    /// [`GraphKind::Slots`] graph `starts` holds each active slot's position, in slot order.
    fn inputs(
        &self,
        spec: &GraphSpec,
        starts: &[usize],
    ) -> Result<Vec<(String, Vec<u8>)>, ForwardError>;

    /// Its weight bytes, where the model knows them (a GGUF file's tensor table).
    fn weight_bytes(&self) -> Option<WeightBytes> {
        None
    }

    /// The memory its weight conversions will own once loaded (copies the OS cannot page
    /// back to the file), where the model knows it before converting anything (an official
    /// checkpoint's FP8 expansions and expert stacks). Default: `None`.
    fn converted_bytes(&self) -> Option<ConvertedBytes> {
        None
    }

    /// The expert cache its routed experts are read through, if any
    /// ([`LoadOptions::experts`]). Default: `None`.
    fn expert_cache(&self) -> Option<&crate::weights::ExpertCache> {
        None
    }

    /// Takes the first error met since the last call by a routed expert that could not be
    /// used (read by the expert cache, or checked when first used in place): its rows were
    /// NaN. Default: the expert cache's.
    fn take_expert_error(&self) -> Option<String> {
        self.expert_cache().and_then(|c| c.take_error())
    }

    /// Reads the weights every token uses into memory (a mapped file is otherwise paged in
    /// by the first tokens; a checkpoint's conversions are otherwise made by the first
    /// graph), calling `progress(done, total)` in bytes as it goes. Default: nothing.
    fn preload(&mut self, progress: &mut dyn FnMut(u64, u64)) {
        let _ = progress;
    }
}

/// Errors of a [`Model`] outside graph building.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The model has no tokenizer (why, naming the file).
    #[error("{0}")]
    NoTokenizer(String),
}

/// How [`open`] loads a model, filled by every command from the same flags.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// GGUF tensor types converted at load into fathom's faster layouts.
    pub repack: Repack,
    /// How a checkpoint's FP8 / FP4 / BF16 weights are stored.
    pub checkpoint: crate::weights::StOptions,
    /// Threads, pinning, profiler, reference kernels and the CPU level (a repack is made only
    /// where its kernels run at that level) of the sessions run on the model.
    pub exec: ExecConfig,
    /// Context length (`None`: [`DEFAULT_CTX`], at most the trained context).
    pub ctx: Option<usize>,
    /// Routed experts read from disk into a RAM-budgeted cache instead of used from the
    /// memory map (GGUF files; `None`: from the map).
    pub experts: Option<crate::weights::ExpertCacheConfig>,
}

impl LoadOptions {
    /// The context length for a model: the one asked for, else [`DEFAULT_CTX`] capped by the
    /// trained context.
    pub fn context(&self, info: &ModelInfo) -> usize {
        self.ctx
            .unwrap_or_else(|| DEFAULT_CTX.min(info.n_ctx_train.max(1)))
    }
}

/// Errors of [`open`]. Each names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The path does not exist.
    #[error("{}: no such file or directory", .0.display())]
    NotFound(PathBuf),
    /// The GGUF file is unreadable.
    #[error(transparent)]
    Gguf(#[from] GgufError),
    /// A file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The architecture is not one fathom implements.
    #[error("{}: architecture '{arch}' is not supported (supported: {supported})", path.display())]
    UnknownArchitecture {
        /// The file.
        path: PathBuf,
        /// Its architecture.
        arch: String,
        /// The supported ones.
        supported: String,
    },
    /// The architecture's loader failed.
    #[error("{}: {message}", path.display())]
    Model {
        /// The file.
        path: PathBuf,
        /// What failed (already written for a user).
        message: String,
    },
}

/// What opening a model returns.
pub type Opened = Result<Box<dyn Model>, LoadError>;

/// One architecture fathom implements: how to recognise and open it.
pub struct Architecture {
    /// Its GGUF `general.architecture`.
    pub name: &'static str,
    /// The config.json `model_type`s of its checkpoints.
    pub model_types: &'static [&'static str],
    /// Opens a GGUF file of it.
    pub from_gguf: fn(Arc<GgufFile>, &LoadOptions) -> Opened,
    /// Opens a checkpoint of it (directory, index or `.safetensors`; `config.json` beside).
    pub from_checkpoint: fn(&Path, &LoadOptions) -> Opened,
}

/// Every architecture fathom implements.
pub const ARCHITECTURES: &[Architecture] = &[crate::deepseek4::ARCHITECTURE];

fn supported() -> String {
    ARCHITECTURES
        .iter()
        .map(|a| a.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `path` names a checkpoint (a directory, an index `.json` or a `.safetensors`)
/// rather than a GGUF file.
pub fn is_checkpoint(path: &Path) -> bool {
    path.is_dir()
        || path
            .extension()
            .is_some_and(|e| e == "json" || e == "safetensors")
}

/// The directory of a checkpoint path (the directory itself, or the file's directory).
pub fn checkpoint_dir(path: &Path) -> &Path {
    if path.is_dir() {
        return path;
    }
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Opens the model at `path` (see the module docs).
pub fn open(path: &Path, opts: &LoadOptions) -> Opened {
    if !path.exists() {
        return Err(LoadError::NotFound(path.to_path_buf()));
    }
    if is_checkpoint(path) {
        let cfg = checkpoint_dir(path).join("config.json");
        let text = crate::files::read_text_capped(&cfg, crate::files::CONFIG_CAP, "config.json")
            .map_err(|source| LoadError::Io {
                path: cfg.clone(),
                source,
            })?;
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| LoadError::Model {
                path: cfg.clone(),
                message: format!("not JSON: {e}"),
            })?;
        let Some(ty) = json.get("model_type").and_then(|t| t.as_str()) else {
            return Err(LoadError::Model {
                path: cfg,
                message: "no \"model_type\" (it says which architecture the checkpoint is)".into(),
            });
        };
        let arch = ARCHITECTURES
            .iter()
            .find(|a| a.model_types.contains(&ty))
            .ok_or_else(|| LoadError::UnknownArchitecture {
                path: cfg.clone(),
                arch: ty.to_string(),
                supported: ARCHITECTURES
                    .iter()
                    .flat_map(|a| a.model_types.iter().copied())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        return (arch.from_checkpoint)(path, opts);
    }
    open_gguf(Arc::new(GgufFile::open(path)?), opts)
}

/// Opens an already opened GGUF file (for instance one held in memory, as the built-in
/// model is).
pub fn open_gguf(file: Arc<GgufFile>, opts: &LoadOptions) -> Opened {
    let arch = file
        .get("general.architecture")
        .and_then(|v| v.as_str())
        .unwrap_or("")
        .to_string();
    let Some(a) = ARCHITECTURES.iter().find(|a| a.name == arch) else {
        return Err(LoadError::UnknownArchitecture {
            path: file.path().to_path_buf(),
            arch: if arch.is_empty() {
                "(none: no general.architecture key)".into()
            } else {
                arch
            },
            supported: supported(),
        });
    };
    (a.from_gguf)(file, opts)
}
