//! `fathom logits`: run a model on given tokens and write the logits of every position as one
//! F32 safetensors tensor `logits` of shape `[n_tokens, n_vocab]` (the stable interface
//! fathom is checked with from outside).
//!
//! `--mode batch` evaluates the whole sequence as one stateless prefill from position 0;
//! `--mode incremental` feeds one token at a time and `--mode chunked:N` N tokens at a time
//! through the decode caches (sliding-window ring, compressor states, compressed entries,
//! indexer keys), which must give the same logits.

use crate::load::{self, ModelArgs};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// Arguments of `fathom logits`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The model (required), threads, context (for the incremental and chunked modes,
    /// default: the number of tokens), repacks (the logits must not change: a way to check
    /// that from outside), checkpoint weight policy.
    #[command(flatten)]
    model: ModelArgs,
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
    /// Also write every layer's residual state as `hidden.{l}` `[n_tokens, 4, n_embd]`.
    #[arg(long)]
    hidden: bool,
}

/// Run the command.
pub fn run(args: &Args, env: &crate::env::Env) -> Result<()> {
    let chunk: Option<usize> = match args.mode.as_str() {
        "batch" => None,
        "incremental" => Some(1),
        m => match m.strip_prefix("chunked:").map(str::parse::<usize>) {
            Some(Ok(n)) if n > 0 => Some(n),
            _ => bail!("--mode {m}: expected batch, incremental or chunked:N (N at least 1)"),
        },
    };
    if chunk.is_some() && args.hidden {
        bail!("--hidden is only available with --mode batch");
    }
    let path = args.model.path()?;
    let shown = path.display();
    let opts = args.model.load_options(env)?;
    let model = load::open(path, &opts)?;
    let tokens: Vec<u32> = match (&args.tokens, &args.text) {
        (Some(t), _) => t.clone(),
        (None, Some(text)) => model
            .tokenizer()
            .context("--text needs the model's tokenizer")?
            .encode(text, true)?,
        (None, None) => bail!("give --tokens or --text"),
    };
    if tokens.is_empty() {
        bail!("no tokens");
    }
    let info = model.info().clone();
    if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= info.n_vocab) {
        bail!(
            "token id {bad} is outside the vocabulary ({} tokens)",
            info.n_vocab
        );
    }
    let t = tokens.len();
    let ctx = opts.ctx.unwrap_or(t);
    let hidden = if args.hidden {
        info.n_layer as u64 * info.hidden.iter().product::<usize>() as u64
    } else {
        0
    };
    load::check_output_memory(
        t as u64 * (info.n_vocab as u64 + hidden) * 4 * 2,
        &format!("the logits of {t} positions and their file"),
    )?;
    let mut session = load::session(model, &opts, ctx)?;
    if let Some(chunk) = chunk {
        let mut logits = Vec::with_capacity(t * info.n_vocab);
        session
            .eval_all(&tokens, chunk, |_, l| logits.extend_from_slice(l))
            .with_context(|| format!("{shown}: chunked evaluation"))?;
        return write_out(
            &args.out,
            vec![(
                "logits".into(),
                bytemuck_f32(&logits),
                vec![t, info.n_vocab],
            )],
            t,
            info.n_vocab,
        );
    }
    let out = session
        .eval_batch(&tokens, args.hidden)
        .with_context(|| format!("{shown}: evaluation"))?;
    let mut tensors: Vec<(String, Vec<u8>, Vec<usize>)> = vec![(
        "logits".into(),
        bytemuck_f32(&out.logits),
        vec![t, info.n_vocab],
    )];
    let [hc, d] = info.hidden;
    for (l, h) in out.hidden.iter().enumerate() {
        tensors.push((format!("hidden.{l}"), bytemuck_f32(h), vec![t, hc, d]));
    }
    write_out(&args.out, tensors, t, info.n_vocab)
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
    let bytes = safetensors::serialize(views, None)?;
    models::files::write_atomic(out, |f| f.write_all(&bytes))
        .with_context(|| format!("cannot write {}", out.display()))?;
    eprintln!("wrote logits [{t}, {n_vocab}] to {}", out.display());
    Ok(())
}

fn bytemuck_f32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
