//! [`Session`]: the generation state of one sequence over the executor — `prefill` the
//! prompt, `decode` one token at a time, `n_past`, `reset`.
//!
//! # Two evaluation modes
//!
//! * [`Mode::Cached`] (default): the decode caches of spec §6 (sliding-window ring,
//!   compressor rings, compressed entries, indexer keys; `Builder::new_cached`) live in one
//!   state buffer of the sequence. A prompt is evaluated in chunks of at most `ubatch` tokens
//!   (default 128) and every decoded token is one 1-token step, so a prompt of `P` tokens
//!   followed by `N` decoded tokens costs `P + N` token evaluations. One executor per chunk
//!   length is built once and replayed (at most a few: `ubatch`, the remainder, 1). The caches
//!   are sized for the whole context up front ([`cache_bytes`]); a step attends over the
//!   window ring plus every compressed slot of the context (masked by position), so its cost
//!   grows with `ctx`, not with the tokens so far.
//! * [`Mode::Recompute`]: the stateless path used before the caches existed, kept as a
//!   cross-check and for measurements. Only the token ids are kept, and every step re-runs
//!   the stateless prefill graph ([`crate::deepseek4::Builder::new`]) over the **whole
//!   sequence so far**: `P + (P+1) + … + (P+N)` token evaluations, O(n²) (O(n³) in
//!   attention), with a new graph and plan for every length. No cache memory is allocated;
//!   the executor arena grows with the sequence ([`SessionStats::peak_arena_bytes`]).
//!
//! Both give the logits of the same model: the model is causal, so a full re-evaluation's
//! last position is what the cached step computes (up to floating-point summation order).
//! Weights are never copied between graphs: the first graph asks the provider for each
//! tensor, later graphs reuse the same zero-copy [`graph::WeightData`].
//!
//! # Context
//!
//! A session has a context length `ctx`; a sequence longer than `ctx` is refused with
//! [`SessionError::ContextFull`] (nothing is evaluated, the sequence is unchanged). An error
//! while building or running a graph resets the sequence (the caches may be half-written).
//!
//! # Profiling
//!
//! With profiling on ([`Session::set_profile`], default: `FATHOM_PROFILE_OPS` set) every
//! executor's per-op timings are folded into one [`ProfileSummary`]
//! ([`Session::take_profile`]); the per-executor tables are suppressed. A session dropped
//! with an untaken profile prints its table to stderr (or writes its JSON) as
//! `FATHOM_PROFILE_OPS` asks.

use crate::deepseek4::forward::{input, ChunkInputs};
use crate::deepseek4::{Builder, ForwardError, GgufWeights, Hparams, PrefillInputs, Weights};
use crate::gguf::GgufFile;
use backends::profiler::ProfileOutput;
use backends::{ExecConfig, ExecError, Executor, StateBuf};
use graph::{Graph, NodeKind, TensorDesc, TensorId, WeightData};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

/// Name of the graph output holding the logits of the last position (the session builds
/// the head for that position only: [`Builder::model_last`]).
const LAST_LOGITS: &str = "logits";

/// Errors of a [`Session`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The sequence would exceed the context length.
    #[error(
        "context full: {n_past} tokens in the sequence + {adding} new = {} > context length {ctx}",
        n_past + adding
    )]
    ContextFull {
        /// Tokens already in the sequence.
        n_past: usize,
        /// Tokens being added.
        adding: usize,
        /// The context length.
        ctx: usize,
    },
    /// `prefill` with no tokens.
    #[error("no tokens to evaluate")]
    Empty,
    /// A token id outside the vocabulary.
    #[error("token id {id} is outside the vocabulary ({n_vocab} tokens)")]
    BadToken {
        /// The id.
        id: u32,
        /// Vocabulary size.
        n_vocab: usize,
    },
    /// A context length of 0.
    #[error("context length must be at least 1")]
    ZeroContext,
    /// Building the forward graph failed.
    #[error("building the graph for {n_tokens} tokens: {source}")]
    Forward {
        /// Sequence length of the graph.
        n_tokens: usize,
        /// The cause.
        source: ForwardError,
    },
    /// Binding inputs or reading outputs failed.
    #[error("executor: {0}")]
    Exec(#[from] ExecError),
    /// A chunk graph declares more state than the sequence's state buffer holds (the graphs
    /// of one sequence must share one cache layout).
    #[error("graph for {n_tokens} tokens needs {need} state bytes, the sequence has {have}")]
    StateLayout {
        /// Chunk length of the graph.
        n_tokens: usize,
        /// Bytes its plan needs.
        need: usize,
        /// Bytes of the state buffer.
        have: usize,
    },
}

