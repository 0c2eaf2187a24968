//! The per-op profiler.
//!
//! Switched on by [`crate::ExecConfig::profile`], which says what to emit when the executor
//! is dropped ([`ProfileOutput`]; the CLI fills it from `FATHOM_PROFILE_OPS`, see
//! [`parse_setting`]):
//! - `1`: print a table per op and tensor types to stderr —
//!   `| op / subsystem | tensor types | calls | calls/tok | ms | ms/tok | share | GB/s |
//!   experts/tok |` (the last column: routed-expert evaluations per token of MUL_MAT_ID —
//!   gate, up and down each count — so live MoE changes are visible);
//! - `json:PATH`: write the same rows as JSON;
//! - `trace:PATH`: write a Chrome trace (`chrome://tracing`, Perfetto) with one timeline per
//!   thread.
//!
//! With the profiler off the executor does one `Option` check per node and reads no clock, so
//! its overhead is unmeasurable. A node's time is the thread time spent in it divided by the
//! thread count — its share of the machine — so the rows add up to the runs' wall time with
//! the row `(barriers, idle)` holding the rest: threads waiting at barriers for a slower
//! thread or for single-threaded work. GB/s is given for matmuls (weight bytes per second
//! of that time). A first-start-to-last-end span would instead count the skew between
//! threads into every small node between two barriers, and with barrier elision the spans
//! of neighbouring nodes overlap.

use graph::{Graph, NodeKind, Plan};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// What the profiler emits when its executor is dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileOutput {
    /// Table on stderr.
    Table,
    /// JSON file.
    Json(String),
    /// Chrome trace file.
    Trace(String),
}

/// Parses a profiler setting: `1` (`on`, `true`) for the table, `json:PATH`, `trace:PATH`;
/// `0` (`off`, `false`) or nothing for off. Anything else is an error saying what is
/// accepted.
pub fn parse_setting(v: &str) -> Result<Option<ProfileOutput>, String> {
    let v = v.trim();
    let path = |p: &str, kind: &str| {
        if p.is_empty() {
            Err(format!("{kind}: needs a file name ({kind}:PATH)"))
        } else {
            Ok(p.to_string())
        }
    };
    if let Some(p) = v.strip_prefix("json:") {
        return Ok(Some(ProfileOutput::Json(path(p, "json")?)));
    }
    if let Some(p) = v.strip_prefix("trace:") {
        return Ok(Some(ProfileOutput::Trace(path(p, "trace")?)));
    }
    match v {
        "" | "0" | "false" | "off" => Ok(None),
        "1" | "true" | "on" => Ok(Some(ProfileOutput::Table)),
        _ => Err("expected 1, json:PATH, trace:PATH or 0".into()),
    }
}

/// The row holding each run's wall time not spent in any node's slowest thread.
pub const IDLE_ROW: &str = "(barriers, idle)";

/// Timings one thread recorded during a run: `(step, start_ns, end_ns)`.
#[derive(Debug, Default)]
pub struct ThreadTimes {
    entries: Vec<(u32, u64, u64)>,
}

impl ThreadTimes {
    /// Record a node.
    pub fn push(&mut self, step: usize, start: u64, end: u64) {
        self.entries.push((step as u32, start, end));
    }
}

#[derive(Debug, Clone)]
struct StepInfo {
    op: &'static str,
    types: String,
    name: String,
    weight_bytes: u64,
    /// MUL_MAT_ID's running count of expert evaluations (read after each run).
    evaluated: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
}

/// One row of the profile.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileRow {
    /// Op name.
    pub op: String,
    /// Types of the sources and output, e.g. `q4_K×f32→f32`.
    pub types: String,
    /// Executions summed over all runs.
    pub calls: u64,
    /// Total wall time in ns.
    pub ns: u64,
    /// Weight bytes streamed (matmuls).
    pub bytes: u64,
    /// Routed-expert evaluations (MUL_MAT_ID: valid (slot, token) pairs; dropped experts do
    /// not count), summed over the rows' nodes and runs.
    pub experts: u64,
}

const MAX_TRACE_EVENTS: usize = 2_000_000;

/// Accumulates per-node timings over runs.
#[derive(Debug)]
pub struct Profiler {
    steps: Vec<StepInfo>,
    ns: Vec<u64>,
    calls: Vec<u64>,
    experts: Vec<u64>,
    experts_seen: Vec<u64>,
    runs: u64,
    /// Wall time of all runs (first node start to last node end), ns.
    wall_ns: u64,
    /// Timing entries each thread handed in for the last run.
    last_entries: Vec<usize>,
    tokens: u64,
    threads: usize,
    barriers: usize,
    elided: usize,
    trace: Vec<(usize, u32, u64, u64)>,
    keep_trace: bool,
    run_offset: u64,
    output: ProfileOutput,
}

