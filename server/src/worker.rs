//! The engine thread: its slots, prefix reuse, and the step loop.
//!
//! The session holds `--parallel` slots ([`Session::set_slots`]), each a sequence with its
//! own caches. Every turn of the loop:
//! 1. takes queued jobs while a slot is free (blocking only when nothing runs), placing each
//!    in the free slot whose live state holds the longest prefix of its prompt, else in the
//!    least recently used free slot, restoring a snapshot there when one is longer;
//! 2. feeds each slot still reading its prompt one chunk (`prefill_chunk` tokens, snapshots
//!    at `snapshot_every` boundaries and at the prompt's end), so a long prompt does not
//!    stall the others' streams for more than a chunk;
//! 3. samples the next token of every generating slot, sends it, and evaluates all those
//!    that go on as one batched step ([`Session::decode_slots`]).
//!
//! A slot keeps its state after its job (the prompt and every generated token but the last,
//! with the logits after them), for the next prompt that continues it.

use crate::disk::DiskCache;
use crate::engine::{EngineError, Event, Finish, GenParams, Job, Metrics, TokenLogprob, Usage};
use crate::prefix::PrefixCache;
use crate::stop::StopMatcher;
use models::sampling::Sampler;
use models::session::Session;
use models::tokenizer::{TokenStreamer, Tokenizer};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc;

/// The engine thread's state.
pub(crate) struct Worker {
    pub(crate) session: Session,
    pub(crate) tokenizer: Arc<Tokenizer>,
    pub(crate) slots: Vec<Slot>,
    pub(crate) cache: PrefixCache,
    pub(crate) snapshot_every: usize,
    pub(crate) prefill_chunk: usize,
    pub(crate) disk: Option<DiskCache>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) clock: u64,
    /// Scripted replies (tests): each job's reply is forced to the next one, in turn.
    pub(crate) script: Vec<Vec<u32>>,
    pub(crate) script_next: usize,
}

/// One slot of the session.
#[derive(Default)]
pub(crate) struct Slot {
    /// Logits after the slot's last position (`None` when it is empty or unknown).
    live_logits: Option<Vec<f32>>,
    /// The job running in it.
    job: Option<Running>,
    /// When it was last given a job (for least-recently-used placement).
    last_used: u64,
}

/// A job in a slot.
struct Running {
    prompt: Vec<u32>,
    params: GenParams,
    events: mpsc::UnboundedSender<Event>,
    sampler: Sampler,
    /// A scripted reply's tokens still to come (tests; `None`: sampled).
    forced: Option<std::collections::VecDeque<u32>>,
    /// Bytes of an incomplete character (see [`TokenStreamer::resume`]).
    pending: Vec<u8>,
    stop: StopMatcher,
    /// Prompt tokens in the slot's sequence so far.
    pos: usize,
    /// Of those, reused from a cached state.
    cached: usize,
    /// Logits to sample the next token from (`None` while the prompt is read).
    logits: Option<Vec<f32>>,
    generated: usize,
    t0: Instant,
    prefill_s: f64,
    t1: Instant,
}

/// What sampling one token of a job decided.
enum Next {
    /// Evaluate this token and go on.
    Step(u32),
    /// The job is over.
    Done(Finish),
    /// Its client went away.
    Gone,
}

impl Worker {
    pub(crate) fn run(mut self, mut rx: mpsc::Receiver<Job>) {
        loop {
            if self.slots.iter().all(|s| s.job.is_none()) {
                match rx.blocking_recv() {
                    Some(job) => self.admit(job),
                    None => return,
                }
            }
            while self.slots.iter().any(|s| s.job.is_none()) {
                match rx.try_recv() {
                    Ok(job) => self.admit(job),
                    Err(_) => break,
                }
            }
            let busy = self.slots.iter().filter(|s| s.job.is_some()).count();
            self.metrics
                .slots_busy
                .store(busy as u64, Ordering::Relaxed);
            self.prefill_step();
            self.decode_step();
            self.publish_experts();
        }
    }

