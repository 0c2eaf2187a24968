//! Integration tests of `fathom kl` on the dsv4-tiny Q8_0 fixture (6 layers, hash layers 0–2,
//! top-6 of 16 experts) over a 30-token text: the model's routing against itself is exact
//! (KL 0, top-1 100%, ΔPPL 0), top-2 costs something (KL > 0, top-1 < 100%) and the TOML and
//! `.bin` forms of one configuration agree, `--save-base` + `--base-logits` reproduce a direct
//! run, and bad configuration files or base files are errors naming the file (and field).

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

fn model() -> String {
    repo("models/tests/fixtures/dsv4-tiny/dsv4-tiny-Q8_0.gguf")
        .display()
        .to_string()
}

/// A fresh temporary directory holding the text (30 tokens with the fixture's tokenizer).
fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fathom-kl-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("text.txt"),
        "The quick brown fox jumps over the lazy dog.\n",
    )
    .unwrap();
    d
}

fn fathom_kl(args: &[&str]) -> Output {
    fathom_kl_on(&model(), args)
}

fn fathom_kl_on(model: &str, args: &[&str]) -> Output {
    common::fathom()
        .arg("kl")
        .args(["-m", model, "-t", "1", "--decode-tokens", "2"])
        .args(args)
        .output()
        .expect("run fathom")
}

