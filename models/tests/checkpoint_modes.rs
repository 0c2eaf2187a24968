//! The BF16 official checkpoint (weights used as f32) against transformers at every position of
//! all five reference prompts, in incremental and chunked (1, 7, 13, 64) evaluation through the
//! decode caches, and the greedy continuations of prompts 1 and 2 generated with the cached
//! session (fixture README §8: max |Δlogit| ≤ 1e-3, top-1 100%, greedy tokens identical).

use backends::ExecConfig;
use fathom_models::deepseek4::SafetensorsWeights;
use fathom_models::weights::StOptions;
use safetensors::SafeTensors;

fn fx(p: &str) -> String {
    format!("{}/tests/fixtures/{p}", env!("CARGO_MANIFEST_DIR"))
}

struct Reference(Vec<u8>);

impl Reference {
    fn load() -> Reference {
        Reference(std::fs::read(fx("dsv4-tiny/reference/hf_logits_all.safetensors")).unwrap())
    }
    fn bytes(&self, name: &str) -> Vec<u8> {
        SafeTensors::deserialize(&self.0)
            .unwrap()
            .tensor(name)
            .unwrap()
            .data()
            .to_vec()
    }
    fn f32s(&self, name: &str) -> Vec<f32> {
        self.bytes(name)
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }
    fn ids(&self, name: &str) -> Vec<u32> {
        self.bytes(name)
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as u32)
            .collect()
    }
}

fn argmax(x: &[f32]) -> usize {
    x.iter()
        .enumerate()
        .fold(0, |b, (i, &v)| if v > x[b] { i } else { b })
}

/// A session over `w` (model `hp`, no tokenizer) with `cfg` and a context of `ctx`.
fn session_of(
    hp: &fathom_models::deepseek4::Hparams,
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

fn open() -> (SafetensorsWeights, fathom_models::deepseek4::Hparams) {
    SafetensorsWeights::open_with(fx("dsv4-tiny/model.safetensors"), StOptions::fp32())
        .expect("checkpoint")
}

#[test]
fn every_mode_matches_transformers_at_every_position() {
    let (w, hp) = open();
    let r = Reference::load();
    let cfg = ExecConfig {
        threads: 2,
        cpus: None,
        pin: false,
        elide_barriers: true,
        spin: 2000,
        profile: None,
        guards: false,
        ..ExecConfig::default()
    };
    let v = hp.n_vocab;
    let mut s = session_of(&hp, w, &cfg, 512);
    for chunk in [1usize, 7, 13, 64] {
        let mut worst = 0f32;
        for p in 0..5 {
            let toks = r.ids(&format!("prompt{p}.tokens"));
            let want = r.f32s(&format!("prompt{p}.logits"));
            let got = logits_chunked(&mut s, &toks, chunk);
            for (row, (g, h)) in got.chunks(v).zip(want.chunks(v)).enumerate() {
                let d = g.iter().zip(h).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
                worst = worst.max(d);
                assert!(
                    d <= 1e-3,
                    "chunk {chunk} prompt {p} row {row}: max |Δlogit| {d:e}"
                );
                assert_eq!(
                    argmax(g),
                    argmax(h),
                    "chunk {chunk} prompt {p} row {row}: top-1"
                );
            }
        }
        eprintln!("chunk {chunk}: max |Δlogit| over 401 positions {worst:e}");
    }
}

#[test]
fn greedy_continuations_are_identical() {
    let r = Reference::load();
    for p in [1, 2] {
        let (w, hp) = open();
        let cfg = ExecConfig {
            threads: 2,
            ..ExecConfig::default()
        };
        let mut s = session_of(&hp, w, &cfg, 256);
        let prompt = r.ids(&format!("prompt{p}.tokens"));
        let want = r.ids(&format!("greedy.prompt{p}"));
        let mut logits = s.prefill(&prompt).unwrap();
        let mut got = Vec::new();
        for _ in 0..want.len() {
            let next = argmax(&logits) as u32;
            got.push(next);
            logits = s.decode(next).unwrap();
        }
        assert_eq!(
            got, want,
            "prompt {p}: greedy continuation differs from transformers"
        );
    }
}
