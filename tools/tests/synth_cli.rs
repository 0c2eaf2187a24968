//! Integration tests of `fathom synth`, on files written with the hidden `--tiny` dimensions
//! (D 256, vocabulary 512; the names, key set, layer structure and recipes of the real
//! V4-Flash-sized files): for each recipe the file opens, its hyperparameters read back, it
//! holds exactly the script's tensors with the recipe's types, every weight dequantizes to
//! finite values and `fathom logits` gives finite logits; the output is deterministic per
//! seed; `--type` overrides apply (last wins) for every supported type; bad arguments are
//! clear errors that leave no file behind.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use models::deepseek4::{AttnKind, Hparams};
use models::gguf::GgufFile;
use quant::DType;

/// A fresh temporary directory for one test.
fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fathom-synth-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn fathom(args: &[&str]) -> Output {
    common::fathom().args(args).output().expect("run fathom")
}

/// `fathom synth OUT --tiny --experts 8 ARGS`, which must succeed.
fn synth(out: &Path, args: &[&str]) -> GgufFile {
    let o = out.to_str().unwrap();
    let res = fathom(&[&["synth", o, "--tiny", "--experts", "8"], args].concat());
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert!(res.status.success(), "synth {args:?}: {stderr}");
    assert!(
        stderr.contains("wrote ") && stderr.contains("peak RSS"),
        "{stderr}"
    );
    GgufFile::open(out).expect("the written file opens")
}

/// stderr of a `fathom synth` run that must fail with status 1 and leave no file.
fn synth_fails(dir: &Path, args: &[&str]) -> String {
    let out = dir.join("bad.gguf");
    let o = out.to_str().unwrap();
    let res = fathom(&[&["synth", o, "--tiny"], args].concat());
    let stderr = String::from_utf8_lossy(&res.stderr).into_owned();
    assert_eq!(res.status.code(), Some(1), "synth {args:?}: {stderr}");
    assert!(
        stderr.starts_with("error: ") && !stderr.contains("panicked"),
        "{stderr}"
    );
    assert!(!out.exists(), "synth {args:?} left {}", out.display());
    stderr
}

/// The script's metadata keys, in order.
const KEYS: &[&str] = &[
    "general.architecture",
    "general.name",
    "deepseek4.context_length",
    "deepseek4.embedding_length",
    "deepseek4.block_count",
    "deepseek4.attention.head_count",
    "deepseek4.attention.head_count_kv",
    "deepseek4.attention.key_length",
    "deepseek4.attention.value_length",
    "deepseek4.rope.dimension_count",
    "deepseek4.attention.q_lora_rank",
    "deepseek4.attention.output_group_count",
    "deepseek4.attention.output_lora_rank",
    "deepseek4.attention.sliding_window",
    "deepseek4.attention.layer_norm_rms_epsilon",
    "deepseek4.rope.freq_base",
    "deepseek4.attention.compress_rope_freq_base",
    "deepseek4.rope.scaling.type",
    "deepseek4.rope.scaling.factor",
    "deepseek4.rope.scaling.original_context_length",
    "deepseek4.rope.scaling.yarn_beta_fast",
    "deepseek4.rope.scaling.yarn_beta_slow",
    "deepseek4.attention.compress_ratios",
    "deepseek4.expert_count",
    "deepseek4.expert_used_count",
    "deepseek4.expert_shared_count",
    "deepseek4.expert_feed_forward_length",
    "deepseek4.expert_gating_func",
    "deepseek4.expert_weights_norm",
    "deepseek4.expert_weights_scale",
    "deepseek4.hash_layer_count",
    "deepseek4.swiglu_clamp_exp",
    "deepseek4.swiglu_clamp_shexp",
    "deepseek4.hyper_connection.count",
    "deepseek4.hyper_connection.sinkhorn_iterations",
    "deepseek4.hyper_connection.epsilon",
    "deepseek4.attention.indexer.head_count",
    "deepseek4.attention.indexer.key_length",
    "deepseek4.attention.indexer.top_k",
    "tokenizer.ggml.model",
    "tokenizer.ggml.pre",
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.token_type",
    "tokenizer.ggml.merges",
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
];

/// Roles of the recipe table (the script's `RECIPES`).
const ROLES: [&str; 10] = [
    "embd",
    "out",
    "attn",
    "shexp_gu",
    "shexp_down",
    "exps",
    "exps_anchor",
    "idx_qb",
    "router",
    "comp",
];

