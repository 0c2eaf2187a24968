//! `fathom`: the command-line tool of the fathom runtime.
//!
//! Subcommands live in [`cmd`], one module each; this file only parses the command line,
//! reads the environment once ([`mod@env`]) and dispatches. Errors are `anyhow` errors whose
//! context chain names the file involved; they are printed on one line, each cause once
//! (`error: cannot open the model: X: bad magic ...`, no backtrace) and the exit status is
//! 1.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

mod cmd;
mod env;
mod fault;
mod load;
mod mem;
mod ram;

/// fathom: a ggml-style runtime for DeepSeek-V4 on CPUs.
#[derive(Parser, Debug)]
#[command(name = "fathom", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
enum Command {
    /// Show the header, metadata, tensors and per-type totals of a GGUF file (single or split:
    /// pass the first shard), a .safetensors file, a model.safetensors.index.json, or a
    /// checkpoint directory.
    Inspect(cmd::inspect::Args),
    /// Run every op's test cases on the optimized executor against the reference
    /// (fathom's test-backend-ops); `--perf` adds GB/s and GFLOP/s.
    TestOps(cmd::test_ops::Args),
    /// Write the logits of every position (`logits`, F32 `[n_tokens, n_vocab]`) to a
    /// safetensors file.
    Logits(cmd::logits::Args),
    /// Prefill and decode throughput like llama-bench (`--json` for llama-bench's fields plus
    /// bytes per token and the fraction of measured memory bandwidth).
    Bench(cmd::bench::Args),
    /// Generate text from a prompt, streaming it as it is produced, then print prefill and
    /// decode speeds; with no -m, the tiny model built into the binary.
    Run(cmd::run::Args),
    /// Compare two MoE configurations (or `none`, the model's own routing) over a text: mean
    /// and max KL, top-10 KL, cosine similarity, ΔPPL, top-1/top-3 agreement and decode speed.
    Kl(cmd::kl::Args),
    /// Write a random-weight DeepSeek-V4 GGUF at real V4-Flash dimensions (llama.cpp's
    /// `deepseek4` keys and names) for benchmarks: `--recipe seed|q4k|iq2`, `--type PAT=TYPE`.
    Synth(cmd::synth::Args),
    /// Serve the model over HTTP: OpenAI /v1/chat/completions and /v1/completions, Anthropic
    /// /v1/messages, /health, /metrics and a chat page, with prefix reuse across requests.
    Serve(cmd::serve::Args),
    /// Chat interactively, turn after turn, keeping the model's cache between turns
    /// (`/reset`, `/save FILE`, `/load FILE`).
    Chat(cmd::chat::Args),
}

/// The error and its causes on one line, `outer: inner: …`, each said once: a cause whose
/// text the message before it already contains (an error that prints its source, wrapped
/// by one that does too) is not repeated.
fn render(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let s = cause.to_string();
        if s.is_empty() || out.contains(&s) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&s);
    }
    out
}

fn main() -> ExitCode {
    fault::install();
    let matches = Cli::command().after_help(env::help()).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let result = env::Env::read().and_then(|env| match cli.command {
        Command::Inspect(args) => cmd::inspect::run(&args),
        Command::TestOps(args) => cmd::test_ops::run(&args),
        Command::Logits(args) => cmd::logits::run(&args, &env),
        Command::Bench(args) => cmd::bench::run(&args, &env),
        Command::Run(args) => cmd::run::run(&args, &env),
        Command::Kl(args) => cmd::kl::run(&args, &env),
        Command::Synth(args) => cmd::synth::run(&args),
        Command::Serve(args) => cmd::serve::run(&args, &env),
        Command::Chat(args) => cmd::chat::run(&args, &env),
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", render(&e));
            ExitCode::FAILURE
        }
    }
}
