//! `fathom bench --matvec [TYPES]`: each weight type's decode matvec streamed from DRAM,
//! side by side with the bandwidth read, and the fraction of the bandwidth it reaches (issue
//! 5's "every matvec ≥ 80% of the measured bandwidth").
//!
//! Per type: one MUL_MAT node with `--row` elements per row (default 4096) and
//! [`super::bench::membw_bytes`] of random weights (generated as `fathom synth` writes that
//! type; the repacked `_X` types from random IQ1_S / IQ2_XXS / IQ1_M / Q2_0 blocks), one
//! activation column, on the executor with `-t` threads.
//! Each of `-r` rounds reads the bandwidth buffer (best of a plain and a prefetching pass),
//! then runs the matvec twice per `--kernels` choice and `--prefetch` distance; the table
//! gives medians over the rounds and the median of each round's own fraction. Alternating
//! in one process is what makes the fraction mean something on a VM whose speed drifts
//! between minutes.

use super::bench::ReadBuffer;
use anyhow::{anyhow, bail, Context, Result};
use backends::{ExecConfig, Executor};
use graph::{Graph, TensorDesc, WeightData};
use quant::DType;
use std::io::Write;
use std::time::Instant;

/// Default row length of the matvecs (V4-Flash's hidden size).
pub const DEFAULT_ROW: usize = 4096;

/// The weight types `--matvec all` measures: issue 5's kernel list plus the repacked layouts.
pub const ALL: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::Q8_0,
    DType::Q6_K,
    DType::Q5_K,
    DType::Q4_K,
    DType::Q2_0,
    DType::Q2_0_X,
    DType::MXFP4,
    DType::IQ2_XXS,
    DType::IQ2_XXS_X,
    DType::IQ1_S,
    DType::IQ1_S_X,
    DType::IQ1_M,
    DType::IQ1_M_X,
];

/// Parses `--matvec`'s list (type names as GGUF spells them, or `all`).
pub fn parse_types(list: &str) -> Result<Vec<DType>> {
    if list == "all" {
        return Ok(ALL.to_vec());
    }
    list.split(',')
        .map(|name| {
            let t = DType::from_name(name.trim())
                .ok_or_else(|| anyhow!("--matvec: unknown type {name:?}"))?;
            if !ALL.contains(&t) {
                bail!(
                    "--matvec: no matvec test for {name} (types: {})",
                    ALL.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
                );
            }
            Ok(t)
        })
        .collect()
}

/// Random weights of `t`, `rows` rows of `k` elements.
fn weights(t: DType, k: usize, rows: usize) -> Result<Vec<u8>> {
    let n = (rows * k) as u64;
    let gen = |t: DType| {
        super::synth::random_weights(t, n, 0x5eed ^ t as u64)
            .ok_or_else(|| anyhow!("--matvec: cannot generate {t} weights"))
    };
    let bytes = |t: DType| quant::bytes_for(t, rows * k).context("--matvec: weight size");
    // a repacked layout: its source type's random weights, converted
    Ok(match quant::codec::repack::repack_source(t) {
        Some((from, convert)) => {
            let mut w = vec![0u8; bytes(t)?];
            convert(&gen(from)?, &mut w);
            w
        }
        None => gen(t)?,
    })
}

/// A one-node graph `y = w · x` (`k`-element rows) on the executor, its input set.
fn executor(t: DType, k: usize, rows: usize, threads: usize) -> Result<Executor> {
    let mut g = Graph::new();
    let desc = TensorDesc::new(t, &[k, rows])?;
    let w = g.weight("w", desc, WeightData::from_vec(weights(t, k, rows)?))?;
    let x = g.input("x", TensorDesc::f32(&[k, 1])?)?;
    let y = g.mul_mat(w, x)?;
    g.output("y", y)?;
    let cfg = ExecConfig {
        threads,
        ..ExecConfig::default()
    };
    let mut e = Executor::new(g, cfg);
    let xs: Vec<f32> = (0..k)
        .map(|i| ((i * 31) % 200) as f32 / 100.0 - 1.0)
        .collect();
    e.set_input_f32("x", &xs)?;
    Ok(e)
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied().unwrap_or(0.0)
}

/// One measured (type, prefetch distance).
struct Measured {
    t: DType,
    kernel: String,
    bytes: usize,
    prefetch: usize,
    matvec: Vec<f64>,
    read: Vec<f64>,
}

/// The decode kernels `--kernels` asks for, per type: `None` for the type's current choice
/// (no `--kernels`, or none of the names is listed for the type), else the listed names in
/// `rows_available` order. A name that no measured type lists is an error.
fn kernel_choices(
    types: &[DType],
    kernels: Option<&str>,
) -> Result<Vec<Vec<Option<&'static str>>>> {
    let Some(spec) = kernels else {
        return Ok(types.iter().map(|_| vec![None]).collect());
    };
    let wanted: Vec<&str> = spec
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .collect();
    let mut seen = vec![false; wanted.len()];
    let choices = types
        .iter()
        .map(|&t| {
            let names: Vec<Option<&'static str>> = quant::simd::rows_available(t)
                .iter()
                .filter(|(name, _)| {
                    let hit = wanted.iter().position(|w| w == name);
                    if let Some(i) = hit {
                        seen[i] = true;
                    }
                    spec == "all" || hit.is_some()
                })
                .map(|(name, _)| Some(*name))
                .collect();
            if names.is_empty() {
                vec![None]
            } else {
                names
            }
        })
        .collect();
    if spec != "all" {
        if let Some(i) = seen.iter().position(|s| !s) {
            bail!(
                "--kernels: no measured type has a decode kernel {:?} on this CPU",
                wanted[i]
            );
        }
    }
    Ok(choices)
}

