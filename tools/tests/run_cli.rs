//! Integration tests of `fathom run`, running the built binary: the built-in model (greedy
//! and seeded sampling, determinism, the speed line and the profile), the dsv4-tiny Q2_0
//! fixture, the chat wrapper, cached vs chunked vs `--recompute` generation, and the errors
//! (missing or garbage model, prompt longer than the context, missing prompt file).
//! Generation lengths stay ≤ 8 tokens: the test build is slow.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

fn fathom_run(args: &[&str]) -> Output {
    common::fathom()
        .arg("run")
        .args(["-t", "1"])
        .args(args)
        .output()
        .expect("run fathom")
}

/// (stdout, stderr) of a run that must succeed.
fn ok(args: &[&str]) -> (String, String) {
    let out = fathom_run(args);
    let stdout = String::from_utf8(out.stdout).expect("stdout is UTF-8");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "fathom run {args:?} failed: {stderr}");
    (stdout, stderr)
}

/// stderr of a run that must fail with exit status 1.
fn fails(args: &[&str]) -> String {
    let out = fathom_run(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "fathom run {args:?}: {stderr}");
    assert!(stderr.contains("error: "), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

fn assert_speed_line(stderr: &str) {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("prefill: "))
        .unwrap_or_else(|| panic!("no speed line in {stderr}"));
    assert!(
        line.contains(" tokens in ") && line.contains(" ms (") && line.contains("| decode: "),
        "{line}"
    );
}

#[test]
fn builtin_greedy_generates_deterministic_text_with_speeds_and_profile() {
    let (out1, err) = ok(&["-n", "8", "--temp", "0"]);
    // the trained model continues its default prompt with the GPL (fixture README, greedy)
    assert!(
        out1.starts_with("This program is free software; you can redistribute"),
        "{out1:?}"
    );
    assert!(
        out1.len() > "This program is free software".len() + 10,
        "{out1:?}"
    );
    assert!(
        err.contains("built-in") && err.contains("NOT DeepSeek-V4's real weights"),
        "{err}"
    );
    assert!(
        err.contains("cache: ") && err.contains(" for 4096 tokens at f32"),
        "{err}"
    );
    assert!(err.contains("sampling: greedy"), "{err}");
    assert_speed_line(&err);
    assert!(err.contains("decode: 7 tokens"), "{err}");
    assert!(
        err.contains("fathom op profile:") && err.contains("| MUL_MAT |"),
        "{err}"
    );
    let (out2, _) = ok(&["-n", "8", "--temp", "0"]);
    assert_eq!(out1, out2, "greedy decoding must be deterministic");
}

#[test]
fn cached_chunked_and_recompute_agree() {
    let (cached, err) = ok(&["-n", "8", "--temp", "0", "-p", "The license"]);
    assert!(err.contains("cached: 2 graphs built"), "{err}");
    let (chunked, err) = ok(&["-n", "8", "--temp", "0", "-p", "The license", "-u", "2"]);
    assert!(err.contains("prompt chunks of 2 tokens"), "{err}");
    let (full, err) = ok(&["-n", "8", "--temp", "0", "-p", "The license", "--recompute"]);
    assert!(err.contains("recompute: 8 graphs built"), "{err}");
    assert_eq!(cached, chunked);
    assert_eq!(cached, full);
}

#[test]
fn seeded_sampling_repeats() {
    let args = [
        "-n",
        "8",
        "--temp",
        "0.9",
        "--seed",
        "7",
        "-p",
        "The license",
    ];
    let (a, err) = ok(&args);
    assert!(a.starts_with("The license"), "{a:?}");
    assert!(err.contains("seed 7"), "{err}");
    assert_speed_line(&err);
    let (b, _) = ok(&args);
    assert_eq!(a, b, "the same seed must give the same text");
}

#[test]
fn q2_0_fixture_runs() {
    let model = repo("models/tests/fixtures/dsv4-tiny-Q2_0.gguf");
    let m = model.to_str().unwrap();
    let (out, err) = ok(&["-m", m, "-p", "hello", "-n", "4"]);
    assert!(out.starts_with("hello"), "{out:?}");
    assert!(err.contains("loading ") && err.contains("done in"), "{err}");
    assert!(!err.contains("built-in"), "{err}");
    assert!(!err.contains("fathom op profile"), "{err}");
    assert_speed_line(&err);
}

#[test]
fn chat_and_prompt_file() {
    let (out, err) = ok(&["--chat", "-p", "Hi", "-n", "2", "--temp", "0"]);
    assert!(
        !out.contains("Hi"),
        "chat mode does not echo the prompt: {out:?}"
    );
    assert!(err.contains("plain-text stand-ins"), "{err}");
    assert_speed_line(&err);
    let prompt = std::env::temp_dir().join(format!("fathom-run-cli-{}.txt", std::process::id()));
    std::fs::write(&prompt, "In the beginning").unwrap();
    let (out, _) = ok(&["-f", prompt.to_str().unwrap(), "-n", "2", "--temp", "0"]);
    let _ = std::fs::remove_file(&prompt);
    assert!(out.starts_with("In the beginning"), "{out:?}");
}

#[test]
fn generation_stops_when_the_context_is_full() {
    // 6 prompt tokens (BOS included) in a context of 8: two decode steps fill it; a third
    // token is sampled from the last logits, then generation stops
    let (_, err) = ok(&["--ctx", "8", "-n", "8", "--temp", "0"]);
    assert!(err.contains("(context full)"), "{err}");
    assert!(err.contains("decode: 2 tokens"), "{err}");
}

#[test]
fn errors_name_the_file_or_the_limit() {
    let err = fails(&["-m", "/nonexistent/model.gguf", "-n", "1"]);
    assert!(err.contains("/nonexistent/model.gguf"), "{err}");

    let garbage = repo("tools/assets/README.md");
    let err = fails(&["-m", garbage.to_str().unwrap(), "-n", "1"]);
    assert!(err.contains("README.md"), "{err}");

    let err = fails(&[
        "--ctx",
        "4",
        "-p",
        "This program is free software",
        "-n",
        "1",
    ]);
    assert!(
        err.contains("context of 4") && err.contains("--ctx"),
        "{err}"
    );

    let err = fails(&["-f", "/nonexistent/prompt.txt"]);
    assert!(err.contains("/nonexistent/prompt.txt"), "{err}");

    let err = fails(&["--top-p", "2", "-n", "1"]);
    assert!(err.contains("top_p"), "{err}");
}
