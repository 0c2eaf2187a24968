//! The plan executor: a persistent pool of core-pinned worker threads that replays a
//! [`Plan`] — every thread walks the same step list, runs each node's kernel on its share of
//! the work and meets the others at the barriers the plan kept.
//!
//! [`Executor::reference`] runs the reference kernels on one thread with every barrier (no
//! elision): the oracle every test compares against.

use crate::adapt::Adapt;
use crate::barrier::{Barrier, Start};
use crate::profiler::{ProfileOutput, Profiler, ThreadTimes};
use graph::{Graph, Location, NodeKind, Op, Plan, PlanOptions, TensorDesc, TensorId, WeightData};
use ops::{KernelCx, Scratch, TensorMut, TensorRef};
use quant::simd::{CpuLevel, Kernels};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

/// Executor configuration. A value the caller fills in (the `fathom` CLI from its flags and
/// environment); nothing here reads the environment.
#[derive(Clone, Debug)]
pub struct ExecConfig {
    /// Worker threads including the caller (default: one per physical core).
    pub threads: usize,
    /// CPUs to pin worker `i` to (`cpus[i % len]`); `None` pins to cores 0.. in order.
    pub cpus: Option<Vec<usize>>,
    /// Pin threads at all.
    pub pin: bool,
    /// Apply barrier elision.
    pub elide_barriers: bool,
    /// Spin iterations before a waiting thread parks.
    pub spin: u32,
    /// Collect per-node timings (the per-op profiler, see [`crate::profiler`]) and, when the
    /// executor is dropped, emit them as this says.
    pub profile: Option<ProfileOutput>,
    /// Leave guard bytes after every arena buffer (test-ops checks them after each run).
    pub guards: bool,
    /// The CPU level whose kernels the plan's nodes run (`quant::simd::table`; capped at the
    /// level this CPU has). Default: [`CpuLevel::detect`].
    pub cpu: CpuLevel,
    /// Run the scalar reference kernels on one thread with every barrier instead (the oracle
    /// of the tests; `FATHOM_FORCE_SCALAR=1` in the CLI). `threads`, `pin`, `elide_barriers`
    /// and `cpu` are then ignored.
    pub reference: bool,
    /// Let the executor run with fewer of its threads when measurements show that is faster
    /// (other processes taking cores: see [`crate::adapt`]). Off while profiling, which
    /// reports every thread of every run.
    pub adapt_threads: bool,
}

impl Default for ExecConfig {
    /// One thread per physical core, pinned to cores in order, barrier elision on, the
    /// kernels of this CPU's level, no profiler.
    fn default() -> Self {
        ExecConfig {
            threads: crate::topology::physical_cores(),
            cpus: None,
            pin: true,
            elide_barriers: true,
            spin: 20_000,
            profile: None,
            guards: false,
            cpu: CpuLevel::detect(),
            reference: false,
            adapt_threads: true,
        }
    }
}

impl ExecConfig {
    /// The configuration of [`Executor::reference`]: one unpinned thread, every barrier, the
    /// reference kernels.
    pub fn reference() -> ExecConfig {
        ExecConfig {
            threads: 1,
            cpus: None,
            pin: false,
            elide_barriers: false,
            spin: 0,
            profile: None,
            guards: false,
            cpu: CpuLevel::Scalar,
            reference: true,
            adapt_threads: false,
        }
    }
}

/// Errors from binding inputs or reading outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExecError {
    /// No input or output of that name.
    UnknownName(String),
    /// Wrong number of bytes for an input.
    Size {
        /// Input name.
        name: String,
        /// Bytes given.
        got: usize,
        /// Bytes expected.
        expected: usize,
    },
}

impl std::fmt::Display for ExecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExecError::UnknownName(n) => write!(f, "no input or output named '{n}'"),
            ExecError::Size {
                name,
                got,
                expected,
            } => write!(f, "input '{name}': got {got} bytes, expected {expected}"),
        }
    }
}
impl std::error::Error for ExecError {}

/// Byte pattern of guard regions.
const GUARD: u8 = 0xA5;

#[repr(C, align(64))]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct Line([u8; 64]);

/// The persistent state buffer (decode caches) of one sequence: shared by every executor
/// whose plan declares the same states in the same order ([`graph::NodeKind::State`]).
/// Cloning it copies the caches (a snapshot of the sequence).
#[derive(Clone)]
pub struct StateBuf {
    lines: Vec<Line>,
}