    /// Copies the expert cache's counters into the metrics (nothing without `--ram`).
    fn publish_experts(&self) {
        let Some(c) = self.session.model().expert_cache() else {
            return;
        };
        let s = c.stats();
        let m = &self.metrics.experts;
        for (a, v) in [
            (&m.enabled, 1),
            (&m.hits, s.hits),
            (&m.misses, s.misses),
            (&m.read_bytes, s.bytes_read),
            (&m.wait_ns, (s.wait_secs * 1e9) as u64),
            (&m.resident_bytes, s.resident),
            (&m.budget_bytes, s.budget),
        ] {
            a.store(v, Ordering::Relaxed);
        }
    }

    /// Check a job and place it in a free slot (or fail it).
    fn admit(&mut self, job: Job) {
        self.metrics.jobs.fetch_add(1, Ordering::Relaxed);
        let events = job.events.clone();
        if let Err(e) = self.place(job) {
            self.metrics.jobs_failed.fetch_add(1, Ordering::Relaxed);
            let _ = events.send(Event::Failed(e));
        }
    }

    fn place(&mut self, job: Job) -> Result<(), EngineError> {
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
        let sampler =
            Sampler::new(params.sampler).map_err(|e| EngineError::BadParams(e.to_string()))?;
        if events.is_closed() {
            self.metrics.cancelled.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        let t0 = Instant::now();
        let k = match self.restore(&prompt) {
            Ok(k) => k,
            Err((k, e)) => {
                // (a slot that was chosen, free: what it held may be half-restored)
                if self.slots.get(k).is_some_and(|s| s.job.is_none()) {
                    self.forget(k);
                }
                return Err(e);
            }
        };
        let cached = self.session.n_past();
        let logits = if cached == prompt.len() {
            self.slots[k].live_logits.take()
        } else {
            None
        };
        self.clock += 1;
        self.slots[k].last_used = self.clock;
        let stop = StopMatcher::new(&params.stop);
        let forced = (!self.script.is_empty()).then(|| {
            let i = self.script_next % self.script.len();
            self.script_next += 1;
            self.script[i].iter().copied().collect()
        });
        self.slots[k].job = Some(Running {
            forced,
            prompt,
            params,
            events,
            sampler,
            pending: Vec::new(),
            stop,
            pos: cached,
            cached,
            logits,
            generated: 0,
            t0,
            prefill_s: 0.0,
            t1: t0,
        });
        if self.slots[k]
            .job
            .as_ref()
            .is_some_and(|r| r.logits.is_some())
        {
            self.started(k);
        }
        Ok(())
    }

    /// Choose a free slot for `prompt`, select it and make it hold the longest cached
    /// prefix of the prompt there is (its live state, a snapshot in memory or on disk).
    /// Returns the slot; on an error, the slot chosen with it.
    fn restore(&mut self, prompt: &[u32]) -> Result<usize, (usize, EngineError)> {
        let usable = |w: &Worker, k: usize| {
            let live = w.session.slot_tokens(k);
            !live.is_empty()
                && prompt.starts_with(live)
                && (live.len() < prompt.len() || w.slots[k].live_logits.is_some())
        };
        let free = (0..self.slots.len()).filter(|&k| self.slots[k].job.is_none());
        let (k, live_len) = free
            .map(|k| {
                let len = if usable(self, k) {
                    self.session.slot_tokens(k).len()
                } else {
                    0
                };
                (k, len)
            })
            // the longest live prefix; else the least recently used slot
            .max_by_key(|&(k, len)| (len, std::cmp::Reverse(self.slots[k].last_used)))
            .ok_or_else(|| (usize::MAX, EngineError::Inference("no free slot".into())))?;
        let err = |e: String| (k, EngineError::Inference(e));
        self.session.select(k).map_err(|e| err(e.to_string()))?;
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
                self.slots[k].live_logits = Some(logits);
            } else {
                self.forget(k);
            }
        } else if let Some(snap) = ram_len.and(self.cache.longest_prefix(prompt, live_len)) {
            // (the state is copied once, into the slot)
            self.session
                .set_state(&snap.state)
                .map_err(|e| err(e.to_string()))?;
            self.slots[k].live_logits = Some(snap.logits.clone());
        } else if live_len == 0 {
            self.forget(k);
        }
        Ok(k)
    }

    /// Empty slot `k` (selecting it).
    fn forget(&mut self, k: usize) {
        if self.session.select(k).is_ok() {
            self.session.reset();
        }
        self.slots[k].live_logits = None;
    }

    /// The prompt of slot `k`'s job is read: tell its client, count it.
    fn started(&mut self, k: usize) {
        let Some(r) = self.slots[k].job.as_mut() else {
            return;
        };
        r.prefill_s = r.t0.elapsed().as_secs_f64();
        r.t1 = Instant::now();
        for &t in &r.prompt {
            r.sampler.accept(t);
        }
        self.metrics
            .prompt_tokens
            .fetch_add(r.prompt.len() as u64, Ordering::Relaxed);
        self.metrics
            .cached_tokens
            .fetch_add(r.cached as u64, Ordering::Relaxed);
        let _ = r.events.send(Event::Started {
            prompt_tokens: r.prompt.len(),
            cached_tokens: r.cached,
        });
    }

    /// Every slot still reading its prompt reads one more chunk of it.
    fn prefill_step(&mut self) {
        for k in 0..self.slots.len() {
            let Some(r) = self.slots[k].job.as_ref() else {
                continue;
            };
            if r.logits.is_some() {
                continue;
            }
            if r.events.is_closed() {
                self.metrics.cancelled.fetch_add(1, Ordering::Relaxed);
                self.slots[k].job = None;
                continue;
            }
            let (pos, len) = (r.pos, r.prompt.len());
            let mut end = (pos + self.prefill_chunk.max(1)).min(len);
            if let Some(n) = pos.checked_div(self.snapshot_every) {
                end = end.min((n + 1) * self.snapshot_every);
            }
            // the prompt's snapshot is taken before its last token: the next turn renders
            // this prompt's end and the reply as one text, and tokenization may merge them
            // (a generation prompt ending in a space, "Assistant: " + "Hi" → " Hi")
            let mark = len.saturating_sub(1);
            if pos < mark {
                end = end.min(mark);
            }
            let t0 = Instant::now();
            let chunk = r.prompt[pos..end].to_vec();
            let res = self
                .session
                .select(k)
                .and_then(|()| self.session.prefill(&chunk));
            self.metrics
                .prefill_tokens
                .fetch_add(chunk.len() as u64, Ordering::Relaxed);
            self.metrics
                .prefill_ns
                .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
            let logits = match res {
                Ok(l) => l,
                Err(e) => {
                    // a failed prefill leaves the slot empty: nothing stale is reused
                    self.fail(k, EngineError::Inference(e.to_string()));
                    self.forget(k);
                    continue;
                }
            };
            // a snapshot at every boundary and before the prompt's last token (on disk too)
            let boundary = self.snapshot_every > 0 && end % self.snapshot_every == 0;
            if end == mark || boundary {
                let state = self.session.state();
                if end == mark {
                    if let Some(d) = self.disk.as_mut() {
                        d.store(&state, &logits);
                    }
                }
                self.cache.insert(state, &logits);
                self.metrics
                    .snapshot_bytes
                    .store(self.cache.bytes(), Ordering::Relaxed);
                self.metrics
                    .snapshots
                    .store(self.cache.len() as u64, Ordering::Relaxed);
            }
            if let Some(r) = self.slots[k].job.as_mut() {
                r.pos = end;
                if end == len {
                    r.logits = Some(logits);
                    self.started(k);
                }
            }
        }
    }

    /// Fail slot `k`'s job.
    fn fail(&mut self, k: usize, e: EngineError) {
        if let Some(r) = self.slots[k].job.take() {
            self.metrics.jobs_failed.fetch_add(1, Ordering::Relaxed);
            let _ = r.events.send(Event::Failed(e));
        }
    }

    /// Sample one token of every generating slot; evaluate those that go on together.
    fn decode_step(&mut self) {
        let ctx = self.session.ctx();
        let eos = self.tokenizer.eos().unwrap_or(self.session.info().eos);
        let mut steps = Vec::new();
        for k in 0..self.slots.len() {
            let n_past = self.session.slot_tokens(k).len();
            let Some(r) = self.slots[k].job.as_mut() else {
                continue;
            };
            let Some(logits) = r.logits.take() else {
                continue;
            };
            let next = sample(&self.tokenizer, r, &logits, eos, n_past >= ctx);
            r.logits = Some(logits);
            let next = match next {
                Ok(n) => n,
                Err(e) => {
                    self.fail(k, e);
                    continue;
                }
            };
            match next {
                Next::Step(t) => steps.push((k, t)),
                Next::Done(finish) => self.finish(k, finish),
                Next::Gone => {
                    self.metrics.cancelled.fetch_add(1, Ordering::Relaxed);
                    if let Some(r) = self.slots[k].job.take() {
                        self.slots[k].live_logits = r.logits;
                    }
                }
            }
        }
        if steps.is_empty() {
            return;
        }
        if steps.len() > 1 {
            self.metrics.batched_steps.fetch_add(1, Ordering::Relaxed);
            self.metrics
                .batched_tokens
                .fetch_add(steps.len() as u64, Ordering::Relaxed);
        }
        match self.session.decode_slots(&steps) {
            Ok(all) => {
                for ((k, _), l) in steps.iter().zip(all) {
                    if let Some(r) = self.slots[*k].job.as_mut() {
                        r.logits = Some(l);
                    }
                }
            }
            Err(e) => {
                // the step's slots were reset by the session
                for &(k, _) in &steps {
                    self.fail(k, EngineError::Inference(e.to_string()));
                    self.slots[k].live_logits = None;
                }
            }
        }
    }

    /// Slot `k`'s job ended: flush what is held back, report, keep the state.
    fn finish(&mut self, k: usize, finish: Finish) {
        let Some(mut r) = self.slots[k].job.take() else {
            return;
        };
        let tail = TokenStreamer::resume(&self.tokenizer, std::mem::take(&mut r.pending))
            .finish()
            .unwrap_or_default();
        let (mut text, _) = r.stop.push(&tail);
        text.push_str(&r.stop.finish());
        if !text.is_empty() {
            let _ = r.events.send(Event::Token {
                text,
                logprob: None,
            });
        }
        let decode_s = r.t1.elapsed().as_secs_f64();
        self.metrics
            .generated_tokens
            .fetch_add(r.generated as u64, Ordering::Relaxed);
        self.metrics
            .decode_ns
            .fetch_add((decode_s * 1e9) as u64, Ordering::Relaxed);
        let _ = r.events.send(Event::Done {
            finish,
            usage: Usage {
                prompt_tokens: r.prompt.len(),
                cached_tokens: r.cached,
                completion_tokens: r.generated,
            },
            prefill_s: r.prefill_s,
            decode_s,
        });
        self.slots[k].live_logits = r.logits;
    }
}

