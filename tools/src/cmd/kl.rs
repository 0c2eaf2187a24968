//! `fathom kl`: what a live MoE configuration (issue 6) costs in quality and buys in speed.
//!
//! The text of `-f` is tokenized with the model's tokenizer (BOS as the metadata says) and
//! evaluated with teacher forcing, once under the base configuration A and once under the test
//! configuration B: every position's logits, in chunks of `--ubatch` tokens through the decode
//! caches (as a prompt is prefilled). Each configuration is a MoE configuration file (TOML, or
//! the seed's 32-byte `.bin` form, as `fathom run --moe-config` reads it) or `none`, the
//! model's own routing (no knobs at all).
//!
//! # Metrics
//!
//! Over the positions `i = 0 … n−2` of an `n`-token text (each one has an actual next token
//! `x_{i+1}`; the last position has none and is not counted), with `p = softmax(A's logits)`
//! and `q = softmax(B's logits)` in f64:
//! - **KL** `KL(p‖q) = Σ_v p_v (ln p_v − ln q_v)` per position (clamped at 0 against rounding);
//!   mean and max over the positions;
//! - **top-10 KL**: the same restricted to `S`, A's 10 most probable tokens (ties: lower id
//!   first), both distributions renormalised over `S`:
//!   `Σ_{v∈S} p̂_v (ln p̂_v − ln q̂_v)` with `p̂_v = p_v / Σ_S p`, `q̂_v = q_v / Σ_S q`; the mean;
//! - **cosine**: `p·q / (‖p‖ ‖q‖)` of the probability vectors, the mean over positions;
//! - **ΔPPL**: `PPL_B / PPL_A − 1`, where `PPL = exp(−mean_i ln p(x_{i+1}))` over the text's
//!   actual next tokens;
//! - **top-1 / top-3 agreement**: the fraction of positions where B's most probable token is
//!   A's most probable token / one of A's 3 most probable (argmax ties: lower id).
//!
//! # Speed
//!
//! `decode ms/tok` is measured separately for each configuration with a
//! [`models::session::Session`]: the first `min(n, 16)` tokens of the text are prefilled, one
//! greedy `decode` step is run untimed (it builds the 1-token graph), then `--decode-tokens`
//! greedy steps are timed; ms/tok is their mean wall time. `eval ms` is the wall time of the
//! whole-text evaluation (graph building included).
//!
//! `--save-base FILE` writes A's logits (`logits` F32 `[n, n_vocab]`) and the tokens (`tokens`
//! I32 `[n]`) to a safetensors file; `--base-logits FILE` reads them instead of evaluating A
//! (the tokens must match), like llama-perplexity's KL mode.

use crate::load::{self, ModelArgs};
use anyhow::{bail, ensure, Context, Result};
use graph::knobs::MoeKnobs;
use models::model::MoeShape;
use models::moe_config::{self, MoeConfig};
use models::session::{Session, DEFAULT_UBATCH};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// Tokens of the text prefilled before the timed decode steps (at most).
const DECODE_PREFIX: usize = 16;

/// Arguments of `fathom kl`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The model (required), threads, context (default: enough for the text and the timed
    /// decode), repacks (lossless, so A and B are measured on faster kernels with the same
    /// logits), checkpoint weight policy.
    #[command(flatten)]
    model: ModelArgs,
    /// The text to evaluate (teacher forcing over every position).
    #[arg(short = 'f', long)]
    file: PathBuf,
    /// Base configuration A: a MoE configuration file (TOML or `.bin`) or `none` (the model's
    /// own routing). Not needed with `--base-logits` (then it only names A and times its decode).
    #[arg(long, required_unless_present = "base_logits")]
    base_config: Option<String>,
    /// Test configuration B: a MoE configuration file (TOML or `.bin`) or `none`.
    #[arg(long)]
    test_config: String,
    /// Positions evaluated at once (prompt chunk).
    #[arg(short = 'u', long, default_value_t = DEFAULT_UBATCH)]
    ubatch: usize,
    /// Greedy decode steps timed per configuration (0: no decode timing).
    #[arg(long, default_value_t = 16)]
    decode_tokens: usize,
    /// Write A's logits and the tokens to this safetensors file.
    #[arg(long, conflicts_with = "base_logits")]
    save_base: Option<PathBuf>,
    /// Read A's logits from a file written by `--save-base` instead of evaluating A.
    #[arg(long)]
    base_logits: Option<PathBuf>,
    /// Print the results as one JSON object instead of tables.
    #[arg(long)]
    json: bool,
}

/// A configuration: its name as given, a short description, and its knobs (`None`: the
/// model's own routing).
struct Config {
    spec: String,
    summary: String,
    knobs: Option<Arc<MoeKnobs>>,
}