fn recipe(name: &str) -> BTreeMap<&'static str, DType> {
    use DType::*;
    let t: [DType; 10] = match name {
        "seed" => [
            Q4_K, Q6_K, Q2_0, Q5_K, Q6_K, IQ1_S, IQ2_XXS, Q2_0, F32, BF16,
        ],
        "q4k" => [Q4_K, Q6_K, Q4_K, Q4_K, Q6_K, Q4_K, Q4_K, Q4_K, F32, BF16],
        "iq2" => [
            Q8_0, Q8_0, Q8_0, Q8_0, Q8_0, IQ2_XXS, IQ2_XXS, Q8_0, F32, BF16,
        ],
        _ => unreachable!(),
    };
    ROLES.into_iter().zip(t).collect()
}

/// The expected tensors (name, role or fixed type, shape) of a tiny file with `layers`
/// layers and 8 experts: written out independently of the implementation, from the script.
fn expected(layers: usize, r: &BTreeMap<&str, DType>) -> Vec<(String, DType, Vec<u64>)> {
    let (d, hc, h, hd, qr, og, or, i, ih, ihd, v, e) =
        (256, 4, 4, 128, 256, 2, 128, 256, 2, 64, 512, 8);
    let ratios = [0u64, 0, 4, 128, 4, 128];
    let f = DType::F32;
    let mut out = vec![("token_embd.weight".to_string(), r["embd"], vec![d, v])];
    for (il, &ratio) in ratios.iter().enumerate().take(layers) {
        let mut t =
            |n: &str, ty: DType, ne: &[u64]| out.push((format!("blk.{il}.{n}"), ty, ne.to_vec()));
        for part in ["attn", "ffn"] {
            t(&format!("hc_{part}_fn.weight"), f, &[hc * d, (2 + hc) * hc]);
            t(&format!("hc_{part}_base.weight"), f, &[(2 + hc) * hc]);
            t(&format!("hc_{part}_scale.weight"), f, &[3]);
        }
        t("attn_norm.weight", f, &[d]);
        t("attn_q_a.weight", r["attn"], &[d, qr]);
        t("attn_q_a_norm.weight", f, &[qr]);
        t("attn_q_b.weight", r["attn"], &[qr, h * hd]);
        t("attn_kv.weight", r["attn"], &[d, hd]);
        t("attn_kv_a_norm.weight", f, &[hd]);
        t("attn_sinks.weight", f, &[h]);
        t("attn_output_a.weight", r["attn"], &[h * hd / og, og * or]);
        t("attn_output_b.weight", r["attn"], &[og * or, d]);
        if ratio > 0 {
            let c = if ratio == 4 { 2 } else { 1 };
            t("attn_compressor_kv.weight", r["comp"], &[d, c * hd]);
            t("attn_compressor_gate.weight", r["comp"], &[d, c * hd]);
            t("attn_compressor_ape.weight", f, &[c * hd, ratio]);
            t("attn_compressor_norm.weight", f, &[hd]);
        }
        if ratio == 4 {
            t("indexer.attn_q_b.weight", r["idx_qb"], &[qr, ih * ihd]);
            t("indexer.proj.weight", r["comp"], &[d, ih]);
            t("indexer_compressor_kv.weight", r["comp"], &[d, 2 * ihd]);
            t("indexer_compressor_gate.weight", r["comp"], &[d, 2 * ihd]);
            t("indexer_compressor_ape.weight", f, &[2 * ihd, 4]);
            t("indexer_compressor_norm.weight", f, &[ihd]);
        }
        t("ffn_norm.weight", f, &[d]);
        t("ffn_gate_inp.weight", r["router"], &[d, e]);
        if il < 3 {
            t("ffn_gate_tid2eid.weight", DType::I32, &[6, v]);
        } else {
            t("exp_probs_b.bias", f, &[e]);
        }
        let ex = if il < 2 { r["exps_anchor"] } else { r["exps"] };
        t("ffn_gate_exps.weight", ex, &[d, i, e]);
        t("ffn_up_exps.weight", ex, &[d, i, e]);
        t("ffn_down_exps.weight", ex, &[i, d, e]);
        t("ffn_gate_shexp.weight", r["shexp_gu"], &[d, i]);
        t("ffn_up_shexp.weight", r["shexp_gu"], &[d, i]);
        t("ffn_down_shexp.weight", r["shexp_down"], &[i, d]);
    }
    out.push(("output_hc_fn.weight".into(), f, vec![hc * d, hc]));
    out.push(("output_hc_base.weight".into(), f, vec![hc]));
    out.push(("output_hc_scale.weight".into(), f, vec![1]));
    out.push(("output_norm.weight".into(), f, vec![d]));
    out.push(("output.weight".into(), r["out"], vec![d, v]));
    out
}

