//! Hyperparameters from GGUF metadata and from config.json agree on the tiny fixture model,
//! and malformed values give errors naming the key.

use fathom_models::deepseek4::{AttnKind, Hparams, HparamsError, Yarn};
use fathom_models::gguf::{GgufFile, GgufWriter, Value};

fn fixture(p: &str) -> String {
    format!("{}/tests/fixtures/{p}", env!("CARGO_MANIFEST_DIR"))
}

fn expected() -> Hparams {
    Hparams {
        n_layer: 6,
        n_embd: 256,
        n_vocab: 512,
        n_ctx_train: 1048576,
        n_head: 4,
        head_dim: 128,
        n_rot: 16,
        q_lora_rank: 128,
        o_groups: 2,
        o_lora_rank: 64,
        window: 16,
        rms_eps: 1e-6,
        rope_theta: 10000.0,
        compress_rope_theta: 160000.0,
        yarn: Some(Yarn {
            factor: 16.0,
            orig_ctx: 65536,
            beta_fast: 32.0,
            beta_slow: 1.0,
        }),
        compress_ratios: vec![0, 4, 128, 4, 128, 0],
        n_expert: 16,
        n_expert_used: 6,
        n_expert_shared: 1,
        expert_ff: 32,
        norm_topk: true,
        routed_scale: 1.5,
        n_hash_layers: 3,
        swiglu_limit: vec![2.5; 6],
        swiglu_limit_shared: vec![2.5; 6],
        hc: 4,
        hc_iters: 20,
        hc_eps: 1e-6,
        idx_heads: 8,
        idx_dim: 64,
        idx_topk: 4,
        bos: 0,
        eos: 1,
    }
}

#[test]
fn gguf_and_config_json_agree() {
    let g = GgufFile::open(fixture("dsv4-tiny-Q2_0.gguf")).unwrap();
    let from_gguf = Hparams::from_gguf(&g).unwrap();
    assert_eq!(from_gguf, expected());
    let text = std::fs::read_to_string(fixture("dsv4-tiny/config.json")).unwrap();
    let from_json = Hparams::from_config_json(&text, "config.json").unwrap();
    assert_eq!(from_json, expected());
    assert_eq!(from_gguf.attn_kind(1), AttnKind::Csa);
    assert_eq!(from_gguf.attn_kind(2), AttnKind::Hca);
    assert_eq!(from_gguf.attn_kind(5), AttnKind::Sliding);
    assert!(from_gguf.is_hash_layer(2) && !from_gguf.is_hash_layer(3));
}

#[test]
fn transformers_layout_config() {
    let text = std::fs::read_to_string(fixture("dsv4-tiny/config.json")).unwrap();
    let mut j: serde_json::Value = serde_json::from_str(&text).unwrap();
    let o = j.as_object_mut().unwrap();
    o.remove("compress_ratios");
    o.remove("num_hash_layers");
    o.remove("qk_rope_head_dim");
    o.insert(
        "layer_types".into(),
        serde_json::json!([
            "sliding_attention",
            "compressed_sparse_attention",
            "heavily_compressed_attention",
            "compressed_sparse_attention",
            "heavily_compressed_attention",
            "sliding_attention"
        ]),
    );
    o.insert(
        "mlp_layer_types".into(),
        serde_json::json!(["hash_moe", "hash_moe", "hash_moe", "moe", "moe", "moe"]),
    );
    o.insert("partial_rotary_factor".into(), serde_json::json!(0.125));
    let h = Hparams::from_config_json(&j.to_string(), "hf.json").unwrap();
    assert_eq!(h, expected());
    // without any layer schedule we refuse rather than guess (HF would default to V4-Pro)
    j.as_object_mut().unwrap().remove("layer_types");
    let e = Hparams::from_config_json(&j.to_string(), "hf.json").unwrap_err();
    assert!(
        matches!(e, HparamsError::Missing { .. }) && e.to_string().contains("compress_ratios"),
        "{e}"
    );
}

fn rewrite(key: &str, v: Value) -> Result<Hparams, HparamsError> {
    let g = GgufFile::open(fixture("dsv4-tiny-Q2_0.gguf")).unwrap();
    let mut w = GgufWriter::from_file(&g).unwrap();
    w.set_kv(key, v).unwrap();
    let bytes = w.to_bytes().unwrap();
    Hparams::from_gguf(&GgufFile::parse(bytes).unwrap())
}