/// How a [`Session`] evaluates its steps (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Decode caches: `P + N` token evaluations.
    #[default]
    Cached,
    /// Re-run the stateless graph over the whole sequence every step (O(n²)).
    Recompute,
}

/// Default prompt chunk (`ubatch`) of the cached mode.
pub const DEFAULT_UBATCH: usize = 128;

/// Bytes the decode caches of spec §6.1 need for one sequence of `ctx` tokens (f32 entries),
/// by part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheBytes {
    /// Sliding-window KV ring, every layer: `window × head_dim`.
    pub window: u64,
    /// Compressed KV entries: CSA `ceil(ctx/4) × head_dim`, HCA `ceil(ctx/128) × head_dim`.
    pub compressed: u64,
    /// Lightning-Indexer keys of the CSA layers: `ceil(ctx/4) × index_head_dim`.
    pub indexer_keys: u64,
    /// Compressor states (kv + gate rings of `coff·ratio` rows × `coff·width`, as the official
    /// code and llama.cpp keep them): CSA attention and indexer compressors, HCA compressor.
    pub compressor_state: u64,
}

impl CacheBytes {
    /// The sum of all parts.
    pub fn total(&self) -> u64 {
        self.window + self.compressed + self.indexer_keys + self.compressor_state
    }
}

/// Bytes per cached element (f32).
pub const CACHE_ELEM_BYTES: u64 = 4;

/// The decode-cache footprint of a `ctx`-token sequence (spec §6.1), at f32, by part.
///
/// Per layer: a sliding ring of `window` rows of `head_dim`; for a compressed layer of ratio
/// `r` (`coff` = 2 for the overlapping CSA windows, 1 for HCA) `ceil(ctx/r)` entries of
/// `head_dim` and a compressor state of 2 (kv, gate) × `coff·r` rows × `coff·head_dim`; for
/// CSA layers also `ceil(ctx/4)` indexer keys of `index_head_dim` and the indexer
/// compressor's state 2 × 8 × `2·index_head_dim`. This is the layout of the cached graph
/// (`deepseek4::forward::cache_bytes` gives the same total with each tensor rounded up to 64
/// bytes); the cached [`Session`] allocates it at its first step.
pub fn cache_bytes(hp: &Hparams, ctx: usize) -> CacheBytes {
    let e = CACHE_ELEM_BYTES;
    let (ctx, hd, di) = (ctx as u64, hp.head_dim as u64, hp.idx_dim as u64);
    let mut c = CacheBytes::default();
    for &r in hp.compress_ratios.iter().take(hp.n_layer) {
        c.window += hp.window as u64 * hd * e;
        if r == 0 {
            continue;
        }
        let r = u64::from(r);
        let coff = if r == 4 { 2 } else { 1 };
        c.compressed += ctx.div_ceil(r) * hd * e;
        c.compressor_state += 2 * coff * r * coff * hd * e;
        if r == 4 {
            c.indexer_keys += ctx.div_ceil(r) * di * e;
            c.compressor_state += 2 * coff * r * coff * di * e;
        }
    }
    c
}

/// Where the time of a session went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Graphs built (cached: one per chunk length; recompute: one per sequence length).
    pub graphs_built: u64,
    /// Time building graphs, plans and executors, in ns.
    pub build_ns: u64,
    /// Graph executions.
    pub runs: u64,
    /// Time executing (inputs bound, run, logits read), in ns.
    pub run_ns: u64,
    /// Token positions evaluated (recompute mode: the whole sequence every step).
    pub positions_evaluated: u64,
    /// Bytes of the sequence's cache state buffer (0 until the first cached step).
    pub state_bytes: usize,
    /// Largest arena seen.
    pub peak_arena_bytes: usize,
}

/// One row of a session's profile (the executor profiler's row type).
pub type ProfileEntry = backends::profiler::ProfileRow;

/// Per-op timings folded over every executor a session built.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProfileSummary {
    /// Rows, largest time first.
    pub rows: Vec<ProfileEntry>,
    /// Graph executions.
    pub runs: u64,
    /// Tokens the runs produced or consumed (prompt tokens + decoded tokens).
    pub tokens: u64,
    /// Executor threads.
    pub threads: usize,
    /// Graphs (executors) the rows come from.
    pub graphs: u64,
}

