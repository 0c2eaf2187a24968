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
