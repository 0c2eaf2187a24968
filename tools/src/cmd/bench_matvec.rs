//! `fathom bench --matvec [TYPES]`: each weight type's decode matvec streamed from DRAM,
//! side by side with the bandwidth read, and the fraction of the bandwidth it reaches (issue
//! 5's "every matvec ≥ 80% of the measured bandwidth").
//!
//! Per type: one MUL_MAT node with `--row` elements per row (default 4096) and
//! [`super::bench::membw_bytes`] of random weights (generated as `fathom synth` writes that
//! type; the repacked `_X` types from random IQ1_S / IQ2_XXS / IQ1_M / Q2_0 blocks), one
//! activation column, on the executor with `-t` threads.
//! Each of `-r` rounds reads the bandwidth buffer (best of a plain and a prefetching pass),
//! then runs the matvec twice with the kernel the kernel table gives the type on this CPU;
//! the table gives medians over the rounds and the median of each round's own fraction.
//! Comparing kernels against each other is the criterion benches' job
//! (`benches/benches/quant.rs`). Alternating
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
    DType::F8_E4M3,
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
        models::synth::random_weights(t, n, 0x5eed ^ t as u64)
            .ok_or_else(|| anyhow!("--matvec: cannot generate {t} weights"))
    };
    let bytes = |t: DType| quant::bytes_for(t, rows * k).context("--matvec: weight size");
    if t == DType::F8_E4M3 {
        // random codes, never the NaN code (the loader refuses it)
        let mut s = 0x5eed_u64;
        return Ok((0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                let b = (s >> 32) as u8;
                if b & 0x7F == 0x7F {
                    b ^ 1
                } else {
                    b
                }
            })
            .collect());
    }
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
fn executor(t: DType, k: usize, rows: usize, exec: &ExecConfig) -> Result<Executor> {
    let mut g = Graph::new();
    let desc = TensorDesc::new(t, &[k, rows])?;
    let mut data = WeightData::from_vec(weights(t, k, rows)?);
    if t == DType::F8_E4M3 {
        // an official checkpoint's 128×128 tile scales (MUL_MAT applies them)
        let per_row = k.div_ceil(128);
        let bs = graph::BlockScales {
            rows: 128,
            cols: 128,
            per_row,
            values: vec![1.0 / 256.0; rows.div_ceil(128) * per_row],
        };
        data = data.with_block_scales(std::sync::Arc::new(bs));
    }
    let w = g.weight("w", desc, data)?;
    let x = g.input("x", TensorDesc::f32(&[k, 1])?)?;
    let y = g.mul_mat(w, x)?;
    g.output("y", y)?;
    let mut e = Executor::new(g, exec.clone());
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

/// One measured type.
struct Measured {
    t: DType,
    kernel: String,
    bytes: usize,
    matvec: Vec<f64>,
    read: Vec<f64>,
}

/// The label of the kernel a matvec of `t` runs on this CPU (the kernel table's choice:
/// the rows kernel, or the dot kernel where the type has none).
fn kernel_label(t: DType, level: quant::simd::CpuLevel) -> String {
    match quant::simd::kernels(t, level) {
        Some(k) => match k.rows {
            Some(r) => format!("{} rows", r.name),
            None => k.dot.name.to_string(),
        },
        None => "none".into(),
    }
}

/// Runs the matvec tests with `k`-element rows and prints their table (or JSON).
pub fn run(
    types: &[DType],
    k: usize,
    exec: &ExecConfig,
    rounds: usize,
    json: bool,
    out: &mut impl Write,
) -> Result<()> {
    let threads = exec.threads;
    let buf = ReadBuffer::new();
    let mut all = Vec::new();
    for &t in types {
        let row = quant::bytes_for(t, k).with_context(|| {
            format!("--matvec: {t} rows of {k} elements (--row must be a multiple of its block)")
        })?;
        let rows = (buf.bytes() / row / 64 * 64).max(64);
        let mut e = executor(t, k, rows, exec)?;
        let bytes = row * rows;
        e.run(); // pages the weights in
        let mut m = Measured {
            t,
            kernel: kernel_label(t, e.cpu()),
            bytes,
            matvec: Vec::new(),
            read: Vec::new(),
        };
        for _ in 0..rounds {
            let read = buf.pass(threads, true).max(buf.pass(threads, false));
            let t0 = Instant::now();
            e.run();
            e.run();
            m.matvec
                .push(2.0 * bytes as f64 / t0.elapsed().as_secs_f64() / 1e9);
            m.read.push(read);
        }
        all.push(m);
    }
    if json {
        let v: Vec<serde_json::Value> = all
            .iter()
            .map(|m| {
                let fr: Vec<f64> = m.matvec.iter().zip(&m.read).map(|(a, b)| a / b).collect();
                serde_json::json!({
                    "test": "matvec", "type": m.t.name(), "kernel": m.kernel, "row": k,
                    "weight_bytes": m.bytes, "n_threads": threads,
                    "prefetch": quant::simd::PREFETCH_DISTANCE,
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
        "| type | kernel | row | weights | matvec GB/s | read GB/s | % of read | rounds' % |"
    )?;
    writeln!(out, "|---|---|---:|---:|---:|---:|---:|---|")?;
    for m in &all {
        let fr: Vec<f64> = m.matvec.iter().zip(&m.read).map(|(a, b)| a / b).collect();
        let rounds: Vec<String> = fr.iter().map(|f| format!("{:.0}", 100.0 * f)).collect();
        writeln!(
            out,
            "| {} | {} | {} | {:.0} MiB | {:.2} | {:.2} | {:.0}% | {} |",
            m.t.name(),
            m.kernel,
            k,
            m.bytes as f64 / (1u64 << 20) as f64,
            median(&m.matvec),
            median(&m.read),
            100.0 * median(&fr),
            rounds.join(", ")
        )?;
    }
    Ok(())
}
