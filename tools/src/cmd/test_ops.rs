//! `fathom test-ops`: fathom's test-backend-ops. Runs every op's cases on the optimized
//! executor at several thread counts (barrier elision on and off) against the reference
//! executor and prints one line per case; `--perf` also times the optimized executor and
//! reports GB/s (bytes of sources and outputs touched) and GFLOP/s (matmuls).

use anyhow::{bail, Result};
use backends::testops;
use graph::{NodeKind, OpKind};

/// Arguments of `fathom test-ops`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only this op (e.g. MUL_MAT, ROPE).
    #[arg(short = 'o', long = "op")]
    op: Option<String>,
    /// Time each case and report GB/s and GFLOP/s.
    #[arg(long)]
    perf: bool,
    /// Only the quick cases (what `cargo test` runs).
    #[arg(long)]
    quick: bool,
    /// Thread counts to test, comma separated.
    #[arg(short = 't', long, default_value = "1,2,3", value_delimiter = ',')]
    threads: Vec<usize>,
    /// List the ops and their case counts, then exit.
    #[arg(long)]
    list: bool,
}

fn work_of(case: &ops::Case) -> (f64, f64) {
    let g = &case.graph;
    let (mut bytes, mut flops) = (0f64, 0f64);
    for n in g.nodes() {
        if let NodeKind::Op { op, srcs } = &n.kind {
            if op.view_offset().is_some() {
                continue;
            }
            bytes += n.desc.nbytes() as f64;
            bytes += srcs.iter().map(|s| g.desc(*s).nbytes() as f64).sum::<f64>();
            if op.kind() == OpKind::MulMat {
                let w = g.desc(srcs[0]);
                flops += 2.0 * (w.ne[0] * w.ne[1]) as f64 * g.desc(srcs[1]).nrows() as f64;
            }
        }
    }
    (bytes, flops)
}

/// Run the command.
pub fn run(args: &Args) -> Result<()> {
    if args.list {
        for &k in OpKind::ALL {
            let c = ops::cases(k);
            println!(
                "{:<16} {:>3} cases ({} quick)",
                k.name(),
                c.len(),
                c.iter().filter(|c| c.quick).count()
            );
        }
        return Ok(());
    }
    if let Some(o) = &args.op {
        if !OpKind::ALL.iter().any(|k| k.name().eq_ignore_ascii_case(o)) {
            bail!("unknown op '{o}' (see `fathom test-ops --list`)");
        }
    }
    if args.threads.is_empty() || args.threads.contains(&0) {
        bail!("--threads needs positive counts");
    }
    let missing = testops::uncovered();
    let (mut pass, mut fail) = (0usize, 0usize);
    for &k in OpKind::ALL {
        if args
            .op
            .as_ref()
            .is_some_and(|o| !o.eq_ignore_ascii_case(k.name()))
        {
            continue;
        }
        for case in ops::cases(k) {
            if args.quick && !case.quick {
                continue;
            }
            let (bytes, flops) = work_of(&case);
            for r in testops::run_case(k, &case, &args.threads, args.perf) {
                let status = if r.error.is_none() { "OK  " } else { "FAIL" };
                let mut line = format!(
                    "{status} {:<12} {:<60} t={} elide={:<5} nmse={:.2e}",
                    r.op, r.name, r.threads, r.elide, r.nmse
                );
                if let Some(ns) = r.ns {
                    line.push_str(&format!(" {:>9.1} us {:>7.2} GB/s", ns / 1e3, bytes / ns));
                    if flops > 0.0 {
                        line.push_str(&format!(" {:>7.2} GFLOP/s", flops / ns));
                    }
                }
                if let Some(e) = &r.error {
                    line.push_str(&format!("  <- {e}"));
                    fail += 1;
                } else {
                    pass += 1;
                }
                println!("{line}");
            }
        }
    }
    for k in &missing {
        println!("FAIL {:<12} has no test-ops case", k.name());
    }
    println!("{pass} passed, {} failed", fail + missing.len());
    if fail + missing.len() > 0 {
        bail!("test-ops: {} failures", fail + missing.len());
    }
    Ok(())
}
