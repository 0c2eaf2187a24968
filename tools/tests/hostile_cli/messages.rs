//! Hostile-input cases of class 8. unclear messages: every value used or refused by name (see `../hostile_cli.rs`).

use super::*;

/// Adds this class's cases to `c`.
pub fn cases(c: &mut Corpus) {
    let dir = c.dir.clone();
    let dir = dir.as_path();
    let q2 = c.q2.clone();
    let text = c.text.clone();
    let out = c.out.clone();
    // ---- 8. unclear messages: every value used or refused by name
    let shape = ckpt_variant(dir, "ck-shape", |d| {
        edit_json(&d.join("config.json"), |c| {
            c.insert("q_lora_rank".into(), serde_json::json!(96));
        })
    });
    c.add(
        "8 messages",
        "checkpoint shape off the config",
        with(logits(&shape), &[&out]),
        err(&["layers.0.attn.wq_a.weight", "model-0000", "expected"]),
    );
    let shared = ckpt_variant(dir, "ck-shared", |d| {
        edit_json(&d.join("config.json"), |c| {
            c.insert("n_shared_experts".into(), serde_json::json!(2));
        })
    });
    c.add(
        "8 messages",
        "n_shared_experts 2 (the tensors hold 1)",
        with(logits(&shared), &[&out]),
        err(&["shared_experts", "expected"]),
    );
    let extra_layer = ckpt_variant(dir, "ck-layers", |d| {
        edit_json(&d.join("config.json"), |c| {
            c.insert("num_hidden_layers".into(), serde_json::json!(4));
            c.insert("compress_ratios".into(), serde_json::json!([0, 4, 128, 4]));
        })
    });
    c.add(
        "8 messages",
        "checkpoint layers past the config",
        with(logits(&extra_layer), &[&out]),
        err(&["layers.4.", "4 layers"]),
    );
    let rope = ckpt_variant(dir, "ck-rope", |d| {
        edit_json(&d.join("config.json"), |c| {
            c.insert(
                "rope_scaling".into(),
                serde_json::json!({"type": "linear", "factor": 4.0}),
            );
        })
    });
    c.add(
        "8 messages",
        "rope_scaling type linear",
        with(logits(&rope), &[&out]),
        err(&["rope_scaling.type"]),
    );
    let topk = ckpt_variant(dir, "ck-norm", |d| {
        edit_json(&d.join("config.json"), |c| {
            c.insert("norm_topk_prob".into(), serde_json::json!("yes"));
        })
    });
    c.add(
        "8 messages",
        "norm_topk_prob \"yes\"",
        with(logits(&topk), &[&out]),
        err(&["norm_topk_prob"]),
    );
    let neg = ckpt_variant(dir, "ck-neg", |d| {
        edit_json(&d.join("config.json"), |c| {
            c.insert("hidden_size".into(), serde_json::json!(-256));
        })
    });
    c.add(
        "8 messages",
        "hidden_size -256",
        with(logits(&neg), &[&out]),
        err(&["hidden_size"]),
    );
    for (key, val, name, says) in [
        (
            "general.architecture",
            Value::Str("llama".into()),
            "architecture llama",
            "llama",
        ),
        (
            "deepseek4.nextn_predict_layers",
            Value::U32(1),
            "an MTP GGUF",
            "MTP",
        ),
        (
            "deepseek4.hyper_connection.count",
            Value::U32(3),
            "3 HC streams",
            "hyper_connection.count",
        ),
        (
            "deepseek4.rope.dimension_count",
            Value::U32(15),
            "15 rope dims",
            "rope.dimension_count",
        ),
        (
            "tokenizer.ggml.bos_token_id",
            Value::U32(512),
            "BOS 512 of 512 tokens",
            "bos_token_id",
        ),
        (
            "deepseek4.expert_weights_norm",
            Value::U32(1),
            "a number as a bool",
            "expert_weights_norm",
        ),
        (
            "deepseek4.attention.compress_ratios",
            Value::Array(Array::I32(vec![0, 4, 64, 4, 128, 0])),
            "compress ratio 64",
            "ratio 64",
        ),
    ] {
        let p = gguf_variant(
            dir,
            &format!("msg-{}.gguf", name.replace(' ', "-")),
            |_, w| w.set_kv(key, val).unwrap(),
        );
        c.add("8 messages", name, run(&p), err(&[says]));
    }
    let no_tokens = {
        let src = GgufFile::open(&q2).unwrap();
        let mut w = GgufWriter::new();
        for (k, val) in src.metadata() {
            if k != "tokenizer.ggml.tokens" && k != "deepseek4.vocab_size" {
                w.add_kv(k.clone(), val.clone()).unwrap();
            }
        }
        let p = dir.join("no-tokens.gguf");
        std::fs::write(&p, w.to_bytes().unwrap()).unwrap();
        p.display().to_string()
    };
    c.add(
        "8 messages",
        "no token list",
        run(&no_tokens),
        err(&["tokenizer.ggml.tokens"]),
    );
    let dup_vocab = gguf_variant(dir, "dup-vocab.gguf", |src, w| {
        let n = src
            .get("tokenizer.ggml.tokens")
            .and_then(|v| v.as_array())
            .unwrap()
            .len();
        w.set_kv(
            "tokenizer.ggml.tokens",
            Value::Array(Array::Str(vec!["a".into(); n])),
        )
        .unwrap()
    });
    c.add(
        "8 messages",
        "all-duplicate vocabulary",
        run(&dup_vocab),
        err(&["no token for byte"]),
    );
    let extra = gguf_variant(dir, "extra-tensor.gguf", |_, w| {
        w.add_tensor(
            "blk.6.attn_norm.weight",
            quant::DType::F32,
            &[256],
            vec![0u8; 1024],
        )
        .unwrap()
    });
    c.add(
        "8 messages",
        "a tensor of layer 6 of 6",
        run(&extra),
        err(&["blk.6.attn_norm.weight", "layer 6"]),
    );
    let mut env_cases = Vec::new();
    for (name, var, val, says) in [
        (
            "FATHOM_ST_WEIGHTS=bogus",
            "FATHOM_ST_WEIGHTS",
            "bogus",
            &["FATHOM_ST_WEIGHTS"][..],
        ),
        (
            "FATHOM_CPUS=999",
            "FATHOM_CPUS",
            "999",
            &["FATHOM_CPUS", "not available"],
        ),
        (
            "FATHOM_FORCE_SCALAR=yes",
            "FATHOM_FORCE_SCALAR",
            "yes",
            &["FATHOM_FORCE_SCALAR"],
        ),
    ] {
        env_cases.push(Case {
            class: "8 messages",
            name: name.into(),
            args: s(&["run", "-n", "1", "-t", "1"]),
            env: vec![(var, val.into())],
            expect: err(says),
        });
    }
    c.add(
        "8 messages",
        "token id past the vocabulary",
        s(&["logits", "-m", &q2, "--tokens", "1,512", "--out", &out]),
        err(&["512", "vocabulary"]),
    );
    c.add(
        "8 messages",
        "--ubatch 0",
        s(&[
            "kl",
            "-m",
            &q2,
            "-f",
            &text,
            "--base-config",
            "none",
            "--test-config",
            "none",
            "-u",
            "0",
        ]),
        err(&["--ubatch 0"]),
    );
    let index = ckpt_variant(dir, "ck-index", |d| {
        edit_json(&d.join("model.safetensors.index.json"), |c| {
            let wm = c.get_mut("weight_map").unwrap().as_object_mut().unwrap();
            wm.insert("embed.weight".into(), serde_json::json!("../../etc/passwd"));
        })
    });
    c.add(
        "8 messages",
        "index shard path outside the checkpoint",
        with(logits(&index), &[&out]),
        err(&["not a relative path inside"]),
    );
    let many = ckpt_variant(dir, "ck-many-shards", |d| {
        let wm: serde_json::Map<String, serde_json::Value> = (0..200_000)
            .map(|i| {
                (
                    format!("t{i}"),
                    serde_json::json!(format!("s{i}.safetensors")),
                )
            })
            .collect();
        std::fs::write(
            d.join("model.safetensors.index.json"),
            serde_json::json!({ "weight_map": wm }).to_string(),
        )
        .unwrap();
    });
    c.add(
        "8 messages",
        "index naming 200000 shards",
        with(logits(&many), &[&out]),
        err(&["does not exist"]),
    );
    c.v.extend(env_cases);
}