impl Profiler {
    /// A profiler for `plan` of `g` on `threads` threads that emits `output` when its
    /// executor is dropped ([`Profiler::finish`]).
    pub fn new(g: &Graph, plan: &Plan, threads: usize, output: ProfileOutput) -> Profiler {
        let steps: Vec<StepInfo> = plan
            .steps()
            .iter()
            .map(|st| {
                let node = g.node(st.node);
                let NodeKind::Op { op, srcs } = &node.kind else {
                    unreachable!("steps are op nodes")
                };
                let mut types: Vec<String> = srcs
                    .iter()
                    .map(|s| g.desc(*s).dtype.info().name.to_string())
                    .collect();
                types.dedup();
                let types = format!("{}→{}", types.join("×"), node.desc.dtype.info().name);
                let weight_bytes = match op.kind() {
                    graph::OpKind::MulMat => g.desc(srcs[0]).nbytes() as u64,
                    _ => 0,
                };
                let evaluated = match op {
                    graph::Op::MulMatId(m) => Some(m.evaluated.clone()),
                    _ => None,
                };
                StepInfo {
                    op: op.name(),
                    types,
                    name: node.name.clone().unwrap_or_default(),
                    weight_bytes,
                    evaluated,
                }
            })
            .collect();
        let n = steps.len();
        Profiler {
            steps,
            ns: vec![0; n],
            calls: vec![0; n],
            experts: vec![0; n],
            experts_seen: vec![0; n],
            runs: 0,
            wall_ns: 0,
            last_entries: Vec::new(),
            tokens: 0,
            threads,
            barriers: plan.barriers(),
            elided: plan.elided_barriers(),
            trace: Vec::new(),
            keep_trace: matches!(output, ProfileOutput::Trace(_)),
            run_offset: 0,
            output,
        }
    }

    /// Fold one run's thread timings in.
    pub fn collect(&mut self, times: &[Mutex<ThreadTimes>]) {
        let n = self.steps.len();
        let mut dur: Vec<Option<u64>> = vec![None; n];
        let (mut run_start, mut run_end) = (u64::MAX, 0);
        self.last_entries.clear();
        for (th, t) in times.iter().enumerate() {
            let mut t = t.lock().unwrap_or_else(|e| e.into_inner());
            self.last_entries.push(t.entries.len());
            for &(s, a, b) in &t.entries {
                let s = s as usize;
                dur[s] = Some(dur[s].unwrap_or(0) + b.saturating_sub(a));
                run_start = run_start.min(a);
                run_end = run_end.max(b);
                if self.keep_trace && self.trace.len() < MAX_TRACE_EVENTS {
                    self.trace
                        .push((th, s as u32, self.run_offset + a, self.run_offset + b));
                }
            }
            t.entries.clear();
        }
        for (s, d) in dur.iter().enumerate() {
            if let Some(d) = *d {
                self.ns[s] += d / self.threads.max(1) as u64;
                self.calls[s] += 1;
            }
            if let Some(c) = &self.steps[s].evaluated {
                let now = c.load(std::sync::atomic::Ordering::Relaxed);
                self.experts[s] += now.saturating_sub(self.experts_seen[s]);
                self.experts_seen[s] = now;
            }
        }
        if run_end >= run_start {
            self.wall_ns += run_end - run_start;
        }
        self.run_offset += run_end + 1000;
        self.runs += 1;
    }

    /// How many node timings each thread handed in for the last run (every thread times
    /// every op node it passes, whether or not it claimed work in it).
    pub fn last_run_entries(&self) -> &[usize] {
        &self.last_entries
    }

    /// Count `n` generated/processed tokens (for the per-token columns). Without calls to
    /// this, every run counts as one token.
    pub fn add_tokens(&mut self, n: u64) {
        self.tokens += n;
    }

    /// Clear accumulated timings (e.g. after warm-up).
    pub fn reset(&mut self) {
        self.ns.iter_mut().for_each(|v| *v = 0);
        self.calls.iter_mut().for_each(|v| *v = 0);
        self.experts.iter_mut().for_each(|v| *v = 0);
        self.runs = 0;
        self.wall_ns = 0;
        self.tokens = 0;
        self.trace.clear();
        self.run_offset = 0;
    }

    fn tokens(&self) -> u64 {
        if self.tokens > 0 {
            self.tokens
        } else {
            self.runs.max(1)
        }
    }

