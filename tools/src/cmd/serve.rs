//! `fathom serve`: the OpenAI- and Anthropic-compatible HTTP server (`fathom_server`).
//!
//! The model is opened like every command's (`-m`, or the built-in model), one session is
//! made for the engine thread, and axum serves on a tokio runtime whose few async workers
//! only parse, queue and stream; inference runs on the engine's own pinned threads.

use crate::load::{self, ModelArgs};
use anyhow::{Context, Result};
use server::{AppState, DiskOptions, Engine, EngineOptions, ServerConfig, StartError};
use std::path::{Path, PathBuf};

/// Arguments of `fathom serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The model (default: the tiny built-in model), threads, context, repacks.
    #[command(flatten)]
    model: ModelArgs,
    /// Address to listen on (loopback by default: pass 0.0.0.0 to serve the network, and
    /// then set --api-key).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on (0: any free port, printed at start).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Require this key on every /v1 request (`Authorization: Bearer KEY` or `x-api-key`).
    #[arg(long)]
    api_key: Option<String>,
    /// Slots: requests generating at once, each with its own caches; their decode steps
    /// run as one batched graph (weights read once per step for all). Requests beyond them
    /// wait in the queue.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    parallel: u64,
    /// Prompt tokens a slot reads per turn while other slots generate: smaller keeps their
    /// streams smoother, larger reads long prompts a little faster.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    prefill_chunk: u64,
    /// Requests that may wait for the engine; beyond it the server answers 503 with
    /// Retry-After.
    #[arg(long, default_value_t = 16)]
    queue: usize,
    /// MiB of memory for prefix snapshots (states after earlier prompts, reused when a new
    /// prompt starts with one); 0 keeps only the last request's state.
    #[arg(long, default_value_t = 1024)]
    cache_ram: u64,
    /// Take a snapshot every this many tokens inside long prompts (0: only at their end).
    #[arg(long, default_value_t = 2048)]
    snapshot_every: usize,
    /// Keep prompt snapshots in this directory too, across restarts (per model file and
    /// settings; read only when a prompt needs one).
    #[arg(long)]
    prefix_cache_dir: Option<PathBuf>,
    /// MiB the snapshot directory may hold (least recently used removed first).
    #[arg(long, default_value_t = 8192)]
    prefix_cache_disk: u64,
    /// The model id clients must name (default: the model file's name, or "fathom-builtin").
    #[arg(long)]
    alias: Option<String>,
    /// `max_tokens` of a chat request that gives none.
    #[arg(long, default_value_t = 4096)]
    default_max_tokens: usize,
    /// Do not read the dense weights into memory before serving.
    #[arg(long)]
    no_preload: bool,
    /// For tests of what a small model cannot write (tool calls): a JSON array of reply
    /// texts; each request's reply is forced to the next, in turn (the model still
    /// evaluates every token).
    #[arg(long, value_name = "FILE")]
    script: Option<PathBuf>,
}

/// Run the command.
pub fn run(args: &Args, env: &crate::env::Env) -> Result<()> {
    let script = match &args.script {
        None => Vec::new(),
        Some(p) => {
            let text = models::files::read_text_capped(p, models::files::CONFIG_CAP, "--script")
                .with_context(|| format!("--script {}", p.display()))?;
            serde_json::from_str::<Vec<String>>(&text)
                .with_context(|| format!("--script {}: not a JSON array of strings", p.display()))?
        }
    };
    let opts = args.model.load_options(env)?;
    let (name, model, builtin) = load::open_or_builtin(&args.model, &opts, args.no_preload)?;
    let tokenizer = model
        .tokenizer()
        .with_context(|| format!("{name}: serving needs the model's tokenizer"))?
        .clone();
    let template = model
        .chat_template()
        .with_context(|| format!("{name}: chat format"))?;
    if template.uses_fallback() {
        eprintln!(
            "chat: the vocabulary lacks {}; plain-text stand-ins are used",
            template.missing_tokens().join(" ")
        );
    }
    let ctx = opts.context(model.info());
    let session = load::session(model, &opts, ctx).with_context(|| name.clone())?;
    let model_id = args.alias.clone().unwrap_or_else(|| {
        if builtin {
            "fathom-builtin".into()
        } else {
            std::path::Path::new(&name)
                .file_name()
                .map_or(name.clone(), |f| f.to_string_lossy().into_owned())
        }
    });
    let threads = session.threads();
    let disk = match &args.prefix_cache_dir {
        None => None,
        Some(dir) => Some(DiskOptions {
            dir: dir.clone(),
            fingerprint: fingerprint(&args.model, builtin, ctx)?,
            max_bytes: args.prefix_cache_disk.saturating_mul(1 << 20),
        }),
    };
    let engine = Engine::start(
        session,
        tokenizer,
        EngineOptions {
            queue: args.queue.max(1),
            cache_ram: args.cache_ram.saturating_mul(1 << 20),
            snapshot_every: args.snapshot_every,
            disk,
            parallel: args.parallel as usize,
            prefill_chunk: args.prefill_chunk as usize,
            script,
        },
    )
    .map_err(|e| match e {
        StartError::Disk(e) => anyhow::anyhow!(
            "cannot use --prefix-cache-dir {}: {e}",
            args.prefix_cache_dir
                .as_deref()
                .unwrap_or(Path::new(""))
                .display()
        ),
        StartError::Slots(e) => anyhow::anyhow!("--parallel {}: {e}", args.parallel),
        e @ StartError::Script { .. } => anyhow::anyhow!("--script: {e}"),
    })?;
    let state = AppState::new(
        engine,
        template,
        ServerConfig {
            model_id: model_id.clone(),
            api_key: args.api_key.clone(),
            default_max_tokens: args.default_max_tokens.max(1),
            ..ServerConfig::default()
        },
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async {
        let addr = format!("{}:{}", args.host, args.port);
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        let local = listener.local_addr()?;
        eprintln!(
            "serving {model_id} ({name}; context {ctx}, {} slot(s), {threads} threads) on \
             http://{local} — \
             OpenAI /v1/chat/completions, /v1/completions, Anthropic /v1/messages, chat page /",
            args.parallel
        );
        if args.api_key.is_none() && !local.ip().is_loopback() {
            eprintln!("warning: listening beyond loopback without --api-key");
        }
        server::serve(listener, state)
            .await
            .context("the server stopped")
    })
}

/// What identifies the model's states on disk: the model file (canonical path, size,
/// modification time; or the built-in model and this version), the context and the load
/// settings that change the weights' layout. A model rewritten in place gets a new one.
fn fingerprint(args: &ModelArgs, builtin: bool, ctx: usize) -> Result<String> {
    let file = match &args.model {
        _ if builtin => format!("builtin {}", env!("CARGO_PKG_VERSION")),
        None => String::new(),
        Some(p) => {
            let canon = p
                .canonicalize()
                .with_context(|| format!("cannot resolve {}", p.display()))?;
            let m = std::fs::metadata(&canon)?;
            let mtime = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            format!("{} {} {mtime}", canon.display(), m.len())
        }
    };
    Ok(format!(
        "{file} ctx {ctx} repack {:?} st {:?}",
        args.repack, args.st_weights
    ))
}
