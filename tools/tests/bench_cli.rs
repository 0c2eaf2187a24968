//! `fathom bench`: llama-bench-shaped JSON with our extra fields, and `--membw` alone.

mod common;

use std::process::Command;

fn fathom() -> Command {
    common::fathom()
}

/// Runs `fathom ARGS`, asserts it succeeded and parses its stdout as JSON.
fn json_of(args: &[&str]) -> serde_json::Value {
    let out = fathom().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn json_has_llama_bench_fields_and_ours() {
    let model = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../models/tests/fixtures/dsv4-tiny/dsv4-tiny-Q8_0.gguf"
    );
    let v = json_of(&[
        "bench", "-m", model, "-p", "8", "-n", "3", "-t", "2", "-r", "2", "--json",
    ]);
    let rows = v.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for r in rows {
        for f in [
            "n_prompt",
            "n_gen",
            "n_threads",
            "avg_ts",
            "stddev_ts",
            "bytes_per_token",
            "membw_gbs",
            "floor_fraction",
        ] {
            assert!(r.get(f).is_some(), "field {f} missing in {r}");
        }
        assert!(r["avg_ts"].as_f64().unwrap() > 0.0);
        assert_eq!(r["samples_ts"].as_array().unwrap().len(), 2);
    }
    assert_eq!(rows[0]["n_prompt"], 8);
    assert_eq!(rows[1]["n_gen"], 3);
    assert!(
        rows[1]["bytes_per_token"].as_u64().unwrap() > 1_000_000,
        "the tiny Q8_0 model reads ~3.7 MB per token"
    );
    let f = rows[1]["floor_fraction"].as_f64().unwrap();
    assert!(f > 0.0 && f < 1.5, "{f}");
    // --parallel: the decode test of three slots batched, named as such, without a floor
    let v = json_of(&[
        "bench",
        "-m",
        model,
        "-p",
        "0",
        "-n",
        "3",
        "-t",
        "2",
        "-r",
        "1",
        "--json",
        "--parallel",
        "3",
    ]);
    let r = &v.as_array().unwrap()[0];
    assert_eq!(
        (r["test"].as_str(), r["n_parallel"].as_u64()),
        (Some("tg3x3"), Some(3))
    );
    assert!(r["avg_ts"].as_f64().unwrap() > 0.0);
    assert!(r["floor_fraction"].is_null(), "{r}");
}