fn config(spec: &str, hp: &MoeShape, flag: &str) -> Result<Config> {
    if spec == "none" {
        return Ok(Config {
            spec: spec.into(),
            summary: "model routing".into(),
            knobs: None,
        });
    }
    let path = Path::new(spec);
    let shown = path.display().to_string();
    let c = MoeConfig::read(path).with_context(|| flag.to_string())?;
    let layers = c.resolve(hp, &shown).with_context(|| flag.to_string())?;
    let knobs = Arc::new(MoeKnobs::new(hp.n_layer));
    moe_config::apply(&knobs, &layers);
    Ok(Config {
        spec: spec.into(),
        summary: c.to_string(),
        knobs: Some(knobs),
    })
}

/// `ln Σ exp(x)` in f64.
fn log_sum_exp(x: impl Iterator<Item = f64> + Clone) -> f64 {
    let m = x.clone().fold(f64::NEG_INFINITY, f64::max);
    if !m.is_finite() {
        return m;
    }
    m + x.map(|v| (v - m).exp()).sum::<f64>().ln()
}

/// Index of the largest value (the lowest index among equals).
fn argmax(x: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in x.iter().enumerate() {
        if v > x[best] {
            best = i;
        }
    }
    best
}

/// The `k` largest entries' indices, largest first (ties: lower index first).
fn top_k(x: &[f32], k: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..x.len()).collect();
    let cmp = |a: &usize, b: &usize| x[*b].total_cmp(&x[*a]).then(a.cmp(b));
    let k = k.min(x.len());
    if k < idx.len() {
        idx.select_nth_unstable_by(k, cmp);
        idx.truncate(k);
    }
    idx.sort_by(cmp);
    idx
}

/// Running sums of the comparison.
#[derive(Default)]
struct Acc {
    positions: usize,
    kl_sum: f64,
    kl_max: f64,
    kl_max_at: usize,
    top10_sum: f64,
    cos_sum: f64,
    nll_a: f64,
    nll_b: f64,
    top1: usize,
    top3: usize,
}

