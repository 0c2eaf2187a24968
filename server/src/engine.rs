//! The inference engine: one thread that owns the model's session and its `parallel` slots,
//! takes jobs from a bounded queue, reuses the longest cached prefix of each prompt, and
//! streams tokens back (the loop itself is in the `worker` module).
//!
//! Inference never runs on the async runtime: [`Engine::start`] spawns a plain thread that
//! drives the session (whose executor has its own pinned worker threads); the HTTP handlers
//! talk to it through channels. A job's events go back on an unbounded channel; when its
//! receiver is gone (the client disconnected) the job stops at the next token. Jobs beyond
//! the free slots wait in the queue; beyond the queue, a submission is refused (HTTP 503).
//!
//! # Prefix reuse
//! DeepSeek-V4's state cannot be rewound (its compressors and indexer fold tokens in), so a
//! prompt can only continue a state taken at one of its prefixes. The engine keeps:
//! - each slot's **live** state: the slot after its last job (prompt and generated tokens),
//!   with the logits of its last position;
//! - **snapshots** ([`crate::prefix::PrefixCache`]): taken at the end of every prompt and
//!   every `snapshot_every` tokens inside long prompts, held in an LRU under `--cache-ram`.
//!
//! A job starts from whichever holds the longest prefix of its prompt and feeds only the rest.
//! The caches restored are the same bytes a straight run computes, so the logits are equal.

use crate::disk::DiskCache;
use crate::prefix::PrefixCache;
use crate::worker::{Slot, Worker};
use models::sampling::SamplerConfig;
use models::session::Session;
use models::tokenizer::Tokenizer;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use tokio::sync::mpsc;

/// How the engine runs.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Jobs that may wait for the engine; beyond it a request is refused (HTTP 503).
    pub queue: usize,
    /// Bytes of memory for prefix snapshots (0: no snapshots; the live state is still reused).
    pub cache_ram: u64,
    /// A snapshot every this many prompt tokens inside a long prompt (0: only at its end).
    pub snapshot_every: usize,
    /// Snapshots on disk, kept across restarts (prompt ends only).
    pub disk: Option<DiskOptions>,
    /// Slots: jobs generating at once, their decode steps evaluated as one batched graph.
    pub parallel: usize,
    /// Most prompt tokens a slot reads per turn of the loop before the generating slots
    /// take their next step.
    pub prefill_chunk: usize,
    /// For tests of what a small model cannot write (tool calls): each job's reply is
    /// forced to the next of these texts, in turn, then ends. The model still evaluates
    /// every token (caches, usage, logprobs and streaming are real); empty: off.
    pub script: Vec<String>,
}

/// Where and how snapshots are kept on disk.
#[derive(Clone, Debug)]
pub struct DiskOptions {
    /// The directory.
    pub dir: std::path::PathBuf,
    /// What identifies the model and the settings that shape its caches (a different
    /// fingerprint never sees this one's snapshots).
    pub fingerprint: String,
    /// Most bytes kept.
    pub max_bytes: u64,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            queue: 16,
            cache_ram: 1 << 30,
            snapshot_every: 2048,
            disk: None,
            parallel: 1,
            prefill_chunk: 256,
            script: Vec::new(),
        }
    }
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct GenParams {
    /// Most tokens to generate (generation also stops at EOS, a stop string, or a full
    /// context).
    pub max_tokens: usize,
    /// Sampling.
    pub sampler: SamplerConfig,
    /// Stop strings: generation ends before the first of them; it is not returned.
    pub stop: Vec<String>,
    /// With `Some(n)`, each token comes with its log-probability and the `n` most likely
    /// alternatives (n ≤ 20).
    pub top_logprobs: Option<usize>,
}

/// A request to the engine.
#[derive(Debug)]
pub struct Job {
    /// The prompt's token ids.
    pub prompt: Vec<u32>,
    /// What to generate.
    pub params: GenParams,
    /// Where the events go.
    pub events: mpsc::UnboundedSender<Event>,
}

