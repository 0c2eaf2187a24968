//! `fathom bench`: prefill and decode throughput like llama-bench (mean ± sd over `-r`
//! repetitions), plus for decode the weight bytes a token touches and the fraction of the
//! machine's measured memory bandwidth that represents (`--membw` measures it alone;
//! `--matvec` measures each type's matvec against it, see [`super::bench_matvec`]).
//!
//! - prefill test `pp<N>`: a fresh sequence, N random tokens in `--ubatch` chunks, timed;
//! - with `-d D` (like llama-bench's `-d`), each test runs after D tokens already in the
//!   cache (`pp512 @ d8192`): the D tokens are evaluated once, untimed, and their state
//!   restored before every repetition;
//! - decode test `tg<N>`: a fresh sequence, one token of prefill, then N timed decode steps;
//!   with `--parallel S`, `tg<N>x<S>`: S sequences (session slots, as `fathom serve
//!   --parallel` runs them) decoded together, N batched steps, tokens/s of all S together.
//!
//! Bytes per decode token: every dense weight once, one row of the token embedding, and of
//! each routed-expert stack only `n_expert_used` experts' share — the bytes a memory-bound
//! decoder must stream per token. `floor_fraction` = bytes/token × tok/s ÷ bandwidth.
//! Both are of the file's bytes; with `--repack` the bytes as loaded (a repacked tensor is
//! larger) are reported beside them (`loaded_bytes_per_token`, `loaded_floor_fraction`).

use crate::load::{self, ModelArgs};
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// Arguments of `fathom bench`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The model (not needed with `--membw` alone or `--matvec`), threads, context (default:
    /// the longest test plus 2), repacks.
    #[command(flatten)]
    model: ModelArgs,
    /// Prompt lengths to test, comma separated (0 = none).
    #[arg(short = 'p', long, value_delimiter = ',', default_value = "64,512")]
    prompt: Vec<usize>,
    /// Generation lengths to test, comma separated (0 = none).
    #[arg(short = 'n', long, value_delimiter = ',', default_value = "32")]
    gen: Vec<usize>,
    /// Repetitions per test.
    #[arg(short = 'r', long, default_value_t = 3)]
    reps: usize,
    /// Tokens already in the cache before each test, comma separated (llama-bench's `-d`).
    #[arg(
        short = 'd',
        long = "depth",
        value_delimiter = ',',
        default_value = "0"
    )]
    depth: Vec<usize>,
    /// Prompt chunk size (llama-bench's default n_ubatch; MoE experts see more tokens
    /// per chunk, so their weight rows are unpacked for more columns).
    #[arg(short = 'u', long, default_value_t = 512)]
    ubatch: usize,
    /// Print one JSON array (llama-bench field names plus ours).
    #[arg(long)]
    json: bool,
    /// Measure the memory bandwidth (and, without -m, only that).
    #[arg(long)]
    membw: bool,
    /// Instead of the tests: the sequential read bandwidth of the file system holding `-m`'s
    /// file (8 MiB reads bypassing the page cache, up to 2 GiB per pass, `-r` passes).
    #[arg(long, conflicts_with = "matvec")]
    diskbw: bool,
    /// Instead of a model: each type's decode matvec from DRAM against the bandwidth,
    /// alternating, `-r` rounds (comma-separated types, or `all`, the default).
    #[arg(long, num_args = 0..=1, default_missing_value = "all")]
    matvec: Option<String>,
    /// With `--matvec`: elements per weight row (a multiple of each type's block; the
    /// 1024-wide `attn_q_b` rows, for instance, run at a different rate than 4096-wide ones).
    #[arg(long, default_value_t = super::bench_matvec::DEFAULT_ROW, requires = "matvec")]
    row: usize,
    /// Decode this many sequences together (one batched graph per step, as `fathom serve
    /// --parallel` does); the decode rate is of all of them together.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    parallel: u64,
    /// Instead of the tests: fill one sequence to this many tokens a prompt chunk (`-u`) at a
    /// time, timing every chunk: prefill at each depth, the prompt rate so far, and `-n`
    /// tokens of decode at each measured depth (like ik_llama.cpp's `llama-sweep-bench`).
    #[arg(long, conflicts_with_all = ["depth", "parallel", "prompt"])]
    sweep: Option<usize>,
    /// With `--sweep`: measure every Nth chunk (the others are filled and timed for the
    /// prompt rate only).
    #[arg(long, default_value_t = 1, requires = "sweep")]
    sweep_stride: usize,
    /// Live MoE configuration (TOML or `.bin`), applied before the tests and re-checked before
    /// each test; without a value `/tmp/dsv4_moe_cfg.bin`.
    #[arg(long, num_args = 0..=1, default_missing_value = "/tmp/dsv4_moe_cfg.bin")]
    moe_config: Option<PathBuf>,
}

