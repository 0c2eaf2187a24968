//! `fathom synth OUT.gguf --layers N --recipe seed|q4k|iq2 [--type PATTERN=TYPE ...]
//! [--experts E] [--seed S]`: write a random-weight DeepSeek-V4 GGUF at real V4-Flash
//! dimensions, for benchmarks; `fathom synth DIR --format checkpoint [--shard-gib G]` writes
//! the same model in the official checkpoint layout (`models::synth::checkpoint`).
//!
//! The file is written by `models::synth` (which documents its contract: keys, names,
//! shapes, recipes, random data, determinism, streaming); this command parses the options,
//! applies `--type` and prints progress. Resident memory stays under 100 MiB whatever the
//! file size; the peak is printed at the end. On error the partial file is removed.
//!
//! **`--type PATTERN=TYPE`** (repeatable) sets the type of every tensor whose name matches
//! PATTERN, a regular expression searched anywhere in the name (so a plain substring such as
//! `_exps` works; anchor with `^…$` for exact names). Later options win over earlier ones. A
//! pattern matching no tensor, an unknown or non-weight type, or a type whose block size does
//! not divide the tensor's row length is an error naming the pattern or the tensor.
//!
//! **`--tiny`** (hidden, for tests only) keeps the layer structure, names, key set and recipes
//! but shrinks every dimension (see `models::synth::Size::Tiny`).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use models::synth::{self, Size, Synth, EXPERTS_USED, RECIPES};
use quant::DType;
use regex::Regex;

use crate::mem;

/// Arguments of `fathom synth`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Output: a .gguf file (created or truncated; removed again if writing fails), or with
    /// `--format checkpoint` a directory (created if missing; the files written are removed
    /// again if writing fails).
    pub out: PathBuf,
    /// `gguf` (llama.cpp's `deepseek4` layout, the recipe's types) or `checkpoint` (the
    /// official layout: FP8 dense weights with 128×128 E8M0 scales, FP4 experts with per-32
    /// E8M0 scales, BF16 embedding/head/router/compressors, sharded safetensors with their
    /// index and config.json; `--recipe` and `--type` do not apply).
    #[arg(long, default_value = "gguf", value_parser = ["gguf", "checkpoint"])]
    pub format: String,
    /// With `--format checkpoint`: GiB per shard at most (a larger tensor gets a shard of
    /// its own).
    #[arg(long, default_value_t = 4.0)]
    pub shard_gib: f64,
    /// Decoder layers (compress ratios follow V4-Flash: 0, 0, then 4 / 128 alternating).
    #[arg(long, default_value_t = 6)]
    pub layers: usize,
    /// Type recipe: `seed` (the project seed's CPU-tuned mix: IQ1_S experts, IQ2_XXS in
    /// layers 0–1, Q2_0 attention), `q4k` (all Q4_K, Q6_K output) or `iq2` (IQ2_XXS experts,
    /// Q8_0 dense).
    #[arg(long, default_value = "seed")]
    pub recipe: String,
    /// Override the type of the tensors whose name matches PATTERN (a regex searched anywhere
    /// in the name, so a substring works; later options win), e.g. `--type _exps=Q4_K` or
    /// `--type '^output\.weight$=Q8_0'`. Repeatable.
    #[arg(long = "type", value_name = "PATTERN=TYPE")]
    pub types: Vec<String>,
    /// Routed experts per layer (at least 6, the number used per token).
    #[arg(long, default_value_t = 256)]
    pub experts: usize,
    /// Seed of the random weights (the same seed gives the same bytes).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The first layers routed by a token-id hash table (default: V4-Flash's 3, at most
    /// `--layers`). `--hash-layers` equal to `--layers` routes every layer uniformly, as a
    /// load-balanced trained model nearly does: a random router sends most tokens to a few
    /// experts, which flatters an expert cache.
    #[arg(long)]
    pub hash_layers: Option<usize>,
    /// Tests only: tiny dimensions instead of V4-Flash's (same names, keys and recipes).
    #[arg(long, hide = true)]
    pub tiny: bool,
}