impl ProfileSummary {
    /// The table, in the columns of `FATHOM_PROFILE_OPS=1`.
    pub fn table(&self) -> String {
        let head = format!(
            "fathom op profile: {} runs, {} tokens, {} threads, {} graphs",
            self.runs, self.tokens, self.threads, self.graphs
        );
        backends::profiler::render_table(&head, &self.rows, self.tokens as f64)
    }

    /// The rows as JSON (the shape of `FATHOM_PROFILE_OPS=json:PATH`).
    pub fn to_json(&self) -> serde_json::Value {
        let rows = backends::profiler::rows_json(&self.rows, self.tokens as f64);
        serde_json::json!({
            "runs": self.runs, "tokens": self.tokens, "threads": self.threads,
            "graphs": self.graphs, "ops": rows,
        })
    }
}

#[derive(Debug, Default)]
struct ProfileAcc {
    rows: BTreeMap<(String, String), ProfileEntry>,
    runs: u64,
    tokens: u64,
    graphs: u64,
}

impl ProfileAcc {
    /// Fold an executor's timings in and clear them (so its drop prints nothing).
    fn harvest(&mut self, exec: &mut Executor) {
        let Some(p) = exec.profiler_mut() else {
            return;
        };
        for r in p.rows() {
            let e = self
                .rows
                .entry((r.op.clone(), r.types.clone()))
                .or_insert_with(|| ProfileEntry {
                    op: r.op.clone(),
                    types: r.types.clone(),
                    calls: 0,
                    ns: 0,
                    bytes: 0,
                    experts: 0,
                });
            e.experts += r.experts;
            e.calls += r.calls;
            e.ns += r.ns;
            e.bytes += r.bytes;
        }
        p.reset();
    }

    fn summary(&self, threads: usize) -> ProfileSummary {
        let mut rows: Vec<ProfileEntry> = self.rows.values().cloned().collect();
        rows.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.op.cmp(&b.op)));
        ProfileSummary {
            rows,
            runs: self.runs,
            tokens: self.tokens,
            threads,
            graphs: self.graphs,
        }
    }
}

/// A weight provider that asks the inner provider once per tensor and replays the same
/// zero-copy data into every later graph (providers map names to ids of one graph only).
struct WeightMemo {
    inner: Box<dyn Weights + Send>,
    seen: HashMap<String, Option<(TensorDesc, WeightData)>>,
    current: HashMap<String, TensorId>,
}

impl Weights for WeightMemo {
    fn new_graph(&mut self) {
        self.current.clear();
        self.inner.new_graph();
    }
    fn try_get(&mut self, g: &mut Graph, name: &str) -> Result<Option<TensorId>, ForwardError> {
        if let Some(&id) = self.current.get(name) {
            return Ok(Some(id));
        }
        let id = match self.seen.get(name) {
            Some(None) => return Ok(None),
            Some(Some((desc, data))) => g.weight(name, *desc, data.clone())?,
            None => {
                let Some(id) = self.inner.try_get(g, name)? else {
                    self.seen.insert(name.to_string(), None);
                    return Ok(None);
                };
                if let NodeKind::Weight(data) = &g.node(id).kind {
                    self.seen
                        .insert(name.to_string(), Some((*g.desc(id), data.clone())));
                }
                id
            }
        };
        self.current.insert(name.to_string(), id);
        Ok(Some(id))
    }
}

