//! The F32 GGUF (written by gguf-py from the same checkpoint, llama.cpp's tensor names) against
//! transformers: batch prefill with per-layer hidden states of prompt 2, incremental and
//! chunked 1/7/13/64 evaluation through the decode caches at every position of all five
//! prompts, and the cached greedy continuations (fixture README §8).

use backends::{ExecConfig, Executor};
use fathom_models::deepseek4::forward::input;
use fathom_models::deepseek4::{Builder, Hparams, PrefillInputs};
use fathom_models::gguf::GgufFile;
use fathom_models::weights::GgufWeights;
use safetensors::SafeTensors;
use std::sync::Arc;

fn fx(p: &str) -> String {
    format!("{}/tests/fixtures/{p}", env!("CARGO_MANIFEST_DIR"))
}

fn f32s(st: &SafeTensors, name: &str) -> Vec<f32> {
    st.tensor(name)
        .unwrap()
        .data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn ids(st: &SafeTensors, name: &str) -> Vec<u32> {
    st.tensor(name)
        .unwrap()
        .data()
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as u32)
        .collect()
}

fn argmax(x: &[f32]) -> usize {
    x.iter()
        .enumerate()
        .fold(0, |b, (i, &v)| if v > x[b] { i } else { b })
}

fn cfg() -> ExecConfig {
    ExecConfig {
        threads: 2,
        cpus: None,
        pin: false,
        elide_barriers: true,
        spin: 2000,
        profile: None,
        guards: false,
        ..ExecConfig::default()
    }
}

/// A session over `w` (model `hp`, no tokenizer) with `cfg` and a context of `ctx`.
fn session_of(
    hp: &Hparams,
    w: impl fathom_models::weights::Weights + Send + 'static,
    cfg: &ExecConfig,
    ctx: usize,
) -> fathom_models::session::Session {
    let m = fathom_models::deepseek4::DeepSeek4::new(hp.clone(), w, Err(String::new()));
    fathom_models::session::Session::new(
        Box::new(m) as Box<dyn fathom_models::model::Model>,
        cfg.clone(),
        ctx,
    )
    .unwrap()
}

/// Every position's logits of `toks` through `s`'s decode caches, `chunk` at a time, from an
/// empty sequence.
fn logits_chunked(s: &mut fathom_models::session::Session, toks: &[u32], chunk: usize) -> Vec<f32> {
    s.reset();
    let mut out = Vec::new();
    s.eval_all(toks, chunk, |_, l| out.extend_from_slice(l))
        .unwrap();
    out
}

fn check_rows(got: &[f32], want: &[f32], v: usize, what: &str) -> f32 {
    assert_eq!(got.len(), want.len(), "{what}");
    let mut worst = 0f32;
    for (row, (g, h)) in got.chunks(v).zip(want.chunks(v)).enumerate() {
        let d = g.iter().zip(h).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        worst = worst.max(d);
        assert!(d <= 1e-3, "{what} row {row}: max |Δlogit| {d:e}");
        assert_eq!(argmax(g), argmax(h), "{what} row {row}: top-1");
    }
    worst
}

#[test]
fn f32_gguf_every_mode_and_greedy() {
    let file = Arc::new(GgufFile::open(fx("dsv4-tiny/dsv4-tiny-F32.gguf")).unwrap());
    let hp = Hparams::from_gguf(&file).unwrap();
    let bytes = std::fs::read(fx("dsv4-tiny/reference/hf_logits_all.safetensors")).unwrap();
    let r = SafeTensors::deserialize(&bytes).unwrap();
    let hb = std::fs::read(fx("dsv4-tiny/reference/hf_reference_subset.safetensors")).unwrap();
    let hidden_ref = SafeTensors::deserialize(&hb).unwrap();
    let v = hp.n_vocab;
    // batch, with hidden states of prompt 2
    for p in 0..5 {
        let toks = ids(&r, &format!("prompt{p}.tokens"));
        let t = toks.len();
        let g = Builder::new(&hp, &mut GgufWeights::new(file.clone()), t)
            .unwrap()
            .model(p == 2)
            .unwrap();
        let mut e = Executor::new(g, cfg());
        e.set_input_i32(
            input::TOKENS,
            &toks.iter().map(|&x| x as i32).collect::<Vec<_>>(),
        )
        .unwrap();
        for (n, b) in PrefillInputs::new(&hp, t).values {
            if e.plan().input(&n).is_some() {
                e.set_input(&n, &b).unwrap();
            }
        }
        e.run();
        check_rows(
            &e.output_f32("logits").unwrap(),
            &f32s(&r, &format!("prompt{p}.logits")),
            v,
            &format!("batch prompt {p}"),
        );
        if p == 2 {
            for l in 0..hp.n_layer {
                // ours {D, 4, T} in index order = transformers [T, 4, D]
                let got = e.output_f32(&format!("hidden.{l}")).unwrap();
                let want = f32s(&hidden_ref, &format!("hidden.prompt2.layer{l}"));
                let d = got
                    .iter()
                    .zip(&want)
                    .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
                assert!(d <= 1e-3, "prompt 2 layer {l}: max |Δhidden| {d:e}");
            }
        }
    }
    let mut s = session_of(&hp, GgufWeights::new(file.clone()), &cfg(), 512);
    for chunk in [1usize, 7, 13, 64] {
        let mut worst = 0f32;
        for p in 0..5 {
            let toks = ids(&r, &format!("prompt{p}.tokens"));
            let got = logits_chunked(&mut s, &toks, chunk);
            worst = worst.max(check_rows(
                &got,
                &f32s(&r, &format!("prompt{p}.logits")),
                v,
                &format!("chunk {chunk} prompt {p}"),
            ));
        }
        eprintln!("F32 GGUF chunk {chunk}: max |Δlogit| {worst:e}");
    }
    for p in [1, 2] {
        let mut s = session_of(&hp, GgufWeights::new(file.clone()), &cfg(), 256);
        let want = ids(&r, &format!("greedy.prompt{p}"));
        let mut logits = s.prefill(&ids(&r, &format!("prompt{p}.tokens"))).unwrap();
        let mut got = Vec::new();
        for _ in 0..want.len() {
            let next = argmax(&logits) as u32;
            got.push(next);
            logits = s.decode(next).unwrap();
        }
        assert_eq!(got, want, "prompt {p}: greedy continuation");
    }
}
