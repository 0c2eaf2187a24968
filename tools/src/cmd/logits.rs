//! `fathom logits`: run a model on given tokens and write the logits of every position as one
//! F32 safetensors tensor `logits` of shape `[n_tokens, n_vocab]` (the stable interface
//! fathom is checked with from outside).
//!
//! `--mode batch` evaluates the whole sequence as one stateless prefill from position 0;
//! `--mode incremental` feeds one token at a time and `--mode chunked:N` N tokens at a time
//! through the decode caches (sliding-window ring, compressor states, compressed entries,
//! indexer keys), which must give the same logits.

use anyhow::{bail, Context, Result};
use backends::{ExecConfig, Executor};
use models::deepseek4::forward::input;
use models::deepseek4::st_weights::Fp8Policy;
use models::deepseek4::{
    Builder, GgufWeights, Hparams, PrefillInputs, SafetensorsWeights, StOptions, Weights,
};
use models::gguf::GgufFile;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Arguments of `fathom logits`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model: a .gguf file (the first shard of a split file), or an official-layout
    /// safetensors checkpoint: its directory, its `model.safetensors.index.json` or a
    /// `.safetensors` file (with `config.json`, and `tokenizer.json` for `--text`, beside it).
    /// A checkpoint's conversions follow `FATHOM_ST_WEIGHTS`: unset/`default` (BF16 in place,
    /// FP8 → F32, FP4 → MXFP4), `q8_0` (FP8 → Q8_0, for the real model) or `fp32` (every
    /// matrix F32: fp32 compute, as transformers).
    #[arg(short = 'm', long)]
    model: PathBuf,
    /// Token ids, comma separated, used exactly as given (no BOS added).
    #[arg(long, value_delimiter = ',', conflicts_with = "text")]
    tokens: Option<Vec<u32>>,
    /// Text to tokenize with the model's tokenizer (BOS as the metadata says).
    #[arg(long)]
    text: Option<String>,
    /// Evaluation mode: batch | incremental | chunked:N.
    #[arg(long, default_value = "batch")]
    mode: String,
    /// Output safetensors file.
    #[arg(long)]
    out: PathBuf,
    /// Threads (default: one per physical core).
    #[arg(short = 't', long)]
    threads: Option<usize>,
    /// Also write every layer's residual state as `hidden.{l}` `[n_tokens, 4, n_embd]`.
    #[arg(long)]
    hidden: bool,
    /// Context length for the incremental/chunked modes (default: the number of tokens).
    #[arg(long)]
    ctx: Option<usize>,
    /// Convert these GGUF tensor types at load into fathom's repacked layouts (`iq1_s`,
    /// `iq2_xxs`, `iq1_m`, `q2_0`, `all` or `none`); the logits must not change (a way to check that from
    /// outside).
    #[arg(long, default_value = "none", value_parser = super::run::parse_repack)]
    repack: models::deepseek4::Repack,
}

/// Run the command.
pub fn run(args: &Args, env: &crate::env::Env) -> Result<()> {
    let chunk: Option<usize> = match args.mode.as_str() {
        "batch" => None,
        "incremental" => Some(1),
        m => match m.strip_prefix("chunked:").map(str::parse::<usize>) {
            Some(Ok(n)) if n > 0 => Some(n),
            _ => bail!("--mode {m}: expected batch, incremental or chunked:N (N ≥ 1)"),
        },
    };
    let path = &args.model;
    let (mut model, hp) = Model::open(path, args.repack, env.st_weights.as_deref())?;
    let tokens: Vec<u32> = match (&args.tokens, &args.text) {
        (Some(t), _) => t.clone(),
        (None, Some(text)) => model
            .tokenizer(path)
            .with_context(|| format!("{}: tokenizer", path.display()))?
            .encode(text, true)?,
        (None, None) => bail!("give --tokens or --text"),
    };
    if tokens.is_empty() {
        bail!("no tokens");
    }
    if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= hp.n_vocab) {
        bail!(
            "token id {bad} is outside the vocabulary ({} tokens)",
            hp.n_vocab
        );
    }
    let t = tokens.len();
    let cfg = env.exec_config(args.threads)?;
    if let Some(chunk) = chunk {
        if args.hidden {
            bail!("--hidden is only available with --mode batch");
        }
        let ctx = args.ctx.unwrap_or(t.max(1));
        let logits = model
            .logits_chunked(&hp, &tokens, chunk, ctx, &cfg)
            .with_context(|| format!("{}: chunked evaluation", path.display()))?;
        return write_out(
            &args.out,
            vec![("logits".into(), bytemuck_f32(&logits), vec![t, hp.n_vocab])],
            t,
            hp.n_vocab,
        );
    }
    let graph = model
        .graph(&hp, t, args.hidden)
        .with_context(|| format!("{}: building the graph", path.display()))?;
    // FATHOM_FORCE_SCALAR=1 (`cfg.reference`): the single-thread reference executor
    let mut exec = Executor::new(graph, cfg);
    let ids: Vec<i32> = tokens.iter().map(|&x| x as i32).collect();
    exec.set_input_i32(input::TOKENS, &ids)?;
    for (name, bytes) in PrefillInputs::new(&hp, t).values {
        if exec.plan().input(&name).is_some() {
            exec.set_input(&name, &bytes)?;
        }
    }
    exec.run();
    if let Some(p) = exec.profiler_mut() {
        p.add_tokens(t as u64);
    }
    let logits = exec.output_f32("logits")?;
    let mut tensors: Vec<(String, Vec<u8>, Vec<usize>)> =
        vec![("logits".into(), bytemuck_f32(&logits), vec![t, hp.n_vocab])];
    if args.hidden {
        for l in 0..hp.n_layer {
            let h = exec.output_f32(&format!("hidden.{l}"))?;
            tensors.push((
                format!("hidden.{l}"),
                bytemuck_f32(&h),
                vec![t, hp.hc, hp.n_embd],
            ));
        }
    }
    write_out(&args.out, tensors, t, hp.n_vocab)
}

