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
    /// What the expert cache did over the same runs (`--ram`), if the model has one.
    pub experts: Option<crate::weights::ExpertCacheStats>,
}

impl ProfileSummary {
    /// The table, in the columns of `FATHOM_PROFILE_OPS=1`.
    pub fn table(&self) -> String {
        let head = format!(
            "fathom op profile: {} runs, {} tokens, {} threads, {} graphs",
            self.runs, self.tokens, self.threads, self.graphs
        );
        let mut t = backends::profiler::render_table(&head, &self.rows, self.tokens as f64);
        if let Some(x) = &self.experts {
            let per = |v: f64| v / self.tokens.max(1) as f64;
            t.push_str(&format!(
                "\nexpert cache: {:.1}% hits ({} hits, {} misses), {:.1} MiB read per token, \
                 {:.2} GB/s while reading, I/O wait {:.2} ms per token, {} of {} guesses used\n",
                100.0 * x.hit_rate(),
                x.hits,
                x.misses,
                per(x.bytes_read as f64) / (1u64 << 20) as f64,
                x.bytes_read as f64 / 1e9 / x.busy_secs.max(1e-9),
                per(1e3 * x.wait_secs),
                x.guess_used,
                x.guessed
            ));
        }
        t
    }

    /// The rows as JSON (the shape of `FATHOM_PROFILE_OPS=json:PATH`).
    pub fn to_json(&self) -> serde_json::Value {
        let rows = backends::profiler::rows_json(&self.rows, self.tokens as f64);
        let experts = self.experts.as_ref().map(|x| {
            serde_json::json!({
                "hits": x.hits, "misses": x.misses, "wasted": x.wasted,
                "bytes_read": x.bytes_read, "busy_secs": x.busy_secs, "wait_secs": x.wait_secs,
                "guessed": x.guessed, "guess_used": x.guess_used,
            })
        });
        serde_json::json!({
            "runs": self.runs, "tokens": self.tokens, "threads": self.threads,
            "graphs": self.graphs, "ops": rows, "expert_cache": experts,
        })
    }
}

#[derive(Debug, Default)]
pub(super) struct ProfileAcc {
    pub(super) rows: BTreeMap<(String, String), ProfileEntry>,
    pub(super) runs: u64,
    pub(super) tokens: u64,
    pub(super) graphs: u64,
    /// The expert cache's counters when the profile (re)started.
    pub(super) experts_start: Option<crate::weights::ExpertCacheStats>,
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

    /// The summary; `experts_now`: the expert cache's counters now (if the model has one).
    pub(super) fn summary(
        &self,
        threads: usize,
        experts_now: Option<crate::weights::ExpertCacheStats>,
    ) -> ProfileSummary {
        let mut rows: Vec<ProfileEntry> = self.rows.values().cloned().collect();
        rows.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.op.cmp(&b.op)));
        ProfileSummary {
            rows,
            runs: self.runs,
            tokens: self.tokens,
            threads,
            graphs: self.graphs,
            experts: experts_now.map(|now| match &self.experts_start {
                Some(start) => now.since(start),
                None => now,
            }),
        }
    }
}