impl StateBuf {
    /// A zeroed buffer of at least `bytes`.
    pub fn new(bytes: usize) -> StateBuf {
        StateBuf {
            lines: vec![Line([0; 64]); bytes.div_ceil(64)],
        }
    }
    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.lines.len() * 64
    }
    /// True for an empty buffer.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
    /// A buffer holding `bytes` (its length rounded up to 64 with zeros).
    pub fn from_bytes(bytes: &[u8]) -> StateBuf {
        let mut b = StateBuf::new(bytes.len());
        b.bytes_mut()[..bytes.len()].copy_from_slice(bytes);
        b
    }
    /// Zero every byte (a new sequence).
    pub fn reset(&mut self) {
        self.lines.iter_mut().for_each(|l| *l = Line([0; 64]));
    }
    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        bytemuck::cast_slice(&self.lines)
    }
    /// The bytes, mutable.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(&mut self.lines)
    }
}

impl std::fmt::Debug for StateBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StateBuf({} bytes)", self.len())
    }
}

/// What one run needs, shared read-only by all threads for the duration of the run.
struct Job {
    graph: *const Graph,
    plan: *const Plan,
    arena: *mut u8,
    arena_len: usize,
    state: *mut u8,
    state_len: usize,
    counters: *const [AtomicUsize],
    kernels: *const [Option<Kernels>],
    cpu: CpuLevel,
    reference: bool,
    profile: bool,
    t0: Instant,
    /// Threads taking part (workers `1..active` and the caller).
    active: usize,
}

// SAFETY: a Job only travels to the pool's workers while `run` keeps every pointee alive and
// unmoved (run waits at the final barrier before returning).
unsafe impl Send for Job {}
// SAFETY: as above; the pointees are only read, except the arena whose writes follow the
// plan's row ownership and barriers.
unsafe impl Sync for Job {}

struct Shared {
    start: Start<Job>,
    step: Barrier,
    times: Vec<Mutex<ThreadTimes>>,
}

/// Replays a plan on a thread pool.
pub struct Executor {
    graph: Graph,
    plan: Plan,
    arena: Vec<Line>,
    state: Option<StateBuf>,
    counters: Box<[AtomicUsize]>,
    /// Each step's kernels, resolved from the kernel table when the plan was built.
    kernels: Box<[Option<Kernels>]>,
    /// The CPU level they were resolved for.
    cpu: CpuLevel,
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    scratch0: Scratch,
    nth: usize,
    reference: bool,
    profiler: Option<Profiler>,
    /// The thread-count policy (`None`: always every thread).
    adapt: Option<Adapt>,
    /// A thread count set by [`Executor::set_active_threads`], overriding the policy.
    forced: Option<usize>,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Executor({} threads, {} steps)",
            self.nth,
            self.plan.steps().len()
        )
    }
}