/// Generation state of one sequence (see the module docs).
pub struct Session {
    hp: Hparams,
    weights: WeightMemo,
    cfg: ExecConfig,
    ctx: usize,
    mode: Mode,
    ubatch: usize,
    tokens: Vec<u32>,
    /// Executors by chunk (cached) or sequence (recompute) length, least recently used first.
    execs: Vec<(usize, Executor)>,
    /// The caches of the sequence (cached mode).
    state: Option<StateBuf>,
    stats: SessionStats,
    profile: Option<ProfileAcc>,
    profile_taken: bool,
    moe_knobs: Option<std::sync::Arc<graph::knobs::MoeKnobs>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("mode", &self.mode)
            .field("n_past", &self.tokens.len())
            .field("ctx", &self.ctx)
            .field("threads", &self.cfg.threads)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A session over `weights` (any provider, e.g. [`GgufWeights`] or the safetensors one)
    /// with `threads` executor threads (0: one per physical core) and a context of `ctx`
    /// tokens, in [`Mode::Cached`]. `FATHOM_FORCE_SCALAR=1` selects the single-thread
    /// reference executor and `FATHOM_PROFILE_OPS` switches profiling on, as in
    /// `fathom logits`.
    pub fn new(
        hp: Hparams,
        weights: impl Weights + Send + 'static,
        threads: usize,
        ctx: usize,
    ) -> Result<Session, SessionError> {
        if ctx == 0 {
            return Err(SessionError::ZeroContext);
        }
        let mut cfg = ExecConfig::default();
        if threads > 0 {
            cfg.threads = threads;
        }
        let profile = cfg.profile.is_some().then(ProfileAcc::default);
        Ok(Session {
            hp,
            weights: WeightMemo {
                inner: Box::new(weights),
                seen: HashMap::new(),
                current: HashMap::new(),
            },
            cfg,
            ctx,
            mode: Mode::Cached,
            ubatch: DEFAULT_UBATCH,
            tokens: Vec::new(),
            execs: Vec::new(),
            state: None,
            stats: SessionStats::default(),
            profile,
            profile_taken: false,
            moe_knobs: None,
        })
    }

    /// A session over an opened GGUF file (hyperparameters from its metadata).
    pub fn from_gguf(
        file: Arc<GgufFile>,
        threads: usize,
        ctx: usize,
    ) -> Result<Session, Box<dyn std::error::Error + Send + Sync>> {
        let hp = Hparams::from_gguf(&file)?;
        Ok(Session::new(hp, GgufWeights::new(file), threads, ctx)?)
    }

    /// [`Session::from_gguf`] with the tensor types `repack` names converted at load into
    /// fathom's repacked layouts (see [`crate::deepseek4::Repack`]).
    pub fn from_gguf_repacked(
        file: Arc<GgufFile>,
        threads: usize,
        ctx: usize,
        repack: crate::deepseek4::Repack,
    ) -> Result<Session, Box<dyn std::error::Error + Send + Sync>> {
        let hp = Hparams::from_gguf(&file)?;
        let w = GgufWeights::with_repack(file, repack);
        Ok(Session::new(hp, w, threads, ctx)?)
    }

    /// Route learned-router layers through live MoE knobs (issue 6). Changing the knobs
    /// between tokens takes effect at the next token without rebuilding anything; the graphs
    /// built so far are dropped once, here, so every later graph reads the knobs.
    pub fn set_moe_knobs(&mut self, knobs: std::sync::Arc<graph::knobs::MoeKnobs>) {
        self.moe_knobs = Some(knobs);
        self.execs.clear();
        self.reset();
    }

    /// Switch the evaluation mode; the sequence is reset.
    pub fn set_mode(&mut self, mode: Mode) {
        if mode != self.mode {
            self.retire_all();
            self.state = None;
            self.mode = mode;
        }
        self.reset();
    }

    /// The evaluation mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Longest prompt chunk of the cached mode (at least 1; default [`DEFAULT_UBATCH`]).
    pub fn set_ubatch(&mut self, ubatch: usize) {
        self.ubatch = ubatch.max(1);
    }

    /// Replace the executor configuration (threads, pinning, profiler output, reference
    /// kernels); the executors built so far are dropped, the sequence is kept.
    pub fn set_exec_config(&mut self, cfg: ExecConfig) {
        self.retire_all();
        if cfg.profile.is_some() && self.profile.is_none() {
            self.profile = Some(ProfileAcc::default());
        }
        self.cfg = cfg;
    }

    /// Switch the per-op profiler on or off for the executors built from now on.
    pub fn set_profile(&mut self, on: bool) {
        if !on || self.cfg.profile.is_none() {
            self.cfg.profile = on.then_some(ProfileOutput::Table);
        }
        if on && self.profile.is_none() {
            self.profile = Some(ProfileAcc::default());
        }
    }

