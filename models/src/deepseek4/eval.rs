//! Evaluating a token sequence through the cached graphs: chunked prefill (`--mode
//! chunked:N`), one token at a time (`--mode incremental`, N = 1) — every position's logits.
//! One executor per distinct chunk length (at most two: N and the remainder) shares one state
//! buffer, so the caches carry over between chunks exactly as in decoding.

use super::forward::{input, Builder, ChunkInputs, ForwardError, Weights};
use super::hparams::Hparams;
use backends::{ExecConfig, Executor, StateBuf};
use graph::knobs::MoeKnobs;
use std::sync::Arc;

/// Logits `[n_tokens × n_vocab]` (row-major) of `tokens` evaluated in chunks of `chunk`
/// through the decode caches, with a context of `ctx` tokens.
pub fn logits_chunked<W: Weights>(
    hp: &Hparams,
    weights: &mut W,
    tokens: &[u32],
    chunk: usize,
    ctx: usize,
    cfg: &ExecConfig,
) -> Result<Vec<f32>, ForwardError> {
    logits_chunked_with(hp, weights, tokens, chunk, ctx, cfg, None)
}

/// [`logits_chunked`] with live MoE knobs (issue 6): every graph routes its learned-router
/// layers through `knobs` (read at run time, so set them before the call). `None` is the
/// model's own routing — the same graphs as [`logits_chunked`].
pub fn logits_chunked_with<W: Weights>(
    hp: &Hparams,
    weights: &mut W,
    tokens: &[u32],
    chunk: usize,
    ctx: usize,
    cfg: &ExecConfig,
    knobs: Option<Arc<MoeKnobs>>,
) -> Result<Vec<f32>, ForwardError> {
    let mut out = Vec::with_capacity(tokens.len() * hp.n_vocab);
    logits_chunked_each(hp, weights, tokens, chunk, ctx, cfg, knobs, |_, l| {
        out.extend_from_slice(l)
    })?;
    Ok(out)
}

/// [`logits_chunked_with`] without collecting: `each(p0, logits)` receives every chunk's
/// logits `[t × n_vocab]` (row-major, positions `p0..p0 + t`) as soon as it is computed.
#[allow(clippy::too_many_arguments)]
pub fn logits_chunked_each<W: Weights>(
    hp: &Hparams,
    weights: &mut W,
    tokens: &[u32],
    chunk: usize,
    ctx: usize,
    cfg: &ExecConfig,
    knobs: Option<Arc<MoeKnobs>>,
    mut each: impl FnMut(usize, &[f32]),
) -> Result<(), ForwardError> {
    if chunk == 0 {
        return Err(ForwardError::Unsupported("chunk size 0".into()));
    }
    if tokens.len() > ctx {
        return Err(ForwardError::Unsupported(format!(
            "{} tokens exceed the context of {ctx}",
            tokens.len()
        )));
    }
    let mut execs: Vec<(usize, Executor)> = Vec::new();
    let mut state: Option<StateBuf> = None;
    let mut p0 = 0;
    while p0 < tokens.len() {
        let t = chunk.min(tokens.len() - p0);
        if !execs.iter().any(|(n, _)| *n == t) {
            weights.new_graph();
            let mut b = Builder::new_cached(hp, weights, t, ctx)?;
            if let Some(k) = &knobs {
                b = b.with_moe_knobs(k.clone());
            }
            let toks = b.g.input(
                input::TOKENS,
                graph::TensorDesc::new(quant::DType::I32, &[t])?,
            )?;
            let mut x = b.embed(toks)?;
            for l in 0..hp.n_layer {
                x = b.layer(l, x, toks)?;
            }
            let logits = b.head(x)?;
            let mut g = b.g;
            g.output("logits", logits)?;
            execs.push((t, Executor::new(g, cfg.clone())));
        }
        let exec = &mut execs
            .iter_mut()
            .find(|(n, _)| *n == t)
            .expect("just built")
            .1;
        let st = state.get_or_insert_with(|| StateBuf::new(exec.plan().state_size()));
        let ids: Vec<i32> = tokens[p0..p0 + t].iter().map(|&x| x as i32).collect();
        exec.set_input_i32(input::TOKENS, &ids)
            .map_err(|e| ForwardError::Unsupported(e.to_string()))?;
        for (name, bytes) in ChunkInputs::new(hp, p0, t, ctx)?.values {
            if exec.plan().input(&name).is_some() {
                exec.set_input(&name, &bytes)
                    .map_err(|e| ForwardError::Unsupported(e.to_string()))?;
            }
        }
        exec.run_with_state(st);
        let logits = exec
            .output_f32("logits")
            .map_err(|e| ForwardError::Unsupported(e.to_string()))?;
        each(p0, &logits);
        p0 += t;
    }
    Ok(())
}