/// Every weight dequantizes to finite values of sane magnitude, not all zero; every id table
/// holds 6 distinct ids < 8 per row.
fn check_data(f: &GgufFile) {
    for t in f.tensors() {
        let bytes = f.tensor_bytes(t).unwrap();
        if t.dtype == DType::I32 {
            let ids: Vec<i32> = bytes
                .chunks_exact(4)
                .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
                .collect();
            for row in ids.chunks(t.ne[0] as usize) {
                let mut r = row.to_vec();
                r.sort();
                r.dedup();
                assert_eq!(r.len(), row.len(), "{}: repeated id in {row:?}", t.name);
                assert!(
                    row.iter().all(|&x| (0..8).contains(&x)),
                    "{}: {row:?}",
                    t.name
                );
            }
            continue;
        }
        if t.dtype.info().dequantize.is_none() {
            continue;
        }
        let mut x = vec![0f32; t.n_elements() as usize];
        quant::dequantize_row(t.dtype, bytes, &mut x).unwrap();
        let max = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!(
            x.iter().all(|v| v.is_finite()),
            "{} ({}): not finite",
            t.name,
            t.dtype.name()
        );
        assert!(
            max > 0.0 && max < 100.0,
            "{} ({}): max |x| {max}",
            t.name,
            t.dtype.name()
        );
    }
}