    /// Evaluate `tokens` after the sequence so far; returns the logits of the last one
    /// (`n_vocab` values).
    pub fn prefill(&mut self, tokens: &[u32]) -> Result<Vec<f32>, SessionError> {
        if tokens.is_empty() {
            return Err(SessionError::Empty);
        }
        if self.tokens.len() + tokens.len() > self.ctx {
            return Err(SessionError::ContextFull {
                n_past: self.tokens.len(),
                adding: tokens.len(),
                ctx: self.ctx,
            });
        }
        if let Some(&id) = tokens.iter().find(|&&t| t as usize >= self.hp.n_vocab) {
            return Err(SessionError::BadToken {
                id,
                n_vocab: self.hp.n_vocab,
            });
        }
        let p0 = self.tokens.len();
        self.tokens.extend_from_slice(tokens);
        let r = match self.mode {
            Mode::Cached => self.eval_cached(p0),
            Mode::Recompute => self.eval_recompute(tokens.len()),
        };
        if r.is_err() {
            self.reset();
        }
        r
    }

    /// Evaluate one token after the sequence so far; returns its logits.
    pub fn decode(&mut self, token: u32) -> Result<Vec<f32>, SessionError> {
        self.prefill(&[token])
    }

    /// Tokens in the sequence.
    pub fn n_past(&self) -> usize {
        self.tokens.len()
    }

    /// Forget the sequence (the caches are cleared; executors, options and statistics stay).
    pub fn reset(&mut self) {
        self.tokens.clear();
        if let Some(st) = self.state.as_mut() {
            st.reset();
        }
    }

    /// The token ids of the sequence.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// The context length.
    pub fn ctx(&self) -> usize {
        self.ctx
    }

    /// Executor threads.
    pub fn threads(&self) -> usize {
        if self.cfg.reference {
            1
        } else {
            self.cfg.threads.max(1)
        }
    }

    /// The hyperparameters.
    pub fn hparams(&self) -> &Hparams {
        &self.hp
    }

    /// The decode-cache footprint of this session's context ([`cache_bytes`]); allocated by
    /// the cached mode, not by the recompute mode.
    pub fn cache_bytes(&self) -> CacheBytes {
        cache_bytes(&self.hp, self.ctx)
    }

    /// Build and run statistics.
    pub fn stats(&self) -> SessionStats {
        self.stats
    }

    /// The per-op profile folded over every executor so far (`None` when profiling is off);
    /// taking it means the session will not print it when dropped.
    pub fn take_profile(&mut self) -> Option<ProfileSummary> {
        let threads = self.threads();
        let acc = self.profile.as_mut()?;
        for (_, e) in self.execs.iter_mut() {
            acc.harvest(e);
        }
        self.profile_taken = true;
        Some(acc.summary(threads))
    }

    /// Discard the per-op timings gathered so far, keeping the profiler on: a benchmark's
    /// warm-up (first-touch page faults of a mapped file, graph builds) must not weigh in
    /// its profile. The graph count stays (the executors do).
    pub fn clear_profile(&mut self) {
        let Some(acc) = self.profile.as_mut() else {
            return;
        };
        for (_, e) in self.execs.iter_mut() {
            if let Some(p) = e.profiler_mut() {
                p.reset();
            }
        }
        *acc = ProfileAcc {
            graphs: acc.graphs,
            ..ProfileAcc::default()
        };
    }

    /// Drop every executor (their timings folded into the profile first).
    fn retire_all(&mut self) {
        for (_, mut e) in self.execs.drain(..) {
            if let Some(acc) = self.profile.as_mut() {
                acc.harvest(&mut e);
            }
        }
    }

    fn build(&mut self, t: usize) -> Result<Executor, SessionError> {
        let fwd = |source| SessionError::Forward {
            n_tokens: t,
            source,
        };
        self.weights.new_graph();
        let b = match self.mode {
            Mode::Cached => Builder::new_cached(&self.hp, &mut self.weights, t, self.ctx),
            Mode::Recompute => Builder::new(&self.hp, &mut self.weights, t),
        };
        let b = b.map_err(fwd)?;
        let b = match &self.moe_knobs {
            Some(k) => b.with_moe_knobs(k.clone()),
            None => b,
        };
        let g = b.model_last().map_err(fwd)?;
        Ok(Executor::new(g, self.cfg.clone()))
    }

