//! `fathom chat`: an interactive multi-turn chat on one session, like `llama-cli -cnv`.
//!
//! Each turn renders the whole conversation in the model's chat format; when the session's
//! tokens are a prefix of it (the usual case: the previous turn's prompt and reply), only the
//! new tokens are evaluated. Otherwise (the reply tokenizes differently when re-rendered) the
//! session starts over, which gives the same logits, only slower. `/reset` forgets the
//! conversation, `/save FILE` writes the session state to FILE and the conversation to
//! FILE.json, `/load FILE` restores both.

use crate::load::{self, ModelArgs};
use anyhow::{bail, Context, Result};
use models::chat::dsml::{ReplyEvent, ReplyParser};
use models::chat::{ChatOptions, Message, Role};
use models::sampling::{Sampler, SamplerConfig};
use models::session::SessionState;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

/// Arguments of `fathom chat`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The model (default: the tiny built-in model), threads, context, repacks.
    #[command(flatten)]
    model: ModelArgs,
    /// A system prompt.
    #[arg(long)]
    system: Option<String>,
    /// Thinking mode: the model reasons first (shown dimmed), then answers.
    #[arg(long)]
    think: bool,
    /// Most tokens per reply.
    #[arg(short = 'n', long = "n-predict", default_value_t = 1024)]
    n_predict: usize,
    /// Sampling temperature; 0 = greedy.
    #[arg(long, default_value_t = 0.6)]
    temp: f32,
    /// Nucleus sampling threshold (1 = off).
    #[arg(long, default_value_t = 0.95)]
    top_p: f32,
    /// Random seed.
    #[arg(short = 's', long)]
    seed: Option<u64>,
    /// Do not read the dense weights into memory before the first turn.
    #[arg(long)]
    no_preload: bool,
}

/// The conversation file written beside a saved state.
fn messages_path(state: &Path) -> PathBuf {
    let mut p = state.as_os_str().to_owned();
    p.push(".json");
    PathBuf::from(p)
}

fn save_messages(path: &Path, msgs: &[Message]) -> Result<()> {
    let v: Vec<serde_json::Value> = msgs
        .iter()
        .map(|m| {
            serde_json::json!({"role": match m.role {
                Role::System => "system", Role::User => "user",
                Role::Assistant => "assistant", Role::Tool => "tool"},
                "content": m.content, "reasoning": m.reasoning})
        })
        .collect();
    let text = serde_json::to_string_pretty(&v)?;
    models::files::write_atomic(path, |f| f.write_all(text.as_bytes()))
        .with_context(|| format!("cannot write {}", path.display()))
}

fn load_messages(path: &Path) -> Result<Vec<Message>> {
    let text = models::files::read_text_capped(path, models::files::TEXT_CAP, "conversation")
        .with_context(|| format!("cannot read {}", path.display()))?;
    let v: Vec<serde_json::Value> = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a saved conversation", path.display()))?;
    v.iter()
        .map(|m| {
            let role = match m["role"].as_str() {
                Some("system") => Role::System,
                Some("user") => Role::User,
                Some("assistant") => Role::Assistant,
                Some("tool") => Role::Tool,
                _ => bail!("{}: a message without a known role", path.display()),
            };
            let mut msg = Message::new(role, m["content"].as_str().unwrap_or(""));
            msg.reasoning = m["reasoning"].as_str().map(str::to_owned);
            Ok(msg)
        })
        .collect()
}