fn run_steps(
    job: &Job,
    ith: usize,
    nth: usize,
    scratch: &mut Scratch,
    step_barrier: &Barrier,
    times: Option<&Mutex<ThreadTimes>>,
) {
    // SAFETY: the Job's pointees outlive the run (see `Job`).
    let (graph, plan, counters, kernels) =
        unsafe { (&*job.graph, &*job.plan, &*job.counters, &*job.kernels) };
    let mut local =
        times.map(|t| std::mem::take(&mut *t.lock().unwrap_or_else(|e| e.into_inner())));
    let mut src_buf: Vec<TensorRef> = Vec::with_capacity(8);
    for (si, st) in plan.steps().iter().enumerate() {
        if st.barrier_before {
            step_barrier.wait();
        }
        let node = graph.node(st.node);
        let NodeKind::Op { op, srcs } = &node.kind else {
            continue;
        };
        let srcs_ids = &srcs[..];
        let view = |id: TensorId| -> TensorRef<'_> {
            let d = graph.desc(id);
            match plan.location(id) {
                Location::Weight { root, offset } => match &graph.node(root).kind {
                    NodeKind::Weight(w) => TensorRef::new(*d, &w.bytes()[offset..]),
                    _ => unreachable!("weight location points at a weight node"),
                },
                Location::Arena { offset } => {
                    // SAFETY: offset + nbytes is inside the arena (planner invariant); the bytes
                    // were completed before this node (barriers/elision rule), and no thread
                    // writes them during this node (outputs never overlap live sources).
                    let b = unsafe {
                        std::slice::from_raw_parts(job.arena.add(offset), job.arena_len - offset)
                    };
                    TensorRef::new(*d, b)
                }
                Location::State { offset } => {
                    // SAFETY: as for the arena: the state buffer outlives the run, the range is
                    // inside it (planner invariant), and writes to it (SET_ROWS) are separated
                    // from every read by barriers.
                    let b = unsafe {
                        std::slice::from_raw_parts(job.state.add(offset), job.state_len - offset)
                    };
                    TensorRef::new(*d, b)
                }
            }
        };
        src_buf.clear();
        src_buf.extend(srcs.iter().map(|&s| view(s)));
        let srcs = &src_buf[..];
        let (base, len, offset) = match plan.location(st.node) {
            Location::Arena { offset } => (job.arena, job.arena_len, offset),
            Location::State { offset } => (job.state, job.state_len, offset),
            Location::Weight { .. } => continue,
        };
        // SAFETY: the node's output buffer lies inside the arena (or, for in-place cache writes,
        // the state buffer) and belongs to this node only while it runs; threads write disjoint
        // rows (TensorMut contract).
        let dst = unsafe { TensorMut::from_raw(node.desc, base.add(offset), len - offset) };
        let t_start = local.as_ref().map(|_| job.t0.elapsed().as_nanos() as u64);
        let mut cx = KernelCx {
            ith,
            nth,
            chunk: &counters[si],
            scratch,
            kernels: kernels[si].as_ref(),
            cpu: job.cpu,
            experts: paged_experts(graph, plan, op, srcs_ids),
            block_scales: block_scales(graph, plan, op, srcs_ids),
        };
        if job.reference {
            ops::run_reference(op, &mut cx, &dst, srcs);
        } else {
            ops::run_forward(op, &mut cx, &dst, srcs);
        }
        if let (Some(l), Some(s)) = (local.as_mut(), t_start) {
            l.push(si, s, job.t0.elapsed().as_nanos() as u64);
        }
    }
    // hand the timings back *before* the final barrier: the caller collects them as soon as
    // the barrier releases it, so a write-back after it would race with the collection
    if let (Some(t), Some(l)) = (times, local) {
        *t.lock().unwrap_or_else(|e| e.into_inner()) = l;
    }
    step_barrier.wait();
    let _ = job.profile;
}

/// The weight node `srcs[0]` of a node resolves to (through views), if it is one.
fn weight_of<'g>(graph: &'g Graph, plan: &Plan, srcs: &[TensorId]) -> Option<&'g WeightData> {
    match plan.location(*srcs.first()?) {
        Location::Weight { root, .. } => match &graph.node(root).kind {
            NodeKind::Weight(w) => Some(w),
            _ => None,
        },
        _ => None,
    }
}

/// Where a MUL_MAT_ID (or EXPERT_PREFETCH) node's weight takes its experts from when they
/// are paged.
fn paged_experts<'g>(
    graph: &'g Graph,
    plan: &Plan,
    op: &Op,
    srcs: &[TensorId],
) -> Option<&'g dyn graph::ExpertSource> {
    if !matches!(op, Op::MulMatId(_) | Op::ExpertPrefetch(_)) {
        return None;
    }
    weight_of(graph, plan, srcs)?.experts()
}

/// The tile scales of a MUL_MAT node's block-scaled weight.
fn block_scales<'g>(
    graph: &'g Graph,
    plan: &Plan,
    op: &Op,
    srcs: &[TensorId],
) -> Option<&'g graph::BlockScales> {
    if !matches!(op, Op::MulMat(_)) {
        return None;
    }
    weight_of(graph, plan, srcs)?.block_scales()
}

impl Executor {
    /// Build the plan, resolve every node's kernels for `cfg.cpu` and start the pool (or,
    /// with `cfg.reference`, the reference executor).
    pub fn new(graph: Graph, cfg: ExecConfig) -> Executor {
        if cfg.reference {
            return Self::reference_with(graph, cfg.profile);
        }
        Self::build(graph, cfg, false)
    }

    /// The oracle: reference kernels, one thread, every barrier.
    pub fn reference(graph: Graph) -> Executor {
        Self::reference_with(graph, None)
    }