    /// The executor for graphs of `t` tokens, built if needed; it ends up last in `execs`.
    fn exec_for(&mut self, t: usize) -> Result<(), SessionError> {
        if let Some(i) = self.execs.iter().position(|(n, _)| *n == t) {
            let e = self.execs.remove(i);
            self.execs.push(e);
            return Ok(());
        }
        let keep = match self.mode {
            Mode::Cached => 4,
            Mode::Recompute => 1,
        };
        while self.execs.len() >= keep {
            let (_, mut e) = self.execs.remove(0);
            if let Some(acc) = self.profile.as_mut() {
                acc.harvest(&mut e);
            }
        }
        let t0 = Instant::now();
        let e = self.build(t)?;
        self.stats.graphs_built += 1;
        self.stats.build_ns += t0.elapsed().as_nanos() as u64;
        self.stats.peak_arena_bytes = self.stats.peak_arena_bytes.max(e.plan().arena_size());
        if let Some(acc) = self.profile.as_mut() {
            acc.graphs += 1;
        }
        self.execs.push((t, e));
        Ok(())
    }

    /// Run the executor last in `execs` on `ids` with `inputs`; `n_new` tokens were added.
    fn run_last(
        &mut self,
        ids: &[u32],
        inputs: Vec<(String, Vec<u8>)>,
        n_new: usize,
        want_logits: bool,
    ) -> Result<Option<Vec<f32>>, SessionError> {
        let Some((t, exec)) = self.execs.last_mut() else {
            return Ok(None);
        };
        let t0 = Instant::now();
        let ids: Vec<i32> = ids.iter().map(|&x| x as i32).collect();
        exec.set_input_i32(input::TOKENS, &ids)?;
        for (name, bytes) in inputs {
            if exec.plan().input(&name).is_some() {
                exec.set_input(&name, &bytes)?;
            }
        }
        match self.mode {
            Mode::Cached => {
                let need = exec.plan().state_size();
                let st = self.state.get_or_insert_with(|| StateBuf::new(need));
                if st.len() < need {
                    return Err(SessionError::StateLayout {
                        n_tokens: *t,
                        need,
                        have: st.len(),
                    });
                }
                self.stats.state_bytes = st.len();
                exec.run_with_state(st);
            }
            Mode::Recompute => exec.run(),
        }
        if let Some(p) = exec.profiler_mut() {
            p.add_tokens(n_new as u64);
        }
        if let Some(acc) = self.profile.as_mut() {
            acc.runs += 1;
            acc.tokens += n_new as u64;
        }
        let logits = if want_logits {
            Some(exec.output_f32(LAST_LOGITS)?)
        } else {
            None
        };
        self.stats.runs += 1;
        self.stats.positions_evaluated += ids.len() as u64;
        self.stats.run_ns += t0.elapsed().as_nanos() as u64;
        Ok(logits)
    }

    /// Cached mode: evaluate the tokens from position `p0` on in chunks of `ubatch`.
    fn eval_cached(&mut self, p0: usize) -> Result<Vec<f32>, SessionError> {
        let end = self.tokens.len();
        let mut p = p0;
        let mut last = None;
        while p < end {
            let t = self.ubatch.min(end - p);
            self.exec_for(t)?;
            let inputs = ChunkInputs::new(&self.hp, p, t, self.ctx)
                .map_err(|source| SessionError::Forward {
                    n_tokens: t,
                    source,
                })?
                .values;
            let ids = self.tokens[p..p + t].to_vec();
            last = self.run_last(&ids, inputs, t, p + t == end)?;
            p += t;
        }
        last.ok_or(SessionError::Empty)
    }

