//! [`Session`]: the generation state of one sequence of any [`Model`] over the executor —
//! `prefill` the prompt, `decode` one token at a time, evaluate every position
//! ([`Session::eval_all`], [`Session::eval_batch`]), snapshot and restore the state
//! ([`Session::state`], [`Session::set_state`], saved to a file with
//! [`SessionState::save`]).
//!
//! # Two evaluation modes
//!
//! * [`Mode::Cached`] (default): the model's decode caches ([`Model::state_tensors`]) live in
//!   one state buffer of the sequence. A prompt is evaluated in chunks of at most `ubatch`
//!   tokens (default 128) and every decoded token is one 1-token step, so a prompt of `P`
//!   tokens followed by `N` decoded tokens costs `P + N` token evaluations. One executor per
//!   chunk length is built once and replayed (at most a few: `ubatch`, the remainder, 1). The
//!   caches are sized for the whole context up front ([`Session::cache_parts`]).
//! * [`Mode::Recompute`]: the stateless path, kept as a cross-check and for measurements.
//!   Only the token ids are kept, and every step re-runs the stateless graph over the
//!   **whole sequence so far**: `P + (P+1) + … + (P+N)` token evaluations, with a new graph
//!   and plan for every length. No cache memory is allocated.
//!
//! Both give the logits of the same model: the model is causal, so a full re-evaluation's
//! last position is what the cached step computes (up to floating-point summation order).
//!
//! # Context
//!
//! A session has a context length `ctx`; a sequence longer than `ctx` is refused with
//! [`SessionError::ContextFull`] (nothing is evaluated, the sequence is unchanged). An error
//! while building or running a graph resets the sequence (the caches may be half-written).
//!
//! # Slots
//!
//! A session may hold several sequences ([`Session::set_slots`]), each in its own region of
//! one state buffer: a server's parallel requests. The one-sequence methods act on the
//! selected slot ([`Session::select`]); [`Session::decode_slots`] evaluates one token of
//! several slots as one batched graph, every weight read once for all of them.
//!
//! # Profiling
//!
//! With the executor configuration's profiler on ([`ExecConfig::profile`], or
//! [`Session::set_profile`]) every executor's per-op timings are folded into one
//! [`ProfileSummary`] ([`Session::take_profile`]); the per-executor tables are suppressed. A
//! session dropped with an untaken profile emits it as the configuration says.

mod error;
mod profile;
mod slots;
mod state;

pub use error::SessionError;
pub use profile::{ProfileEntry, ProfileSummary};
pub use state::{SessionState, StateError};

use crate::model::{
    span_for, CachePart, GraphKind, GraphSpec, Logits, Model, ModelInfo, LOGITS, TOKENS,
};
use backends::profiler::ProfileOutput;
use backends::{ExecConfig, Executor, StateBuf};
use graph::knobs::MoeKnobs;
use profile::ProfileAcc;
use std::sync::Arc;
use std::time::Instant;

/// How a [`Session`] evaluates its steps (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Decode caches: `P + N` token evaluations.
    #[default]
    Cached,
    /// Re-run the stateless graph over the whole sequence every step (O(n²)).
    Recompute,
}

/// The longest context a session takes: 2^32 tokens (every size computed from it fits 64
/// bits; the memory check refuses far shorter ones on any real machine).
pub const MAX_CONTEXT: usize = 1 << 32;

/// Default prompt chunk (`ubatch`) of the cached mode.
pub const DEFAULT_UBATCH: usize = 128;

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

/// The outputs of [`Session::eval_batch`].
#[derive(Debug, Clone, PartialEq)]
pub struct BatchOutput {
    /// Logits `[n_tokens × n_vocab]`, row-major.
    pub logits: Vec<f32>,
    /// With `hidden`, every layer's residual state `[n_tokens × ModelInfo::hidden]`.
    pub hidden: Vec<Vec<f32>>,
}

