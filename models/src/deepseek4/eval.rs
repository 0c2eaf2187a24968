//! Evaluating a token sequence through the cached graphs: chunked prefill (`--mode
//! chunked:N`), one token at a time (`--mode incremental`, N = 1) — every position's logits.
//! One executor per distinct chunk length (at most two: N and the remainder) shares one state
//! buffer, so the caches carry over between chunks exactly as in decoding.

use super::forward::{input, Builder, ChunkInputs, ForwardError, Weights};
use super::hparams::Hparams;
use backends::{ExecConfig, Executor, StateBuf};

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
    let mut out = Vec::with_capacity(tokens.len() * hp.n_vocab);
    let mut p0 = 0;
    while p0 < tokens.len() {
        let t = chunk.min(tokens.len() - p0);
        if !execs.iter().any(|(n, _)| *n == t) {
            weights.new_graph();
            let mut b = Builder::new_cached(hp, weights, t, ctx)?;
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
        out.extend(
            exec.output_f32("logits")
                .map_err(|e| ForwardError::Unsupported(e.to_string()))?,
        );
        p0 += t;
    }
    Ok(out)
}
