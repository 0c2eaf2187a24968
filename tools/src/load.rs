//! The flags every command that loads a model takes ([`ModelArgs`]), turned into one
//! `models::model::LoadOptions` with the environment ([`crate::env::Env`]), and the one
//! place the CLI opens a model ([`open`]): `run`, `logits`, `kl` and `bench` all load
//! through it, so a flag or a variable means the same in each.

use anyhow::{bail, Context, Result};
use models::gguf::GgufFile;
use models::model::{LoadOptions, Model};
use models::session::Session;
use models::weights::policy::{Fp4Policy, Fp8Policy, StOptions};
use models::weights::Repack;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The built-in model (see `tools/assets/README.md`).
pub static BUILTIN: &[u8] = include_bytes!("../assets/dsv4-tiny-trained-Q8_0.gguf");

/// The name the built-in model is shown under.
pub const BUILTIN_NAME: &str = "built-in dsv4-tiny-trained-Q8_0";

/// The model flags shared by `run`, `logits`, `kl` and `bench`.
#[derive(clap::Args, Debug, Clone)]
pub struct ModelArgs {
    /// Model: a .gguf file (the first shard of a split file), or an official safetensors
    /// checkpoint — its directory, its `model.safetensors.index.json` or a `.safetensors`
    /// file, with `config.json` (and `tokenizer.json` for text) beside it.
    #[arg(short = 'm', long)]
    pub model: Option<PathBuf>,
    /// Threads (default: one per physical core, or per CPU of `FATHOM_CPUS`).
    #[arg(short = 't', long)]
    pub threads: Option<usize>,
    /// Context length in tokens.
    #[arg(long)]
    pub ctx: Option<usize>,
    /// Convert these GGUF tensor types at load into fathom's faster layouts (comma
    /// separated: `iq1_s` → IQ1_S_X, 1.4× that type's memory; `iq2_xxs` → IQ2_XXS_X, 1.55×;
    /// `iq1_m` → IQ1_M_X, 1.36×; `q2_0` → Q2_0_X, the same size, for rows of whole 512s;
    /// `all`; `none`). Lossless (the same logits); only where this CPU has the layout's
    /// SIMD kernel.
    #[arg(long, default_value = "none", value_parser = parse_repack)]
    pub repack: Repack,
    /// How a checkpoint's weights are stored: `default` (BF16, FP8 and the FP4 experts
    /// used in place from the files), `q8_0` (FP8 → Q8_0, as llama.cpp's converter does),
    /// `stacked` (the FP4 experts copied into memory as MXFP4 at load), `fp32` (every
    /// matrix F32, as transformers computes); `q8_0,stacked` combines. Default:
    /// `FATHOM_ST_WEIGHTS`, else `default`.
    #[arg(long, value_name = "POLICY")]
    pub st_weights: Option<String>,
    /// Memory for the model, in GiB: its routed experts are read from the GGUF file into a
    /// cache that gets what the resident weights, the caches and the working memory leave
    /// (for a model larger than RAM). `auto`: only where the file does not fit in the memory
    /// available; `off`: experts paged in from the memory map.
    #[arg(long, value_name = "GIB", default_value = "auto", value_parser = crate::ram::parse_ram)]
    pub ram: crate::ram::Ram,
}

/// `--repack`'s value parser.
pub fn parse_repack(s: &str) -> std::result::Result<Repack, String> {
    Repack::parse(s)
}

/// A checkpoint weight policy by name (`what` names where it came from, for the error).
fn st_options(v: &str, what: &str) -> Result<StOptions> {
    let mut o = StOptions::default();
    for part in v.split(',').map(str::trim) {
        match part {
            "default" => {}
            "fp32" => o = StOptions::fp32(),
            "q8_0" => o.fp8 = Fp8Policy::Q8_0,
            "stacked" => o.fp4 = Fp4Policy::Mxfp4,
            _ => bail!(
                "{what} {v}: expected default, q8_0, fp32 or stacked (or a comma-separated \
                 list such as q8_0,stacked)"
            ),
        }
    }
    Ok(o)
}

