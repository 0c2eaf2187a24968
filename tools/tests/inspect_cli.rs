//! Integration tests of `fathom inspect`, running the built binary on the repository's copied
//! fixtures (the dsv4-tiny Q2_0 GGUF, the dsv4-tiny-fp8 sharded checkpoint, a quant test-vector
//! safetensors file) and on missing and garbage files.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

fn gguf_fixture() -> PathBuf {
    repo("models/tests/fixtures/dsv4-tiny-Q2_0.gguf")
}

fn fp8_dir() -> PathBuf {
    repo("models/tests/fixtures/dsv4-tiny-fp8")
}

fn quant_fixture() -> PathBuf {
    repo("quant/tests/fixtures/Q4_K.safetensors")
}

fn inspect(args: &[&str], path: &Path) -> Output {
    common::fathom()
        .arg("inspect")
        .args(args)
        .arg(path)
        .output()
        .expect("run fathom")
}

fn text_ok(path: &Path) -> String {
    let out = inspect(&[], path);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{}: {stderr}", path.display());
    assert!(
        stderr.contains("opened in") && stderr.contains("resident memory"),
        "{stderr}"
    );
    String::from_utf8(out.stdout).unwrap()
}

fn json_ok(path: &Path) -> Value {
    let out = inspect(&["--json"], path);
    assert!(
        out.status.success(),
        "{}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("--json prints one JSON document");
    assert!(doc["open_seconds"].as_f64().unwrap() >= 0.0);
    if cfg!(target_os = "linux") {
        assert!(doc["rss_bytes"].as_u64().unwrap() > 0);
        assert!(doc["peak_rss_bytes"].as_u64().unwrap() >= doc["rss_bytes"].as_u64().unwrap());
    }
    // Totals agree with the tensor list.
    let tensors = doc["tensors"].as_array().unwrap();
    assert_eq!(
        doc["totals"]["tensors"].as_u64().unwrap() as usize,
        tensors.len()
    );
    let bytes: u64 = tensors.iter().map(|t| t["bytes"].as_u64().unwrap()).sum();
    assert_eq!(doc["totals"]["bytes"].as_u64().unwrap(), bytes);
    let by_type: u64 = doc["totals"]["by_type"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tensors"].as_u64().unwrap())
        .sum();
    assert_eq!(by_type as usize, tensors.len());
    doc
}

fn tensor<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tensor {name}"))
}

#[test]
fn gguf_text() {
    let out = text_ok(&gguf_fixture());
    assert!(out.contains("format: gguf"), "{out}");
    assert!(out.contains("version: 3"));
    assert!(out.contains("alignment: 32"));
    assert!(out.contains("general.architecture"));
    assert!(out.contains("\"deepseek4\""));
    // Long arrays are summarised.
    assert!(
        out.contains("[string; 512] [\"<｜begin▁of▁sentence｜>\", "),
        "{out}"
    );
    assert!(out.contains("token_embd.weight"));
    assert!(out.contains("blk.0.attn_q_a.weight"));
    assert!(out.contains("output.weight"));
    assert!(out.contains("totals by type:"));
    assert!(out.contains("Q2_0"));
}

#[test]
fn gguf_json() {
    let doc = json_ok(&gguf_fixture());
    assert_eq!(doc["format"], "gguf");
    assert_eq!(doc["header"]["version"], 3);
    assert_eq!(doc["header"]["alignment"], 32);
    assert!(doc["header"]["data_offset"].as_u64().unwrap() > 0);
    assert_eq!(doc["tensors"].as_array().unwrap().len(), 178);
    assert_eq!(doc["shards"].as_array().unwrap().len(), 1);
    let toks = doc["metadata"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["key"] == "tokenizer.ggml.tokens")
        .unwrap();
    assert_eq!(toks["type"], "array<string>");
    assert_eq!(toks["value"]["len"], 512);
    assert_eq!(toks["value"]["first"].as_array().unwrap().len(), 8);
    let arch = doc["metadata"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["key"] == "general.architecture")
        .unwrap();
    assert_eq!(arch["value"], "deepseek4");
    let t = tensor(&doc, "token_embd.weight");
    assert_eq!(t["shard"], 0);
    assert!(t["offset"].as_u64().unwrap() >= doc["header"]["data_offset"].as_u64().unwrap());
    // Data of all tensors lies inside the file.
    let file_len = std::fs::metadata(gguf_fixture()).unwrap().len();
    for t in doc["tensors"].as_array().unwrap() {
        assert!(t["offset"].as_u64().unwrap() + t["bytes"].as_u64().unwrap() <= file_len);
    }
}

#[test]
fn sharded_safetensors_text_and_json() {
    for path in [fp8_dir(), fp8_dir().join("model.safetensors.index.json")] {
        let out = text_ok(&path);
        assert!(out.contains("format: safetensors"), "{out}");
        assert!(out.contains("shards (2):"));
        assert!(out.contains("model-00001-of-00002.safetensors"));
        assert!(out.contains("model-00002-of-00002.safetensors"));
        assert!(out.contains("layers.0.attn.wq_a.weight"));
        assert!(out.contains("F8_E4M3"));
        assert!(out.contains("F8_E8M0"));
        assert!(out.contains("index.total_size"));

        let doc = json_ok(&path);
        let index: Value = serde_json::from_str(
            &std::fs::read_to_string(fp8_dir().join("model.safetensors.index.json")).unwrap(),
        )
        .unwrap();
        let n = index["weight_map"].as_object().unwrap().len();
        assert_eq!(doc["tensors"].as_array().unwrap().len(), n);
        assert_eq!(doc["totals"]["bytes"], 5767608);
        let t = tensor(&doc, "layers.3.ffn.experts.5.w2.weight");
        assert_eq!(t["type"], "I8");
        assert_eq!(t["shape"], serde_json::json!([256, 16]));
        assert_eq!(t["shard"], 1);
        let types: Vec<&str> = doc["totals"]["by_type"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["BF16", "F32", "F8_E4M3", "F8_E8M0", "I64", "I8"]);
    }
}

#[test]
fn single_safetensors() {
    let out = text_ok(&quant_fixture());
    assert!(out.contains("blocks"), "{out}");
    assert!(out.contains("ggml_type"));
    let doc = json_ok(&quant_fixture());
    assert_eq!(doc["format"], "safetensors");
    assert_eq!(doc["tensors"].as_array().unwrap().len(), 10);
    assert_eq!(
        tensor(&doc, "blocks")["shape"],
        serde_json::json!([16, 288])
    );
    let one_shard = fp8_dir().join("model-00002-of-00002.safetensors");
    assert_eq!(
        json_ok(&one_shard)["tensors"].as_array().unwrap().len(),
        395
    );
}

fn tmp(name: &str, bytes: &[u8]) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("inspect_cli");
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// Fails with exit status 1, an `error:` line naming the file, and no panic.
fn assert_clean_failure(path: &Path) {
    for args in [&[][..], &["--json"][..]] {
        let out = inspect(args, path);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{}: {stderr}", path.display());
        assert!(stderr.contains(&path.display().to_string()), "{stderr}");
        assert!(stderr.starts_with("error: "), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn missing_and_garbage_files_fail_cleanly() {
    assert_clean_failure(&repo("models/tests/fixtures/does-not-exist.gguf"));
    assert_clean_failure(&tmp(
        "garbage.bin",
        b"this is not a model file at all, just some text\n",
    ));
    assert_clean_failure(&tmp("garbage.gguf", b"definitely not gguf"));
    assert_clean_failure(&tmp("short.safetensors", b"abc"));
    assert_clean_failure(&tmp("empty.safetensors", b""));
    // Valid GGUF magic, truncated header.
    assert_clean_failure(&tmp("truncated.gguf", b"GGUF\x03\x00\x00\x00\x01"));
    // A GGUF cut in the middle of its metadata.
    let g = std::fs::read(gguf_fixture()).unwrap();
    assert_clean_failure(&tmp("cut.gguf", &g[..5000]));
    // A safetensors header that lies about the size.
    let mut st = std::fs::read(quant_fixture()).unwrap();
    st.truncate(st.len() - 1);
    assert_clean_failure(&tmp("cut.safetensors", &st));
    // An index naming a missing shard.
    assert_clean_failure(&tmp(
        "bad.safetensors.index.json",
        br#"{"weight_map":{"a":"nope.safetensors"}}"#,
    ));
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("inspect_cli/empty-dir");
    std::fs::create_dir_all(&d).unwrap();
    assert_clean_failure(&d);
}

#[test]
fn usage_errors() {
    let out = common::fathom().arg("inspect").output().unwrap();
    assert!(!out.status.success());
    let out = common::fathom().arg("--help").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("inspect"));
}