    /// Rows aggregated by (op, types), largest time first.
    pub fn rows(&self) -> Vec<ProfileRow> {
        let mut m: BTreeMap<(&str, &str), ProfileRow> = BTreeMap::new();
        for (i, s) in self.steps.iter().enumerate() {
            let r = m.entry((s.op, &s.types)).or_insert_with(|| ProfileRow {
                op: s.op.to_string(),
                types: s.types.clone(),
                calls: 0,
                ns: 0,
                bytes: 0,
                experts: 0,
            });
            r.experts += self.experts[i];
            r.calls += self.calls[i];
            r.ns += self.ns[i];
            r.bytes += s.weight_bytes * self.calls[i];
        }
        let mut v: Vec<ProfileRow> = m.into_values().collect();
        let busy: u64 = v.iter().map(|r| r.ns).sum();
        if self.runs > 0 {
            v.push(ProfileRow {
                op: IDLE_ROW.to_string(),
                types: String::new(),
                calls: self.runs,
                ns: self.wall_ns.saturating_sub(busy),
                bytes: 0,
                experts: 0,
            });
        }
        v.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.op.cmp(&b.op)));
        v
    }

    /// The table as markdown text.
    pub fn table(&self) -> String {
        let head = format!(
            "fathom op profile: {} runs, {} tokens, {} threads, {} barriers/run ({} elided)",
            self.runs,
            self.tokens(),
            self.threads,
            self.barriers,
            self.elided
        );
        render_table(&head, &self.rows(), self.tokens() as f64)
    }

    /// The rows as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        let rows = rows_json(&self.rows(), self.tokens() as f64);
        serde_json::json!({
            "runs": self.runs, "tokens": self.tokens(), "threads": self.threads,
            "barriers_per_run": self.barriers, "elided_barriers_per_run": self.elided, "ops": rows,
        })
    }

    /// Chrome trace JSON (complete events, one `tid` per thread).
    pub fn chrome_trace(&self) -> serde_json::Value {
        let ev: Vec<serde_json::Value> = self
            .trace
            .iter()
            .map(|&(th, s, a, b)| {
                let st = &self.steps[s as usize];
                serde_json::json!({
                    "name": st.op, "cat": st.types, "ph": "X", "pid": 0, "tid": th,
                    "ts": a as f64 / 1000.0, "dur": (b - a) as f64 / 1000.0,
                    "args": { "step": s, "node": st.name },
                })
            })
            .collect();
        serde_json::json!({ "traceEvents": ev, "displayTimeUnit": "ms" })
    }

    /// Emit what the configuration asked for (called when the executor is dropped).
    pub fn finish(&self) {
        if self.runs == 0 {
            return;
        }
        match Some(&self.output) {
            Some(ProfileOutput::Table) => eprintln!("{}", self.table()),
            Some(ProfileOutput::Json(p)) => {
                if let Err(e) = std::fs::write(p, self.to_json().to_string()) {
                    eprintln!("fathom: cannot write profile {p}: {e}");
                }
            }
            Some(ProfileOutput::Trace(p)) => {
                if let Err(e) = std::fs::write(p, self.chrome_trace().to_string()) {
                    eprintln!("fathom: cannot write trace {p}: {e}");
                }
            }
            None => {}
        }
    }
}

/// The markdown table of `rows` (largest time first) under the line `head`, per-token columns
/// divided by `tokens` — shared by the executor's profiler and the session's summary.
pub fn render_table(head: &str, rows: &[ProfileRow], tokens: f64) -> String {
    let total: u64 = rows.iter().map(|r| r.ns).sum::<u64>().max(1);
    let tok = tokens.max(1.0);
    let mut s = format!("{head}\n");
    s.push_str("| op / subsystem | tensor types | calls | calls/tok | ms | ms/tok | share | GB/s | experts/tok |\n");
    s.push_str("|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for r in rows {
        let ms = r.ns as f64 / 1e6;
        let gbs = if r.bytes > 0 && r.ns > 0 {
            format!("{:.2}", r.bytes as f64 / r.ns as f64)
        } else {
            String::new()
        };
        let experts = if r.op == "MUL_MAT_ID" {
            format!("{:.2}", r.experts as f64 / tok)
        } else {
            String::new()
        };
        s.push_str(&format!(
            "| {} | {} | {} | {:.1} | {:.3} | {:.4} | {:.1}% | {} | {} |\n",
            r.op,
            r.types,
            r.calls,
            r.calls as f64 / tok,
            ms,
            ms / tok,
            100.0 * r.ns as f64 / total as f64,
            gbs,
            experts
        ));
    }
    s.push_str(&format!(
        "| total | | | | {:.3} | {:.4} | 100% | | |\n",
        total as f64 / 1e6,
        total as f64 / 1e6 / tok
    ));
    s
}

/// The JSON objects of `rows` (the shape of `FATHOM_PROFILE_OPS=json:PATH`).
pub fn rows_json(rows: &[ProfileRow], tokens: f64) -> Vec<serde_json::Value> {
    let tok = tokens.max(1.0);
    rows.iter()
        .map(|r| {
            serde_json::json!({
                "op": r.op, "types": r.types, "calls": r.calls, "calls_per_tok": r.calls as f64 / tok,
                "ms": r.ns as f64 / 1e6, "ms_per_tok": r.ns as f64 / 1e6 / tok,
                "gbs": if r.ns > 0 && r.bytes > 0 { r.bytes as f64 / r.ns as f64 } else { 0.0 },
                "experts_per_tok": r.experts as f64 / tok,
            })
        })
        .collect()
}