/// Bytes `measure_membw` reads: four times the L3 Linux reports, at least 1 GiB and at most
/// 4 GiB (a buffer only about twice a 480 MiB L3 read up to 29 GB/s against 24–26).
pub fn membw_bytes() -> usize {
    let l3 = backends::topology::l3_bytes().unwrap_or(0);
    l3.saturating_mul(4).clamp(1 << 30, 4 << 30)
}

/// Sustained read bandwidth in GB/s: `threads` threads each sum a disjoint part of a
/// buffer much larger than the last-level cache ([`membw_bytes`]), best of 3 passes with
/// and 3 without software prefetch (alternating). The prefetching read is there because the
/// matvec kernels prefetch ([`quant::simd::PREFETCH_DISTANCE`]): on a VM whose hardware
/// prefetchers run short of the memory latency, the plain read alone measured less than the
/// kernels then stream (10.3 against 13.8 GB/s for Q6_K, one after the other).
pub fn measure_membw(threads: usize) -> f64 {
    let r = ReadBuffer::new();
    (0..6)
        .map(|pass| r.pass(threads, pass % 2 == 0))
        .fold(0f64, f64::max)
}

/// The buffer [`measure_membw`] reads ([`membw_bytes`] of it).
pub struct ReadBuffer(Vec<u64>);

impl ReadBuffer {
    /// A buffer of [`membw_bytes`], written once (so its pages exist).
    pub fn new() -> ReadBuffer {
        ReadBuffer(vec![1; membw_bytes() / 8])
    }

    /// Bytes in the buffer.
    pub fn bytes(&self) -> usize {
        self.0.len() * 8
    }

