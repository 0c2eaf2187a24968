//! The model is not special-cased to the fixture: a random-weight DeepSeek-V4 with other
//! dimensions (hidden 192, 3 heads of 64 with 8 RoPE dims, 3 output groups, window 6, layer
//! schedule CSA/HCA/SWA/CSA, one hash layer, 5 experts top-3, a 2-head indexer) built from its
//! hyperparameters alone. Batch prefill, one token at a time and chunked evaluation through the
//! decode caches must give the same logits (140 tokens: the window ring wraps many times, one
//! 128-token HCA window closes, the indexer selects 2 of up to 35 entries).

use backends::{ExecConfig, Executor};
use fathom_models::deepseek4::forward::input;
use fathom_models::deepseek4::{Builder, Hparams, PrefillInputs, Yarn};
use fathom_models::weights::{ForwardError, Weights};
use graph::{Graph, NodeKind, TensorDesc, TensorId, WeightData};
use quant::DType;

fn hparams() -> Hparams {
    Hparams {
        n_layer: 4,
        n_embd: 192,
        n_vocab: 50,
        n_ctx_train: 4096,
        n_head: 3,
        head_dim: 64,
        n_rot: 8,
        q_lora_rank: 48,
        o_groups: 3,
        o_lora_rank: 16,
        window: 6,
        rms_eps: 1e-6,
        rope_theta: 10000.0,
        compress_rope_theta: 80000.0,
        yarn: Some(Yarn {
            factor: 8.0,
            orig_ctx: 1024,
            beta_fast: 24.0,
            beta_slow: 2.0,
        }),
        compress_ratios: vec![4, 128, 0, 4],
        n_expert: 5,
        n_expert_used: 3,
        n_expert_shared: 1,
        expert_ff: 24,
        norm_topk: true,
        routed_scale: 1.2,
        n_hash_layers: 1,
        swiglu_limit: vec![3.0; 4],
        swiglu_limit_shared: vec![4.0; 4],
        hc: 4,
        hc_iters: 20,
        hc_eps: 1e-6,
        idx_heads: 2,
        idx_dim: 32,
        idx_topk: 2,
        bos: 0,
        eos: 1,
    }
}

/// Every tensor of `hp` with its GGUF shape, from the hyperparameters only (spec §3).
fn tensors(hp: &Hparams) -> Vec<(String, Vec<usize>)> {
    let (d, hd, h) = (hp.n_embd, hp.head_dim, hp.n_head);
    let mut v = vec![
        ("token_embd.weight".to_string(), vec![d, hp.n_vocab]),
        ("output.weight".into(), vec![d, hp.n_vocab]),
        ("output_norm.weight".into(), vec![d]),
        ("output_hc_fn.weight".into(), vec![4 * d, 4]),
        ("output_hc_scale.weight".into(), vec![1]),
        ("output_hc_base.weight".into(), vec![4]),
    ];
    for l in 0..hp.n_layer {
        let mut add = |n: &str, s: Vec<usize>| v.push((format!("blk.{l}.{n}"), s));
        for p in ["attn", "ffn"] {
            add(&format!("hc_{p}_fn.weight"), vec![4 * d, 24]);
            add(&format!("hc_{p}_scale.weight"), vec![3]);
            add(&format!("hc_{p}_base.weight"), vec![24]);
        }
        add("attn_norm.weight", vec![d]);
        add("ffn_norm.weight", vec![d]);
        add("attn_q_a.weight", vec![d, hp.q_lora_rank]);
        add("attn_q_a_norm.weight", vec![hp.q_lora_rank]);
        add("attn_q_b.weight", vec![hp.q_lora_rank, h * hd]);
        add("attn_kv.weight", vec![d, hd]);
        add("attn_kv_a_norm.weight", vec![hd]);
        add("attn_sinks.weight", vec![h]);
        add(
            "attn_output_a.weight",
            vec![hd * h / hp.o_groups, hp.o_lora_rank * hp.o_groups],
        );
        add(
            "attn_output_b.weight",
            vec![hp.o_lora_rank * hp.o_groups, d],
        );
        add("ffn_gate_inp.weight", vec![d, hp.n_expert]);
        add("ffn_gate_exps.weight", vec![d, hp.expert_ff, hp.n_expert]);
        add("ffn_up_exps.weight", vec![d, hp.expert_ff, hp.n_expert]);
        add("ffn_down_exps.weight", vec![hp.expert_ff, d, hp.n_expert]);
        add("ffn_gate_shexp.weight", vec![d, hp.expert_ff]);
        add("ffn_up_shexp.weight", vec![d, hp.expert_ff]);
        add("ffn_down_shexp.weight", vec![hp.expert_ff, d]);
        if l < hp.n_hash_layers {
            add(
                "ffn_gate_tid2eid.weight",
                vec![hp.n_expert_used, hp.n_vocab],
            );
        } else {
            add("exp_probs_b.bias", vec![hp.n_expert]);
        }
        let r = hp.compress_ratios[l] as usize;
        if r > 0 {
            let c = if r == 4 { 2 } else { 1 };
            add("attn_compressor_kv.weight", vec![d, c * hd]);
            add("attn_compressor_gate.weight", vec![d, c * hd]);
            add("attn_compressor_ape.weight", vec![c * hd, r]);
            add("attn_compressor_norm.weight", vec![hd]);
        }
        if r == 4 {
            let di = hp.idx_dim;
            add(
                "indexer.attn_q_b.weight",
                vec![hp.q_lora_rank, hp.idx_heads * di],
            );
            add("indexer.proj.weight", vec![d, hp.idx_heads]);
            add("indexer_compressor_kv.weight", vec![d, 2 * di]);
            add("indexer_compressor_gate.weight", vec![d, 2 * di]);
            add("indexer_compressor_ape.weight", vec![2 * di, 4]);
            add("indexer_compressor_norm.weight", vec![di]);
        }
    }
    v
}