/// Run `fathom logits` on two tokens and return the logits.
fn logits(model: &Path, dir: &Path) -> Vec<f32> {
    let out = dir.join("logits.safetensors");
    let res = fathom(&[
        "logits",
        "-m",
        model.to_str().unwrap(),
        "--tokens",
        "0,1",
        "--out",
        out.to_str().unwrap(),
        "-t",
        "1",
    ]);
    assert!(
        res.status.success(),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let bytes = std::fs::read(&out).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let l = st.tensor("logits").unwrap();
    assert_eq!(l.shape(), &[2, 512]);
    l.data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

#[test]
fn recipes_match_the_script_and_run() {
    let dir = tmp("recipes");
    for name in ["seed", "q4k", "iq2"] {
        let path = dir.join(format!("{name}.gguf"));
        let f = synth(&path, &["--layers", "4", "--recipe", name, "--seed", "3"]);
        // metadata: the script's keys in its order, llama.cpp's values
        let keys: Vec<&str> = f.metadata().iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, KEYS);
        assert_eq!(f.get_str("general.architecture").unwrap(), "deepseek4");
        assert!(f
            .get_str("general.name")
            .unwrap()
            .contains(&format!("recipe {name}")));
        let toks = f
            .get_array("tokenizer.ggml.tokens")
            .unwrap()
            .as_str()
            .unwrap();
        assert_eq!(toks.len(), 512);
        assert_eq!(toks[0], "<｜begin▁of▁sentence｜>");
        assert_eq!(toks[511], "<t511>");
        let hp = Hparams::from_gguf(&f).unwrap();
        assert_eq!(
            (
                hp.n_layer,
                hp.n_embd,
                hp.n_vocab,
                hp.n_expert,
                hp.n_expert_used
            ),
            (4, 256, 512, 8, 6)
        );
        assert_eq!(
            (hp.n_hash_layers, hp.hc, hp.head_dim, hp.n_rot),
            (3, 4, 128, 16)
        );
        assert_eq!(hp.compress_ratios, [0, 0, 4, 128]);
        assert_eq!(hp.attn_kind(2), AttnKind::Csa);
        assert_eq!(hp.attn_kind(3), AttnKind::Hca);
        assert!(hp.yarn.is_some() && hp.norm_topk && hp.routed_scale == 1.5);
        assert_eq!(hp.swiglu_limit, [10.0; 4]);
        // the full ratio array is the script's: at least 44 entries
        let ratios = f.get_array("deepseek4.attention.compress_ratios").unwrap();
        assert_eq!(ratios.as_i32().unwrap().len(), 44);
        // tensors: names, order, types and shapes
        let got: Vec<(String, DType, Vec<u64>)> = f
            .tensors()
            .iter()
            .map(|t| (t.name.clone(), t.dtype, t.ne.clone()))
            .collect();
        assert_eq!(got, expected(4, &recipe(name)), "recipe {name}");
        check_data(&f);
        let l = logits(&path, &dir);
        assert!(
            l.iter().all(|x| x.is_finite()),
            "recipe {name}: logits not finite"
        );
        assert!(l.iter().any(|&x| x != 0.0));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn output_is_deterministic_per_seed() {
    let dir = tmp("seed");
    let (a, b, c, one) = (
        dir.join("a.gguf"),
        dir.join("b.gguf"),
        dir.join("c.gguf"),
        dir.join("one.gguf"),
    );
    let fa = synth(&a, &["--layers", "2", "--seed", "7"]);
    synth(&b, &["--layers", "2", "--seed", "7"]);
    let fc = synth(&c, &["--layers", "2", "--seed", "8"]);
    let f1 = synth(&one, &["--layers", "1", "--seed", "7"]);
    let (ba, bc) = (std::fs::read(&a).unwrap(), std::fs::read(&c).unwrap());
    assert_eq!(ba, std::fs::read(&b).unwrap(), "same seed, same bytes");
    assert_eq!(ba.len(), bc.len());
    assert_ne!(ba, bc, "another seed, other bytes");
    let name = "blk.1.ffn_up_exps.weight";
    assert_ne!(fa.tensor_data(name).unwrap(), fc.tensor_data(name).unwrap());
    // a tensor's bytes depend on the seed and its name only, not on the layer count
    for name in [
        "blk.0.ffn_gate_exps.weight",
        "token_embd.weight",
        "blk.0.attn_q_b.weight",
    ] {
        assert_eq!(
            fa.tensor_data(name).unwrap(),
            f1.tensor_data(name).unwrap(),
            "{name}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn type_overrides_apply_last_wins() {
    let dir = tmp("types");
    let path = dir.join("o.gguf");
    let f = synth(
        &path,
        &[
            "--layers",
            "3",
            "--type",
            "_exps=Q4_K",
            "--type",
            r"^blk\.0\.ffn_gate_exps\.weight$=q8_0",
            "--type",
            "attn_q_b=BF16",
        ],
    );
    let ty = |n: &str| f.tensor(n).unwrap().dtype;
    assert_eq!(ty("blk.0.ffn_gate_exps.weight"), DType::Q8_0);
    assert_eq!(ty("blk.0.ffn_up_exps.weight"), DType::Q4_K);
    assert_eq!(ty("blk.2.ffn_down_exps.weight"), DType::Q4_K);
    assert_eq!(ty("blk.1.attn_q_b.weight"), DType::BF16);
    assert_eq!(ty("blk.2.indexer.attn_q_b.weight"), DType::BF16);
    assert_eq!(
        ty("blk.1.attn_q_a.weight"),
        DType::Q2_0,
        "others keep the recipe's type"
    );
    assert!(f.get_str("general.name").unwrap().contains("_exps=Q4_K"));
    check_data(&f);
    let l = logits(&path, &dir);
    assert!(l.iter().all(|x| x.is_finite()));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_supported_type_gives_finite_weights() {
    use DType::*;
    let dir = tmp("alltypes");
    let path = dir.join("t.gguf");
    let types = [
        F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ2_XXS,
        IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0, MXFP4, Q1_0,
        Q2_0,
    ];
    for t in types {
        let f = synth(
            &path,
            &[
                "--layers",
                "1",
                "--type",
                &format!("_exps={}", t.name()),
                "--type",
                &format!(r"attn_q_a\.weight={}", t.name()),
            ],
        );
        assert_eq!(f.tensor("blk.0.ffn_down_exps.weight").unwrap().dtype, t);
        assert_eq!(f.tensor("blk.0.attn_q_a.weight").unwrap().dtype, t);
        check_data(&f);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_arguments_are_clear_errors() {
    let dir = tmp("errors");
    let e = synth_fails(&dir, &["--recipe", "q3"]);
    assert!(
        e.contains("--recipe q3") && e.contains("seed, q4k, iq2"),
        "{e}"
    );
    let e = synth_fails(&dir, &["--type", "_exps=Q9_9"]);
    assert!(
        e.contains("unknown or unsupported type 'Q9_9'") && e.contains("IQ1_S"),
        "{e}"
    );
    let e = synth_fails(&dir, &["--type", "_exps=Q8_K"]);
    assert!(e.contains("'Q8_K'"), "{e}");
    let e = synth_fails(&dir, &["--type", "_exps=I32"]);
    assert!(e.contains("'I32'"), "{e}");
    let e = synth_fails(&dir, &["--type", "_exps"]);
    assert!(e.contains("expected PATTERN=TYPE"), "{e}");
    let e = synth_fails(&dir, &["--type", "(=Q8_0"]);
    assert!(e.contains("bad regular expression"), "{e}");
    let e = synth_fails(&dir, &["--type", "no_such_tensor=Q8_0"]);
    assert!(e.contains("matches no tensor"), "{e}");
    let e = synth_fails(&dir, &["--type", "hc_attn_scale=Q8_0"]);
    assert!(
        e.contains("blk.0.hc_attn_scale.weight") && e.contains("block size 32"),
        "{e}"
    );
    let e = synth_fails(&dir, &["--experts", "4"]);
    assert!(e.contains("--experts 4"), "{e}");
    let e = synth_fails(&dir, &["--layers", "0"]);
    assert!(e.contains("--layers"), "{e}");
    let e = synth_fails(&dir, &["--layers", "2", "--hash-layers", "3"]);
    assert!(
        e.contains("--hash-layers 3") && e.contains("2 layers"),
        "{e}"
    );
    // an output path that cannot be created names the path
    let missing = dir.join("no/such/dir/x.gguf");
    let res = fathom(&[
        "synth",
        missing.to_str().unwrap(),
        "--tiny",
        "--experts",
        "8",
    ]);
    let e = String::from_utf8_lossy(&res.stderr);
    assert_eq!(res.status.code(), Some(1), "{e}");
    assert!(e.contains("no/such/dir/x.gguf"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--hash-layers` routes that many first layers by a hash table: every layer of a
/// `--hash-layers 4 --layers 4` file has its `tid2eid` table and no router bias, its metadata
/// says 4, and it runs.
#[test]
fn every_layer_can_be_hash_routed() {
    let dir = tmp("hash");
    let p = dir.join("h.gguf");
    let f = synth(
        &p,
        &["--layers", "4", "--hash-layers", "4", "--recipe", "iq2"],
    );
    let hp = Hparams::from_gguf(&f).unwrap();
    assert_eq!(hp.n_hash_layers, 4);
    for l in 0..4 {
        assert!(f
            .tensor(&format!("blk.{l}.ffn_gate_tid2eid.weight"))
            .is_some());
        assert!(f.tensor(&format!("blk.{l}.exp_probs_b.bias")).is_none());
    }
    assert!(logits(&p, &dir).iter().all(|v| v.is_finite()));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--format checkpoint` writes the official layout (config.json, index, shards) that
/// `fathom logits` opens through the checkpoint loader, with finite logits; `--type` and a
/// bad `--shard-gib` are refused.
#[test]
fn synth_writes_an_official_checkpoint_that_runs() {
    let dir = tmp("checkpoint");
    let out = dir.join("ck");
    let o = out.to_str().unwrap();
    let res = fathom(&[
        "synth",
        o,
        "--tiny",
        "--experts",
        "8",
        "--layers",
        "3",
        "--format",
        "checkpoint",
        "--shard-gib",
        "0.001",
    ]);
    let stderr = String::from_utf8_lossy(&res.stderr);
    assert!(res.status.success(), "{stderr}");
    assert!(stderr.contains("peak RSS"), "{stderr}");
    let shards = std::fs::read_dir(&out)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".safetensors")
        })
        .count();
    assert!(shards > 1, "{shards} shards");
    let hp = Hparams::from_config_json(
        &std::fs::read_to_string(out.join("config.json")).unwrap(),
        "config.json",
    )
    .unwrap();
    assert_eq!((hp.n_layer, hp.n_expert, hp.n_embd), (3, 8, 256));
    let logits = dir.join("logits.safetensors");
    let res = fathom(&[
        "logits",
        "-m",
        o,
        "--tokens",
        "0,17,300",
        "--out",
        logits.to_str().unwrap(),
    ]);
    assert!(
        res.status.success(),
        "{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let bytes = std::fs::read(&logits).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let l = st.tensor("logits").unwrap();
    assert_eq!(l.shape(), &[3, 512]);
    assert!(l
        .data()
        .chunks_exact(4)
        .all(|c| f32::from_le_bytes(c.try_into().unwrap()).is_finite()));
    for (args, want) in [
        (
            &["--type", "_exps=Q8_0"][..],
            "--type applies to --format gguf only",
        ),
        (&["--shard-gib", "0"][..], "--shard-gib 0"),
    ] {
        let res = fathom(&[&["synth", o, "--tiny", "--format", "checkpoint"], args].concat());
        let e = String::from_utf8_lossy(&res.stderr);
        assert_eq!(res.status.code(), Some(1), "{e}");
        assert!(e.contains(want) && !e.contains("panicked"), "{e}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