    fn reference_with(graph: Graph, profile: Option<ProfileOutput>) -> Executor {
        let cfg = ExecConfig {
            profile,
            ..ExecConfig::reference()
        };
        Self::build(graph, cfg, true)
    }

    /// The plan [`Executor::new`] would run `graph` with under `cfg`: to size its arena and
    /// state before allocating them ([`Executor::with_plan`] then runs it).
    pub fn planned(graph: &Graph, cfg: &ExecConfig) -> Plan {
        let opts = if cfg.reference {
            PlanOptions {
                elide_barriers: false,
                guards: false,
            }
        } else {
            PlanOptions {
                elide_barriers: cfg.elide_barriers,
                guards: cfg.guards,
            }
        };
        Plan::new(graph, opts)
    }

    /// [`Executor::new`] with the plan [`Executor::planned`] made for `graph` and `cfg`.
    pub fn with_plan(graph: Graph, plan: Plan, cfg: ExecConfig) -> Executor {
        if cfg.reference {
            let cfg = ExecConfig {
                profile: cfg.profile,
                ..ExecConfig::reference()
            };
            return Self::build_with(graph, plan, cfg, true);
        }
        Self::build_with(graph, plan, cfg, false)
    }

    fn build(graph: Graph, cfg: ExecConfig, reference: bool) -> Executor {
        let plan = Self::planned(&graph, &cfg);
        Self::build_with(graph, plan, cfg, reference)
    }

    fn build_with(graph: Graph, plan: Plan, cfg: ExecConfig, reference: bool) -> Executor {
        let nth = cfg.threads.max(1);
        let shared = Arc::new(Shared {
            start: Start::new(cfg.spin),
            step: Barrier::new(nth, cfg.spin),
            times: (0..nth)
                .map(|_| Mutex::new(ThreadTimes::default()))
                .collect(),
        });
        let cores = if cfg.pin {
            core_affinity::get_core_ids().unwrap_or_default()
        } else {
            Vec::new()
        };
        let pick = move |i: usize| -> Option<core_affinity::CoreId> {
            if cores.is_empty() {
                return None;
            }
            match &cfg.cpus {
                Some(list) if !list.is_empty() => {
                    cores.iter().copied().find(|c| c.id == list[i % list.len()])
                }
                _ => Some(cores[i % cores.len()]),
            }
        };
        let mut workers = Vec::new();
        for ith in 1..nth {
            let sh = shared.clone();
            let core = pick(ith);
            workers.push(std::thread::spawn(move || {
                if let Some(c) = core {
                    core_affinity::set_for_current(c);
                }
                let mut scratch = Scratch::default();
                let mut seen = 0;
                while let Some(job) = sh.start.next(ith, &mut seen) {
                    let times = job.profile.then(|| &sh.times[ith]);
                    run_steps(&job, ith, job.active, &mut scratch, &sh.step, times);
                }
            }));
        }
        let counters = (0..plan.steps().len())
            .map(|_| AtomicUsize::new(0))
            .collect();
        let arena = vec![Line([0; 64]); plan.arena_size().div_ceil(64)];
        let cpu = cfg.cpu.min(CpuLevel::detect());
        let kernels = plan
            .steps()
            .iter()
            .map(|st| match &graph.node(st.node).kind {
                NodeKind::Op { op, srcs } => {
                    let weight = srcs.first().map(|&s| graph.desc(s).dtype);
                    ops::node_kernels(op, weight, cpu)
                }
                _ => None,
            })
            .collect();
        let profiler = cfg
            .profile
            .clone()
            .map(|out| Profiler::new(&graph, &plan, nth, out));
        let adapt = (cfg.adapt_threads && !reference && profiler.is_none() && nth > 1)
            .then(|| Adapt::new(nth));
        Executor {
            graph,
            plan,
            arena,
            state: None,
            counters,
            kernels,
            cpu,
            shared,
            workers,
            scratch0: Scratch::default(),
            nth,
            reference,
            profiler,
            adapt,
            forced: None,
        }
    }

    /// Exchange this executor's thread-count policy with `other` (one shared by executors of
    /// the same shape of work: the same chunk length, another span), so that what one learnt
    /// about the machine's load is not learnt again. Nothing happens where the policy is off
    /// or the pools differ in size; returns whether the two were exchanged.
    pub fn swap_adapt(&mut self, other: &mut Adapt) -> bool {
        match self.adapt.as_mut() {
            Some(a) if a.levels() == other.levels() => {
                std::mem::swap(a, other);
                true
            }
            _ => false,
        }
    }

