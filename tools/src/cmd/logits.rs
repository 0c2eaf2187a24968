//! `fathom logits`: run a model on given tokens and write the logits of every position as one
//! F32 safetensors tensor `logits` of shape `[n_tokens, n_vocab]` (the stable interface
//! fathom is checked with from outside).
//!
//! `--mode batch` evaluates the whole sequence as one prefill from position 0. The
//! incremental and chunked modes need the decode caches and are not implemented yet.

use anyhow::{bail, Context, Result};
use backends::{ExecConfig, Executor};
use models::deepseek4::forward::input;
use models::deepseek4::{Builder, GgufWeights, Hparams, PrefillInputs};
use models::gguf::GgufFile;
use std::path::PathBuf;
use std::sync::Arc;

/// Arguments of `fathom logits`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model: a .gguf file (the first shard of a split file).
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
}

/// Run the command.
pub fn run(args: &Args) -> Result<()> {
    if args.mode != "batch" {
        bail!("--mode {}: only batch is implemented so far (incremental and chunked need the decode caches)", args.mode);
    }
    let path = &args.model;
    let file =
        Arc::new(GgufFile::open(path).with_context(|| format!("cannot open {}", path.display()))?);
    let hp = Hparams::from_gguf(&file)
        .with_context(|| format!("{}: bad hyperparameters", path.display()))?;
    let tokens: Vec<u32> = match (&args.tokens, &args.text) {
        (Some(t), _) => t.clone(),
        (None, Some(text)) => {
            let tok = models::tokenizer::Tokenizer::from_gguf(&file)
                .with_context(|| format!("{}: tokenizer", path.display()))?;
            tok.encode(text, true)?
        }
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
    let mut weights = GgufWeights::new(file.clone());
    let graph = Builder::new(&hp, &mut weights, t)?
        .model(args.hidden)
        .with_context(|| format!("{}: building the graph", path.display()))?;
    let mut cfg = ExecConfig::default();
    if let Some(n) = args.threads {
        cfg.threads = n.max(1);
    }
    // FATHOM_FORCE_SCALAR=1: the single-thread reference executor (for bisecting numerics)
    let mut exec = if std::env::var("FATHOM_FORCE_SCALAR").is_ok_and(|v| v == "1") {
        Executor::reference(graph)
    } else {
        Executor::new(graph, cfg)
    };
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
    let views: Vec<(String, safetensors::tensor::TensorView)> = tensors
        .iter()
        .map(|(n, b, s)| {
            Ok((
                n.clone(),
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), b)?,
            ))
        })
        .collect::<Result<_>>()?;
    safetensors::serialize_to_file(views, None, &args.out)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    eprintln!(
        "wrote logits [{t}, {}] to {}",
        hp.n_vocab,
        args.out.display()
    );
    Ok(())
}

fn bytemuck_f32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}