    /// Recompute mode: run the stateless graph over the whole sequence.
    fn eval_recompute(&mut self, n_new: usize) -> Result<Vec<f32>, SessionError> {
        let t = self.tokens.len();
        self.exec_for(t)?;
        let inputs = PrefillInputs::new(&self.hp, t).values;
        let ids = self.tokens.clone();
        self.run_last(&ids, inputs, n_new, true)?
            .ok_or(SessionError::Empty)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.profile.is_none() {
            return;
        }
        // fold the last executor in (which also keeps it from printing its own table)
        let taken = self.profile_taken;
        let summary = self.take_profile();
        if taken {
            return;
        }
        if let (Some(s), Some(out)) = (summary, self.cfg.profile.clone()) {
            if s.runs == 0 {
                return;
            }
            match out {
                ProfileOutput::Table => eprintln!("{}", s.table()),
                ProfileOutput::Json(p) => {
                    if let Err(e) = std::fs::write(&p, s.to_json().to_string()) {
                        eprintln!("fathom: cannot write profile {p}: {e}");
                    }
                }
                ProfileOutput::Trace(p) => {
                    eprintln!("fathom: trace:{p}: not written (a session rebuilds its executor per step; use fathom logits for traces)");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// V4-Flash dimensions (spec §1.1, §2).
    fn flash() -> Hparams {
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

    #[test]
    fn flash_cache_bytes_match_the_spec() {
        let hp = flash();
        assert_eq!(hp.compress_ratios.iter().filter(|&&r| r == 4).count(), 21);
        assert_eq!(hp.compress_ratios.iter().filter(|&&r| r == 128).count(), 20);
        let c = cache_bytes(&hp, 4096);
        assert_eq!(c.window, 43 * 128 * 512 * 4);
        // spec §6.1: 3440 elements per token of context (CSA 2688 + indexer 672 + HCA 80)
        assert_eq!(c.compressed + c.indexer_keys, 4096 * 3440 * 4);
        assert_eq!(c.indexer_keys, 21 * 1024 * 128 * 4);
        assert_eq!(
            c.compressor_state,
            21 * (2 * 8 * 1024 + 2 * 8 * 256) * 4 + 20 * (2 * 128 * 512) * 4
        );
        assert_eq!(
            c.total(),
            c.window + c.compressed + c.indexer_keys + c.compressor_state
        );
        // the per-token part grows linearly, the rest is fixed
        let c2 = cache_bytes(&hp, 8192);
        assert_eq!(
            c2.compressed + c2.indexer_keys,
            2 * (c.compressed + c.indexer_keys)
        );
        assert_eq!(c2.window, c.window);
    }

    #[test]
    fn short_context_still_has_the_whole_ring_and_one_entry() {
        let hp = flash();
        let c = cache_bytes(&hp, 3);
        assert_eq!(c.window, 43 * 128 * 512 * 4);
        assert_eq!(c.compressed, 41 * 512 * 4);
        assert_eq!(c.indexer_keys, 21 * 128 * 4);
    }

    #[test]
    fn same_total_as_the_cached_graph_layout() {
        for (hp, ctx) in [
            (flash(), 4096),
            (flash(), 1000),
            (tiny_hp(), 4096),
            (tiny_hp(), 7),
        ] {
            let mine = cache_bytes(&hp, ctx).total();
            let graph = crate::deepseek4::forward::cache_bytes(&hp, ctx) as u64;
            // the graph rounds each of its ≤ 7 state tensors per layer up to 64 bytes
            assert!(
                mine <= graph && graph < mine + 64 * 7 * hp.n_layer as u64,
                "ctx {ctx}: {mine} vs {graph}"
            );
        }
    }

    fn tiny() -> Arc<GgufFile> {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/dsv4-tiny-Q2_0.gguf");
        Arc::new(GgufFile::open(p).expect("the dsv4-tiny Q2_0 fixture"))
    }

    fn tiny_hp() -> Hparams {
        Hparams::from_gguf(&tiny()).unwrap()
    }

    fn session(mode: Mode, ctx: usize) -> Session {
        let mut s = Session::from_gguf(tiny(), 1, ctx).unwrap();
        s.set_mode(mode);
        s
    }

    fn max_diff(a: &[f32], b: &[f32]) -> f32 {
        assert_eq!(a.len(), b.len());
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max)
    }

    #[test]
    fn cached_steps_match_recompute_and_chunked_prefill() {
        // 9 prompt tokens, then decode past a CSA window boundary and more
        let prompt = [0u32, 5, 17, 3, 200, 11, 42, 7, 99];
        let steps = [9u32, 2, 300, 1, 64];
        let mut cached = session(Mode::Cached, 64);
        let mut chunked = session(Mode::Cached, 64);
        chunked.set_ubatch(4);
        let mut full = session(Mode::Recompute, 64);
        let a = cached.prefill(&prompt).unwrap();
        let c = chunked.prefill(&prompt).unwrap();
        let f = full.prefill(&prompt).unwrap();
        assert_eq!(a.len(), cached.hparams().n_vocab);
        assert!(max_diff(&a, &f) < 1e-3, "{}", max_diff(&a, &f));
        assert!(max_diff(&c, &f) < 1e-3, "{}", max_diff(&c, &f));
        for &t in &steps {
            let a = cached.decode(t).unwrap();
            let c = chunked.decode(t).unwrap();
            let f = full.decode(t).unwrap();
            assert!(max_diff(&a, &f) < 1e-3, "token {t}: {}", max_diff(&a, &f));
            assert!(max_diff(&c, &f) < 1e-3, "token {t}: {}", max_diff(&c, &f));
        }
        assert_eq!(cached.n_past(), prompt.len() + steps.len());
        // cached: one graph for the prompt, one for 1-token steps; chunked: 4, 1
        assert_eq!(cached.stats().graphs_built, 2);
        assert_eq!(chunked.stats().graphs_built, 2);
        assert_eq!(full.stats().graphs_built, 1 + steps.len() as u64);
        assert!(cached.stats().state_bytes >= cache_bytes(cached.hparams(), 64).total() as usize);
        assert_eq!(full.stats().state_bytes, 0);
        assert_eq!(
            cached.stats().positions_evaluated,
            (prompt.len() + steps.len()) as u64
        );
    }

    #[test]
    fn context_is_enforced_and_reset_starts_over() {
        for mode in [Mode::Cached, Mode::Recompute] {
            let mut s = session(mode, 6);
            let prompt = [0u32, 5, 17, 3];
            let a = s.prefill(&prompt).unwrap();
            s.decode(9).unwrap();
            assert_eq!(s.n_past(), 5);
            // the context is 6: two more do not fit (nothing changes), one does
            let err = s.prefill(&[1, 2]).unwrap_err();
            assert!(matches!(
                err,
                SessionError::ContextFull {
                    n_past: 5,
                    adding: 2,
                    ctx: 6
                }
            ));
            assert!(err.to_string().contains("context length 6"), "{err}");
            assert_eq!(s.n_past(), 5);
            s.decode(2).unwrap();
            assert!(matches!(s.decode(2), Err(SessionError::ContextFull { .. })));
            // reset: the same prompt gives the same logits (no stale cache rows)
            s.reset();
            assert_eq!(s.n_past(), 0);
            assert_eq!(s.prefill(&prompt).unwrap(), a, "{mode:?}");
            assert!(matches!(
                s.decode(u32::MAX),
                Err(SessionError::BadToken { .. })
            ));
            assert_eq!(s.n_past(), 4);
            assert!(matches!(s.prefill(&[]), Err(SessionError::Empty)));
        }
        assert!(matches!(
            Session::new(tiny_hp(), GgufWeights::new(tiny()), 1, 0),
            Err(SessionError::ZeroContext)
        ));
    }

    #[test]
    fn profile_folds_every_executor() {
        let mut s = Session::from_gguf(tiny(), 1, 8).unwrap();
        s.set_profile(true);
        s.prefill(&[0, 1, 2]).unwrap();
        s.decode(3).unwrap();
        s.decode(4).unwrap();
        let p = s.take_profile().unwrap();
        assert_eq!(p.runs, 3);
        assert_eq!(p.tokens, 5);
        assert_eq!(p.graphs, 2);
        assert!(p.rows.iter().any(|r| r.op == "MUL_MAT" && r.calls > 0));
        assert!(p.table().contains("| total |"));
        assert_eq!(p.to_json()["runs"], 3);
    }

    #[test]
    fn clear_profile_drops_the_warm_up() {
        let mut s = Session::from_gguf(tiny(), 1, 8).unwrap();
        s.clear_profile(); // profiling off: nothing to clear, and it stays off
        s.set_profile(true);
        s.prefill(&[0, 1, 2]).unwrap();
        s.decode(3).unwrap();
        s.clear_profile();
        s.decode(4).unwrap();
        let p = s.take_profile().unwrap();
        assert_eq!((p.runs, p.tokens, p.graphs), (1, 1, 2));
        // the executors' own timings went too: two decode runs after the clear count
        // twice the calls of one (with the prefill's left in, P + 3D ≠ 2·(P + 2D))
        let calls = |p: &ProfileSummary| p.rows.iter().find(|r| r.op == "MUL_MAT").unwrap().calls;
        let mut q = Session::from_gguf(tiny(), 1, 8).unwrap();
        q.set_profile(true);
        q.prefill(&[0, 1, 2]).unwrap();
        q.decode(3).unwrap();
        q.clear_profile();
        q.decode(4).unwrap();
        q.decode(5).unwrap();
        assert_eq!(calls(&q.take_profile().unwrap()), 2 * calls(&p));
    }
}
