//! The per-op profile of a session: every executor's timings folded into one
//! [`ProfileSummary`] (a session builds one executor per chunk length).

use backends::Executor;
use std::collections::BTreeMap;

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
pub(super) struct ProfileAcc {
    pub(super) rows: BTreeMap<(String, String), ProfileEntry>,
    pub(super) runs: u64,
    pub(super) tokens: u64,
    pub(super) graphs: u64,
}

impl ProfileAcc {
    /// Fold an executor's timings in and clear them (so its drop prints nothing).
    pub(super) fn harvest(&mut self, exec: &mut Executor) {
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

    pub(super) fn summary(&self, threads: usize) -> ProfileSummary {
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
