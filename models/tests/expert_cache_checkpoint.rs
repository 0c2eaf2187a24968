//! The expert cache over an official checkpoint (`--ram` with FP8/FP4 shards): each routed
//! expert is read from its own tensors (FP4 nibbles, then their E8M0 scales) when a node needs
//! it and converted as loading would convert it, so a cache far smaller than one layer's
//! experts gives the logits of the checkpoint loaded into memory, bit for bit, under each
//! FP4 policy; the experts are never stacked in memory.

use fathom_models::deepseek4::DeepSeek4;
use fathom_models::model::{LoadOptions, Model};
use fathom_models::session::Session;
use fathom_models::weights::policy::Fp4Policy;
use fathom_models::weights::{ExpertCacheConfig, StOptions};
use std::path::{Path, PathBuf};

mod session_support;
use session_support::greedy;

fn checkpoint() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dsv4-tiny-fp8")
}

fn session(path: &Path, experts: Option<ExpertCacheConfig>, st: StOptions) -> Session {
    let opts = LoadOptions {
        experts,
        checkpoint: st,
        exec: backends::ExecConfig {
            threads: 2,
            ..backends::ExecConfig::default()
        },
        ..LoadOptions::default()
    };
    let m = DeepSeek4::from_checkpoint(path, &opts).unwrap();
    Session::new(Box::new(m) as Box<dyn Model>, opts.exec, 64).unwrap()
}

/// One layer's experts as loaded: 16 experts × (gate, up, down), each 32 × 256 values.
fn layer_bytes(st: StOptions) -> u64 {
    let values = 16 * 3 * 32 * 256u64;
    if st.fp4 == Fp4Policy::F32 {
        4 * values
    } else {
        values / 32 * 17
    }
}

fn matches_with_a_small_cache(st: StOptions) {
    let path = checkpoint();
    let prompt: Vec<u32> = vec![0, 266, 85, 329, 66, 356, 329, 12, 85, 266, 7];
    // loaded into memory: the experts stacked (the FP4 ones as MXFP4)
    let stacked = StOptions {
        fp4: match st.fp4 {
            Fp4Policy::InPlace => Fp4Policy::Mxfp4,
            p => p,
        },
        ..st
    };
    let mut loaded = session(&path, None, stacked);
    let want = greedy(&mut loaded, &prompt, 6);
    let budget = layer_bytes(st) / 4;
    let cfg = ExpertCacheConfig {
        budget,
        io_threads: 2,
        direct: true,
    };
    let mut s = session(&path, Some(cfg), st);
    // nothing of the experts is converted at load: what the conversions own is the dense
    // part only
    let owned = |s: &Session| s.model().converted_bytes().unwrap().bytes;
    assert!(
        owned(&s) + 6 * layer_bytes(st) <= owned(&loaded),
        "{st:?}: {} vs {}",
        owned(&s),
        owned(&loaded)
    );
    let got = greedy(&mut s, &prompt, 6);
    assert!(
        got == want,
        "{st:?}: logits differ from the loaded checkpoint's"
    );
    let c = s.model().expert_cache().unwrap().stats();
    assert!(
        c.misses > 0 && c.hits + c.misses > c.misses,
        "{st:?}: {c:?}"
    );
    assert!(c.bytes_read > 4 * budget, "{st:?}: {c:?}");
    assert!(
        c.peak <= budget + 6 * (layer_bytes(st) / 48 + 8192),
        "{st:?}: {c:?}"
    );
}

#[test]
fn a_small_cache_gives_the_loaded_checkpoints_logits_fp4() {
    matches_with_a_small_cache(StOptions::default());
}

#[test]
fn a_small_cache_gives_the_loaded_checkpoints_logits_fp32() {
    matches_with_a_small_cache(StOptions::fp32());
}

/// A scratch directory `tag` holding copies of the fixture's `files`.
fn copy_of(tag: &str, files: &[&str]) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fathom-ckpt-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    for f in files {
        std::fs::copy(checkpoint().join(f), d.join(f)).unwrap();
    }
    d
}

/// Opening the checkpoint in `d` with a cache fails naming its second shard; `d` is then
/// removed.
fn assert_second_shard_named(d: &Path) {
    let opts = LoadOptions {
        experts: Some(ExpertCacheConfig::with_budget(1 << 20)),
        ..LoadOptions::default()
    };
    let e = DeepSeek4::from_checkpoint(d, &opts)
        .unwrap_err()
        .to_string();
    assert!(e.contains("model-00002-of-00002.safetensors"), "{e}");
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_truncated_shard_is_named_before_anything_is_read() {
    let d = copy_of(
        "truncated",
        &[
            "config.json",
            "model.safetensors.index.json",
            "model-00001-of-00002.safetensors",
            "model-00002-of-00002.safetensors",
        ],
    );
    // the second shard loses its last KiB: some expert's bytes are gone
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(d.join("model-00002-of-00002.safetensors"))
        .unwrap();
    let len = f.metadata().unwrap().len();
    f.set_len(len - 1024).unwrap();
    assert_second_shard_named(&d);
}

#[test]
fn a_missing_shard_is_named_before_anything_is_read() {
    let d = copy_of(
        "missing",
        &["config.json", "model-00001-of-00002.safetensors"],
    );
    // an index that names both shards, one of them absent
    let index = r#"{"metadata": {}, "weight_map": {"layers.3.ffn.experts.0.w1.weight": "model-00002-of-00002.safetensors"}}"#;
    std::fs::write(d.join("model.safetensors.index.json"), index).unwrap();
    assert_second_shard_named(&d);
}
