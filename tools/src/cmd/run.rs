//! `fathom run`: generate text from a prompt, streaming it to stdout as it is produced, then
//! print prefill and decode speeds on stderr.
//!
//! Without `-m` it runs the tiny DeepSeek-V4 model built into the binary
//! (`tools/assets/dsv4-tiny-trained-Q8_0.gguf`, a 7.8M-parameter model trained on a small
//! English corpus — not DeepSeek-V4's weights) with the per-op profile at the end.
//!
//! Generation goes through [`models::session::Session`]: the prompt is evaluated in chunks of
//! `--ubatch` tokens through the decode caches, then one cached step per generated token.
//! `--recompute` selects the pre-cache path instead (the stateless graph re-run over the whole
//! sequence for every token, O(n²)) — a cross-check and a measurement, not for use.

use crate::load::{self, ModelArgs, BUILTIN_NAME};
use anyhow::{bail, Context, Result};
use backends::profiler::ProfileOutput;
use models::chat::{ChatOptions, Message};
use models::model::CachePart;
use models::sampling::{Sampler, SamplerConfig};
use models::session::{Mode, Session, DEFAULT_UBATCH};
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

/// The prompt used when none is given: the built-in model continues it with the GPL text.
const DEFAULT_PROMPT: &str = "This program is free software";

/// Arguments of `fathom run`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The model (default: the tiny built-in model), threads, context, repacks.
    #[command(flatten)]
    model: ModelArgs,
    /// Do not read the dense (non-expert) weights into memory before the first token (large
    /// GGUFs are otherwise paged in up front with a progress bar; routed experts are always
    /// paged in on demand).
    #[arg(long)]
    no_preload: bool,
    /// Prompt text (default: "This program is free software").
    #[arg(short = 'p', long, conflicts_with = "file")]
    prompt: Option<String>,
    /// Read the prompt from a file.
    #[arg(short = 'f', long)]
    file: Option<PathBuf>,
    /// Tokens to generate at most (generation also stops at EOS).
    #[arg(short = 'n', long = "n-predict", default_value_t = 64)]
    n_predict: usize,
    /// Wrap the prompt in the model's chat format (one user turn + the assistant prompt).
    #[arg(long)]
    chat: bool,
    /// Sampling temperature; 0 = greedy.
    #[arg(long, default_value_t = 0.8)]
    temp: f32,
    /// Keep the k most likely tokens (0 = off).
    #[arg(long, default_value_t = 40)]
    top_k: usize,
    /// Nucleus sampling threshold (1 = off).
    #[arg(long, default_value_t = 0.95)]
    top_p: f32,
    /// Minimum probability relative to the most likely token (0 = off).
    #[arg(long, default_value_t = 0.05)]
    min_p: f32,
    /// Repetition penalty over the last 64 tokens (1 = off).
    #[arg(long, default_value_t = 1.0)]
    repeat_penalty: f32,
    /// Random seed (default: from the clock; printed so that a run can be repeated).
    #[arg(short = 's', long)]
    seed: Option<u64>,
    /// Longest prompt chunk evaluated at once.
    #[arg(short = 'u', long, default_value_t = DEFAULT_UBATCH)]
    ubatch: usize,
    /// Diagnostic: no decode caches — re-evaluate the whole sequence with the stateless graph
    /// for every token (O(n²); the path used before the caches existed).
    #[arg(long)]
    recompute: bool,
    /// Live MoE configuration (TOML, or the seed's 32-byte `.bin` form), re-checked between
    /// tokens; without a value `/tmp/dsv4_moe_cfg.bin`. Also `FATHOM_MOE_CONFIG`.
    #[arg(long, num_args = 0..=1, default_missing_value = "/tmp/dsv4_moe_cfg.bin")]
    moe_config: Option<PathBuf>,
}

/// What was loaded.
struct Loaded {
    name: String,
    session: Session,
    builtin: bool,
}