#[test]
fn sweep_times_every_chunk_and_decodes_at_the_stride() {
    let model = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../models/tests/fixtures/dsv4-tiny/dsv4-tiny-Q8_0.gguf"
    );
    // 40 tokens in chunks of 8: chunks at depths 0, 8, .., 32; every second one measured
    let v = json_of(&[
        "bench",
        "-m",
        model,
        "--sweep",
        "40",
        "-u",
        "8",
        "--sweep-stride",
        "2",
        "-n",
        "3",
        "-t",
        "2",
        "--json",
    ]);
    let rows = v.as_array().unwrap();
    let depths: Vec<u64> = rows
        .iter()
        .map(|r| r["n_depth"].as_u64().unwrap())
        .collect();
    assert_eq!(depths, [0, 16, 32]);
    for r in rows {
        for f in ["speed_pp", "speed_prompt", "speed_tg"] {
            assert!(r[f].as_f64().unwrap() > 0.0, "{f} in {r}");
        }
        assert_eq!(
            (r["n_ubatch"].as_u64(), r["n_gen"].as_u64()),
            (Some(8), Some(3))
        );
    }
    // without decode tokens, no tg; a sweep is its own test, not combinable with -d
    let v = json_of(&[
        "bench", "-m", model, "--sweep", "16", "-u", "8", "-n", "0", "--json",
    ]);
    assert!(
        v[1]["speed_tg"].is_null() && v[1]["speed_pp"].as_f64().unwrap() > 0.0,
        "{v}"
    );
    let out = fathom()
        .args(["bench", "-m", model, "--sweep", "16", "-d", "8"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--sweep"));
    let out = fathom()
        .args(["bench", "-m", model, "--sweep", "16", "--sweep-stride", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--sweep-stride"));
}

#[test]
fn diskbw_reads_the_model_file() {
    let model = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../models/tests/fixtures/dsv4-tiny/dsv4-tiny-Q8_0.gguf"
    );
    let v = json_of(&["bench", "--diskbw", "-m", model, "-r", "2", "--json"]);
    let r = &v.as_array().unwrap()[0];
    assert_eq!(r["test"], "diskbw");
    assert!(r["diskbw_gbs"].as_f64().unwrap() > 0.0, "{r}");
    assert_eq!(r["samples_gbs"].as_array().unwrap().len(), 2);
    assert!(r["bytes"].as_u64().unwrap() >= 1 << 20);
    // without a model, or a file too small to time
    let out = fathom().args(["bench", "--diskbw"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("give -m MODEL"));
    let small = concat!(env!("CARGO_MANIFEST_DIR"), "/../tools/assets/README.md");
    let out = fathom()
        .args(["bench", "--diskbw", "-m", small])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("too small"));
}

#[test]
fn membw_alone_and_errors() {
    let out = fathom()
        .args(["bench", "--membw", "-t", "1"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("GB/s"));
    let out = fathom().args(["bench"]).output().unwrap();
    assert!(!out.status.success());
    let out = fathom()
        .args(["bench", "-m", "/nonexistent.gguf"])
        .output()
        .unwrap();
    assert!(
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("/nonexistent.gguf")
    );
}

/// `--repack iq1_s` on the tiny IQ1_S model: the loaded bytes per token are the file's × 1.4
/// for the repacked tensors (where this CPU repacks), and an unknown type is refused by name.
#[test]
fn repack_reports_loaded_bytes_and_rejects_unknown_types() {
    let model = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../models/tests/fixtures/dsv4-tiny/dsv4-tiny-IQ1_S.gguf"
    );
    let v = json_of(&[
        "bench", "-m", model, "-p", "0", "-n", "2", "-t", "2", "-r", "1", "--json", "--repack",
        "iq1_s",
    ]);
    let r = &v.as_array().unwrap()[0];
    let file = r["bytes_per_token"].as_u64().unwrap();
    let repacks = quant::simd::kernels(quant::DType::IQ1_S_X, quant::simd::CpuLevel::detect())
        .is_some_and(|k| k.has_simd());
    match r["loaded_bytes_per_token"].as_u64() {
        Some(loaded) => {
            assert!(repacks);
            assert!(
                loaded > file && loaded * 5 <= file * 7,
                "{loaded} vs {file}"
            );
            assert!(r["loaded_floor_fraction"].as_f64().unwrap() > 0.0);
        }
        None => assert!(!repacks, "no loaded bytes although this CPU repacks"),
    }
    let out = fathom()
        .args(["bench", "-m", model, "--repack", "q4_k"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("q4_k"), "{err}");
}

/// `--matvec`: one JSON object per type with the measured rates and the fraction;
/// unknown or untested types are refused by name, and `--matvec` does not take a model.
#[test]
fn matvec_reports_each_type_against_the_bandwidth() {
    let v = json_of(&[
        "bench", "--matvec", "q8_0,f32", "-t", "2", "-r", "1", "--json",
    ]);
    let rows = v.as_array().unwrap();
    let got: Vec<&str> = rows.iter().map(|r| r["type"].as_str().unwrap()).collect();
    assert_eq!(got, ["Q8_0", "F32"]);
    for r in rows {
        let (m, b, f) = (
            r["matvec_gbs"].as_f64().unwrap(),
            r["membw_gbs"].as_f64().unwrap(),
            r["fraction"].as_f64().unwrap(),
        );
        assert!(m > 0.0 && b > 0.0, "{r}");
        assert!((f - m / b).abs() < 1e-9 * f.max(1.0), "{r}");
        // the bandwidth buffer's size (at least 1 GiB), rounded down to 64 rows
        assert!(r["weight_bytes"].as_u64().unwrap() > 1_000 << 20, "{r}");
    }
    for (bad, says) in [("q9_9", "q9_9"), ("q1_0", "q1_0")] {
        let out = fathom().args(["bench", "--matvec", bad]).output().unwrap();
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(says),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = fathom()
        .args(["bench", "--matvec", "q8_0", "-m", "x.gguf"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    // `--row`: the row length is reported; one that is not a multiple of the type's block
    // is refused naming the type and the option
    let v = json_of(&[
        "bench", "--matvec", "q8_0", "--row", "1024", "-t", "1", "-r", "1", "--json",
    ]);
    assert_eq!(v[0]["row"].as_u64(), Some(1024), "{v}");
    let out = fathom()
        .args(["bench", "--matvec", "q4_k", "--row", "1000"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("Q4_K") && err.contains("--row"),
        "{err}"
    );
}

/// The kernel column names the kernel the table gives the type on this CPU: its rows
/// kernel, or its dot kernel (the scalar reference where it has none).
#[test]
fn matvec_names_the_kernel_of_the_table() {
    let level = quant::simd::CpuLevel::detect();
    for t in [quant::DType::Q8_0, quant::DType::Q2_0_X] {
        let v = json_of(&[
            "bench",
            "--matvec",
            t.name(),
            "-t",
            "1",
            "-r",
            "1",
            "--json",
        ]);
        let k = quant::simd::kernels(t, level).unwrap();
        let want = match k.rows {
            Some(r) => format!("{} rows", r.name),
            None => k.dot.name.to_string(),
        };
        assert_eq!(v[0]["kernel"].as_str(), Some(want.as_str()), "{v}");
    }
}

/// `--ram`: a figure that leaves the experts room runs with the cache and reports it in
/// `--json`; one too small for the resident weights, caches and working memory is refused
/// with the figures; one that is not a number names the flag.
#[test]
fn ram_plans_an_expert_cache_or_refuses_with_the_figures() {
    let model = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../models/tests/fixtures/dsv4-tiny/dsv4-tiny-Q8_0.gguf"
    );
    let v = json_of(&[
        "bench", "-m", model, "-p", "8", "-n", "3", "-t", "2", "-r", "1", "--json", "--ram", "1.25",
    ]);
    for r in v.as_array().unwrap() {
        let c = &r["expert_cache"];
        assert!(c.is_object(), "no expert_cache in {r}");
        // 1.25 GiB less 1 GiB of working memory and the tiny model's few MiB
        let budget = c["budget"].as_u64().unwrap();
        assert!(budget > 200 << 20 && budget < 256 << 20, "{budget}");
        assert!(c["hits"].as_u64().unwrap() > 0, "{c}");
        assert!(r["peak_rss"].as_u64().is_some(), "{r}");
    }
    let out = fathom()
        .args(["bench", "-m", model, "-p", "8", "-n", "0", "--ram", "0.5"])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(
        e.contains("--ram 0.5 GiB is too little") && e.contains("working memory 1.00"),
        "{e}"
    );
    let out = fathom()
        .args(["bench", "-m", model, "--ram", "lots"])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && e.contains("--ram") && e.contains("GiB"),
        "{e}"
    );
}