fn write_out(
    out: &Path,
    tensors: Vec<(String, Vec<u8>, Vec<usize>)>,
    t: usize,
    n_vocab: usize,
) -> Result<()> {
    let views: Vec<(String, safetensors::tensor::TensorView)> = tensors
        .iter()
        .map(|(n, b, s)| {
            Ok((
                n.clone(),
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), b)?,
            ))
        })
        .collect::<Result<_>>()?;
    safetensors::serialize_to_file(views, None, out)
        .with_context(|| format!("cannot write {}", out.display()))?;
    eprintln!("wrote logits [{t}, {n_vocab}] to {}", out.display());
    Ok(())
}

fn bytemuck_f32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The weights behind `-m`: a GGUF file, or an official safetensors checkpoint used directly
/// (BF16/F32 in place, FP8 dequantized to F32, FP4 experts repacked to MXFP4).
enum Model {
    Gguf(Box<GgufWeights>),
    Checkpoint(Box<SafetensorsWeights>),
}

/// A directory, a `.json` index or a `.safetensors` file is a checkpoint; anything else GGUF.
fn is_checkpoint(path: &Path) -> bool {
    path.is_dir()
        || path
            .extension()
            .is_some_and(|e| e == "json" || e == "safetensors")
}

impl Model {
    fn open(
        path: &Path,
        repack: models::deepseek4::Repack,
        st_weights: Option<&str>,
    ) -> Result<(Model, Hparams)> {
        if is_checkpoint(path) {
            let opts = match st_weights {
                None | Some("default") => StOptions::default(),
                Some("fp32") => StOptions::fp32(),
                Some("q8_0") => StOptions {
                    fp8: Fp8Policy::Q8_0,
                    ..StOptions::default()
                },
                Some(v) => bail!("FATHOM_ST_WEIGHTS={v}: expected default, q8_0 or fp32"),
            };
            let (w, hp) = SafetensorsWeights::open_with(path, opts)
                .with_context(|| format!("cannot open checkpoint {}", path.display()))?;
            return Ok((Model::Checkpoint(Box::new(w)), hp));
        }
        let file = Arc::new(
            GgufFile::open(path).with_context(|| format!("cannot open {}", path.display()))?,
        );
        let hp = Hparams::from_gguf(&file)
            .with_context(|| format!("{}: bad hyperparameters", path.display()))?;
        Ok((
            Model::Gguf(Box::new(GgufWeights::with_repack(file, repack))),
            hp,
        ))
    }

    fn tokenizer(&self, path: &Path) -> Result<models::tokenizer::Tokenizer> {
        Ok(match self {
            Model::Gguf(w) => models::tokenizer::Tokenizer::from_gguf(w.file())?,
            Model::Checkpoint(_) => {
                let dir = match path.parent() {
                    _ if path.is_dir() => path,
                    Some(p) if !p.as_os_str().is_empty() => p,
                    _ => Path::new("."),
                };
                models::tokenizer::Tokenizer::from_dir(dir)?
            }
        })
    }

    fn logits_chunked(
        &mut self,
        hp: &Hparams,
        tokens: &[u32],
        chunk: usize,
        ctx: usize,
        cfg: &ExecConfig,
    ) -> Result<Vec<f32>> {
        use models::deepseek4::eval::logits_chunked;
        Ok(match self {
            Model::Gguf(w) => logits_chunked(hp, w.as_mut(), tokens, chunk, ctx, cfg)?,
            Model::Checkpoint(w) => logits_chunked(hp, w.as_mut(), tokens, chunk, ctx, cfg)?,
        })
    }

    fn graph(&mut self, hp: &Hparams, t: usize, hidden: bool) -> Result<graph::Graph> {
        fn build(
            hp: &Hparams,
            w: &mut impl Weights,
            t: usize,
            hidden: bool,
        ) -> Result<graph::Graph> {
            Ok(Builder::new(hp, w, t)?.model(hidden)?)
        }
        match self {
            Model::Gguf(w) => build(hp, w.as_mut(), t, hidden),
            Model::Checkpoint(w) => build(hp, w.as_mut(), t, hidden),
        }
    }
}
