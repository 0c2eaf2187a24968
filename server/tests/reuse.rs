//! Prefix reuse in the engine against the fixture's cache-reuse reference
//! (`fixtures/reuse.safetensors`, copied from `shared/fixtures/dsv4-tiny/reference/`: see
//! `fixtures/README.md`): 500 tokens of MPL-2.0 and transformers' fp32 logits of every
//! position from one stateless forward. Prompts grow one token at a time from a split point,
//! so each continues a snapshot the engine took at the previous prompt's end; the
//! log-probabilities at every position after the split must match the reference (top-1 equal,
//! top-5 within 1e-3) and equal, bit for bit, an engine without snapshots that continues its
//! live state over the same chunks.

use fathom_server::engine::{Event, GenParams, Job, TokenLogprob};
use fathom_server::{Engine, EngineOptions};
use models::model::{open_gguf, LoadOptions};
use models::sampling::SamplerConfig;
use models::session::Session;
use std::sync::Arc;

const MODEL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../models/tests/fixtures/dsv4-tiny/dsv4-tiny-F32.gguf"
);
const REUSE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/reuse.safetensors"
);

fn engine(snapshot_every: usize, cache_ram: u64) -> Engine {
    let file = Arc::new(models::gguf::GgufFile::parse(std::fs::read(MODEL).unwrap()).unwrap());
    let lo = LoadOptions::default();
    let model = open_gguf(file, &lo).unwrap();
    let tok = model.tokenizer().unwrap().clone();
    let session = Session::new(model, lo.exec.clone(), 512).unwrap();
    let opts = EngineOptions {
        snapshot_every,
        cache_ram,
        ..EngineOptions::default()
    };
    Engine::start(session, tok, opts).unwrap()
}

/// The first token's log-probabilities (`None` when the greedy token is the end of text,
/// which is not reported) and the cached prompt tokens of a 1-token greedy job.
fn next_logprobs(e: &Engine, prompt: &[u32]) -> (Option<TokenLogprob>, usize) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    e.submit(Job {
        prompt: prompt.to_vec(),
        params: GenParams {
            max_tokens: 1,
            sampler: SamplerConfig::greedy(),
            stop: Vec::new(),
            top_logprobs: Some(5),
        },
        events: tx,
    })
    .unwrap();
    let (mut lp, mut cached) = (None, 0);
    while let Some(ev) = rx.blocking_recv() {
        match ev {
            Event::Started { cached_tokens, .. } => cached = cached_tokens,
            Event::Token {
                logprob: Some(l), ..
            } => lp = Some(l),
            Event::Done { .. } => break,
            Event::Failed(e) => panic!("{e}"),
            Event::Token { .. } => {}
        }
    }
    (lp, cached)
}

struct Reference {
    tokens: Vec<u32>,
    split: usize,
    logits: Vec<f32>,
    n_vocab: usize,
}

fn reference() -> Reference {
    let bytes = std::fs::read(REUSE).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let i32s = |name: &str| -> Vec<i32> {
        st.tensor(name)
            .unwrap()
            .data()
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    };
    let logits = st.tensor("reuse_logits").unwrap();
    let n_vocab = logits.shape()[1];
    Reference {
        tokens: i32s("reuse_tokens").iter().map(|&t| t as u32).collect(),
        split: i32s("reuse_prefix_len")[0] as usize,
        logits: logits
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        n_vocab,
    }
}

/// The reference log-probabilities after position `p` (of the prompt `tokens[..=p]`).
fn ref_logprobs(r: &Reference, p: usize) -> Vec<f64> {
    let row = &r.logits[p * r.n_vocab..(p + 1) * r.n_vocab];
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let lse = max
        + row
            .iter()
            .map(|&l| (l as f64 - max).exp())
            .sum::<f64>()
            .ln();
    row.iter().map(|&l| l as f64 - lse).collect()
}

#[test]
fn every_position_after_the_split_matches_the_reference_and_a_run_without_snapshots() {
    let r = reference();
    assert_eq!(r.tokens.len(), 500);
    // A restores a snapshot for every prompt (taken at the previous prompt's end, and every
    // 128 tokens); B keeps no snapshots and only continues its live state. Both evaluate the
    // same chunks, so they must agree bit for bit, and both must match the reference.
    let a = engine(128, 1 << 30);
    let b = engine(0, 0);
    let (mut worst, mut checked, mut eos) = (0f64, 0, 0);
    let mut check = |lp: &Option<TokenLogprob>, end: usize| {
        let want = ref_logprobs(&r, end - 1);
        let best = (0..want.len())
            .max_by(|&x, &y| want[x].total_cmp(&want[y]))
            .unwrap();
        let Some(lp) = lp else {
            // greedy chose the end of text (id 1), whose log-probability is not reported
            assert_eq!(
                best, 1,
                "end of text after {end} tokens; the reference's top is {best}"
            );
            eos += 1;
            return;
        };
        assert_eq!(lp.top[0].0 as usize, best, "top-1 after {end} tokens");
        for &(id, _, l) in &lp.top {
            worst = worst.max((l as f64 - want[id as usize]).abs());
        }
        checked += 1;
    };
    for end in r.split..=r.tokens.len() {
        let (la, ca) = next_logprobs(&a, &r.tokens[..end]);
        let (lb, cb) = next_logprobs(&b, &r.tokens[..end]);
        if end > r.split {
            assert_eq!(
                ca,
                end - 1,
                "A, prompt of {end}: from the previous prompt's snapshot"
            );
            assert_eq!(cb, end - 1, "B, prompt of {end}: its live state");
        }
        assert_eq!(
            la, lb,
            "prompt of {end}: restored snapshot vs continued state"
        );
        check(&la, end);
    }
    // Another split, on A: prompts up to 300 are new; from there on they are whole
    // snapshots from the first pass, served with their stored logits.
    for end in 257..=r.tokens.len() {
        let (lp, cached) = next_logprobs(&a, &r.tokens[..end]);
        assert!(
            end == 257 || cached >= end - 1,
            "prompt of {end}: {cached} reused"
        );
        check(&lp, end);
    }
    assert!(worst < 1e-3, "max |Δ logprob| {worst:.2e}");
    assert!(
        checked > 400,
        "{checked} positions checked, {eos} ended at end of text"
    );
}