/// A token's log-probability and the most likely alternatives at its position.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenLogprob {
    /// The token id.
    pub id: u32,
    /// Its text (special tokens included).
    pub text: String,
    /// Its log-probability under the model's distribution (before sampling filters).
    pub logprob: f32,
    /// The most likely tokens at this position, best first: (id, text, log-probability).
    pub top: Vec<(u32, String, f32)>,
}

/// Why generation ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finish {
    /// The model wrote its end-of-text token.
    Stop,
    /// This stop string was met.
    StopString(String),
    /// `max_tokens` was reached, or the context is full.
    Length,
}

/// Token counts of a job.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: usize,
    /// Of those, tokens taken from a cached state instead of being evaluated.
    pub cached_tokens: usize,
    /// Generated tokens.
    pub completion_tokens: usize,
}

/// What the engine reports about a job, in order: `Started`, then `Token`s, then `Done`
/// (or `Failed` at any point).
#[derive(Debug)]
pub enum Event {
    /// The prompt is accepted; `cached_tokens` of it came from a cached state.
    Started {
        /// Prompt tokens.
        prompt_tokens: usize,
        /// Of those, reused.
        cached_tokens: usize,
    },
    /// Text of one generated token (possibly empty: a character still incomplete, or text
    /// held back while it may begin a stop string).
    Token {
        /// The text.
        text: String,
        /// Its log-probabilities, when asked for.
        logprob: Option<TokenLogprob>,
    },
    /// Generation ended.
    Done {
        /// Why.
        finish: Finish,
        /// Token counts.
        usage: Usage,
        /// Prompt evaluation time (s).
        prefill_s: f64,
        /// Generation time (s).
        decode_s: f64,
    },
    /// The job failed.
    Failed(EngineError),
}

/// Why a job failed.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum EngineError {
    /// The prompt is empty.
    #[error("the prompt is empty")]
    EmptyPrompt,
    /// The prompt does not fit the context.
    #[error("the prompt has {prompt} tokens; the context holds {ctx}")]
    PromptTooLong {
        /// Prompt tokens.
        prompt: usize,
        /// The context.
        ctx: usize,
    },
    /// A token id is outside the vocabulary.
    #[error("token id {id} is outside the vocabulary of {n_vocab}")]
    BadToken {
        /// The id.
        id: u32,
        /// The vocabulary size.
        n_vocab: usize,
    },
    /// The sampling parameters are invalid.
    #[error("{0}")]
    BadParams(String),
    /// The model failed (a non-finite value, memory); the message says which step.
    #[error("inference failed: {0}")]
    Inference(String),
}

/// Counters for `/metrics` (monotonic unless noted).
#[derive(Debug, Default)]
pub struct Metrics {
    /// Jobs started.
    pub jobs: AtomicU64,
    /// Jobs refused or failed.
    pub jobs_failed: AtomicU64,
    /// Prompt tokens received.
    pub prompt_tokens: AtomicU64,
    /// Prompt tokens reused from a cached state.
    pub cached_tokens: AtomicU64,
    /// Prompt tokens evaluated.
    pub prefill_tokens: AtomicU64,
    /// Nanoseconds spent evaluating prompts.
    pub prefill_ns: AtomicU64,
    /// Tokens generated.
    pub generated_tokens: AtomicU64,
    /// Nanoseconds spent generating.
    pub decode_ns: AtomicU64,
    /// Jobs stopped because their client went away.
    pub cancelled: AtomicU64,
    /// Bytes held by prefix snapshots (a gauge).
    pub snapshot_bytes: AtomicU64,
    /// Prefix snapshots held (a gauge).
    pub snapshots: AtomicU64,
    /// Prompts continued from a snapshot read from disk.
    pub disk_hits: AtomicU64,
    /// Slots running a job (a gauge).
    pub slots_busy: AtomicU64,
    /// Decode steps that evaluated two or more slots at once.
    pub batched_steps: AtomicU64,
    /// Tokens evaluated by those steps.
    pub batched_tokens: AtomicU64,
    /// The expert cache's counters (`--ram`; all 0 without it), copied after every step.
    pub experts: ExpertMetrics,
}