#[test]
fn bad_values_name_the_key() {
    use fathom_models::gguf::Array;
    let e = rewrite(
        "deepseek4.attention.compress_ratios",
        Value::Array(Array::I32(vec![0, 4, 64, 4, 128, 0])),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("compress_ratios") && e.to_string().contains("64"),
        "{e}"
    );
    let e = rewrite(
        "deepseek4.attention.compress_ratios",
        Value::Array(Array::I32(vec![0, 4])),
    )
    .unwrap_err();
    assert!(e.to_string().contains("2 entries for 6 layers"), "{e}");
    let e = rewrite("deepseek4.expert_gating_func", Value::U32(1)).unwrap_err();
    assert!(e.to_string().contains("expert_gating_func"), "{e}");
    let e = rewrite("deepseek4.rope.dimension_count", Value::U32(200)).unwrap_err();
    assert!(e.to_string().contains("rope.dimension_count"), "{e}");
    let e = rewrite("general.architecture", Value::Str("llama".into())).unwrap_err();
    assert!(e.to_string().contains("llama"), "{e}");
    let e = rewrite("deepseek4.embedding_length", Value::Str("x".into())).unwrap_err();
    assert!(e.to_string().contains("embedding_length"), "{e}");
    // the YaRN betas are honoured (llama.cpp ignores them)
    let h = rewrite("deepseek4.rope.scaling.yarn_beta_fast", Value::F32(24.0)).unwrap();
    assert_eq!(h.yarn.unwrap().beta_fast, 24.0);
}

/// Every size, float and table entry is checked, several hostile values per key, and the
/// error names the key (never a panic, never an allocation sized by the value).
#[test]
fn hostile_gguf_values_name_the_key() {
    use fathom_models::gguf::Array;
    let huge = [u32::MAX as u64, 1 << 40, u64::MAX];
    let mut cases: Vec<(&str, Value)> = Vec::new();
    for key in [
        "block_count",
        "embedding_length",
        "context_length",
        "attention.head_count",
        "attention.key_length",
        "attention.q_lora_rank",
        "attention.output_group_count",
        "attention.output_lora_rank",
        "attention.sliding_window",
        "expert_count",
        "expert_used_count",
        "expert_shared_count",
        "expert_feed_forward_length",
        "hash_layer_count",
        "hyper_connection.count",
        "hyper_connection.sinkhorn_iterations",
        "attention.indexer.head_count",
        "attention.indexer.key_length",
        "attention.indexer.top_k",
        "rope.dimension_count",
    ] {
        for v in huge {
            cases.push((key, Value::U64(v)));
        }
    }
    for key in [
        "block_count",
        "embedding_length",
        "attention.head_count",
        "attention.sliding_window",
        "expert_count",
        "expert_used_count",
        "hyper_connection.count",
        "hyper_connection.sinkhorn_iterations",
        "attention.indexer.top_k",
        "rope.dimension_count",
    ] {
        cases.push((key, Value::U32(0)));
    }
    // a window longer than the trained context; more experts used than exist; hash layers
    // beyond the layer count; 3 HC streams; odd rope dims
    cases.push(("attention.sliding_window", Value::U32(2_000_000)));
    cases.push(("expert_used_count", Value::U32(17)));
    cases.push(("hash_layer_count", Value::U32(7)));
    cases.push(("hyper_connection.count", Value::U32(3)));
    cases.push(("rope.dimension_count", Value::U32(15)));
    for key in [
        "attention.layer_norm_rms_epsilon",
        "rope.freq_base",
        "attention.compress_rope_freq_base",
        "expert_weights_scale",
        "hyper_connection.epsilon",
        "rope.scaling.factor",
        "rope.scaling.yarn_beta_fast",
        "rope.scaling.yarn_beta_slow",
        "swiglu_clamp_exp",
        "swiglu_clamp_shexp",
    ] {
        for v in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -1.0, 0.0] {
            cases.push((key, Value::F32(v)));
        }
    }
    cases.push(("attention.layer_norm_rms_epsilon", Value::F32(2.0)));
    cases.push(("expert_weights_norm", Value::U32(1)));
    cases.push(("nextn_predict_layers", Value::U32(1)));
    cases.push(("expert_gating_func", Value::U32(0)));
    cases.push((
        "swiglu_clamp_exp",
        Value::Array(Array::F32(vec![2.5, 2.5, f32::NAN, 2.5, 2.5, 2.5])),
    ));
    cases.push((
        "attention.compress_ratios",
        Value::Array(Array::I32(vec![0, 4, 128, 4, 128, 0, 7])),
    ));
    cases.push((
        "attention.compress_ratios",
        Value::Array(Array::I32(vec![0, 4, 128, 4, -128, 0])),
    ));
    for (key, v) in cases {
        let full = format!("deepseek4.{key}");
        let shown = format!("{v}");
        let e = rewrite(&full, v).expect_err(&format!("{full} = {shown} accepted"));
        assert!(e.to_string().contains(&full), "{full} = {shown}: {e}");
    }
    // token ids outside the vocabulary
    for id in [512u32, 4096, u32::MAX] {
        for key in ["tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"] {
            let e = rewrite(key, Value::U32(id)).unwrap_err();
            assert!(e.to_string().contains(key), "{e}");
        }
    }
    // MTP padding past the main layers is allowed (the 0731 checkpoint ships 46 entries)
    let h = rewrite(
        "deepseek4.attention.compress_ratios",
        Value::Array(Array::I32(vec![0, 4, 128, 4, 128, 0, 0, 0])),
    )
    .unwrap();
    assert_eq!(h.compress_ratios.len(), 6);
}

