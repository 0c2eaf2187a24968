//! The environment and the shared model flags: every variable fathom reads is validated
//! (a value it cannot use is an error naming the variable), and `--st-weights` and
//! `FATHOM_ST_WEIGHTS` load a checkpoint the same way in every command.

mod common;

use common::fathom;
use std::path::{Path, PathBuf};

fn fixture(p: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../models/tests/fixtures")
        .join(p)
        .display()
        .to_string()
}

fn tmp(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("env_cli");
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn threads_beyond_the_cpus_are_clamped_with_a_note() {
    let cpus = std::thread::available_parallelism().unwrap().get();
    for t in [cpus + 1, 64, 100_000] {
        let out = fathom()
            .args(["run", "-n", "2", "--temp", "0", "-t", &t.to_string()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "-t {t}: {err}");
        assert!(
            err.contains(&format!("note: -t {t}:")) && err.contains(&format!("{cpus} threads")),
            "-t {t}: {err}"
        );
    }
    // FATHOM_CPUS=0 lists one CPU: -t 2 runs one thread
    let out = fathom()
        .args(["run", "-n", "1", "-t", "2"])
        .env("FATHOM_CPUS", "0")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && err.contains("FATHOM_CPUS lists 1 CPU; using 1 thread"),
        "{err}"
    );
}

#[test]
fn bad_values_are_errors_naming_the_variable() {
    for (var, value) in [
        ("FATHOM_CPUS", "zero"),
        ("FATHOM_CPUS", "3-1"),
        ("FATHOM_CPUS", "999"),
        ("FATHOM_CPUS", "0,4096"),
        ("FATHOM_CPUS", ","),
        ("FATHOM_PROFILE_OPS", "yes please"),
        ("LLAMA_PROFILE_OPS", "json:"),
        ("FATHOM_FORCE_SCALAR", "2"),
        ("FATHOM_ST_WEIGHTS", "bogus"),
    ] {
        let out = fathom()
            .args(["run", "-n", "1", "-t", "1"])
            .env(var, value)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{var}={value}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(var) && !err.contains("panicked"),
            "{var}={value}: {err}"
        );
    }
    let out = fathom()
        .args([
            "logits",
            "--st-weights",
            "half",
            "-m",
            &fixture("dsv4-tiny-fp8"),
        ])
        .args(["--tokens", "1", "--out", "/dev/null"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--st-weights half"), "{err}");
}

/// The help lists every variable.
#[test]
fn help_lists_the_environment() {
    let out = fathom().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for v in &common::CLEARED[..6] {
        assert!(help.contains(v), "{v} not in --help:\n{help}");
    }
}

fn logits(extra: &[&str], env: Option<&str>) -> Vec<u8> {
    let out_path = tmp(&format!(
        "l{}-{}.st",
        extra.join("_"),
        env.unwrap_or("none")
    ));
    let mut c = fathom();
    c.args([
        "logits",
        "-m",
        &fixture("dsv4-tiny-fp8"),
        "--tokens",
        "0,5,17,3",
    ])
    .args(["-t", "1", "--out", out_path.to_str().unwrap()])
    .args(extra);
    if let Some(v) = env {
        c.env("FATHOM_ST_WEIGHTS", v);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(out_path).unwrap()
}

/// `--st-weights` and `FATHOM_ST_WEIGHTS` choose the same conversion; the flag wins; the
/// policies differ (FP8 → Q8_0 rounds the dense weights).
#[test]
fn checkpoint_policy_by_flag_or_variable() {
    let default = logits(&[], None);
    let q8 = logits(&["--st-weights", "q8_0"], None);
    assert_eq!(logits(&[], Some("q8_0")), q8);
    assert_eq!(logits(&["--st-weights", "default"], Some("q8_0")), default);
    assert_ne!(q8, default);
}
