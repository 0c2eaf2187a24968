//! The one way to open a model (`models::model::open`): every path fathom reads reaches the
//! DeepSeek-V4 entry of the registry (GGUF, checkpoint directory, index, `.safetensors`), and
//! what is not one of its architectures is refused naming the file and what it found.

use fathom_models::gguf::{GgufWriter, Value};
use fathom_models::model::{open, LoadError, LoadOptions, ARCHITECTURES};
use std::path::{Path, PathBuf};

fn fixture(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(p)
}

fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("model_open");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn every_kind_of_path_opens_the_deepseek4_model() {
    let opts = LoadOptions::default();
    for p in [
        fixture("dsv4-tiny-Q2_0.gguf"),
        fixture("dsv4-tiny-fp8"),
        fixture("dsv4-tiny-fp8/model.safetensors.index.json"),
        fixture("dsv4-tiny/model.safetensors"),
    ] {
        let m = open(&p, &opts).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let info = m.info();
        assert_eq!(info.arch, "deepseek4", "{}", p.display());
        assert_eq!((info.n_layer, info.n_vocab), (6, 512), "{}", p.display());
        assert!(m.state_tensors(64).len() > info.n_layer);
    }
    // the GGUF carries its tokenizer; the fp8 checkpoint has no tokenizer.json: an error
    // naming the file, only when asked for
    let g = open(&fixture("dsv4-tiny-Q2_0.gguf"), &opts).unwrap();
    assert!(g.tokenizer().is_ok());
    let c = open(&fixture("dsv4-tiny-fp8"), &opts).unwrap();
    let e = c.tokenizer().unwrap_err().to_string();
    assert!(e.contains("tokenizer.json"), "{e}");
    assert!(ARCHITECTURES.iter().any(|a| a.name == "deepseek4"));
}