/// Types accepted by `--type` (every weight type synth can generate; not I32).
fn override_types() -> String {
    DType::ALL
        .iter()
        .filter(|&&t| t != DType::I32 && synth::writable(t))
        .map(|t| t.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parse `PATTERN=TYPE` (split at the last `=`).
fn parse_override(s: &str) -> Result<(Regex, DType)> {
    let Some((pat, ty)) = s.rsplit_once('=') else {
        bail!("--type {s}: expected PATTERN=TYPE, e.g. --type _exps=Q4_K");
    };
    ensure!(!pat.is_empty(), "--type {s}: empty PATTERN");
    let re = Regex::new(pat).with_context(|| format!("--type {s}: bad regular expression"))?;
    let dtype = DType::from_name(ty).filter(|&t| t != DType::I32 && synth::writable(t));
    let Some(dtype) = dtype else {
        bail!(
            "--type {s}: unknown or unsupported type '{ty}' (supported: {})",
            override_types()
        );
    };
    Ok((re, dtype))
}

fn human(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    if v < 1024.0 {
        return format!("{n} B");
    }
    let mut u = 0;
    v /= 1024.0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

/// Run the command.
pub fn run(args: &Args) -> Result<()> {
    let Some(recipe) = synth::recipe(&args.recipe) else {
        bail!(
            "--recipe {}: unknown recipe (choose one of {RECIPES})",
            args.recipe
        );
    };
    ensure!(args.layers >= 1, "--layers must be at least 1");
    if let Some(h) = args.hash_layers {
        ensure!(
            h <= args.layers,
            "--hash-layers {h} is more than the {} layers",
            args.layers
        );
    }
    ensure!(
        args.experts >= EXPERTS_USED && args.experts <= i32::MAX as usize,
        "--experts {}: need at least {EXPERTS_USED} (the experts used per token)",
        args.experts
    );
    if args.format == "checkpoint" {
        ensure!(
            args.types.is_empty(),
            "--type applies to --format gguf only (a checkpoint's storage types are the official ones)"
        );
        return checkpoint(args, recipe);
    }
    let overrides = args
        .types
        .iter()
        .map(|s| parse_override(s))
        .collect::<Result<Vec<_>>>()?;
    let model = Synth {
        size: if args.tiny { Size::Tiny } else { Size::Flash },
        layers: args.layers,
        experts: args.experts,
        hash_layers: args
            .hash_layers
            .unwrap_or(models::synth::HASH_LAYERS.min(args.layers)),
        recipe,
    };
    let mut specs = model.plan();
    for ((re, dtype), text) in overrides.iter().zip(&args.types) {
        let mut hit = false;
        for s in specs.iter_mut().filter(|s| re.is_match(&s.name)) {
            s.dtype = *dtype;
            hit = true;
        }
        ensure!(hit, "--type {text}: the pattern matches no tensor");
    }
    let mut name = format!(
        "synthetic DeepSeek-V4-Flash dims, {} layers, recipe {}",
        args.layers, args.recipe
    );
    if args.tiny {
        name = name.replacen("DeepSeek-V4-Flash dims", "tiny (test) dims", 1);
    }
    if !args.types.is_empty() {
        name.push_str(&format!(", types {}", args.types.join(" ")));
    }
    let kv = model.metadata(name);
    let prepared = model
        .prepare(kv, specs)
        .with_context(|| format!("{}: header", args.out.display()))?;
    let total = prepared.total();
    let n = prepared.specs().len();
    eprintln!(
        "synth: {}: {} layers, recipe {}, {} experts, seed {}: {n} tensors, {}",
        args.out.display(),
        args.layers,
        args.recipe,
        args.experts,
        args.seed,
        human(total)
    );
    let t0 = Instant::now();
    let width = n.to_string().len();
    prepared
        .write(&args.out, args.seed, &mut |k, s, written, total| {
            eprintln!(
                "  [{:>width$}/{n}] {:5.1}% {:6.1}s  {:42} {:8} {} {}",
                k + 1,
                100.0 * written as f64 / total as f64,
                t0.elapsed().as_secs_f64(),
                s.name,
                s.dtype.name(),
                s.ne.iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join("×"),
                human(s.n_bytes())
            )
        })
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    let secs = t0.elapsed().as_secs_f64();
    let peak = mem::rss().peak.map_or_else(|| "n/a".into(), human);
    eprintln!(
        "wrote {}: {n} tensors, {} ({total} bytes) in {secs:.1} s ({:.0} MiB/s), peak RSS {peak}",
        args.out.display(),
        human(total),
        total as f64 / (1 << 20) as f64 / secs.max(1e-9),
    );
    Ok(())
}

/// `--format checkpoint`: the official layout into the directory `args.out`.
fn checkpoint(args: &Args, recipe: synth::Recipe) -> Result<()> {
    ensure!(
        args.shard_gib.is_finite() && args.shard_gib > 0.0 && args.shard_gib <= 1024.0,
        "--shard-gib {}: expected a size above 0 and at most 1024",
        args.shard_gib
    );
    let model = Synth {
        size: if args.tiny { Size::Tiny } else { Size::Flash },
        layers: args.layers,
        experts: args.experts,
        hash_layers: args
            .hash_layers
            .unwrap_or(models::synth::HASH_LAYERS.min(args.layers)),
        recipe,
    };
    let plan = model.checkpoint_plan();
    let total: u64 = plan.iter().map(|t| t.n_bytes()).sum();
    eprintln!(
        "synth: {}: official checkpoint layout, {} layers, {} experts, seed {}: {} tensors, {}",
        args.out.display(),
        args.layers,
        args.experts,
        args.seed,
        plan.len(),
        human(total)
    );
    let t0 = Instant::now();
    let mut shown = u64::MAX;
    model
        .write_checkpoint(
            &args.out,
            (args.shard_gib * (1u64 << 30) as f64) as u64,
            args.seed,
            &mut |done, total| {
                let pct = done * 100 / total.max(1);
                if pct != shown && (pct % 5 == 0 || done == total) {
                    shown = pct;
                    eprintln!(
                        "  {pct:>3}% {:6.1}s  {} of {}",
                        t0.elapsed().as_secs_f64(),
                        human(done),
                        human(total)
                    );
                }
            },
        )
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    let secs = t0.elapsed().as_secs_f64();
    let peak = mem::rss().peak.map_or_else(|| "n/a".into(), human);
    eprintln!(
        "wrote {}: {} tensors, {} in {secs:.1} s ({:.0} MiB/s), peak RSS {peak}",
        args.out.display(),
        plan.len(),
        human(total),
        total as f64 / (1 << 20) as f64 / secs.max(1e-9),
    );
    Ok(())
}