    /// A copy of the thread-count policy's state (`None` where it is off).
    pub fn adapt(&self) -> Option<Adapt> {
        self.adapt.clone()
    }

    /// Run the next runs with `n` of the pool's threads (1 to [`Executor::threads`]), or
    /// (`None`) as the thread-count policy decides. For measurements and tests.
    pub fn set_active_threads(&mut self, n: Option<usize>) {
        self.forced = n.map(|n| n.clamp(1, self.nth));
    }

    /// The plan being replayed.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }
    /// The graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }
    /// Threads in the pool (including the caller).
    pub fn threads(&self) -> usize {
        self.nth
    }
    /// The CPU level the nodes' kernels were resolved for.
    pub fn cpu(&self) -> CpuLevel {
        self.cpu
    }
    /// The names of the kernels (dot, rows, multi, tile) step `i` resolved, for MUL_MAT and
    /// MUL_MAT_ID steps.
    pub fn step_kernels(&self, i: usize) -> Option<&Kernels> {
        self.kernels.get(i)?.as_ref()
    }
    /// The profiler, when enabled.
    pub fn profiler(&self) -> Option<&Profiler> {
        self.profiler.as_ref()
    }
    /// Mutable profiler access (to set token counts, print, reset).
    pub fn profiler_mut(&mut self) -> Option<&mut Profiler> {
        self.profiler.as_mut()
    }

    fn arena_bytes(&mut self) -> &mut [u8] {
        bytemuck::cast_slice_mut(&mut self.arena)
    }

    /// Bind the bytes of a named input (copied into the arena).
    pub fn set_input(&mut self, name: &str, bytes: &[u8]) -> Result<(), ExecError> {
        let id = self
            .plan
            .input(name)
            .ok_or_else(|| ExecError::UnknownName(name.to_string()))?;
        let n = self.graph.desc(id).nbytes();
        if bytes.len() != n {
            return Err(ExecError::Size {
                name: name.to_string(),
                got: bytes.len(),
                expected: n,
            });
        }
        let Location::Arena { offset } = self.plan.location(id) else {
            unreachable!("inputs live in the arena")
        };
        self.arena_bytes()[offset..offset + n].copy_from_slice(bytes);
        Ok(())
    }
    /// Bind f32 data to an input.
    pub fn set_input_f32(&mut self, name: &str, v: &[f32]) -> Result<(), ExecError> {
        self.set_input(name, bytemuck::cast_slice(v))
    }
    /// Bind i32 data to an input.
    pub fn set_input_i32(&mut self, name: &str, v: &[i32]) -> Result<(), ExecError> {
        self.set_input(name, bytemuck::cast_slice(v))
    }

    /// Execute the plan once, with the executor's own state buffer.
    pub fn run(&mut self) {
        let mut st = self
            .state
            .take()
            .unwrap_or_else(|| StateBuf::new(self.plan.state_size()));
        self.run_with_state(&mut st);
        self.state = Some(st);
    }

    /// Execute the plan once with an external state buffer (shared by the plans of one
    /// sequence, e.g. a chunked-prefill plan and a one-token decode plan). Panics only if the
    /// buffer is smaller than the plan's states, which is a caller bug.
    pub fn run_with_state(&mut self, state: &mut StateBuf) {
        self.run_with_state_at(state, 0);
    }