#[test]
fn other_architectures_and_missing_files_are_refused_by_name() {
    let opts = LoadOptions::default();
    // a GGUF of another architecture
    let mut w = GgufWriter::new();
    w.add_kv("general.architecture", Value::Str("llama".into()))
        .unwrap();
    let p = tmp("llama.gguf");
    std::fs::write(&p, w.to_bytes().unwrap()).unwrap();
    let e = open(&p, &opts).unwrap_err();
    assert!(matches!(e, LoadError::UnknownArchitecture { .. }), "{e}");
    let s = e.to_string();
    assert!(
        s.contains("llama") && s.contains("deepseek4") && s.contains("llama.gguf"),
        "{s}"
    );
    // a GGUF without an architecture key
    let p = tmp("none.gguf");
    std::fs::write(&p, GgufWriter::new().to_bytes().unwrap()).unwrap();
    let s = open(&p, &opts).unwrap_err().to_string();
    assert!(s.contains("no general.architecture"), "{s}");
    // a checkpoint of another model type, one without model_type, one without config.json
    for (dir, config, says) in [
        ("other", Some(r#"{"model_type": "llama"}"#), "'llama'"),
        ("untyped", Some(r#"{"hidden_size": 8}"#), "model_type"),
        ("bare", None, "config.json"),
        ("garbage", Some("{"), "not JSON"),
    ] {
        let d = tmp(dir);
        std::fs::create_dir_all(&d).unwrap();
        let cfg = d.join("config.json");
        match config {
            Some(c) => std::fs::write(&cfg, c).unwrap(),
            None => {
                let _ = std::fs::remove_file(&cfg);
            }
        }
        let s = open(&d, &opts).unwrap_err().to_string();
        assert!(s.contains(says) && s.contains(dir), "{dir}: {s}");
    }
    let s = open(&tmp("absent.gguf"), &opts).unwrap_err().to_string();
    assert!(
        s.contains("absent.gguf") && s.contains("no such file"),
        "{s}"
    );
}

#[test]
fn gguf_tensors_the_model_does_not_use_are_refused() {
    use fathom_models::gguf::GgufFile;
    use fathom_models::model::open_gguf;
    use quant::DType;
    use std::sync::Arc;
    let src = GgufFile::open(fixture("dsv4-tiny-Q2_0.gguf")).unwrap();
    // a layer past block_count (6), an unknown name, and a tensor its layer lacks (layer 0 is
    // a sliding-window layer: no compressor; layer 4 is not hash-routed: no tid2eid)
    for (name, says) in [
        ("blk.6.attn_norm.weight", "layer 6"),
        ("blk.4000000000.attn_norm.weight", "layer 4000000000"),
        ("rope_freqs.weight", "not a DeepSeek-V4 tensor"),
        ("blk.0.attn_compressor_kv.weight", "sliding-window"),
        ("blk.4.ffn_gate_tid2eid.weight", "layer 4"),
    ] {
        let mut w = GgufWriter::from_file(&src).unwrap();
        w.add_tensor(name, DType::F32, &[4], vec![0u8; 16]).unwrap();
        let f = Arc::new(GgufFile::parse(w.to_bytes().unwrap()).unwrap());
        let e = match open_gguf(f, &LoadOptions::default()) {
            Ok(_) => panic!("{name} accepted"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(name) && e.contains(says), "{name}: {e}");
    }
}

#[test]
fn gguf_hash_tables_are_checked_like_the_checkpoints() {
    use fathom_models::gguf::GgufFile;
    use fathom_models::model::open_gguf;
    use std::sync::Arc;
    let src = GgufFile::open(fixture("dsv4-tiny-Q2_0.gguf")).unwrap();
    // 16 experts: 16, -1 and i32::MAX are not expert ids, wherever they sit
    for (layer, entry, bad) in [(0usize, 0usize, 16i32), (1, 777, -1), (2, 3071, i32::MAX)] {
        let name = format!("blk.{layer}.ffn_gate_tid2eid.weight");
        let mut w = GgufWriter::new();
        for (k, v) in src.metadata() {
            w.add_kv(k.clone(), v.clone()).unwrap();
        }
        for t in src.tensors() {
            let mut data = src.tensor_bytes(t).unwrap().to_vec();
            if t.name == name {
                data[4 * entry..4 * entry + 4].copy_from_slice(&bad.to_le_bytes());
            }
            w.add_tensor(t.name.clone(), t.dtype, &t.ne, data).unwrap();
        }
        let f = Arc::new(GgufFile::parse(w.to_bytes().unwrap()).unwrap());
        let e = match open_gguf(f, &LoadOptions::default()) {
            Ok(_) => panic!("{name}[{entry}] = {bad} accepted"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains(&name) && e.contains(&format!("entry {entry} is {bad}")),
            "{e}"
        );
    }
}

#[test]
fn gguf_shapes_are_checked_at_open() {
    use fathom_models::gguf::GgufFile;
    use fathom_models::model::open_gguf;
    use std::sync::Arc;
    let src = GgufFile::open(fixture("dsv4-tiny-Q2_0.gguf")).unwrap();
    // the same bytes under another shape: swapped, or a 1 where a dimension belongs
    for (name, ne) in [
        ("output_norm.weight", vec![128u64, 2]),
        ("blk.2.attn_sinks.weight", vec![2, 2]),
        ("blk.0.hc_attn_base.weight", vec![6, 4]),
    ] {
        let mut w = GgufWriter::new();
        for (k, v) in src.metadata() {
            w.add_kv(k.clone(), v.clone()).unwrap();
        }
        for t in src.tensors() {
            let shape = if t.name == name {
                ne.clone()
            } else {
                t.ne.clone()
            };
            w.add_tensor(
                t.name.clone(),
                t.dtype,
                &shape,
                src.tensor_bytes(t).unwrap().to_vec(),
            )
            .unwrap();
        }
        let f = Arc::new(GgufFile::parse(w.to_bytes().unwrap()).unwrap());
        let e = match open_gguf(f, &LoadOptions::default()) {
            Ok(_) => panic!("{name} {ne:?} accepted"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains(name) && e.contains("the hyperparameters need"),
            "{e}"
        );
    }
}

#[test]
fn a_vocabulary_that_cannot_encode_every_byte_is_refused() {
    use fathom_models::gguf::{Array, GgufFile};
    use fathom_models::tokenizer::Tokenizer;
    let src = GgufFile::open(fixture("dsv4-tiny-Q2_0.gguf")).unwrap();
    let tokens: Vec<String> = src
        .get("tokenizer.ggml.tokens")
        .and_then(|v| v.as_array())
        .and_then(|a| a.as_str())
        .unwrap()
        .to_vec();
    // every token the same; one byte token renamed; the vocabulary cut to 100 tokens
    let mut renamed = tokens.clone();
    let at = renamed.iter().position(|t| t == "a").unwrap();
    renamed[at] = "not-a".into();
    for bad in [vec!["a".to_string(); tokens.len()], renamed] {
        let mut w = GgufWriter::from_file(&src).unwrap();
        w.set_kv("tokenizer.ggml.tokens", Value::Array(Array::Str(bad)))
            .unwrap();
        let f = GgufFile::parse(w.to_bytes().unwrap()).unwrap();
        let e = match Tokenizer::from_gguf(&f) {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains("tokenizer.ggml.tokens") && e.contains("no token for byte"),
            "{e}"
        );
    }
}