struct Random {
    shapes: Vec<(String, Vec<usize>)>,
    n_expert: usize,
}

impl Weights for Random {
    fn try_get(&mut self, g: &mut Graph, name: &str) -> Result<Option<TensorId>, ForwardError> {
        if let Some(id) = g.find(name) {
            if matches!(g.node(id).kind, NodeKind::Weight(_)) {
                return Ok(Some(id));
            }
        }
        let Some((i, (_, ne))) = self.shapes.iter().enumerate().find(|(_, (n, _))| n == name)
        else {
            return Ok(None);
        };
        let n: usize = ne.iter().product();
        let mut s = 0x9e37_79b9_u64 + i as u64 * 7919;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        };
        let (dtype, bytes): (DType, Vec<u8>) = if name.ends_with("tid2eid.weight") {
            let k = ne[0];
            let ids: Vec<i32> = (0..n)
                .map(|j| (((j / k) * 2 + j % k) % self.n_expert) as i32)
                .collect();
            (DType::I32, bytemuck::cast_slice(&ids).to_vec())
        } else {
            let norm = name.contains("norm");
            let scale = if ne.len() == 1 || name.contains("ape") || name.contains("hc_") {
                0.5
            } else {
                1.7 / (ne[0] as f32).sqrt()
            };
            let v: Vec<f32> = (0..n)
                .map(|_| {
                    if norm {
                        1.0 + 0.3 * next()
                    } else {
                        scale * next()
                    }
                })
                .collect();
            // f32 weights: activations are never quantized, so the three evaluation orders
            // may only differ by f32 summation order (quantized activations would turn that
            // into rounding-boundary flips; the GGUF accuracy tests cover quantized types)
            let dtype = DType::F32;
            let mut b = vec![0u8; quant::bytes_for(dtype, n).unwrap()];
            quant::quantize_row(dtype, &v, &mut b).unwrap();
            (dtype, b)
        };
        Ok(Some(g.weight(
            name,
            TensorDesc::new(dtype, ne)?,
            WeightData::from_vec(bytes),
        )?))
    }
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

#[test]
fn batch_incremental_and_chunked_agree_on_other_shapes() {
    let hp = hparams();
    let mut w = Random {
        shapes: tensors(&hp),
        n_expert: hp.n_expert,
    };
    let t = 140;
    let toks: Vec<u32> = (0..t as u32)
        .map(|i| (i * 17 + 3) % hp.n_vocab as u32)
        .collect();
    let g = Builder::new(&hp, &mut w, t).unwrap().model(false).unwrap();
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
    let batch = e.output_f32("logits").unwrap();
    assert!(batch.iter().all(|v| v.is_finite()));
    let scale = batch.iter().fold(0f32, |m, v| m.max(v.abs()));
    let w = Random {
        shapes: tensors(&hp),
        n_expert: hp.n_expert,
    };
    let mut s = session_of(&hp, w, &cfg(), 256);
    for chunk in [1, 5, 64] {
        let got = logits_chunked(&mut s, &toks, chunk);
        let maxd = got
            .iter()
            .zip(&batch)
            .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        eprintln!("chunk {chunk}: max |Δlogit| {maxd:e} (logit scale {scale})");
        assert!(
            maxd <= 1e-4 * scale.max(1.0),
            "chunk {chunk}: max |Δlogit| {maxd} (logit scale {scale})"
        );
    }
}

#[test]
fn missing_and_misshaped_tensors_are_named() {
    let hp = hparams();
    let mut shapes = tensors(&hp);
    shapes.retain(|(n, _)| n != "blk.2.attn_kv.weight");
    let mut w = Random {
        shapes,
        n_expert: hp.n_expert,
    };
    let e = Builder::new(&hp, &mut w, 3)
        .unwrap()
        .model(false)
        .unwrap_err();
    assert!(e.to_string().contains("blk.2.attn_kv.weight"), "{e}");

    let mut shapes = tensors(&hp);
    for (n, s) in shapes.iter_mut() {
        if n == "blk.1.attn_q_b.weight" {
            s[1] += 1;
        }
    }
    let mut w = Random {
        shapes,
        n_expert: hp.n_expert,
    };
    let e = Builder::new(&hp, &mut w, 3)
        .unwrap()
        .model(false)
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("blk.1.attn_q_b.weight") && msg.contains("193"),
        "{msg}"
    );
}