/// Whether a session with `cfg` folds its executors' timings into one summary: for a table
/// or JSON rows. A Chrome trace is a timeline of one executor, so with `trace:PATH` each
/// executor writes its own when it is dropped (`fathom logits` runs one graph; `fathom run`
/// leaves the trace of its last).
fn folds(cfg: &ExecConfig) -> bool {
    matches!(
        cfg.profile,
        Some(ProfileOutput::Table | ProfileOutput::Json(_))
    )
}

/// Generation state of one sequence (see the module docs), over a model `M` (by default any
/// model, `dyn Model`).
pub struct Session<M: Model + ?Sized = dyn Model> {
    model: Box<M>,
    cfg: ExecConfig,
    ctx: usize,
    mode: Mode,
    ubatch: usize,
    /// The token ids of each slot's sequence (one slot unless [`Session::set_slots`]).
    seqs: Vec<Vec<u32>>,
    /// The slot the one-sequence methods act on.
    slot: usize,
    /// Executors by graph, least recently used first.
    execs: Vec<(GraphSpec, Executor)>,
    /// The caches of every slot's sequence, back to back (cached mode).
    state: Option<StateBuf>,
    stats: SessionStats,
    profile: Option<ProfileAcc>,
    profile_taken: bool,
    moe_knobs: Option<Arc<MoeKnobs>>,
    /// Bytes the caches and executor arenas may take ([`Session::set_memory_limit`]).
    memory_limit: Option<u64>,
    /// The thread-count policy of each chunk length of the cached graphs, shared by their
    /// executors: the graphs of one length for different spans or slot sets do the same work,
    /// and one policy learning the machine's load (and paying for its tries) serves them all.
    adapts: std::collections::HashMap<usize, backends::adapt::Adapt>,
}

