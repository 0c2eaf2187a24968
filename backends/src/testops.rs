//! test-ops: run every op case on the optimized executor at several thread counts (with
//! barrier elision on and off) and compare with the reference executor: NMSE within the
//! case's limit, NaN/Inf in the same places. A coverage check fails when an op has no case.
//! Guard bytes: the optimized executor plans a guard region after every arena buffer, fills
//! it with a pattern before the run and checks it afterwards.

use crate::{ExecConfig, Executor};
use graph::OpKind;
use ops::case::nmse;
use ops::Case;
use std::time::Instant;

/// Result of one case at one thread count.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// Op kind.
    pub op: &'static str,
    /// Case description.
    pub name: String,
    /// Threads.
    pub threads: usize,
    /// Barrier elision on.
    pub elide: bool,
    /// Measured NMSE.
    pub nmse: f64,
    /// Limit.
    pub max_nmse: f64,
    /// Failure reason, if any.
    pub error: Option<String>,
    /// Mean time per run in ns (perf mode).
    pub ns: Option<f64>,
}

fn cfg(threads: usize, elide: bool) -> ExecConfig {
    ExecConfig {
        threads,
        cpus: None,
        pin: false,
        elide_barriers: elide,
        spin: 2000,
        profile: None,
        guards: true,
        ..ExecConfig::default()
    }
}

fn run_exec(mut e: Executor, case: &Case) -> (Executor, Vec<f32>, Option<String>) {
    for (n, b) in &case.inputs {
        e.set_input(n, b).expect("case inputs match their graph");
    }
    e.fill_guards();
    e.run();
    let broken = e.broken_guards();
    let out = e.output_f32("out").expect("case has an output");
    let err = (!broken.is_empty()).then(|| format!("guard bytes overwritten at {broken:?}"));
    (e, out, err)
}

/// Compare `got` with `want`: same NaN/Inf positions, NMSE within `limit`.
pub fn compare(got: &[f32], want: &[f32], limit: f64) -> (f64, Option<String>) {
    if got.len() != want.len() {
        return (
            f64::INFINITY,
            Some(format!("length {} vs {}", got.len(), want.len())),
        );
    }
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        if a.is_nan() != b.is_nan()
            || (a.is_infinite() != b.is_infinite())
            || (a.is_infinite() && a != b)
        {
            return (
                f64::INFINITY,
                Some(format!("non-finite mismatch at {i}: {a} vs {b}")),
            );
        }
    }
    let e = nmse(got, want);
    (
        e,
        (e > limit).then(|| format!("nmse {e:.3e} > {limit:.1e}")),
    )
}

/// Run one case against the reference at each thread count, elision on and off.
pub fn run_case(op: OpKind, case: &Case, threads: &[usize], perf: bool) -> Vec<CaseResult> {
    let (_, want, _) = run_exec(Executor::reference(case.graph.clone()), case);
    let mut out = Vec::new();
    for &t in threads {
        for elide in [true, false] {
            let (mut e, got, guard_err) =
                run_exec(Executor::new(case.graph.clone(), cfg(t, elide)), case);
            let (err, cmp_err) = compare(&got, &want, case.max_nmse);
            let error = guard_err.or(cmp_err);
            let ns = perf.then(|| {
                let reps = 5;
                let t0 = Instant::now();
                for _ in 0..reps {
                    e.run();
                }
                t0.elapsed().as_nanos() as f64 / reps as f64
            });
            out.push(CaseResult {
                op: op.name(),
                name: case.name.clone(),
                threads: t,
                elide,
                nmse: err,
                max_nmse: case.max_nmse,
                error,
                ns,
            });
        }
    }
    out
}

/// Every op kind that has no case (the coverage check).
pub fn uncovered() -> Vec<OpKind> {
    OpKind::ALL
        .iter()
        .copied()
        .filter(|&k| ops::cases(k).is_empty())
        .collect()
}

/// Run all cases (quick ones only when `quick`), optionally only for op `filter`.
pub fn run_all(
    filter: Option<&str>,
    quick: bool,
    threads: &[usize],
    perf: bool,
) -> Vec<CaseResult> {
    let mut res = Vec::new();
    for &k in OpKind::ALL {
        if filter.is_some_and(|f| !f.eq_ignore_ascii_case(k.name())) {
            continue;
        }
        for case in ops::cases(k) {
            if quick && !case.quick {
                continue;
            }
            res.extend(run_case(k, &case, threads, perf));
        }
    }
    res
}