    /// One read of the whole buffer by `threads` threads, each summing a disjoint part with
    /// four accumulators (and, with `prefetch`, a software prefetch
    /// [`quant::simd::PREFETCH_DISTANCE`] bytes ahead); GB/s.
    pub fn pass(&self, threads: usize, prefetch: bool) -> f64 {
        let pd = if prefetch {
            quant::simd::PREFETCH_DISTANCE.max(64)
        } else {
            0
        };
        let t0 = Instant::now();
        let sums: Vec<u64> = std::thread::scope(|s| {
            let per = self.0.len().div_ceil(threads.max(1));
            let hs: Vec<_> = self
                .0
                .chunks(per)
                .map(|c| {
                    s.spawn(move || {
                        // four independent accumulators keep the loads in flight
                        let (mut a, mut b, mut x, mut y) = (0u64, 0u64, 0u64, 0u64);
                        for line in c.chunks_exact(8) {
                            quant::simd::prefetch_ahead(line.as_ptr().cast(), 64, pd);
                            for q in line.chunks_exact(4) {
                                a = a.wrapping_add(q[0]);
                                b = b.wrapping_add(q[1]);
                                x = x.wrapping_add(q[2]);
                                y = y.wrapping_add(q[3]);
                            }
                        }
                        a ^ b ^ x ^ y
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap_or(0)).collect()
        });
        std::hint::black_box(sums);
        self.bytes() as f64 / t0.elapsed().as_secs_f64() / 1e9
    }
}

struct Row {
    test: String,
    n_prompt: usize,
    n_gen: usize,
    n_depth: usize,
    samples: Vec<f64>,
    /// What the expert cache did over the measured repetitions (with `--ram`), and the
    /// tokens and seconds they took.
    experts: Option<(models::weights::ExpertCacheStats, usize, f64)>,
}

/// What the expert cache did since the snapshot `x0` (the measured repetitions).
fn since(
    session: &models::session::Session,
    x0: Option<models::weights::ExpertCacheStats>,
) -> Option<models::weights::ExpertCacheStats> {
    cache_stats(session)
        .zip(x0)
        .map(|(now, start)| now.since(&start))
}

/// The expert cache's counters, with `--ram`.
fn cache_stats(session: &models::session::Session) -> Option<models::weights::ExpertCacheStats> {
    session.model().expert_cache().map(|c| c.stats())
}

fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len().max(1) as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = if v.len() > 1 {
        v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (m, var.sqrt())
}

/// `n` pseudo-random token ids below `vocab` (a fixed stream per `seed`).
pub(super) fn tokens(n: usize, vocab: usize, seed: u64) -> Vec<u32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % vocab.max(1) as u64) as u32
        })
        .collect()
}

/// Run the command (a closed stdout, e.g. `| head`, ends it quietly).
pub fn run(args: &Args, env: &crate::env::Env) -> Result<()> {
    match run_inner(args, env) {
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            Ok(())
        }
        r => r,
    }
}

