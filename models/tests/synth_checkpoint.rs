//! `fathom synth --format checkpoint`'s writer (`models::synth::checkpoint`): its config.json
//! reads back as the same hyperparameters, and a tiny synthetic checkpoint in several shards
//! opens through the one model-opening path (the checkpoint loader, FP8 and FP4 included) and
//! evaluates to finite logits; the same seed writes the same bytes.

use backends::ExecConfig;
use fathom_models::deepseek4::Hparams;
use fathom_models::model::{open, LoadOptions};
use fathom_models::synth::checkpoint::config_json;
use fathom_models::synth::{recipe, Size, StGen, Synth};
use std::path::{Path, PathBuf};

fn synth(size: Size, layers: usize, experts: usize) -> Synth {
    Synth {
        size,
        layers,
        experts,
        hash_layers: fathom_models::synth::HASH_LAYERS,
        recipe: recipe("iq2").unwrap(),
    }
}

fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("synth_checkpoint")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn config_json_reads_back_as_the_same_hyperparameters() {
    for s in [
        synth(Size::Tiny, 1, 8),
        synth(Size::Tiny, 4, 8),
        synth(Size::Flash, 43, 256),
    ] {
        let hp = s.hparams();
        let back = Hparams::from_config_json(&config_json(&hp), "config.json").unwrap();
        assert_eq!(back, hp);
    }
}

#[test]
fn the_plan_has_the_official_names_and_storage() {
    let s = synth(Size::Tiny, 3, 8);
    let plan = s.checkpoint_plan();
    let get = |n: &str| {
        plan.iter()
            .find(|t| t.name == n)
            .unwrap_or_else(|| panic!("{n} missing"))
    };
    let hp = s.hparams();
    let (d, ff) = (hp.n_embd as u64, hp.expert_ff as u64);
    let wq_a = get("layers.0.attn.wq_a.weight");
    assert_eq!(wq_a.gen, StGen::Fp8);
    let sc = get("layers.0.attn.wq_a.scale");
    assert_eq!(sc.shape, vec![wq_a.shape[0].div_ceil(128), d.div_ceil(128)]);
    let w2 = get("layers.2.ffn.experts.7.w2.weight");
    assert_eq!((w2.gen, w2.shape.clone()), (StGen::Fp4, vec![d, ff / 2]));
    assert_eq!(
        get("layers.2.ffn.experts.7.w2.scale").shape,
        vec![d, ff / 32]
    );
    assert_eq!(get("embed.weight").gen, StGen::Bf16);
    assert_eq!(get("layers.1.attn_norm.weight").gen, StGen::Bf16);
    assert_eq!(get("layers.1.hc_attn_fn").gen, StGen::F32);
    let ids = get("layers.0.ffn.gate.tid2eid");
    assert_eq!(ids.gen, StGen::Ids(8));
    assert_eq!(ids.shape, vec![hp.n_vocab as u64, hp.n_expert_used as u64]);
    // one FP4 pair per routed expert and matrix, nothing named twice
    let fp4 = plan.iter().filter(|t| t.gen == StGen::Fp4).count();
    assert_eq!(fp4, 3 * 3 * 8);
    let mut names: Vec<&str> = plan.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), plan.len());
}

#[test]
fn a_sharded_synthetic_checkpoint_opens_and_evaluates() {
    let s = synth(Size::Tiny, 3, 8);
    let (a, b) = (tmp("a"), tmp("b"));
    let mut calls = 0;
    s.write_checkpoint(&a, 1 << 20, 5, &mut |_, _| calls += 1)
        .unwrap();
    assert!(calls > 0);
    s.write_checkpoint(&b, 1 << 20, 5, &mut |_, _| {}).unwrap();
    let mut shards: Vec<String> = std::fs::read_dir(&a)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".safetensors"))
        .collect();
    shards.sort();
    assert!(shards.len() > 2, "{shards:?}");
    assert!(shards[0].ends_with(&format!("-of-{:05}.safetensors", shards.len())));
    // the same seed, the same bytes
    for f in shards.iter().map(String::as_str).chain(["config.json"]) {
        assert!(
            std::fs::read(a.join(f)).unwrap() == std::fs::read(b.join(f)).unwrap(),
            "{f}"
        );
    }
    let m = open(&a, &LoadOptions::default()).unwrap();
    assert_eq!(m.info().n_layer, 3);
    let mut sess = fathom_models::session::Session::new(m, ExecConfig::default(), 64).unwrap();
    let logits = sess.prefill(&[0, 17, 300, 5]).unwrap();
    assert_eq!(logits.len(), 512);
    assert!(logits.iter().all(|x| x.is_finite()));
    assert!(logits.iter().any(|&x| x != logits[0]));
}