impl ModelArgs {
    /// The load options these flags and `env` ask for.
    pub fn load_options(&self, env: &crate::env::Env) -> Result<LoadOptions> {
        if self.ctx == Some(0) {
            bail!("--ctx 0: the context must hold at least one token");
        }
        let checkpoint = match (&self.st_weights, &env.st_weights) {
            (Some(v), _) => st_options(v, "--st-weights")?,
            (None, Some(v)) => st_options(v, "FATHOM_ST_WEIGHTS=")?,
            (None, None) => StOptions::default(),
        };
        let exec = env.exec_config(self.threads)?;
        self.note_skipped_repacks(exec.cpu);
        Ok(LoadOptions {
            repack: self.repack,
            checkpoint,
            exec,
            ctx: self.ctx,
            experts: crate::ram::expert_cache(
                self.ram,
                self.model.as_deref(),
                backends::topology::available_memory(),
            )?,
        })
    }

    /// Says on stderr, in one line, which of the `--repack` types this CPU level leaves as
    /// they are ([`Repack::left_as_stored`]).
    fn note_skipped_repacks(&self, level: quant::simd::CpuLevel) {
        let left = self.repack.left_as_stored(level);
        if !left.is_empty() {
            let names: Vec<String> = left.iter().map(|t| t.name().to_lowercase()).collect();
            eprintln!(
                "--repack: {} left as stored at kernel level {level} (the repacked kernels \
                 there lack the prompt or decode kernels of the stored type)",
                names.join(", ")
            );
        }
    }

    /// `-m`, required.
    pub fn path(&self) -> Result<&Path> {
        self.model
            .as_deref()
            .context("give the model with -m MODEL")
    }
}

/// A session over `model` with `opts`' executor configuration and a context of `ctx` tokens,
/// whose caches and working memory may take at most the memory available now: a context
/// that does not fit is refused here, with the figures, before anything is allocated.
///
/// With an expert cache (`--ram`), the figure is shared out first ([`crate::ram::plan`]):
/// the cache gets what the rest leaves, and the caches and working memory must fit in their
/// share.
pub fn session(model: Box<dyn Model>, opts: &LoadOptions, ctx: usize) -> Result<Session> {
    let mut limit = backends::topology::available_memory();
    if let (Some(cfg), Some(cache)) = (opts.experts, model.expert_cache()) {
        let plan = crate::ram::plan(cfg.budget, &*model, ctx, 1)?;
        cache.set_budget(plan.experts);
        eprintln!("{plan}");
        limit = Some(plan.caches + plan.workspace);
    }
    let mut s = Session::new(model, opts.exec.clone(), ctx)?;
    s.set_memory_limit(limit)
        .map_err(|e| anyhow::anyhow!("{e}; lower --ctx"))?;
    Ok(s)
}

/// Refuse a run whose outputs held in memory (`what`, `bytes`) do not fit in the memory
/// available now.
pub fn check_output_memory(bytes: u64, what: &str) -> Result<()> {
    if let Some(avail) = backends::topology::available_memory() {
        if bytes > avail {
            let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
            bail!(
                "{what} need {:.2} GiB, and {:.2} GiB of memory is available",
                gib(bytes),
                gib(avail)
            );
        }
    }
    Ok(())
}

/// Opens the model at `path` with `opts`; refuses, with the figures, a model whose weight
/// conversions would not fit in the memory available now (before converting anything).
pub fn open(path: &Path, opts: &LoadOptions) -> Result<Box<dyn Model>> {
    let model = models::model::open(path, opts).context("cannot open the model")?;
    if let (Some(c), Some(avail)) = (
        model.converted_bytes(),
        backends::topology::available_memory(),
    ) {
        check_converted(path, c, avail)?;
    }
    Ok(model)
}