    /// Execute the plan once with the states at byte `offset` of `state` (a multiple of
    /// 64): one buffer holds the states of several sequences back to back, and a plan of one
    /// sequence runs on any of them. Panics only if the region is smaller than the plan's
    /// states or the offset is not aligned, which is a caller bug.
    pub fn run_with_state_at(&mut self, state: &mut StateBuf, offset: usize) {
        assert!(
            offset.is_multiple_of(64)
                && state.len().saturating_sub(offset) >= self.plan.state_size(),
            "state region smaller than the plan's states"
        );
        for c in self.counters.iter() {
            c.store(0, Ordering::Relaxed);
        }
        let arena_len = self.arena.len() * 64;
        let profile = self.profiler.is_some();
        let state_len = state.len() - offset;
        let active = match self.forced {
            Some(n) => n,
            None => self.adapt.as_mut().map_or(self.nth, Adapt::threads),
        };
        let t_run = Instant::now();
        let job = Arc::new(Job {
            graph: &self.graph,
            plan: &self.plan,
            arena: self.arena.as_mut_ptr().cast::<u8>(),
            arena_len,
            state: state.bytes_mut()[offset..].as_mut_ptr(),
            state_len,
            counters: &*self.counters,
            kernels: &*self.kernels,
            cpu: self.cpu,
            reference: self.reference,
            profile,
            t0: Instant::now(),
            active,
        });
        self.shared.step.set_n(active);
        // a run of the caller alone leaves the workers asleep
        self.shared.start.post(job.clone(), active);
        let times = profile.then(|| &self.shared.times[0]);
        // the last step barrier returns once every active thread is done
        run_steps(
            &job,
            0,
            active,
            &mut self.scratch0,
            &self.shared.step,
            times,
        );
        self.shared.start.clear();
        if let (Some(a), None) = (self.adapt.as_mut(), self.forced) {
            a.record(t_run.elapsed().as_nanos() as u64);
        }
        if let Some(p) = self.profiler.as_mut() {
            p.collect(&self.shared.times);
        }
    }

    /// Fill every guard region with the guard pattern (call before [`Executor::run`]).
    pub fn fill_guards(&mut self) {
        let guards = self.plan.guards().to_vec();
        let a = self.arena_bytes();
        for (off, len) in guards {
            a[off..off + len].fill(GUARD);
        }
    }

    /// Guard regions whose bytes changed since [`Executor::fill_guards`]: `(offset, len)`.
    pub fn broken_guards(&self) -> Vec<(usize, usize)> {
        let a: &[u8] = bytemuck::cast_slice(&self.arena);
        self.plan
            .guards()
            .iter()
            .copied()
            .filter(|&(o, l)| a[o..o + l].iter().any(|&b| b != GUARD))
            .collect()
    }

    /// The executor's own state buffer (created on first use), e.g. to reset it.
    pub fn state_mut(&mut self) -> &mut StateBuf {
        let n = self.plan.state_size();
        self.state.get_or_insert_with(|| StateBuf::new(n))
    }

    /// Descriptor of a named output.
    pub fn output_desc(&self, name: &str) -> Result<TensorDesc, ExecError> {
        let id = self.output_id(name)?;
        Ok(*self.graph.desc(id))
    }

    fn output_id(&self, name: &str) -> Result<TensorId, ExecError> {
        self.plan
            .outputs()
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, id)| *id)
            .ok_or_else(|| ExecError::UnknownName(name.to_string()))
    }

    /// A named output converted to f32, in index order (any layout).
    pub fn output_f32(&self, name: &str) -> Result<Vec<f32>, ExecError> {
        let id = self.output_id(name)?;
        let d = *self.graph.desc(id);
        let bytes: &[u8] = match self.plan.location(id) {
            Location::Arena { offset } => &bytemuck::cast_slice::<Line, u8>(&self.arena)[offset..],
            Location::State { offset } => match &self.state {
                Some(st) => &st.bytes()[offset..],
                None => return Err(ExecError::UnknownName(format!("{name} (state never run)"))),
            },
            Location::Weight { root, offset } => match &self.graph.node(root).kind {
                NodeKind::Weight(w) => &w.bytes()[offset..],
                _ => unreachable!("weight location points at a weight node"),
            },
        };
        let t = TensorRef::new(d, bytes);
        let mut out = vec![0f32; d.nelements()];
        for r in 0..d.nrows() {
            t.row_to_f32(r, &mut out[r * d.ne[0]..(r + 1) * d.ne[0]]);
        }
        Ok(out)
    }

    /// A named output as i32 (contiguous I32 outputs).
    pub fn output_i32(&self, name: &str) -> Result<Vec<i32>, ExecError> {
        let id = self.output_id(name)?;
        let d = *self.graph.desc(id);
        let Location::Arena { offset } = self.plan.location(id) else {
            return Err(ExecError::UnknownName(name.into()));
        };
        let b = &bytemuck::cast_slice::<Line, u8>(&self.arena)[offset..offset + d.nbytes()];
        Ok(b.chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        self.shared.start.quit();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        if let Some(p) = &self.profiler {
            p.finish();
        }
    }
}