fn mb(b: u64) -> String {
    if b >= 1 << 30 {
        format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.2} MiB", b as f64 / (1u64 << 20) as f64)
    }
}

fn ms(ns: u128) -> f64 {
    ns as f64 / 1e6
}

fn rate(n: usize, ns: u128) -> String {
    if n == 0 || ns == 0 {
        "n/a".into()
    } else {
        format!("{:.2} tok/s", n as f64 / (ns as f64 / 1e9))
    }
}

fn load(args: &Args, env: &crate::env::Env) -> Result<Loaded> {
    let opts = args.model.load_options(env)?;
    let t0 = Instant::now();
    let (name, model, builtin) = match &args.model.model {
        None => {
            let model = load::open_builtin(&opts)?;
            eprintln!(
                "fathom run: no -m given, using the built-in demo model: a {:.1}M-parameter model \
                 with the DeepSeek-V4 architecture, trained for 35 minutes on a small English \
                 corpus (Debian licences and documentation). These are NOT DeepSeek-V4's real \
                 weights; expect rambling licence-flavoured English. Pass -m MODEL.gguf for a \
                 real model.",
                model.info().n_params as f64 / 1e6
            );
            (BUILTIN_NAME.to_string(), model, true)
        }
        Some(path) => {
            let shown = path.display().to_string();
            eprint!("loading {shown} … ");
            let _ = std::io::stderr().flush();
            let mut model = load::open(path, &opts).inspect_err(|_| eprintln!())?;
            if !args.no_preload {
                load::preload(&mut *model);
            }
            (shown, model, false)
        }
    };
    let info = model.info();
    if let Some(n) = opts.ctx.filter(|&n| n > info.n_ctx_train) {
        eprintln!(
            "\nwarning: --ctx {n} is longer than the model's trained context ({})",
            info.n_ctx_train
        );
    }
    let ctx = opts.context(info);
    let session = load::session(model, &opts, ctx).with_context(|| name.clone())?;
    if builtin {
        eprintln!(
            "loaded the built-in model in {:.1} ms",
            ms(t0.elapsed().as_nanos())
        );
    } else {
        eprintln!("done in {:.1} ms", ms(t0.elapsed().as_nanos()));
    }
    Ok(Loaded {
        name,
        session,
        builtin,
    })
}

fn describe_cache(total: u64, parts: &[CachePart]) -> String {
    let parts: Vec<String> = parts
        .iter()
        .map(|p| format!("{} {}", p.name, mb(p.bytes)))
        .collect();
    format!("{} ({})", mb(total), parts.join(", "))
}