impl Acc {
    /// Compare position `i`'s logits (`a` of A, `b` of B) whose actual next token is `next`.
    fn add(&mut self, i: usize, a: &[f32], b: &[f32], next: u32) {
        let lse_a = log_sum_exp(a.iter().map(|&v| v as f64));
        let lse_b = log_sum_exp(b.iter().map(|&v| v as f64));
        let (mut kl, mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
        for (&x, &y) in a.iter().zip(b) {
            let (la, lb) = (x as f64 - lse_a, y as f64 - lse_b);
            let (pa, pb) = (la.exp(), lb.exp());
            if pa > 0.0 {
                kl += pa * (la - lb);
            }
            dot += pa * pb;
            na += pa * pa;
            nb += pb * pb;
        }
        let kl = kl.max(0.0);
        let top = top_k(a, 10);
        let ln_sa = log_sum_exp(top.iter().map(|&v| a[v] as f64));
        let ln_sb = log_sum_exp(top.iter().map(|&v| b[v] as f64));
        let top10: f64 = top
            .iter()
            .map(|&v| {
                let la = a[v] as f64 - ln_sa;
                let lb = b[v] as f64 - ln_sb;
                la.exp() * (la - lb)
            })
            .sum();
        let best_b = argmax(b);
        self.positions += 1;
        self.kl_sum += kl;
        if kl > self.kl_max || self.positions == 1 {
            self.kl_max = kl;
            self.kl_max_at = i;
        }
        self.top10_sum += top10.max(0.0);
        self.cos_sum += if na > 0.0 && nb > 0.0 {
            dot / (na.sqrt() * nb.sqrt())
        } else {
            0.0
        };
        self.nll_a += lse_a - a[next as usize] as f64;
        self.nll_b += lse_b - b[next as usize] as f64;
        self.top1 += usize::from(top.first() == Some(&best_b));
        self.top3 += usize::from(top.iter().take(3).any(|&v| v == best_b));
    }
}

/// What one configuration measured.
struct Measured {
    ppl: f64,
    eval_ms: Option<f64>,
    decode_ms: Option<f64>,
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Mean wall time of `n` greedy decode steps after a prefix of the text (module docs).
fn time_decode(s: &mut Session, c: &Config, tokens: &[u32], n: usize) -> Result<Option<f64>> {
    if n == 0 {
        return Ok(None);
    }
    s.set_moe_knobs(c.knobs.clone());
    let prefix = &tokens[..tokens.len().min(DECODE_PREFIX)];
    let mut logits = s.prefill(prefix)?;
    logits = s.decode(argmax(&logits) as u32)?; // warm-up: builds the 1-token graph
    let t0 = Instant::now();
    for _ in 0..n {
        logits = s.decode(argmax(&logits) as u32)?;
    }
    Ok(Some(ms_since(t0) / n as f64))
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn save_base(
    path: &Path,
    logits: &[f32],
    tokens: &[u32],
    n_vocab: usize,
    c: &Config,
) -> Result<()> {
    use safetensors::{tensor::TensorView, Dtype};
    let lb = f32_bytes(logits);
    let tb: Vec<u8> = tokens
        .iter()
        .flat_map(|&t| (t as i32).to_le_bytes())
        .collect();
    let views = vec![
        (
            "logits".to_string(),
            TensorView::new(Dtype::F32, vec![tokens.len(), n_vocab], &lb)?,
        ),
        (
            "tokens".to_string(),
            TensorView::new(Dtype::I32, vec![tokens.len()], &tb)?,
        ),
    ];
    let meta = HashMap::from([
        ("fathom".to_string(), "kl base logits".to_string()),
        ("base_config".to_string(), c.spec.clone()),
    ]);
    let bytes = safetensors::serialize(views, Some(meta))?;
    models::files::write_atomic(path, |f| f.write_all(&bytes))
        .with_context(|| format!("cannot write {}", path.display()))?;
    eprintln!(
        "kl: wrote A's logits [{}, {n_vocab}] and tokens to {}",
        tokens.len(),
        path.display()
    );
    Ok(())
}

/// Read a `--save-base` file, checking it holds logits for exactly `tokens`; returns the
/// logits and the base configuration it names.
fn load_base(path: &Path, tokens: &[u32], n_vocab: usize) -> Result<(Vec<f32>, Option<String>)> {
    use safetensors::{Dtype, SafeTensors};
    let shown = path.display();
    // the logits and tokens it must hold, and room for a header
    let cap = (tokens.len() as u64 * (n_vocab as u64 + 1)) * 4 + (1 << 20);
    let bytes = models::files::read_capped(path, cap, "--base-logits file for this text")
        .with_context(|| format!("cannot read {shown}"))?;
    let st = SafeTensors::deserialize(&bytes)
        .with_context(|| format!("{shown}: not a safetensors file"))?;
    let base = SafeTensors::read_metadata(&bytes)
        .ok()
        .and_then(|(_, m)| m.metadata().as_ref()?.get("base_config").cloned());
    let t = st
        .tensor("tokens")
        .with_context(|| format!("{shown}: no 'tokens' tensor (not written by --save-base?)"))?;
    ensure!(
        t.dtype() == Dtype::I32 && t.shape().len() == 1,
        "{shown}: 'tokens' is {:?} {:?}, expected I32 [n]",
        t.dtype(),
        t.shape()
    );
    let saved: Vec<u32> = t
        .data()
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as u32)
        .collect();
    if saved != tokens {
        let at = saved
            .iter()
            .zip(tokens)
            .position(|(a, b)| a != b)
            .unwrap_or(saved.len().min(tokens.len()));
        bail!(
            "{shown}: its logits are for other tokens: {} saved, the text has {}; first \
             difference at position {at} (use the same text, model tokenizer and BOS)",
            saved.len(),
            tokens.len()
        );
    }
    let l = st
        .tensor("logits")
        .with_context(|| format!("{shown}: no 'logits' tensor"))?;
    ensure!(
        l.dtype() == Dtype::F32 && l.shape() == [tokens.len(), n_vocab],
        "{shown}: 'logits' is {:?} {:?}, expected F32 [{}, {n_vocab}] (another model?)",
        l.dtype(),
        l.shape(),
        tokens.len()
    );
    let logits: Vec<f32> = l
        .data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if let Some(i) = logits.iter().position(|v| !v.is_finite()) {
        bail!(
            "{shown}: the logits of position {} are not finite ({})",
            i / n_vocab.max(1),
            logits[i]
        );
    }
    Ok((logits, base))
}

fn hp_vocab(m: &dyn models::model::Model) -> u64 {
    m.info().n_vocab as u64
}

fn opt(x: Option<f64>, prec: usize) -> String {
    x.map_or_else(|| "n/a".into(), |v| format!("{v:.prec$}"))
}

/// Run the command.
pub fn run(args: &Args, env: &crate::env::Env) -> Result<()> {
    ensure!(
        args.ubatch > 0,
        "--ubatch 0: chunks must hold at least one token"
    );
    let text = models::files::read_text_capped(&args.file, models::files::TEXT_CAP, "text file")
        .with_context(|| format!("cannot read the text file {}", args.file.display()))?;
    let path = args.model.path()?;
    let opts = args.model.load_options(env)?;
    let model = load::open(path, &opts)?;
    let mshown = path.display().to_string();
    let info = model.info().clone();
    let Some(hp) = info.moe else {
        bail!("{mshown}: the model has no routed experts to configure");
    };
    let tokens = model
        .tokenizer()
        .context("the text is tokenized with the model's tokenizer")?
        .encode(&text, true)
        .with_context(|| format!("{mshown}: tokenizing {}", args.file.display()))?;
    let n = tokens.len();
    ensure!(
        n >= 2,
        "{}: {n} token(s); at least 2 are needed (one next-token prediction)",
        args.file.display()
    );
    let timing = (n.min(DECODE_PREFIX) + 1).saturating_add(args.decode_tokens);
    let need = n.max(timing);
    let ctx = match opts.ctx {
        Some(c) if c < need => bail!(
            "--ctx {c}: the text has {n} tokens and the decode timing needs {timing} (raise \
             --ctx or lower --decode-tokens)"
        ),
        Some(c) => c,
        None => need,
    };
    let threads_used = opts.exec.threads;
    // both models' logits of every position are held at once
    load::check_output_memory(
        2 * n as u64 * hp_vocab(&*model) * 4,
        &format!("the logits of {n} positions under both configurations"),
    )?;
    let mut session = load::session(model, &opts, ctx)?;
    let test = config(&args.test_config, &hp, "--test-config")?;
    let base = match &args.base_config {
        Some(s) => Some(config(s, &hp, "--base-config")?),
        None => None,
    };
    let mut eval = |c: &Config, each: &mut dyn FnMut(usize, &[f32])| {
        session.set_moe_knobs(c.knobs.clone());
        session
            .eval_all(&tokens, args.ubatch, each)
            .with_context(|| {
                format!(
                    "{mshown}: evaluating {} under {}",
                    args.file.display(),
                    c.spec
                )
            })
    };

    // A: evaluated, or read from --base-logits
    let v = info.n_vocab;
    let (base_logits, base_eval_ms, base_name) = match &args.base_logits {
        Some(p) => {
            let (l, saved) = load_base(p, &tokens, v)?;
            let name = match (&base, saved) {
                (Some(c), _) => c.spec.clone(),
                (None, Some(s)) => s,
                (None, None) => "saved".into(),
            };
            (l, None, format!("{name} (from {})", p.display()))
        }
        None => {
            let c = base.as_ref().expect("clap: --base-config or --base-logits");
            let mut l = Vec::with_capacity(n * v);
            let t0 = Instant::now();
            eval(c, &mut |_, x| l.extend_from_slice(x))?;
            let ms = ms_since(t0);
            if let Some(p) = &args.save_base {
                save_base(p, &l, &tokens, v, c)?;
            }
            (l, Some(ms), c.spec.clone())
        }
    };

    // B, compared chunk by chunk
    let mut acc = Acc::default();
    let t0 = Instant::now();
    eval(&test, &mut |p0, x| {
        for (j, b) in x.chunks_exact(v).enumerate() {
            let i = p0 + j;
            if i + 1 < n {
                acc.add(i, &base_logits[i * v..(i + 1) * v], b, tokens[i + 1]);
            }
        }
    })?;
    let test_eval_ms = ms_since(t0);
    ensure!(
        acc.positions == n - 1,
        "evaluated {} of {} positions",
        acc.positions,
        n - 1
    );

    let mut time = |c: &Config| {
        time_decode(&mut session, c, &tokens, args.decode_tokens)
            .with_context(|| format!("{mshown}: timing decode under {}", c.spec))
    };
    let base_decode = match &base {
        Some(c) => time(c)?,
        None => None,
    };
    let test_decode = time(&test)?;

    let np = acc.positions as f64;
    let a = Measured {
        ppl: (acc.nll_a / np).exp(),
        eval_ms: base_eval_ms,
        decode_ms: base_decode,
    };
    let b = Measured {
        ppl: (acc.nll_b / np).exp(),
        eval_ms: Some(test_eval_ms),
        decode_ms: test_decode,
    };
    let kl_mean = acc.kl_sum / np;
    let top10 = acc.top10_sum / np;
    let cos = acc.cos_sum / np;
    let dppl = b.ppl / a.ppl - 1.0;
    let top1 = acc.top1 as f64 / np;
    let top3 = acc.top3 as f64 / np;
    let base_summary = base
        .as_ref()
        .map_or_else(|| "saved logits".to_string(), |c| c.summary.clone());

    if args.json {
        let side = |name: &str, summary: &str, m: &Measured| {
            serde_json::json!({
                "config": name, "summary": summary, "ppl": m.ppl, "eval_ms": m.eval_ms,
                "decode_ms_per_token": m.decode_ms,
                "decode_tok_per_s": m.decode_ms.map(|d| 1e3 / d),
            })
        };
        let j = serde_json::json!({
            "model": mshown,
            "text": args.file.display().to_string(),
            "tokens": n,
            "positions": acc.positions,
            "ctx": ctx,
            "threads": threads_used,
            "ubatch": args.ubatch,
            "decode_tokens": args.decode_tokens,
            "base": side(&base_name, &base_summary, &a),
            "test": side(&test.spec, &test.summary, &b),
            "kl_mean": kl_mean,
            "kl_max": acc.kl_max,
            "kl_max_position": acc.kl_max_at,
            "top10_kl_mean": top10,
            "cos_mean": cos,
            "delta_ppl": dppl,
            "top1": top1,
            "top3": top3,
        });
        println!("{j}");
        return Ok(());
    }
    println!(
        "fathom kl: {mshown}; {}: {n} tokens, {} positions; ctx {ctx}, threads {threads_used}, \
         chunks of {}; decode timed over {} greedy steps after a {}-token prefix",
        args.file.display(),
        acc.positions,
        args.ubatch,
        args.decode_tokens,
        n.min(DECODE_PREFIX)
    );
    println!();
    println!("| | config | settings | PPL | eval ms | decode ms/tok | decode tok/s |");
    println!("|---|---|---|---:|---:|---:|---:|");
    for (tag, name, summary, m) in [
        ("A", &base_name, &base_summary, &a),
        ("B", &test.spec, &test.summary, &b),
    ] {
        println!(
            "| {tag} | {name} | {summary} | {:.4} | {} | {} | {} |",
            m.ppl,
            opt(m.eval_ms, 1),
            opt(m.decode_ms, 3),
            opt(m.decode_ms.map(|d| 1e3 / d), 1)
        );
    }
    println!();
    println!("| mean KL | max KL | top-10 KL | cos sim | ΔPPL | top-1 | top-3 |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {kl_mean:.6} | {:.6} (pos {}) | {top10:.6} | {cos:.6} | {:+.3}% | {:.2}% | {:.2}% |",
        acc.kl_max,
        acc.kl_max_at,
        dppl * 100.0,
        top1 * 100.0,
        top3 * 100.0
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_logits_compare_exactly() {
        let a = [
            1.0f32, 3.0, -2.0, 0.5, 3.0, 7.0, 0.0, 1.5, 2.5, -1.0, 4.0, 0.25,
        ];
        let mut acc = Acc::default();
        acc.add(0, &a, &a, 2);
        assert_eq!(acc.kl_sum, 0.0);
        assert_eq!(acc.top10_sum, 0.0);
        assert_eq!((acc.top1, acc.top3), (1, 1));
        assert!((acc.cos_sum - 1.0).abs() < 1e-12);
        assert_eq!(acc.nll_a, acc.nll_b);
    }

    #[test]
    fn metrics_follow_their_definitions() {
        let a = [0.0f32, (2.0f32).ln(), (3.0f32).ln()]; // p = 1/6, 2/6, 3/6
        let b = [(3.0f32).ln(), (2.0f32).ln(), 0.0]; // q = 3/6, 2/6, 1/6
        let mut acc = Acc::default();
        acc.add(0, &a, &b, 1);
        let p = [1.0 / 6.0, 2.0 / 6.0, 3.0 / 6.0f64];
        let q = [3.0 / 6.0, 2.0 / 6.0, 1.0 / 6.0f64];
        let kl: f64 = p.iter().zip(&q).map(|(p, q)| p * (p / q).ln()).sum();
        assert!((acc.kl_sum - kl).abs() < 1e-6, "{} {kl}", acc.kl_sum);
        assert!(
            (acc.top10_sum - kl).abs() < 1e-6,
            "all 3 tokens are in the top 10"
        );
        assert!((acc.cos_sum - 10.0 / 14.0).abs() < 1e-6);
        assert!((acc.nll_a - 3.0f64.ln()).abs() < 1e-6 && (acc.nll_b - 3.0f64.ln()).abs() < 1e-6);
        assert_eq!((acc.top1, acc.top3), (0, 1), "B's argmax 0 is A's 3rd");
        assert_eq!(top_k(&[1.0, 5.0, 5.0, 2.0], 3), vec![1, 2, 3]);
        assert_eq!(argmax(&[1.0, 5.0, 5.0]), 1);
    }
}