/// The refusal of [`open`]: `c` does not fit in `avail` bytes.
fn check_converted(path: &Path, c: models::model::ConvertedBytes, avail: u64) -> Result<()> {
    if c.bytes <= avail {
        return Ok(());
    }
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let q8 = match c.with_q8_0 {
        Some(q) if q < c.bytes => format!(
            "; with --st-weights q8_0 (its FP8 weights as Q8_0) it needs {:.1} GiB",
            gib(q)
        ),
        _ => String::new(),
    };
    bail!(
        "{}: loading this checkpoint converts its weights into {:.1} GiB of memory (FP8 \
         expansions and experts copied into memory), and {:.1} GiB is available{q8}. The \
         default --st-weights uses the experts in place from the files; with --ram GIB they \
         are read from disk into a cache of that budget",
        path.display(),
        gib(c.bytes),
        gib(avail)
    )
}

/// Opens the built-in model with `opts`.
pub fn open_builtin(opts: &LoadOptions) -> Result<Box<dyn Model>> {
    let file = GgufFile::parse(BUILTIN.to_vec()).context("the built-in model (tools/assets)")?;
    models::model::open_gguf(Arc::new(file), opts).context("the built-in model")
}

/// Reads the weights every token uses into memory (see `Model::preload`), with a progress
/// bar on stderr.
pub fn preload(model: &mut dyn Model) {
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    let mut shown = u64::MAX;
    let mut started = false;
    model.preload(&mut |done, total| {
        if !started {
            eprintln!();
            started = true;
        }
        let pct = done * 100 / total.max(1);
        if pct != shown {
            shown = pct;
            let bar = "=".repeat((pct / 4) as usize);
            eprint!(
                "\r  weights [{bar:<25}] {pct:>3}%  {:.2}/{:.2} GiB",
                gib(done),
                gib(total)
            );
            let _ = std::io::stderr().flush();
        }
    });
    if started {
        eprint!("\n  ");
    }
}

/// Opens `-m` (preloading its dense weights unless `no_preload`) or, without `-m`, the
/// built-in model; returns the name to show, the model, and whether it is the built-in one.
pub fn open_or_builtin(
    args: &ModelArgs,
    opts: &LoadOptions,
    no_preload: bool,
) -> Result<(String, Box<dyn Model>, bool)> {
    match &args.model {
        None => Ok((BUILTIN_NAME.to_string(), open_builtin(opts)?, true)),
        Some(path) => {
            let shown = path.display().to_string();
            eprint!("loading {shown} … ");
            let _ = std::io::stderr().flush();
            let mut model = open(path, opts).inspect_err(|_| eprintln!())?;
            if !no_preload {
                preload(&mut *model);
            }
            eprintln!("done");
            Ok((shown, model, false))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::check_converted;
    use models::model::ConvertedBytes;
    use std::path::Path;

    /// A conversion larger than the memory available is refused with both figures and the
    /// smaller policy's, naming the path; one that fits passes.
    #[test]
    fn conversions_that_do_not_fit_are_refused_with_the_figures() {
        let p = Path::new("/models/v4-flash");
        let c = ConvertedBytes {
            bytes: 159 << 30,
            with_q8_0: Some(144 << 30),
        };
        let e = check_converted(p, c, 22 << 30).unwrap_err().to_string();
        for want in [
            "/models/v4-flash",
            "159.0 GiB",
            "22.0 GiB",
            "--st-weights q8_0",
            "144.0 GiB",
            "--ram",
        ] {
            assert!(e.contains(want), "{want}: {e}");
        }
        assert!(check_converted(p, c, 160 << 30).is_ok());
        let q = ConvertedBytes {
            bytes: 144 << 30,
            with_q8_0: None,
        };
        // no Q8_0 figure to offer; the in-place default and --ram are still named
        let e = check_converted(p, q, 22 << 30).unwrap_err().to_string();
        assert!(!e.contains("q8_0"), "{e}");
        assert!(e.contains("in place") && e.contains("--ram"), "{e}");
    }
}