fn run_inner(args: &Args, env: &crate::env::Env) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let opts = args.model.load_options(env)?;
    let exec = opts.exec.clone();
    let threads = exec.threads;
    if let Some(level) = env.cpu_level {
        eprintln!(
            "kernels of level {level} (FATHOM_CPU_LEVEL; this CPU: {})",
            quant::simd::CpuLevel::detect()
        );
    }
    if let Some(list) = &args.matvec {
        if args.model.model.is_some() {
            bail!("--matvec measures random weights: it takes no -m");
        }
        if args.reps == 0 {
            bail!("-r must be at least 1");
        }
        let types = super::bench_matvec::parse_types(list)?;
        if args.row == 0 {
            bail!("--row must be at least 1");
        }
        return super::bench_matvec::run(&types, args.row, &exec, args.reps, args.json, &mut out);
    }
    if args.diskbw {
        let Some(path) = &args.model.model else {
            bail!("--diskbw reads the model's file: give -m MODEL");
        };
        let d = super::bench_disk::measure(path, args.reps.max(1))?;
        let how = if d.direct {
            "O_DIRECT"
        } else {
            "buffered, cached pages dropped first: the file system refused O_DIRECT"
        };
        if args.json {
            writeln!(
                out,
                "{}",
                serde_json::json!([{ "test": "diskbw", "file": d.file, "bytes": d.bytes,
                    "direct": d.direct, "diskbw_gbs": d.best_gbs, "samples_gbs": d.passes }])
            )?;
        } else {
            writeln!(
                out,
                "disk read: {:.2} GB/s ({}, 8 MiB reads, {:.2} GiB of {}, best of {})",
                d.best_gbs,
                how,
                d.bytes as f64 / (1u64 << 30) as f64,
                d.file.display(),
                d.passes.len()
            )?;
        }
        return Ok(());
    }
    let Some(path) = &args.model.model else {
        if !args.membw {
            bail!("give -m MODEL (or --membw to measure the memory bandwidth only)");
        }
        let bw = measure_membw(threads);
        if args.json {
            writeln!(
                out,
                "{}",
                serde_json::json!([{ "test": "membw", "n_threads": threads, "membw_gbs": bw }])
            )?;
        } else {
            writeln!(
                out,
                "memory bandwidth: {bw:.2} GB/s ({threads} threads, {:.2} GiB read, best of 6)",
                membw_bytes() as f64 / (1u64 << 30) as f64
            )?;
        }
        return Ok(());
    };
    if args.reps == 0 {
        bail!("-r must be at least 1");
    }
    let model = load::open(path, &opts)?;
    let info = model.info().clone();
    let Some(wb) = model.weight_bytes() else {
        bail!(
            "{}: bench needs the weight bytes a token reads, known for GGUF files",
            path.display()
        );
    };
    let size = wb.total;
    let bpt = wb.per_token;
    // what decode streams when tensors are repacked at load (= bpt without --repack)
    let lbpt = wb.per_token_loaded;
    let repacked = lbpt != bpt;
    let want_decode = args.gen.iter().any(|&n| n > 0);
    let bw = (args.membw || want_decode).then(|| measure_membw(threads));
    let ctx = opts.ctx.unwrap_or_else(|| {
        let longest = args.prompt.iter().chain(args.gen.iter()).copied().max();
        let deepest = args.depth.iter().copied().max().unwrap_or(0);
        let deepest = deepest.max(args.sweep.unwrap_or(0));
        longest
            .unwrap_or(1)
            .saturating_add(deepest)
            .saturating_add(2)
    });
    let mut session =
        load::session(model, &opts, ctx).with_context(|| path.display().to_string())?;
    session.set_ubatch(args.ubatch);
    let par = args.parallel as usize;
    if par > 1 {
        session
            .set_slots(par)
            .with_context(|| format!("--parallel {par}"))?;
    }
    let mut moe = args.moe_config.clone().map(|p| {
        let knobs = Arc::new(graph::knobs::MoeKnobs::new(info.n_layer));
        session.set_moe_knobs(Some(knobs.clone()));
        (models::moe_config::MoeWatcher::new(p), knobs)
    });
    let moe_shape = info.moe;
    if moe.is_some() && moe_shape.is_none() {
        bail!(
            "{}: --moe-config: the model has no routed experts",
            path.display()
        );
    }
    // `now`: at start-up, a configuration already in place applies before the first token
    let mut poll_moe = |now: bool| {
        if let (Some((w, knobs)), Some(shape)) = (moe.as_mut(), moe_shape.as_ref()) {
            let event = if now {
                w.poll_now(shape, knobs)
            } else {
                w.poll(shape, knobs)
            };
            match event {
                Some(models::moe_config::MoeEvent::Applied(c)) => {
                    eprintln!("moe: {} now in force: {c}", w.path().display())
                }
                Some(models::moe_config::MoeEvent::Rejected(e)) => {
                    eprintln!("moe: rejected, keeping the last good configuration: {e}")
                }
                Some(models::moe_config::MoeEvent::Removed) => eprintln!(
                    "moe: {} removed, back to the model's own routing",
                    w.path().display()
                ),
                None => {}
            }
        }
    };
    let name = path
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .unwrap_or_default();
    if let Some(n) = args.sweep {
        poll_moe(true);
        let sweep = super::bench_sweep::Sweep {
            tokens: n,
            stride: args.sweep_stride,
            gen: args.gen.iter().copied().max().unwrap_or(0),
            ubatch: args.ubatch,
        };
        let how = (name.as_str(), threads, args.json);
        return super::bench_sweep::run(&mut session, &sweep, info.n_vocab, how, &mut out);
    }
    let mut rows = Vec::new();
    for &d in &args.depth {
        // the depth's state, evaluated once (untimed) and restored before every repetition
        let base = if d > 0 {
            session.select(0)?;
            session.reset();
            session.prefill(&tokens(d, info.n_vocab, 99))?;
            Some(session.state())
        } else {
            None
        };
        let start = |session: &mut models::session::Session, k: usize| -> Result<()> {
            session.select(k)?;
            match &base {
                Some(b) => session.set_state(b)?,
                None => session.reset(),
            }
            Ok(())
        };
        let at = |test: String| {
            if d > 0 {
                format!("{test} @ d{d}")
            } else {
                test
            }
        };
        for &p in args.prompt.iter().filter(|&&p| p > 0) {
            poll_moe(true);
            let toks = tokens(p, info.n_vocab, p as u64);
            start(&mut session, 0)?;
            session.prefill(&toks)?; // warm-up: builds the chunk graphs, pages weights in
            session.clear_profile(); // with FATHOM_PROFILE_OPS: the measured runs only
            let x0 = cache_stats(&session);
            let mut samples = Vec::new();
            let mut secs = 0.0;
            for _ in 0..args.reps {
                start(&mut session, 0)?;
                let t0 = Instant::now();
                session.prefill(&toks)?;
                secs += t0.elapsed().as_secs_f64();
                samples.push(p as f64 / t0.elapsed().as_secs_f64());
            }
            rows.push(Row {
                test: at(format!("pp{p}")),
                n_prompt: p,
                n_gen: 0,
                n_depth: d,
                samples,
                experts: since(&session, x0).map(|c| (c, p * args.reps, secs)),
            });
        }
        for &n in args.gen.iter().filter(|&&n| n > 0) {
            poll_moe(true);
            let mut samples = Vec::new();
            let mut secs = 0.0;
            let mut x0 = None;
            for rep in 0..=args.reps {
                // each slot starts from its own token, so the slots route to different experts
                for k in 0..par {
                    start(&mut session, k)?;
                    session.prefill(&tokens(1, info.n_vocab, 7 + k as u64))?;
                }
                // pseudo-random tokens, as llama-bench feeds: a random-weight model's argmax
                // repeats one token, whose experts would all be cache hits
                let feed = tokens(n * par, info.n_vocab, 1000 + rep as u64);
                let t0 = Instant::now();
                for step in feed.chunks(par) {
                    let steps: Vec<(usize, u32)> = step.iter().copied().enumerate().collect();
                    session.decode_slots(&steps)?;
                }
                if rep > 0 {
                    // rep 0 warms up
                    secs += t0.elapsed().as_secs_f64();
                    samples.push((n * par) as f64 / t0.elapsed().as_secs_f64());
                } else {
                    session.clear_profile();
                }
                if rep == 0 {
                    x0 = cache_stats(&session);
                }
            }
            session.select(0)?;
            rows.push(Row {
                test: at(if par > 1 {
                    format!("tg{n}x{par}")
                } else {
                    format!("tg{n}")
                }),
                n_prompt: 0,
                n_gen: n,
                n_depth: d,
                samples,
                experts: since(&session, x0).map(|c| (c, n * par * args.reps, secs)),
            });
        }
    }
    if args.json {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                let (avg, sd) = mean_sd(&r.samples);
                // (a batched step's bytes depend on how many experts its tokens share: no
                // floor for it)
                let decode = r.n_gen > 0 && par == 1;
                serde_json::json!({
                    "model_filename": name, "model_size": size, "n_threads": threads, "n_parallel": par,
                    "n_prompt": r.n_prompt, "n_gen": r.n_gen, "n_depth": r.n_depth, "test": r.test,
                    "avg_ts": avg, "stddev_ts": sd, "samples_ts": r.samples,
                    "bytes_per_token": if decode { Some(bpt) } else { None },
                    "membw_gbs": bw,
                    "floor_fraction": match (decode, bw) { (true, Some(bw)) => Some(bpt as f64 * avg / 1e9 / bw), _ => None },
                    "loaded_bytes_per_token": if decode && repacked { Some(lbpt) } else { None },
                    "loaded_floor_fraction": match (decode && repacked, bw) { (true, Some(bw)) => Some(lbpt as f64 * avg / 1e9 / bw), _ => None },
                    "expert_cache": r.experts.as_ref().map(|(c, toks, secs)| serde_json::json!({
                        "budget": c.budget, "hits": c.hits, "misses": c.misses, "wasted": c.wasted,
                        "guessed": c.guessed, "guess_used": c.guess_used,
                        "hit_rate": c.hit_rate(), "bytes_read": c.bytes_read,
                        "bytes_read_per_token": c.bytes_read as f64 / (*toks).max(1) as f64,
                        "disk_gbs": c.bytes_read as f64 / 1e9 / secs.max(1e-9),
                        "busy_gbs": c.bytes_read as f64 / 1e9 / c.busy_secs.max(1e-9),
                        "wait_s_per_token": c.wait_secs / (*toks).max(1) as f64,
                        "peak_bytes": c.peak, "direct": c.direct,
                    })),
                    "peak_rss": crate::mem::rss().peak,
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    let bw_name = bw.map_or("bandwidth".into(), |b| format!("{b:.1} GB/s"));
    if repacked {
        writeln!(
            out,
            "| model | size | threads | test | t/s | GB/s of weights | % of {bw_name} | % as loaded |"
        )?;
        writeln!(out, "|---|---:|---:|---|---:|---:|---:|---:|")?;
    } else {
        writeln!(
            out,
            "| model | size | threads | test | t/s | GB/s of weights | % of {bw_name} |"
        )?;
        writeln!(out, "|---|---:|---:|---|---:|---:|---:|")?;
    }
    for r in &rows {
        let (avg, sd) = mean_sd(&r.samples);
        let pct = |bytes: u64| {
            let g = bytes as f64 * avg / 1e9;
            bw.map_or(String::new(), |b| format!("{:.1}%", 100.0 * g / b))
        };
        let (gbs, frac, lfrac) = if r.n_gen > 0 && par == 1 {
            (
                format!("{:.2}", bpt as f64 * avg / 1e9),
                pct(bpt),
                pct(lbpt),
            )
        } else {
            Default::default()
        };
        let extra = if repacked {
            format!(" {lfrac} |")
        } else {
            String::new()
        };
        writeln!(
            out,
            "| {name} | {:.2} GiB | {threads} | {} | {avg:.2} ± {sd:.2} | {gbs} | {frac} |{extra}",
            size as f64 / (1u64 << 30) as f64,
            r.test
        )?;
    }
    if rows.iter().any(|r| r.experts.is_some()) {
        writeln!(
            out,
            "\n| test | expert hits | MiB read/token | disk GB/s | GB/s while reading | I/O wait ms/token | guesses used | cache peak GiB |"
        )?;
        writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|")?;
        for r in &rows {
            if let Some((c, toks, secs)) = &r.experts {
                let toks = (*toks).max(1) as f64;
                writeln!(
                    out,
                    "| {} | {:.1}% | {:.1} | {:.2} | {:.2} | {:.1} | {:.0}% of {} | {:.2} |",
                    r.test,
                    100.0 * c.hit_rate(),
                    c.bytes_read as f64 / toks / (1u64 << 20) as f64,
                    c.bytes_read as f64 / 1e9 / secs.max(1e-9),
                    c.bytes_read as f64 / 1e9 / c.busy_secs.max(1e-9),
                    1e3 * c.wait_secs / toks,
                    100.0 * c.guess_used as f64 / c.guessed.max(1) as f64,
                    c.guessed,
                    c.peak as f64 / (1u64 << 30) as f64
                )?;
            }
        }
    }
    if let Some(peak) = crate::mem::rss().peak {
        eprintln!("peak RSS {:.2} GiB", peak as f64 / (1u64 << 30) as f64);
    }
    eprintln!(
        "decode reads {:.1} MiB of the file's weights per token",
        bpt as f64 / (1u64 << 20) as f64
    );
    if repacked {
        eprintln!(
            "  ({:.1} MiB as loaded with --repack: the last column is against those bytes)",
            lbpt as f64 / (1u64 << 20) as f64
        );
    }
    Ok(())
}