/// Sample job `r`'s next token from `logits` and send its text. The last token is not
/// evaluated (its logits would not be used): the slot's state stays the prompt and the
/// tokens before it, with `logits` matching.
fn sample(
    tok: &Tokenizer,
    r: &mut Running,
    logits: &[f32],
    eos: u32,
    full: bool,
) -> Result<Next, EngineError> {
    let next = match r.forced.as_mut() {
        // a scripted reply: its tokens, then the end of text
        Some(f) => f.pop_front().unwrap_or(eos),
        None => r
            .sampler
            .sample(logits)
            .map_err(|e| EngineError::Inference(e.to_string()))?,
    };
    if next == eos {
        return Ok(Next::Done(Finish::Stop));
    }
    r.generated += 1;
    r.sampler.accept(next);
    let logprob = r
        .params
        .top_logprobs
        .map(|n| logprobs(tok, logits, next, n));
    // control tokens (BOS, chat markers) are not text; the thinking markers are, for the
    // reply parser
    let piece = if tok.is_special(next) && !is_thinking_marker(tok, next) {
        String::new()
    } else {
        let mut streamer = TokenStreamer::resume(tok, std::mem::take(&mut r.pending));
        let piece = streamer.push(next).unwrap_or_default();
        r.pending = streamer.into_pending();
        piece
    };
    let (text, hit) = r.stop.push(&piece);
    if r.events.send(Event::Token { text, logprob }).is_err() {
        return Ok(Next::Gone);
    }
    if let Some(s) = hit {
        return Ok(Next::Done(Finish::StopString(s)));
    }
    if r.generated >= r.params.max_tokens || full {
        return Ok(Next::Done(Finish::Length));
    }
    Ok(Next::Step(next))
}

/// Whether `id` is `<think>` or `</think>`.
fn is_thinking_marker(tok: &Tokenizer, id: u32) -> bool {
    tok.id_to_token(id)
        .is_some_and(|t| t == models::chat::THINK_START_TOKEN || t == models::chat::THINK_END_TOKEN)
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