/// The JSON result of a run that must succeed.
fn json(args: &[&str]) -> serde_json::Value {
    let out = fathom_kl(&[args, &["--json"]].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "fathom kl {args:?} failed: {stderr}");
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

/// stderr of a run that must fail with exit status 1.
fn fails(args: &[&str]) -> String {
    let out = fathom_kl(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "fathom kl {args:?}: {stderr}");
    assert!(
        stderr.starts_with("error: ") && !stderr.contains("panicked"),
        "{stderr}"
    );
    stderr
}

fn f(j: &serde_json::Value, key: &str) -> f64 {
    j[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no number '{key}' in {j}"))
}

/// The quality numbers of a result (everything but the timings).
fn quality(j: &serde_json::Value) -> Vec<f64> {
    let mut v: Vec<f64> = [
        "kl_mean",
        "kl_max",
        "top10_kl_mean",
        "cos_mean",
        "delta_ppl",
        "top1",
        "top3",
    ]
    .iter()
    .map(|k| f(j, k))
    .collect();
    v.push(f(&j["base"], "ppl"));
    v.push(f(&j["test"], "ppl"));
    v
}

#[test]
fn model_routing_against_itself_is_exact_and_prints_tables() {
    let d = tmp("none");
    let text = d.join("text.txt").display().to_string();
    let j = json(&[
        "-f",
        &text,
        "--base-config",
        "none",
        "--test-config",
        "none",
    ]);
    assert_eq!(j["tokens"], 30, "{j}");
    assert_eq!(j["positions"], 29);
    assert_eq!(f(&j, "kl_mean"), 0.0, "{j}");
    assert_eq!(f(&j, "kl_max"), 0.0);
    assert_eq!(f(&j, "top10_kl_mean"), 0.0);
    assert_eq!(f(&j, "delta_ppl"), 0.0);
    assert_eq!(f(&j, "top1"), 1.0);
    assert_eq!(f(&j, "top3"), 1.0);
    assert!((f(&j, "cos_mean") - 1.0).abs() < 1e-12);
    assert_eq!(f(&j["base"], "ppl"), f(&j["test"], "ppl"));
    assert!(f(&j["base"], "decode_ms_per_token") > 0.0);
    // an empty configuration file is the model's own routing, bit for bit
    std::fs::write(d.join("empty.toml"), "").unwrap();
    let empty = d.join("empty.toml").display().to_string();
    let out = fathom_kl(&[
        "-f",
        &text,
        "--base-config",
        "none",
        "--test-config",
        &empty,
    ]);
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(
        table.contains("| mean KL | max KL | top-10 KL | cos sim | ΔPPL | top-1 | top-3 |"),
        "{table}"
    );
    assert!(
        table.contains(
            "| 0.000000 | 0.000000 (pos 0) | 0.000000 | 1.000000 | +0.000% | 100.00% | 100.00% |"
        ),
        "{table}"
    );
    assert!(table.contains("decode ms/tok"), "{table}");
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn fewer_experts_cost_quality_and_both_file_forms_agree() {
    let d = tmp("k2");
    let text = d.join("text.txt").display().to_string();
    let toml = d.join("k2.toml");
    std::fs::write(&toml, "top_k = 2\n").unwrap();
    let toml = toml.display().to_string();
    let j = json(&["-f", &text, "--base-config", "none", "--test-config", &toml]);
    assert!(f(&j, "kl_mean") > 0.0, "{j}");
    assert!(f(&j, "kl_max") >= f(&j, "kl_mean"));
    assert!(f(&j, "top10_kl_mean") > 0.0);
    assert!(f(&j, "top1") < 1.0, "{j}");
    assert!(f(&j, "top3") >= f(&j, "top1"));
    assert!(f(&j, "cos_mean") < 1.0);
    assert_ne!(f(&j, "delta_ppl"), 0.0);
    assert_eq!(j["test"]["summary"], "top_k=2");
    // the seed's binary form of the same setting: top_k 2, all layers, l2
    let bin = d.join("k2.bin");
    let words: Vec<u8> = [2i32, 0, 0, 0, 6, 1, 0, 0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    std::fs::write(&bin, words).unwrap();
    let b = json(&[
        "-f",
        &text,
        "--base-config",
        "none",
        "--test-config",
        &bin.display().to_string(),
    ]);
    assert_eq!(quality(&b), quality(&j));
    std::fs::remove_dir_all(&d).ok();
}

/// `--repack iq2_xxs` is lossless: base logits saved from the plain IQ2_XXS model are
/// matched exactly by the model's own routing on the repacked weights.
#[test]
fn repacked_weights_reproduce_saved_base_logits_exactly() {
    let d = tmp("repack");
    let text = d.join("text.txt").display().to_string();
    let saved = d.join("base.safetensors").display().to_string();
    let iq2 = repo("models/tests/fixtures/dsv4-tiny/dsv4-tiny-IQ2_XXS.gguf")
        .display()
        .to_string();
    let run = |args: &[&str]| {
        let out = fathom_kl_on(
            &iq2,
            &[args, &["--json", "-f", &text, "--test-config", "none"]].concat(),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "fathom kl {args:?} failed: {stderr}");
        serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("one JSON object")
    };
    run(&["--base-config", "none", "--save-base", &saved]);
    let j = run(&["--base-logits", &saved, "--repack", "iq2_xxs"]);
    assert_eq!(f(&j, "kl_max"), 0.0, "{j}");
    assert_eq!(f(&j, "top1"), 1.0);
    assert_eq!(f(&j, "delta_ppl"), 0.0);
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn saved_base_logits_reproduce_a_direct_run() {
    let d = tmp("save");
    let text = d.join("text.txt").display().to_string();
    let toml = d.join("tail.toml");
    std::fs::write(&toml, "min_weight = 0.3\nrescale = \"l1\"\n").unwrap();
    let toml = toml.display().to_string();
    let saved = d.join("base.safetensors").display().to_string();
    // chunks of 16: two graphs (16 + 14), the caches carry over
    let common = ["-f", &text, "-u", "16", "--test-config", &toml];
    let direct = json(
        &[
            &common[..],
            &["--base-config", "none", "--save-base", &saved],
        ]
        .concat(),
    );
    assert!(f(&direct, "kl_mean") > 0.0, "{direct}");
    let again = json(&[&common[..], &["--base-logits", &saved]].concat());
    assert_eq!(quality(&again), quality(&direct), "{again}\n{direct}");
    assert!(again["base"]["config"]
        .as_str()
        .unwrap()
        .starts_with("none (from "));
    assert!(
        again["base"]["decode_ms_per_token"].is_null(),
        "no base config: no A timing"
    );
    // another text: a clear error naming the file
    let other = d.join("other.txt");
    std::fs::write(&other, "A different text.\n").unwrap();
    let e = fails(&[
        "-f",
        &other.display().to_string(),
        "--test-config",
        "none",
        "--base-logits",
        &saved,
    ]);
    assert!(e.contains(&saved) && e.contains("other tokens"), "{e}");
    let e = fails(&["-f", &text, "--test-config", "none", "--base-logits", &text]);
    assert!(e.contains(&text) && e.contains("safetensors"), "{e}");
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn bad_configurations_are_errors_naming_file_and_field() {
    let d = tmp("bad");
    let text = d.join("text.txt").display().to_string();
    let run = |body: &str, flag: &str| {
        let p = d.join("bad.toml");
        std::fs::write(&p, body).unwrap();
        let p = p.display().to_string();
        let (base, test) = if flag == "--base-config" {
            (p.as_str(), "none")
        } else {
            ("none", p.as_str())
        };
        let e = fails(&["-f", &text, "--base-config", base, "--test-config", test]);
        assert!(e.contains(flag) && e.contains(&p), "{e}");
        e
    };
    assert!(run("top_k = 7\n", "--test-config").contains("'top_k' = 7"));
    assert!(run("rescale = \"l3\"\n", "--base-config").contains("rescale"));
    assert!(run("tpo_k = 3\n", "--test-config").contains("tpo_k"));
    let missing = d.join("missing.toml").display().to_string();
    let e = fails(&[
        "-f",
        &text,
        "--base-config",
        "none",
        "--test-config",
        &missing,
    ]);
    assert!(e.contains(&missing), "{e}");
    let torn = d.join("torn.bin");
    std::fs::write(&torn, [1u8, 0, 0, 0, 2]).unwrap();
    let torn = torn.display().to_string();
    let e = fails(&["-f", &text, "--base-config", &torn, "--test-config", "none"]);
    assert!(e.contains(&torn) && e.contains("torn"), "{e}");
    let e = fails(&[
        "-f",
        &d.join("nope.txt").display().to_string(),
        "--base-config",
        "none",
        "--test-config",
        "none",
    ]);
    assert!(e.contains("nope.txt"), "{e}");
    std::fs::remove_dir_all(&d).ok();
}
