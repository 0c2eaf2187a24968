//! The inference engine: one thread that owns the model's session, takes jobs from a bounded
//! queue, reuses the longest cached prefix of each prompt, and streams tokens back.
//!
//! Inference never runs on the async runtime: [`Engine::start`] spawns a plain thread that
//! drives the session (whose executor has its own pinned worker threads); the HTTP handlers
//! talk to it through channels. A job's events go back on an unbounded channel; when its
//! receiver is gone (the client disconnected) the job stops at the next token.
//!
//! # Prefix reuse
//! DeepSeek-V4's state cannot be rewound (its compressors and indexer fold tokens in), so a
//! prompt can only continue a state taken at one of its prefixes. The engine keeps:
//! - the **live** state: the session after the last job (prompt and generated tokens), with
//!   the logits of its last position;
//! - **snapshots** ([`crate::prefix::PrefixCache`]): taken at the end of every prompt and
//!   every `snapshot_every` tokens inside long prompts, held in an LRU under `--cache-ram`.
//!
//! A job starts from whichever holds the longest prefix of its prompt and feeds only the rest.
//! The caches restored are the same bytes a straight run computes, so the logits are equal.

use crate::disk::DiskCache;
use crate::prefix::PrefixCache;
use crate::stop::StopMatcher;
use models::sampling::{Sampler, SamplerConfig};
use models::session::Session;
use models::tokenizer::Tokenizer;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;
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
    /// Start the engine thread on `session`. `tokenizer` is the model's. Fails only when
    /// the disk cache's directory cannot be made or read.
    pub fn start(
        session: Session,
        tokenizer: Tokenizer,
        opts: EngineOptions,
    ) -> std::io::Result<Engine> {
        let disk = match &opts.disk {
            Some(d) => Some(DiskCache::open(&d.dir, &d.fingerprint, d.max_bytes)?),
            None => None,
        };
        let (tx, rx) = mpsc::channel(opts.queue.max(1));
        let metrics = Arc::new(Metrics::default());
        let ctx = session.ctx();
        let tokenizer = Arc::new(tokenizer);
        let worker = Worker {
            session,
            tokenizer: tokenizer.clone(),
            live_logits: None,
            cache: PrefixCache::new(opts.cache_ram),
            snapshot_every: opts.snapshot_every,
            disk,
            metrics: metrics.clone(),
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

/// The engine thread's state.
struct Worker {
    session: Session,
    tokenizer: Arc<Tokenizer>,
    /// Logits after the live session's last position (`None` when it is empty or unknown).
    live_logits: Option<Vec<f32>>,
    cache: PrefixCache,
    snapshot_every: usize,
    disk: Option<DiskCache>,
    metrics: Arc<Metrics>,
}

impl Worker {
    fn run(mut self, mut rx: mpsc::Receiver<Job>) {
        while let Some(job) = rx.blocking_recv() {
            self.metrics.jobs.fetch_add(1, Ordering::Relaxed);
            let events = job.events.clone();
            if let Err(e) = self.serve(job) {
                self.metrics.jobs_failed.fetch_add(1, Ordering::Relaxed);
                let _ = events.send(Event::Failed(e));
            }
        }
    }

    /// Make the session hold `prompt` and return the logits after it and the tokens reused.
    fn prepare(&mut self, prompt: &[u32]) -> Result<(Vec<f32>, usize), EngineError> {
        let live = self.session.tokens();
        let live_usable = !live.is_empty()
            && prompt.starts_with(live)
            && (live.len() < prompt.len() || self.live_logits.is_some());
        let live_len = if live_usable { live.len() } else { 0 };
        let ram_len = self
            .cache
            .longest_prefix(prompt, live_len)
            .map(|s| s.state.tokens().len());
        let best = ram_len.unwrap_or(live_len);
        let disk = self
            .disk
            .as_mut()
            .and_then(|d| d.longest_prefix(prompt, best));
        if let Some((state, logits)) = disk {
            if self.session.set_state(&state).is_ok() {
                self.metrics.disk_hits.fetch_add(1, Ordering::Relaxed);
                self.cache.insert(state, &logits);
                self.live_logits = Some(logits);
            } else {
                self.session.reset();
                self.live_logits = None;
            }
        } else if let Some(snap) = ram_len.and(self.cache.longest_prefix(prompt, live_len)) {
            // (the state is copied once, into the session)
            self.session
                .set_state(&snap.state)
                .map_err(|e| EngineError::Inference(e.to_string()))?;
            self.live_logits = Some(snap.logits.clone());
        } else if !live_usable {
            self.session.reset();
            self.live_logits = None;
        }
        let cached = self.session.n_past();
        let mut logits = self.live_logits.take();
        let mut pos = cached;
        let t0 = Instant::now();
        while pos < prompt.len() {
            let end = match self.snapshot_every {
                0 => prompt.len(),
                k => ((pos / k + 1) * k).min(prompt.len()),
            };
            let l = self
                .session
                .prefill(&prompt[pos..end])
                .map_err(|e| EngineError::Inference(e.to_string()))?;
            pos = end;
            // A snapshot at every boundary and at the prompt's end (on disk too).
            let state = self.session.state();
            if end == prompt.len() {
                if let Some(d) = self.disk.as_mut() {
                    d.store(&state, &l);
                }
            }
            self.cache.insert(state, &l);
            logits = Some(l);
        }
        let evaluated = prompt.len() - cached;
        self.metrics
            .prefill_tokens
            .fetch_add(evaluated as u64, Ordering::Relaxed);
        self.metrics
            .prefill_ns
            .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        self.metrics
            .snapshot_bytes
            .store(self.cache.bytes(), Ordering::Relaxed);
        self.metrics
            .snapshots
            .store(self.cache.len() as u64, Ordering::Relaxed);
        let logits = logits.ok_or_else(|| EngineError::Inference("no logits".into()))?;
        Ok((logits, cached))
    }

    fn serve(&mut self, job: Job) -> Result<(), EngineError> {
        let Job {
            prompt,
            params,
            events,
        } = job;
        let ctx = self.session.ctx();
        let n_vocab = self.session.info().n_vocab;
        if prompt.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        if prompt.len() > ctx {
            return Err(EngineError::PromptTooLong {
                prompt: prompt.len(),
                ctx,
            });
        }
        if let Some(&id) = prompt.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(EngineError::BadToken { id, n_vocab });
        }
        let mut sampler =
            Sampler::new(params.sampler).map_err(|e| EngineError::BadParams(e.to_string()))?;
        if events.is_closed() {
            self.metrics.cancelled.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let t0 = Instant::now();
        let (mut logits, cached) = match self.prepare(&prompt) {
            Ok(r) => r,
            Err(e) => {
                // A failed prefill leaves the session empty; nothing stale is reused.
                self.session.reset();
                self.live_logits = None;
                return Err(e);
            }
        };
        let prefill_s = t0.elapsed().as_secs_f64();
        self.metrics
            .prompt_tokens
            .fetch_add(prompt.len() as u64, Ordering::Relaxed);
        self.metrics
            .cached_tokens
            .fetch_add(cached as u64, Ordering::Relaxed);
        let _ = events.send(Event::Started {
            prompt_tokens: prompt.len(),
            cached_tokens: cached,
        });
        for &t in &prompt {
            sampler.accept(t);
        }
        let eos = self.tokenizer.eos().unwrap_or(self.session.info().eos);
        let mut streamer = self.tokenizer.streamer().skip_special(false);
        let mut stop = StopMatcher::new(&params.stop);
        let mut generated = 0usize;
        let t1 = Instant::now();
        let finish = loop {
            let next = sampler
                .sample(&logits)
                .map_err(|e| EngineError::Inference(e.to_string()))?;
            if next == eos {
                break Finish::Stop;
            }
            generated += 1;
            sampler.accept(next);
            let logprob = params
                .top_logprobs
                .map(|n| logprobs(&self.tokenizer, &logits, next, n));
            let piece = streamer.push(next).unwrap_or_default();
            let (text, hit) = stop.push(&piece);
            if events.send(Event::Token { text, logprob }).is_err() {
                self.metrics.cancelled.fetch_add(1, Ordering::Relaxed);
                self.live_logits = Some(logits);
                return Ok(());
            }
            if let Some(s) = hit {
                break Finish::StopString(s);
            }
            // the last token is not evaluated: its logits would not be used (the live state
            // stays the prompt and the tokens before it, with matching logits)
            if generated >= params.max_tokens || self.session.n_past() >= ctx {
                break Finish::Length;
            }
            logits = match self.session.decode(next) {
                Ok(l) => l,
                Err(e) => {
                    self.session.reset();
                    self.live_logits = None;
                    return Err(EngineError::Inference(e.to_string()));
                }
            };
        };
        // What the streamer or the stop matcher still holds.
        let tail = streamer.finish().unwrap_or_default();
        let (mut text, _) = stop.push(&tail);
        text.push_str(&stop.finish());
        if !text.is_empty() {
            let _ = events.send(Event::Token {
                text,
                logprob: None,
            });
        }
        self.live_logits = Some(logits);
        let decode_s = t1.elapsed().as_secs_f64();
        self.metrics
            .generated_tokens
            .fetch_add(generated as u64, Ordering::Relaxed);
        self.metrics
            .decode_ns
            .fetch_add((decode_s * 1e9) as u64, Ordering::Relaxed);
        let _ = events.send(Event::Done {
            finish,
            usage: Usage {
                prompt_tokens: prompt.len(),
                cached_tokens: cached,
                completion_tokens: generated,
            },
            prefill_s,
            decode_s,
        });
        Ok(())
    }
}

/// The log-probability of `id` and the `n` most likely tokens under `logits`.
fn logprobs(tok: &Tokenizer, logits: &[f32], id: u32, n: usize) -> TokenLogprob {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().map(|&l| f64::from(l - max).exp()).sum();
    let lse = f64::from(max) + sum.ln();
    let lp = |i: usize| (f64::from(logits[i]) - lse) as f32;
    let mut idx: Vec<usize> = (0..logits.len()).collect();
    let n = n.min(idx.len());
    if n > 0 {
        idx.select_nth_unstable_by(n - 1, |&a, &b| logits[b].total_cmp(&logits[a]));
    }
    idx.truncate(n);
    idx.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
    let text = |i: u32| String::from_utf8_lossy(tok.token_bytes(i)).into_owned();
    TokenLogprob {
        id,
        text: text(id),
        logprob: lp(id as usize),
        top: idx
            .into_iter()
            .map(|i| (i as u32, text(i as u32), lp(i)))
            .collect(),
    }
}