impl<M: Model + ?Sized> std::fmt::Debug for Session<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("mode", &self.mode)
            .field("slots", &self.seqs.len())
            .field("n_past", &self.seqs[self.slot].len())
            .field("ctx", &self.ctx)
            .field("threads", &self.cfg.threads)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<M: Model + ?Sized> Session<M> {
    /// A session over `model` with the executor configuration `cfg` and a context of `ctx`
    /// tokens, in [`Mode::Cached`].
    pub fn new(model: Box<M>, cfg: ExecConfig, ctx: usize) -> Result<Session<M>, SessionError> {
        if ctx == 0 {
            return Err(SessionError::ZeroContext);
        }
        if ctx > MAX_CONTEXT {
            return Err(SessionError::ContextTooLong(ctx));
        }
        let profile = folds(&cfg).then(ProfileAcc::default);
        Ok(Session {
            model,
            cfg,
            ctx,
            mode: Mode::Cached,
            ubatch: DEFAULT_UBATCH,
            seqs: vec![Vec::new()],
            slot: 0,
            execs: Vec::new(),
            state: None,
            stats: SessionStats::default(),
            profile,
            profile_taken: false,
            moe_knobs: None,
            memory_limit: None,
            adapts: Default::default(),
        })
    }

    /// Let the session's caches and graph working memory (executor arenas) take at most
    /// `limit` bytes (`None`: no limit), e.g. the memory available when it starts. Checked
    /// now for the caches of the context (an error with the figures if they do not fit),
    /// and before every allocation after.
    pub fn set_memory_limit(&mut self, limit: Option<u64>) -> Result<(), SessionError> {
        self.memory_limit = limit;
        if self.mode == Mode::Cached && self.state.is_none() {
            self.reserve(
                self.cache_bytes() * self.seqs.len() as u64,
                format!("the caches for a context of {} tokens", self.ctx),
            )?;
        }
        Ok(())
    }

    /// Bytes the caches and the executors' arenas hold.
    fn held(&self) -> u64 {
        self.state.as_ref().map_or(0, |s| s.len() as u64)
            + self
                .execs
                .iter()
                .map(|(_, e)| e.plan().arena_size() as u64)
                .sum::<u64>()
    }

    /// Refuse to allocate `bytes` more for `what` beyond the memory limit.
    fn reserve(&self, bytes: u64, what: String) -> Result<(), SessionError> {
        let Some(limit) = self.memory_limit else {
            return Ok(());
        };
        let held = self.held();
        if held.saturating_add(bytes) > limit {
            return Err(SessionError::OutOfMemory {
                what,
                need: bytes,
                held,
                limit,
            });
        }
        Ok(())
    }

    /// The model.
    pub fn model(&self) -> &M {
        &self.model
    }

    /// The model's information.
    pub fn info(&self) -> &ModelInfo {
        self.model.info()
    }

    /// Route learned-router layers through live MoE knobs (`None`: the model's own
    /// routing). Changing the knobs between tokens takes effect at the next token without
    /// rebuilding anything; the graphs built so far are dropped once, here, so every later
    /// graph reads the knobs. The sequence is reset.
    pub fn set_moe_knobs(&mut self, knobs: Option<Arc<MoeKnobs>>) {
        self.moe_knobs = knobs;
        self.retire_all();
        self.reset_all();
    }

    /// Switch the evaluation mode; the sequence is reset (the recompute mode has one slot:
    /// switching to it drops the others).
    pub fn set_mode(&mut self, mode: Mode) {
        if mode != self.mode {
            self.retire_all();
            self.state = None;
            self.mode = mode;
            if mode == Mode::Recompute {
                self.seqs.truncate(1);
                self.slot = 0;
            }
            self.seqs.iter_mut().for_each(Vec::clear);
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
        if folds(&cfg) && self.profile.is_none() {
            self.profile = Some(ProfileAcc::default());
        }
        self.cfg = cfg;
    }

    /// Switch the per-op profiler on (a table when dropped, unless the configuration names
    /// another output) or off for the executors built from now on.
    pub fn set_profile(&mut self, on: bool) {
        if !on || self.cfg.profile.is_none() {
            self.cfg.profile = on.then_some(ProfileOutput::Table);
        }
        if on && self.profile.is_none() && folds(&self.cfg) {
            self.profile = Some(ProfileAcc {
                experts_start: self.expert_stats(),
                ..ProfileAcc::default()
            });
        }
    }

    fn check_tokens(&self, tokens: &[u32]) -> Result<(), SessionError> {
        if tokens.is_empty() {
            return Err(SessionError::Empty);
        }
        if self.seq().len() + tokens.len() > self.ctx {
            return Err(SessionError::ContextFull {
                n_past: self.seq().len(),
                adding: tokens.len(),
                ctx: self.ctx,
            });
        }
        let n_vocab = self.info().n_vocab;
        if let Some(&id) = tokens.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(SessionError::BadToken { id, n_vocab });
        }
        Ok(())
    }

    /// Evaluate `tokens` after the sequence so far; returns the logits of the last one
    /// (`n_vocab` values).
    pub fn prefill(&mut self, tokens: &[u32]) -> Result<Vec<f32>, SessionError> {
        self.check_tokens(tokens)?;
        let p0 = self.seq().len();
        self.seq_mut().extend_from_slice(tokens);
        let r = match self.mode {
            Mode::Cached => {
                let mut last = None;
                self.eval_cached(p0, self.ubatch, Logits::Last, |_, l| {
                    last = Some(l.to_vec())
                })
                .and_then(|()| last.ok_or(SessionError::Empty))
            }
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

    /// Evaluate `tokens` after the sequence so far through the caches, `chunk` tokens at a
    /// time, with every position's logits: `each(p, logits)` receives each chunk's logits
    /// `[t × n_vocab]` (row-major, positions `p..p + t`) as soon as it is computed. What
    /// `fathom logits --mode chunked:N` and `fathom kl` evaluate; in [`Mode::Cached`] only.
    pub fn eval_all(
        &mut self,
        tokens: &[u32],
        chunk: usize,
        each: impl FnMut(usize, &[f32]),
    ) -> Result<(), SessionError> {
        if chunk == 0 {
            return Err(SessionError::ZeroChunk);
        }
        self.set_mode(Mode::Cached);
        self.check_tokens(tokens)?;
        let p0 = self.seq().len();
        self.seq_mut().extend_from_slice(tokens);
        let r = self.eval_cached(p0, chunk, Logits::All, each);
        if r.is_err() {
            self.reset();
        }
        r
    }

    /// Evaluate `tokens` as one stateless prefill from position 0, with every position's
    /// logits and, with `hidden`, every layer's residual state. The session's sequence is
    /// neither read nor changed. What `fathom logits --mode batch` evaluates.
    pub fn eval_batch(
        &mut self,
        tokens: &[u32],
        hidden: bool,
    ) -> Result<BatchOutput, SessionError> {
        if tokens.is_empty() {
            return Err(SessionError::Empty);
        }
        let n_vocab = self.info().n_vocab;
        if let Some(&id) = tokens.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(SessionError::BadToken { id, n_vocab });
        }
        let spec = GraphSpec {
            tokens: tokens.len(),
            kind: GraphKind::Stateless,
            logits: Logits::All,
            hidden,
        };
        self.exec_for(spec)?;
        let logits = self
            .run_last(tokens, &[0], tokens.len(), true)?
            .unwrap_or_default();
        let mut out = BatchOutput {
            logits,
            hidden: Vec::new(),
        };
        if hidden {
            let exec = &self.execs.last().expect("just run").1;
            for l in 0..self.model.info().n_layer {
                out.hidden
                    .push(exec.output_f32(&crate::model::hidden_output(l))?);
            }
        }
        Ok(out)
    }

    /// Tokens in the (selected slot's) sequence.
    pub fn n_past(&self) -> usize {
        self.seq().len()
    }

    /// Forget the (selected slot's) sequence: its caches are cleared; executors, options,
    /// statistics and the other slots stay.
    pub fn reset(&mut self) {
        self.seq_mut().clear();
        let range = self.slot_range(self.slot);
        if let Some(st) = self.state.as_mut() {
            st.bytes_mut()[range].fill(0);
        }
    }

    /// The token ids of the (selected slot's) sequence.
    pub fn tokens(&self) -> &[u32] {
        self.seq()
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

    /// Bytes of the state buffer of this session's context: the model's state tensors,
    /// each 64-byte aligned, in declaration order.
    pub fn cache_bytes(&self) -> u64 {
        self.model
            .state_tensors(self.ctx)
            .iter()
            .map(|s| s.bytes())
            .sum()
    }

    /// [`Session::cache_bytes`] by part (allocated by the cached mode, not by the recompute
    /// mode).
    pub fn cache_parts(&self) -> Vec<CachePart> {
        self.model.cache_parts(self.ctx)
    }

    /// Build and run statistics.
    pub fn stats(&self) -> SessionStats {
        self.stats
    }

    /// The per-op profile folded over every executor so far (`None` when profiling is off);
    /// taking it means the session will not emit it when dropped.
    pub fn take_profile(&mut self) -> Option<ProfileSummary> {
        let threads = self.threads();
        let acc = self.profile.as_mut()?;
        for (_, e) in self.execs.iter_mut() {
            acc.harvest(e);
        }
        self.profile_taken = true;
        let now = self.expert_stats();
        let acc = self.profile.as_ref()?;
        Some(acc.summary(threads, now))
    }

    /// The model's expert cache counters now, if it has a cache.
    fn expert_stats(&self) -> Option<crate::weights::ExpertCacheStats> {
        self.model.expert_cache().map(|c| c.stats())
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
            experts_start: self.model.expert_cache().map(|c| c.stats()),
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

    /// The executor for `spec`, built if needed; it ends up last in `execs`.
    fn exec_for(&mut self, spec: GraphSpec) -> Result<(), SessionError> {
        if let Some(i) = self.execs.iter().position(|(s, _)| *s == spec) {
            let e = self.execs.remove(i);
            self.execs.push(e);
            return Ok(());
        }
        let keep = match spec.kind {
            // a prefill chunk length, the 1-token step and, with slots, the batched steps
            // of the sets of slots that decode together
            GraphKind::Cached { .. } | GraphKind::Slots { .. } if self.seqs.len() > 1 => 16,
            GraphKind::Cached { .. } | GraphKind::Slots { .. } => 6,
            GraphKind::Stateless => 1,
        };
        while self.execs.len() >= keep {
            let (_, mut e) = self.execs.remove(0);
            if let Some(acc) = self.profile.as_mut() {
                acc.harvest(&mut e);
            }
        }
        let t0 = Instant::now();
        let g = self
            .model
            .build(&spec, self.moe_knobs.as_ref())
            .map_err(|source| SessionError::Forward {
                n_tokens: spec.tokens,
                source,
            })?;
        let plan = Executor::planned(&g, &self.cfg);
        let mut need = plan.arena_size() as u64;
        let mut what = format!("the working memory of a {}-token step", spec.tokens);
        if !matches!(spec.kind, GraphKind::Stateless) && self.state.is_none() {
            need += self.state_len() as u64;
            what = format!("the caches for a context of {} tokens and {what}", self.ctx);
        }
        // over the limit, the least recently used executors go first (their arenas are
        // rebuilt when next needed); only what is left over is refused
        while !self.execs.is_empty()
            && self
                .memory_limit
                .is_some_and(|l| self.held().saturating_add(need) > l)
        {
            let (_, mut e) = self.execs.remove(0);
            if let Some(acc) = self.profile.as_mut() {
                acc.harvest(&mut e);
            }
        }
        self.reserve(need, what)?;
        let e = Executor::with_plan(g, plan, self.cfg.clone());
        self.stats.graphs_built += 1;
        self.stats.build_ns += t0.elapsed().as_nanos() as u64;
        self.stats.peak_arena_bytes = self.stats.peak_arena_bytes.max(e.plan().arena_size());
        if let Some(acc) = self.profile.as_mut() {
            acc.graphs += 1;
        }
        self.execs.push((spec, e));
        Ok(())
    }

    /// Run the executor last in `execs` on `ids` (the chunk at position `starts[0]` of the
    /// selected slot; for a batched step, one token per slot at `starts`); `n_new` tokens
    /// were added. Returns its logits when `want_logits`.
    fn run_last(
        &mut self,
        ids: &[u32],
        starts: &[usize],
        n_new: usize,
        want_logits: bool,
    ) -> Result<Option<Vec<f32>>, SessionError> {
        let state_len = self.state_len();
        let offset = self.slot_range(self.slot).start;
        let Some((spec, exec)) = self.execs.last_mut() else {
            return Ok(None);
        };
        let p0 = starts.first().copied().unwrap_or(0);
        let t0 = Instant::now();
        let inputs = self
            .model
            .inputs(spec, starts)
            .map_err(|source| SessionError::Forward {
                n_tokens: spec.tokens,
                source,
            })?;
        let ids: Vec<i32> = ids.iter().map(|&x| x as i32).collect();
        exec.set_input_i32(TOKENS, &ids)?;
        for (name, bytes) in inputs {
            if exec.plan().input(&name).is_some() {
                exec.set_input(&name, &bytes)?;
            }
        }
        match spec.kind {
            GraphKind::Cached { .. } | GraphKind::Slots { .. } => {
                // a one-sequence graph runs on the selected slot's region, a batched one
                // on the whole buffer
                let offset = match spec.kind {
                    GraphKind::Slots { .. } => 0,
                    _ => offset,
                };
                let need = exec.plan().state_size();
                let st = self.state.get_or_insert_with(|| StateBuf::new(state_len));
                if st.len() < offset + need {
                    return Err(SessionError::StateLayout {
                        n_tokens: spec.tokens,
                        need,
                        have: st.len() - offset,
                    });
                }
                self.stats.state_bytes = st.len();
                // the chunk length's shared policy runs in this executor for the step and
                // goes back, exchanged (no copy per step; the first executor seeds it)
                let shared = match self.adapts.entry(spec.tokens) {
                    std::collections::hash_map::Entry::Occupied(e) => Some(e.into_mut()),
                    std::collections::hash_map::Entry::Vacant(e) => {
                        exec.adapt().map(|a| e.insert(a))
                    }
                };
                let swapped = shared.is_some_and(|a| exec.swap_adapt(a));
                exec.run_with_state_at(st, offset);
                if swapped {
                    if let Some(a) = self.adapts.get_mut(&spec.tokens) {
                        exec.swap_adapt(a);
                    }
                }
            }
            GraphKind::Stateless => exec.run(),
        }
        if let Some(p) = exec.profiler_mut() {
            p.add_tokens(n_new as u64);
        }
        if let Some(acc) = self.profile.as_mut() {
            acc.runs += 1;
            acc.tokens += n_new as u64;
        }
        // an expert that could not be read or used left NaN in its rows: the error says why
        if let Some(e) = self.model.take_expert_error() {
            return Err(SessionError::ExpertRead(e));
        }
        // every step's logits are checked (for a chunk whose logits are not wanted, the last
        // position's, which every graph computes): a NaN anywhere upstream reaches them
        let logits = exec.output_f32(LOGITS)?;
        if let Some(i) = logits.iter().position(|v| !v.is_finite()) {
            let rows = (logits.len() / self.model.info().n_vocab.max(1)).max(1);
            let row = i / self.model.info().n_vocab.max(1);
            if starts.len() > 1 {
                // a batched step: row r is slot r's one token
                let p = starts.get(row).copied().unwrap_or(p0);
                return Err(SessionError::NonFinite {
                    position: p,
                    first: p,
                    last: p,
                });
            }
            let last = p0 + ids.len() - 1;
            return Err(SessionError::NonFinite {
                position: last + 1 - rows + row,
                first: p0,
                last,
            });
        }
        let logits = want_logits.then_some(logits);
        self.stats.runs += 1;
        self.stats.positions_evaluated += ids.len() as u64;
        self.stats.run_ns += t0.elapsed().as_nanos() as u64;
        Ok(logits)
    }

    /// Cached mode: evaluate the tokens from position `p0` on in chunks of `chunk`, with
    /// `logits` of each chunk to `each` (for [`Logits::Last`], only the last chunk's).
    fn eval_cached(
        &mut self,
        p0: usize,
        chunk: usize,
        logits: Logits,
        mut each: impl FnMut(usize, &[f32]),
    ) -> Result<(), SessionError> {
        let end = self.seq().len();
        let mut p = p0;
        while p < end {
            let t = chunk.min(end - p);
            let spec = GraphSpec {
                tokens: t,
                kind: GraphKind::Cached {
                    ctx: self.ctx,
                    span: span_for(self.ctx, p + t),
                },
                logits,
                hidden: false,
            };
            self.exec_for(spec)?;
            let ids = self.seq()[p..p + t].to_vec();
            let want = logits == Logits::All || p + t == end;
            if let Some(l) = self.run_last(&ids, &[p], t, want)? {
                each(p, &l);
            }
            p += t;
        }
        Ok(())
    }

    /// Recompute mode: run the stateless graph over the whole sequence.
    fn eval_recompute(&mut self, n_new: usize) -> Result<Vec<f32>, SessionError> {
        let spec = GraphSpec {
            tokens: self.seq().len(),
            kind: GraphKind::Stateless,
            logits: Logits::Last,
            hidden: false,
        };
        self.exec_for(spec)?;
        let ids = self.seq().clone();
        self.run_last(&ids, &[0], n_new, true)?
            .ok_or(SessionError::Empty)
    }
}

impl<M: Model + ?Sized> Drop for Session<M> {
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
                    let json = s.to_json().to_string();
                    let path = std::path::Path::new(&p);
                    if let Err(e) =
                        crate::files::write_atomic(path, |f| f.write_all(json.as_bytes()))
                    {
                        eprintln!("fathom: cannot write profile {p}: {e}");
                    }
                }
                // traces are not folded: each executor writes its own (see `folds`)
                ProfileOutput::Trace(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests;
