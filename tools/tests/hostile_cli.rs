//! The hostile-input corpus: malformed files and values of every class of
//! `shared/spec/hostile-inputs.md` and issue 32 (silent wrong output, unbounded sizes, hangs,
//! unbounded reads, files changed while mapped, unclear messages), each given to the `fathom`
//! binary under `ulimit -v` and `timeout`. Every case must end as it should: an error naming
//! what is wrong (exit 1), or a correct run (exit 0) where the right answer is to run; never
//! a panic, an abort, a signal, a hang, or exit 0 with wrong output. The table of outcomes
//! is printed (`cargo test --test hostile_cli -- --nocapture`).

mod common;
#[path = "hostile_cli/hangs_reads.rs"]
mod hangs_reads;
#[path = "hostile_cli/messages.rs"]
mod messages;
#[path = "hostile_cli/sizes.rs"]
mod sizes;
#[path = "hostile_cli/wrong_output.rs"]
mod wrong_output;

use models::gguf::{Array, GgufFile, GgufWriter, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

fn fixture(p: &str) -> PathBuf {
    repo("models/tests/fixtures").join(p)
}

/// Virtual memory limit of every run (KiB): far above what the tiny models need.
const ULIMIT_V_KB: u64 = 3 << 20;
/// Wall-clock limit of every run.
const TIMEOUT_S: u64 = 60;

/// How a case must end.
enum Expect {
    /// Exit 1, stderr `error: …` holding every one of these.
    Error(Vec<String>),
    /// Exit 0, stderr holding every one of these.
    Ok(Vec<String>),
}

fn err(says: &[&str]) -> Expect {
    Expect::Error(says.iter().map(|x| x.to_string()).collect())
}

fn ran(says: &[&str]) -> Expect {
    Expect::Ok(says.iter().map(|x| x.to_string()).collect())
}

struct Case {
    class: &'static str,
    name: String,
    args: Vec<String>,
    env: Vec<(&'static str, String)>,
    expect: Expect,
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// Runs `fathom args` under the limits; (exit code or None for a signal, stderr, seconds).
fn run_limited(args: &[String], env: &[(&str, String)]) -> (Option<i32>, String, f64) {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!(
            "ulimit -v {ULIMIT_V_KB}; exec timeout -s KILL {TIMEOUT_S} \"$@\""
        ))
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_fathom"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for v in common::CLEARED {
        c.env_remove(v);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let t0 = Instant::now();
    let out = c.output().expect("run sh");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    // `timeout -s KILL` reports a killed child as 137; a child killed by a signal of its own
    // makes sh exit 128 + n: both are failures here
    let code = out.status.code().filter(|&c| c < 124);
    (code, err, t0.elapsed().as_secs_f64())
}

/// A copy of the Q2_0 fixture with `edit` applied to the writer, written to `dir/name`.
fn gguf_variant(dir: &Path, name: &str, edit: impl FnOnce(&GgufFile, &mut GgufWriter)) -> String {
    let src = GgufFile::open(fixture("dsv4-tiny-Q2_0.gguf")).unwrap();
    let mut w = GgufWriter::from_file(&src).unwrap();
    edit(&src, &mut w);
    let p = dir.join(name);
    std::fs::write(&p, w.to_bytes().unwrap()).unwrap();
    p.display().to_string()
}

/// A copy of the Q2_0 fixture with the bytes of tensor `tensor` changed by `edit`.
fn gguf_bytes_variant(dir: &Path, name: &str, tensor: &str, edit: impl Fn(&mut [u8])) -> String {
    let src = GgufFile::open(fixture("dsv4-tiny-Q2_0.gguf")).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in src.metadata() {
        w.add_kv(k.clone(), v.clone()).unwrap();
    }
    for t in src.tensors() {
        let mut data = src.tensor_bytes(t).unwrap().to_vec();
        if t.name == tensor {
            edit(&mut data);
        }
        w.add_tensor(t.name.clone(), t.dtype, &t.ne, data).unwrap();
    }
    let p = dir.join(name);
    std::fs::write(&p, w.to_bytes().unwrap()).unwrap();
    p.display().to_string()
}

fn mkfifo(p: &Path) -> String {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
    assert_eq!(rc, 0);
    p.display().to_string()
}

/// A copy of the fp8 checkpoint directory with `edit(dir)` applied.
fn ckpt_variant(root: &Path, name: &str, edit: impl FnOnce(&Path)) -> String {
    let d = root.join(name);
    std::fs::create_dir_all(&d).unwrap();
    for f in std::fs::read_dir(fixture("dsv4-tiny-fp8")).unwrap() {
        let f = f.unwrap().path();
        if f.is_file() {
            std::fs::copy(&f, d.join(f.file_name().unwrap())).unwrap();
        }
    }
    edit(&d);
    d.display().to_string()
}

fn edit_json(p: &Path, edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) {
    let mut j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    edit(j.as_object_mut().unwrap());
    std::fs::write(p, j.to_string()).unwrap();
}

/// The corpus being built: its directory, the paths every class uses, and the cases.
pub struct Corpus {
    dir: PathBuf,
    q2: String,
    f32m: String,
    text: String,
    out: String,
    v: Vec<Case>,
}

impl Corpus {
    fn add(&mut self, class: &'static str, name: &str, args: Vec<String>, expect: Expect) {
        self.v.push(Case {
            class,
            name: name.to_string(),
            args,
            env: Vec::new(),
            expect,
        })
    }
}

/// `fathom run` of 4 greedy tokens on one thread.
fn run(m: &str) -> Vec<String> {
    s(&["run", "-m", m, "-n", "4", "-t", "1", "--temp", "0"])
}

/// `fathom logits` of 4 tokens on one thread, `--out` to be appended.
fn logits(m: &str) -> Vec<String> {
    s(&[
        "logits",
        "-m",
        m,
        "--tokens",
        "1,5,9,300",
        "-t",
        "1",
        "--out",
    ])
}

/// `a` with `more` appended.
fn with(mut a: Vec<String>, more: &[&str]) -> Vec<String> {
    a.extend(more.iter().map(|x| x.to_string()));
    a
}

fn cases(dir: &Path) -> Vec<Case> {
    let text = dir.join("text.txt");
    std::fs::write(&text, "The quick brown fox jumps over the lazy dog.\n").unwrap();
    let mut c = Corpus {
        dir: dir.to_path_buf(),
        q2: fixture("dsv4-tiny-Q2_0.gguf").display().to_string(),
        f32m: fixture("dsv4-tiny/dsv4-tiny-F32.gguf")
            .display()
            .to_string(),
        text: text.display().to_string(),
        out: dir.join("out.st").display().to_string(),
        v: Vec::new(),
    };
    wrong_output::cases(&mut c);
    sizes::cases(&mut c);
    hangs_reads::cases(&mut c);
    messages::cases(&mut c);
    c.v
}

#[test]
fn the_hostile_corpus_ends_cleanly() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hostile_cli");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cases = cases(&dir);
    let mut failures = Vec::new();
    let mut table = String::from("| class | case | exit | s | result |\n|---|---|---:|---:|---|\n");
    for c in &cases {
        let (code, err, secs) = run_limited(&c.args, &c.env);
        let problem = if err.contains("panicked") {
            Some("panicked".to_string())
        } else {
            match (&c.expect, code) {
                (_, None) => Some("killed by a signal or the timeout".to_string()),
                (Expect::Error(says), Some(1)) => {
                    let last = err.lines().rev().find(|l| l.contains("error: "));
                    match last {
                        None => Some("exit 1 without 'error:'".into()),
                        Some(l) => says
                            .iter()
                            .find(|w| !l.contains(*w))
                            .map(|w| format!("message lacks '{w}'")),
                    }
                }
                (Expect::Ok(says), Some(0)) => says
                    .iter()
                    .find(|w| !err.contains(*w))
                    .map(|w| format!("stderr lacks '{w}'")),
                (Expect::Error(_), Some(c)) => Some(format!("exit {c}, expected an error")),
                (Expect::Ok(_), Some(c)) => Some(format!("exit {c}, expected a run")),
            }
        };
        table.push_str(&format!(
            "| {} | {} | {} | {secs:.2} | {} |\n",
            c.class,
            c.name,
            code.map_or("signal".into(), |c| c.to_string()),
            problem.as_deref().unwrap_or("ok")
        ));
        if let Some(p) = problem {
            let tail: String = err
                .chars()
                .rev()
                .take(400)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            failures.push(format!("{} / {}: {p}\n  {tail}", c.class, c.name));
        }
    }
    eprintln!("{table}");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(cases.len() >= 60, "{} cases", cases.len());
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// A model file truncated while a run has it mapped: an error naming the file (the SIGBUS
/// handler), exit 1, never a bare signal; an output being written is not left behind.
#[test]
fn changed_while_mapped() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hostile_cli_sigbus");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let m = dir.join("m.gguf");
    std::fs::copy(fixture("dsv4-tiny-Q2_0.gguf"), &m).unwrap();
    let mut child = common::fathom()
        .args([
            "bench",
            "-m",
            m.to_str().unwrap(),
            "-p",
            "0",
            "-n",
            "64",
            "-r",
            "100000",
            "-t",
            "1",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let f = std::fs::OpenOptions::new().write(true).open(&m).unwrap();
    f.set_len(100_000).unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "still running after the truncation"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains("m.gguf") && err.contains("changed on disk"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