/// Run the command.
pub fn run(args: &Args, env: &crate::env::Env) -> Result<()> {
    let opts = args.model.load_options(env)?;
    let (name, model, _) = load::open_or_builtin(&args.model, &opts, args.no_preload)?;
    let tok = model
        .tokenizer()
        .with_context(|| format!("{name}: chatting needs the model's tokenizer"))?
        .clone();
    let template = model
        .chat_template()
        .with_context(|| format!("{name}: chat format"))?;
    let ctx = opts.context(model.info());
    let mut session = load::session(model, &opts, ctx).with_context(|| name.clone())?;
    let eos = tok.eos().unwrap_or(session.info().eos);
    let cfg = SamplerConfig {
        temperature: args.temp,
        top_k: 0,
        top_p: args.top_p,
        min_p: 0.0,
        seed: args.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        }),
        ..SamplerConfig::default()
    };
    let mut sampler = Sampler::new(cfg).context("sampling options")?;
    let chat_opts = ChatOptions {
        thinking: args.think,
        ..ChatOptions::default()
    };
    let system: Vec<Message> = args.system.iter().map(Message::system).collect();
    let mut msgs = system.clone();
    eprintln!(
        "chat with {name} (context {ctx}); /reset, /save FILE, /load FILE, /quit; an empty line \
         or Ctrl-D ends"
    );
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    loop {
        eprint!("> ");
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 {
            break;
        }
        let line = line.trim_end_matches(['\n', '\r']);
        match line
            .split_once(' ')
            .map_or((line, ""), |(a, b)| (a, b.trim()))
        {
            ("" | "/quit" | "/exit", _) => break,
            ("/reset", _) => {
                msgs = system.clone();
                session.reset();
                eprintln!("(conversation cleared)");
                continue;
            }
            ("/save", f) if !f.is_empty() => {
                let p = Path::new(f);
                session
                    .state()
                    .save(p)
                    .with_context(|| format!("cannot save the session to {f}"))?;
                save_messages(&messages_path(p), &msgs)?;
                eprintln!("(saved {} tokens to {f})", session.n_past());
                continue;
            }
            ("/load", f) if !f.is_empty() => {
                let p = Path::new(f);
                let state = SessionState::load(p)?;
                let loaded = load_messages(&messages_path(p))?;
                session.set_state(&state)?;
                msgs = loaded;
                eprintln!(
                    "(loaded {} messages, {} tokens)",
                    msgs.len(),
                    session.n_past()
                );
                continue;
            }
            (c, _) if c.starts_with('/') => {
                eprintln!("commands: /reset, /save FILE, /load FILE, /quit");
                continue;
            }
            _ => {}
        }
        msgs.push(Message::user(line));
        let text = template.render(&msgs, &chat_opts);
        let ids = tok
            .encode(&text, false)
            .context("tokenizing the conversation")?;
        if ids.len() >= ctx {
            msgs.pop();
            eprintln!(
                "(the conversation has {} tokens, the context {ctx}: /reset)",
                ids.len()
            );
            continue;
        }
        if !ids.starts_with(session.tokens()) {
            session.reset();
        }
        let reused = session.n_past();
        let mut logits = session.prefill(&ids[reused..])?;
        let mut streamer = tok.streamer().skip_special(false);
        let mut parser = ReplyParser::new(args.think);
        let mut reply = models::chat::dsml::Reply::default();
        let mut show =
            |evs: Vec<ReplyEvent>, reply: &mut models::chat::dsml::Reply| -> Result<()> {
                for e in evs {
                    match &e {
                        ReplyEvent::Reasoning(s) => write!(out, "\x1b[2m{s}\x1b[0m")?,
                        ReplyEvent::Content(s) => write!(out, "{s}")?,
                        ReplyEvent::ToolCall(c) => write!(out, "\n[tool call {}]", c.name)?,
                    }
                    reply.push(e);
                }
                out.flush()?;
                Ok(())
            };
        for i in 0..args.n_predict {
            let next = sampler.sample(&logits)?;
            if next == eos {
                break;
            }
            sampler.accept(next);
            if let Some(s) = streamer.push(next) {
                show(parser.push(&s), &mut reply)?;
            }
            if i + 1 == args.n_predict || session.n_past() >= ctx {
                break;
            }
            logits = session.decode(next)?;
        }
        let tail = streamer.finish().unwrap_or_default();
        let mut evs = parser.push(&tail);
        evs.extend(parser.finish());
        show(evs, &mut reply)?;
        writeln!(out)?;
        eprintln!("({} prompt tokens, {reused} reused)", ids.len());
        let mut m = Message::assistant(reply.content);
        if !reply.reasoning.is_empty() {
            m.reasoning = Some(reply.reasoning);
        }
        msgs.push(m);
    }
    Ok(())
}