/// The expert cache's counters as the engine last saw them (`models::weights::ExpertCacheStats`).
#[derive(Debug, Default)]
pub struct ExpertMetrics {
    /// Whether the model reads its experts through a cache (0 or 1).
    pub enabled: AtomicU64,
    /// Experts asked for that were resident.
    pub hits: AtomicU64,
    /// Experts asked for that needed a read.
    pub misses: AtomicU64,
    /// Bytes read from disk.
    pub read_bytes: AtomicU64,
    /// Nanoseconds compute threads waited for experts.
    pub wait_ns: AtomicU64,
    /// Bytes of experts held (a gauge).
    pub resident_bytes: AtomicU64,
    /// The cache's budget (a gauge).
    pub budget_bytes: AtomicU64,
}

/// A handle to the engine thread.
#[derive(Clone, Debug)]
pub struct Engine {
    jobs: mpsc::Sender<Job>,
    /// The engine's counters.
    pub metrics: Arc<Metrics>,
    /// The tokenizer (a copy; the session owns the model's).
    pub tokenizer: Arc<Tokenizer>,
    /// The context length.
    pub ctx: usize,
    /// Slots.
    pub parallel: usize,
}

/// Why the engine could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The disk cache's directory cannot be made or read.
    #[error("prefix cache directory: {0}")]
    Disk(#[from] std::io::Error),
    /// The session cannot hold the slots (their caches do not fit in memory).
    #[error("{0}")]
    Slots(#[from] models::session::SessionError),
    /// A scripted reply cannot be tokenized.
    #[error("scripted reply {index}: {message}")]
    Script {
        /// Its index.
        index: usize,
        /// Why.
        message: String,
    },
}

/// Why a job could not be queued.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// The queue is full.
    #[error("the server is busy ({0} requests waiting); retry later")]
    Busy(usize),
    /// The engine thread has stopped.
    #[error("the inference engine has stopped")]
    Stopped,
}

impl Engine {
    /// Start the engine thread on `session` (made to hold `opts.parallel` slots).
    /// `tokenizer` is the model's. Fails when the disk cache's directory cannot be made or
    /// read, or the slots' caches do not fit.
    pub fn start(
        mut session: Session,
        tokenizer: Tokenizer,
        opts: EngineOptions,
    ) -> Result<Engine, StartError> {
        let disk = match &opts.disk {
            Some(d) => Some(DiskCache::open(&d.dir, &d.fingerprint, d.max_bytes)?),
            None => None,
        };
        let script = opts
            .script
            .iter()
            .enumerate()
            .map(|(index, text)| {
                tokenizer
                    .encode(text, false)
                    .map_err(|e| StartError::Script {
                        index,
                        message: e.to_string(),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let parallel = opts.parallel.max(1);
        session.set_slots(parallel)?;
        let (tx, rx) = mpsc::channel(opts.queue.max(1));
        let metrics = Arc::new(Metrics::default());
        let ctx = session.ctx();
        let tokenizer = Arc::new(tokenizer);
        let worker = Worker {
            session,
            tokenizer: tokenizer.clone(),
            slots: (0..parallel).map(|_| Slot::default()).collect(),
            cache: PrefixCache::new(opts.cache_ram),
            snapshot_every: opts.snapshot_every,
            prefill_chunk: opts.prefill_chunk.max(1),
            disk,
            metrics: metrics.clone(),
            clock: 0,
            script,
            script_next: 0,
        };
        std::thread::Builder::new()
            .name("fathom-engine".into())
            .spawn(move || worker.run(rx))
            .expect("spawning the engine thread");
        Ok(Engine {
            jobs: tx,
            metrics,
            tokenizer,
            ctx,
            parallel,
        })
    }

    /// Queue a job.
    pub fn submit(&self, job: Job) -> Result<(), SubmitError> {
        self.jobs.try_send(job).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => SubmitError::Busy(self.jobs.max_capacity()),
            mpsc::error::TrySendError::Closed(_) => SubmitError::Stopped,
        })
    }

    /// Jobs waiting in the queue now.
    pub fn queued(&self) -> usize {
        self.jobs.max_capacity() - self.jobs.capacity()
    }
}