#[test]
fn hostile_config_json_values_name_the_key() {
    let text = std::fs::read_to_string(fixture("dsv4-tiny/config.json")).unwrap();
    let base: serde_json::Value = serde_json::from_str(&text).unwrap();
    let huge = serde_json::json!(u64::MAX);
    let mut cases: Vec<(&str, serde_json::Value, &str)> = Vec::new();
    for key in [
        "num_hidden_layers",
        "hidden_size",
        "vocab_size",
        "num_attention_heads",
        "head_dim",
        "sliding_window",
        "n_routed_experts",
        "num_experts_per_tok",
        "n_shared_experts",
        "moe_intermediate_size",
        "hc_mult",
        "hc_sinkhorn_iters",
        "index_topk",
        "bos_token_id",
    ] {
        cases.push((key, huge.clone(), key));
        cases.push((key, serde_json::json!(-1), key));
        cases.push((key, serde_json::json!("12"), key));
        cases.push((key, serde_json::json!(1.5), key));
    }
    for key in [
        "rms_norm_eps",
        "routed_scaling_factor",
        "hc_eps",
        "swiglu_limit",
    ] {
        cases.push((key, serde_json::json!(0.0), key));
        cases.push((key, serde_json::json!(-3.0), key));
        cases.push((key, serde_json::json!(1e300), key));
        cases.push((key, serde_json::json!("x"), key));
    }
    cases.push((
        "sliding_window",
        serde_json::json!(4_000_000),
        "sliding_window",
    ));
    cases.push(("norm_topk_prob", serde_json::json!("yes"), "norm_topk_prob"));
    cases.push((
        "rope_scaling",
        serde_json::json!({"type": "yarn", "factor": "16"}),
        "rope_scaling.factor",
    ));
    cases.push((
        "rope_scaling",
        serde_json::json!({"type": "yarn", "factor": -2.0}),
        "rope_scaling.factor",
    ));
    cases.push((
        "rope_scaling",
        serde_json::json!({"type": "linear", "factor": 2.0}),
        "rope_scaling.type",
    ));
    cases.push((
        "compress_ratios",
        serde_json::json!([0, 4, 128, 4, 128, 3]),
        "compress_ratios",
    ));
    for (key, v, named) in cases {
        let mut j = base.clone();
        j.as_object_mut().unwrap().insert(key.into(), v.clone());
        let e = Hparams::from_config_json(&j.to_string(), "config.json")
            .expect_err(&format!("{key} = {v} accepted"));
        assert!(e.to_string().contains(named), "{key} = {v}: {e}");
    }
}
