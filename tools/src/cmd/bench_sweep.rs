//! `fathom bench --sweep N`: prefill and decode as the context grows, like ik_llama.cpp's
//! `llama-sweep-bench`. One sequence is filled to `N` tokens a prompt chunk (`-u`) at a time,
//! every chunk timed; at every `--sweep-stride`-th chunk the `-n` decode tokens are timed first
//! from the state there, which is then restored. Each row gives the chunk's prefill rate at
//! its depth (the `pp<u> @ d<depth>` of `fathom bench -d`), the prompt rate so far (all
//! chunks up to it: what a prompt of that length gets), and the decode rate at that depth.

use anyhow::{bail, Result};
use std::io::Write;
use std::time::Instant;

/// What the sweep measures.
pub struct Sweep {
    /// Tokens to fill.
    pub tokens: usize,
    /// Chunks between measured rows.
    pub stride: usize,
    /// Decode tokens timed at each measured row (0: none).
    pub gen: usize,
    /// Prompt chunk size.
    pub ubatch: usize,
}

/// One measured row.
struct Row {
    /// Tokens in the cache before the chunk.
    depth: usize,
    /// The chunk's prefill rate, tokens/s.
    pp: f64,
    /// Tokens prefilled so far (this chunk included) per second of prefill.
    prompt: f64,
    /// Decode rate at `depth`, tokens/s.
    tg: Option<f64>,
}

/// Run the sweep on `session` (one sequence, reset first) and print its table or JSON.
pub fn run(
    session: &mut models::session::Session,
    sweep: &Sweep,
    vocab: usize,
    (name, threads, json): (&str, usize, bool),
    out: &mut impl Write,
) -> Result<()> {
    if sweep.tokens == 0 || sweep.stride == 0 || sweep.ubatch == 0 {
        bail!("--sweep, --sweep-stride and -u must be at least 1");
    }
    let toks = super::bench::tokens(sweep.tokens, vocab, 99);
    // warm-up (untimed): one chunk builds the chunk graph and pages the weights in
    session.reset();
    session.prefill(&toks[..sweep.ubatch.min(toks.len())])?;
    session.reset();
    let mut rows = Vec::new();
    let mut total = 0.0;
    for (i, chunk) in toks.chunks(sweep.ubatch).enumerate() {
        let depth = i * sweep.ubatch;
        let measure = i % sweep.stride == 0;
        let tg = if measure && sweep.gen > 0 {
            let state = session.state();
            let feed = super::bench::tokens(sweep.gen, vocab, 1000 + i as u64);
            let t0 = Instant::now();
            for &t in &feed {
                session.decode(t)?;
            }
            let rate = sweep.gen as f64 / t0.elapsed().as_secs_f64();
            session.set_state(&state)?;
            Some(rate)
        } else {
            None
        };
        let t0 = Instant::now();
        session.prefill(chunk)?;
        let secs = t0.elapsed().as_secs_f64();
        total += secs;
        if measure {
            rows.push(Row {
                depth,
                pp: chunk.len() as f64 / secs,
                prompt: (depth + chunk.len()) as f64 / total,
                tg,
            });
            if !json {
                eprintln!(
                    "sweep: {} of {} tokens, {:.1} tok/s so far",
                    depth + chunk.len(),
                    toks.len(),
                    (depth + chunk.len()) as f64 / total
                );
            }
        }
    }
    if json {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "model_filename": name, "n_threads": threads, "n_ubatch": sweep.ubatch,
                    "n_depth": r.depth, "speed_pp": r.pp, "speed_prompt": r.prompt,
                    "n_gen": sweep.gen, "speed_tg": r.tg,
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    let gen = if sweep.gen > 0 {
        format!("tg{} t/s", sweep.gen)
    } else {
        "tg".into()
    };
    writeln!(
        out,
        "| model | threads | depth | pp{} t/s | prompt t/s so far | {gen} |",
        sweep.ubatch
    )?;
    writeln!(out, "|---|---:|---:|---:|---:|---:|")?;
    for r in &rows {
        let tg = r.tg.map_or(String::from("-"), |t| format!("{t:.2}"));
        writeln!(
            out,
            "| {name} | {threads} | {} | {:.2} | {:.2} | {tg} |",
            r.depth, r.pp, r.prompt
        )?;
    }
    Ok(())
}