/// Run the command.
pub fn run(args: &Args, env: &crate::env::Env) -> Result<()> {
    let cfg = SamplerConfig {
        temperature: args.temp,
        top_k: args.top_k,
        top_p: args.top_p,
        min_p: args.min_p,
        seed: args.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0)
        }),
        repeat_penalty: args.repeat_penalty,
        ..SamplerConfig::default()
    };
    let mut sampler = Sampler::new(cfg).context("sampling options")?;
    let prompt = match (&args.prompt, &args.file) {
        (Some(p), _) => p.clone(),
        (None, Some(f)) => {
            models::files::read_text_capped(f, models::files::TEXT_CAP, "prompt file")
                .with_context(|| format!("cannot read the prompt file {}", f.display()))?
        }
        (None, None) => DEFAULT_PROMPT.to_string(),
    };

    let Loaded {
        name,
        mut session,
        builtin,
    } = load(args, env)?;
    let info = session.info().clone();
    let tok = session
        .model()
        .tokenizer()
        .context("generating text needs the model's tokenizer")?
        .clone();
    let profile_out: Option<ProfileOutput> = env.profile.clone();
    if builtin || profile_out.is_some() {
        session.set_profile(true);
    }
    if args.ubatch == 0 {
        bail!("--ubatch 0: chunks must hold at least one token");
    }
    session.set_ubatch(args.ubatch);
    if args.recompute {
        session.set_mode(Mode::Recompute);
    }
    // live MoE control: knobs read by the graph at run time, the file polled once per token
    let moe_path = args.moe_config.clone().or_else(|| env.moe_config.clone());
    let mut moe = moe_path.map(|p| {
        let knobs = std::sync::Arc::new(graph::knobs::MoeKnobs::new(info.n_layer));
        session.set_moe_knobs(Some(knobs.clone()));
        eprintln!(
            "moe: watching {} (model routing until it exists)",
            p.display()
        );
        (models::moe_config::MoeWatcher::new(p), knobs)
    });
    let moe_shape = info.moe;
    if moe.is_some() && moe_shape.is_none() {
        bail!("{name}: --moe-config: the model has no routed experts");
    }
    // `now`: at start-up, a configuration already in place applies before the first token
    let mut poll_moe = |now: bool| {
        if let (Some((w, knobs)), Some(shape)) = (moe.as_mut(), moe_shape.as_ref()) {
            let event = if now {
                w.poll_now(shape, knobs)
            } else {
                w.poll(shape, knobs)
            };
            match event {
                Some(models::moe_config::MoeEvent::Applied(c)) => {
                    eprintln!("\nmoe: {} now in force: {c}", w.path().display())
                }
                Some(models::moe_config::MoeEvent::Rejected(e)) => {
                    eprintln!("\nmoe: rejected, keeping the last good configuration: {e}")
                }
                Some(models::moe_config::MoeEvent::Removed) => eprintln!(
                    "\nmoe: {} removed, back to the model's own routing",
                    w.path().display()
                ),
                None => {}
            }
        }
    };
    poll_moe(true);

    // tokenize
    let mut ids = if args.chat {
        let tmpl = session
            .model()
            .chat_template()
            .with_context(|| format!("{name}: chat format"))?;
        if tmpl.uses_fallback() {
            eprintln!(
                "chat: the vocabulary lacks {}; plain-text stand-ins are used",
                tmpl.missing_tokens().join(" ")
            );
        }
        let text = tmpl.render(&[Message::user(prompt.clone())], &ChatOptions::default());
        tok.encode(&text, false)
    } else {
        tok.encode(&prompt, true)
    }
    .with_context(|| format!("{name}: tokenizing the prompt"))?;
    if ids.is_empty() && !prompt.is_empty() {
        // a vocabulary without byte tokens (e.g. the synthetic real-dimension GGUF) can leave
        // nothing of the text: start from BOS rather than refuse
        if let Some(bos) = tok.bos() {
            eprintln!("warning: no token of the vocabulary matches the prompt; starting from BOS");
            ids.push(bos);
        }
    }
    if ids.is_empty() {
        bail!("the prompt is empty");
    }
    let ctx = session.ctx();
    if ids.len() > ctx {
        bail!(
            "the prompt has {} tokens, more than the context of {ctx} (raise --ctx)",
            ids.len()
        );
    }
    eprintln!(
        "model: {} layers, hidden {}, vocab {}; {} threads; context {ctx} tokens",
        info.n_layer,
        info.n_embd,
        info.n_vocab,
        session.threads()
    );
    if args.recompute {
        eprintln!(
            "cache: none (--recompute: every step re-evaluates the whole sequence, O(n²)); \
             the cached mode would allocate {} for {ctx} tokens",
            mb(session.cache_bytes())
        );
    } else {
        eprintln!(
            "cache: {} for {ctx} tokens at f32; prompt chunks of {} tokens",
            describe_cache(session.cache_bytes(), &session.cache_parts()),
            args.ubatch
        );
    }
    if cfg.temperature > 0.0 {
        eprintln!(
            "sampling: temp {} top-k {} top-p {} min-p {} repeat-penalty {} seed {}",
            cfg.temperature, cfg.top_k, cfg.top_p, cfg.min_p, cfg.repeat_penalty, cfg.seed
        );
    } else {
        eprintln!("sampling: greedy");
    }
    for &t in &ids {
        sampler.accept(t);
    }

    let mut out = std::io::stdout().lock();
    if !args.chat {
        write!(out, "{prompt}")?;
        out.flush()?;
    }
    let eos = tok.eos().unwrap_or(info.eos);
    let mut streamer = tok.streamer().skip_special(true);

    let t0 = Instant::now();
    let mut logits = session
        .prefill(&ids)
        .with_context(|| format!("{name}: prefill of {} tokens", ids.len()))?;
    let prefill_ns = t0.elapsed().as_nanos();
    let mut decode_ns = 0u128;
    let mut decoded = 0usize;
    let mut generated = 0usize;
    let mut stop = "";
    while generated < args.n_predict {
        let next = sampler.sample(&logits).context("sampling")?;
        if next == eos {
            stop = " (end of text)";
            break;
        }
        generated += 1;
        if let Some(s) = streamer.push(next) {
            write!(out, "{s}")?;
            out.flush()?;
        }
        if generated == args.n_predict {
            break;
        }
        if session.n_past() >= ctx {
            stop = " (context full)";
            break;
        }
        poll_moe(false);
        let t = Instant::now();
        logits = session
            .decode(next)
            .with_context(|| format!("{name}: decoding at position {}", session.n_past()))?;
        decode_ns += t.elapsed().as_nanos();
        decoded += 1;
    }
    if let Some(s) = streamer.finish() {
        write!(out, "{s}")?;
    }
    writeln!(out)?;
    out.flush()?;
    drop(out);

    eprintln!(
        "prefill: {} tokens in {:.1} ms ({}) | decode: {decoded} tokens in {:.1} ms ({}){stop}",
        ids.len(),
        ms(prefill_ns),
        rate(ids.len(), prefill_ns),
        ms(decode_ns),
        rate(decoded, decode_ns),
    );
    let st = session.stats();
    eprintln!(
        "{}: {} graphs built in {:.1} ms, {} runs in {:.1} ms over {} positions (cache state \
         {}, peak arena {})",
        if args.recompute {
            "recompute"
        } else {
            "cached"
        },
        st.graphs_built,
        ms(u128::from(st.build_ns)),
        st.runs,
        ms(u128::from(st.run_ns)),
        st.positions_evaluated,
        mb(st.state_bytes as u64),
        mb(st.peak_arena_bytes as u64)
    );
    if let Some(c) = session.model().expert_cache() {
        let s = c.stats();
        let per = |x: f64| x / (ids.len() + decoded).max(1) as f64;
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        eprintln!(
            "experts (--ram): {:.1}% hits, {:.1} MiB read per token ({:.2} GB/s while reading), \
             I/O wait {:.1} ms per token, {} of {} guesses used, {:.2} GiB held (peak {:.2}, \
             budget {:.2})",
            100.0 * s.hit_rate(),
            per(s.bytes_read as f64) / (1u64 << 20) as f64,
            s.bytes_read as f64 / 1e9 / s.busy_secs.max(1e-9),
            per(1e3 * s.wait_secs),
            s.guess_used,
            s.guessed,
            gib(s.resident),
            gib(s.peak),
            gib(s.budget)
        );
    }
    if let Some(p) = session.take_profile() {
        match profile_out {
            Some(ProfileOutput::Json(path)) => {
                let json = p.to_json().to_string();
                models::files::write_atomic(std::path::Path::new(&path), |f| f.write_all(json.as_bytes()))
                    .with_context(|| format!("cannot write the profile {path}"))?
            }
            Some(ProfileOutput::Trace(path)) => eprintln!(
                "profile: trace:{path} is not written by run (one executor per step); the table:\n{}",
                p.table()
            ),
            _ => eprintln!("{}", p.table()),
        }
    }
    Ok(())
}