/// The label of the kernel a matvec of `t` runs with `choice` in force.
fn kernel_label(t: DType, choice: Option<&str>) -> String {
    let rows = quant::simd::rows_available(t);
    let chosen = choice.or_else(|| quant::simd::rows_kernel_choice(t));
    match chosen.or_else(|| rows.first().map(|k| k.0)) {
        Some(name) => format!("{name} rows"),
        None => quant::simd::available(t)
            .first()
            .map_or("reference".into(), |k| k.0.to_string()),
    }
}

/// Runs the matvec tests with `k`-element rows and prints their table (or JSON).
#[allow(clippy::too_many_arguments)]
pub fn run(
    types: &[DType],
    k: usize,
    prefetch: &[usize],
    kernels: Option<&str>,
    threads: usize,
    rounds: usize,
    json: bool,
    out: &mut impl Write,
) -> Result<()> {
    let saved = quant::simd::prefetch_distance();
    let dists = if prefetch.is_empty() {
        vec![saved]
    } else {
        prefetch.to_vec()
    };
    let choices = kernel_choices(types, kernels)?;
    let buf = ReadBuffer::new();
    let mut all = Vec::new();
    for (&t, choice) in types.iter().zip(&choices) {
        let row = quant::bytes_for(t, k).with_context(|| {
            format!("--matvec: {t} rows of {k} elements (--row must be a multiple of its block)")
        })?;
        let rows = (buf.bytes() / row / 64 * 64).max(64);
        let mut e = executor(t, k, rows, threads)?;
        let bytes = row * rows;
        let saved_kernel = quant::simd::rows_kernel_choice(t);
        e.run(); // pages the weights in
        let mut m: Vec<(Option<&'static str>, Measured)> = choice
            .iter()
            .flat_map(|&c| dists.iter().map(move |&d| (c, d)))
            .map(|(c, d)| {
                let m = Measured {
                    t,
                    kernel: kernel_label(t, c),
                    bytes,
                    prefetch: d,
                    matvec: Vec::new(),
                    read: Vec::new(),
                };
                (c, m)
            })
            .collect();
        for _ in 0..rounds {
            let read = buf.pass(threads, true).max(buf.pass(threads, false));
            for (c, mm) in &mut m {
                // every name comes from `rows_available(t)`, so this cannot fail
                quant::simd::set_rows_kernel(t, c.or(saved_kernel))?;
                quant::simd::set_prefetch_distance(mm.prefetch);
                let t0 = Instant::now();
                e.run();
                e.run();
                mm.matvec
                    .push(2.0 * bytes as f64 / t0.elapsed().as_secs_f64() / 1e9);
                mm.read.push(read);
            }
        }
        quant::simd::set_prefetch_distance(saved);
        quant::simd::set_rows_kernel(t, saved_kernel)?;
        all.extend(m.into_iter().map(|(_, m)| m));
    }
    if json {
        let v: Vec<serde_json::Value> = all
            .iter()
            .map(|m| {
                let fr: Vec<f64> = m.matvec.iter().zip(&m.read).map(|(a, b)| a / b).collect();
                serde_json::json!({
                    "test": "matvec", "type": m.t.name(), "kernel": m.kernel, "row": k,
                    "weight_bytes": m.bytes, "n_threads": threads, "prefetch": m.prefetch,
                    "matvec_gbs": median(&m.matvec), "membw_gbs": median(&m.read),
                    "fraction": median(&fr), "samples_gbs": m.matvec, "samples_membw_gbs": m.read,
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    writeln!(
        out,
        "| type | kernel | row | weights | prefetch | matvec GB/s | read GB/s | % of read | rounds' % |"
    )?;
    writeln!(out, "|---|---|---:|---:|---:|---:|---:|---:|---|")?;
    for m in &all {
        let fr: Vec<f64> = m.matvec.iter().zip(&m.read).map(|(a, b)| a / b).collect();
        let rounds: Vec<String> = fr.iter().map(|f| format!("{:.0}", 100.0 * f)).collect();
        writeln!(
            out,
            "| {} | {} | {} | {:.0} MiB | {} | {:.2} | {:.2} | {:.0}% | {} |",
            m.t.name(),
            m.kernel,
            k,
            m.bytes as f64 / (1u64 << 20) as f64,
            m.prefetch,
            median(&m.matvec),
            median(&m.read),
            100.0 * median(&fr),
            rounds.join(", ")
        )?;
    }
    Ok(())
}
