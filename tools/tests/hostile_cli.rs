//! The hostile-input corpus: malformed files and values of every class of
//! `shared/spec/hostile-inputs.md` and issue 32 (silent wrong output, unbounded sizes, hangs,
//! unbounded reads, files changed while mapped, unclear messages), each given to the `fathom`
//! binary under `ulimit -v` and `timeout`. Every case must end as it should: an error naming
//! what is wrong (exit 1), or a correct run (exit 0) where the right answer is to run; never
//! a panic, an abort, a signal, a hang, or exit 0 with wrong output. The table of outcomes
//! is printed (`cargo test --test hostile_cli -- --nocapture`).

mod common;

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

fn cases(dir: &Path) -> Vec<Case> {
    let q2 = fixture("dsv4-tiny-Q2_0.gguf").display().to_string();
    let f32m = fixture("dsv4-tiny/dsv4-tiny-F32.gguf")
        .display()
        .to_string();
    let text = dir.join("text.txt");
    std::fs::write(&text, "The quick brown fox jumps over the lazy dog.\n").unwrap();
    let text = text.display().to_string();
    let nan16 = 0x7E00u16.to_le_bytes();
    let mut v = Vec::new();
    let mut add = |class, name: &str, args: Vec<String>, expect| {
        v.push(Case {
            class,
            name: name.to_string(),
            args,
            env: Vec::new(),
            expect,
        })
    };
    let run = |m: &str| s(&["run", "-m", m, "-n", "4", "-t", "1", "--temp", "0"]);
    let logits = |m: &str| {
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
    };
    let out = dir.join("out.st").display().to_string();
    let with = |mut a: Vec<String>, more: &[&str]| {
        a.extend(more.iter().map(|x| x.to_string()));
        a
    };

    // ---- 1. silent wrong output: NaN anywhere is an error naming the position
    let nan_norm = gguf_bytes_variant(dir, "nan-norm.gguf", "output_norm.weight", |b| {
        b[8..12].copy_from_slice(&f32::NAN.to_le_bytes())
    });
    add(
        "1 NaN",
        "NaN output norm: run",
        run(&nan_norm),
        err(&["output_norm.weight", "not a finite number"]),
    );
    add(
        "1 NaN",
        "NaN output norm: logits",
        with(logits(&nan_norm), &[&out]),
        err(&["output_norm.weight", "not a finite number"]),
    );
    add(
        "1 NaN",
        "NaN output norm: kl",
        s(&[
            "kl",
            "-m",
            &nan_norm,
            "-f",
            &text,
            "--base-config",
            "none",
            "--test-config",
            "none",
            "-t",
            "1",
            "--decode-tokens",
            "0",
        ]),
        err(&["output_norm.weight", "not a finite number"]),
    );
    let nan_attn = gguf_bytes_variant(dir, "nan-attn-q.gguf", "blk.3.attn_q_a.weight", |b| {
        for blk in b.chunks_exact_mut(18) {
            blk[..2].copy_from_slice(&nan16);
        }
    });
    add(
        "1 NaN",
        "NaN q-projection scales (all-NaN attention rows)",
        run(&nan_attn),
        err(&["non-finite", "position"]),
    );
    let inf_sink = gguf_bytes_variant(dir, "inf-sink.gguf", "blk.2.attn_sinks.weight", |b| {
        b[..4].copy_from_slice(&f32::INFINITY.to_le_bytes())
    });
    add(
        "1 NaN",
        "infinite attention sink",
        run(&inf_sink),
        err(&["attn_sinks", "not a finite number"]),
    );
    let nan_emb = gguf_bytes_variant(dir, "nan-embd.gguf", "token_embd.weight", |b| {
        for blk in b.chunks_exact_mut(144) {
            blk[..2].copy_from_slice(&nan16);
        }
    });
    add(
        "1 NaN",
        "NaN embedding scales",
        with(logits(&nan_emb), &[&out]),
        err(&["non-finite", "position 0"]),
    );
    let nan_exp = gguf_bytes_variant(dir, "nan-expert.gguf", "blk.4.ffn_down_exps.weight", |b| {
        for blk in b.chunks_exact_mut(18) {
            blk[..2].copy_from_slice(&nan16);
        }
    });
    add(
        "1 NaN",
        "NaN routed-expert scales (Q4_0)",
        with(logits(&nan_exp), &[&out]),
        err(&["non-finite"]),
    );
    let f32_nan = {
        let src = GgufFile::open(&f32m).unwrap();
        let mut w = GgufWriter::new();
        for (k, val) in src.metadata() {
            w.add_kv(k.clone(), val.clone()).unwrap();
        }
        for t in src.tensors() {
            let mut data = src.tensor_bytes(t).unwrap().to_vec();
            if t.name == "output.weight" {
                data[400..404].copy_from_slice(&f32::NAN.to_le_bytes());
            }
            if t.name == "output_norm.weight" {
                // finite, but logits overflow to infinity
                for c in data.chunks_exact_mut(4) {
                    c.copy_from_slice(&3e38f32.to_le_bytes());
                }
            }
            w.add_tensor(t.name.clone(), t.dtype, &t.ne, data).unwrap();
        }
        let p = dir.join("f32-nan.gguf");
        std::fs::write(&p, w.to_bytes().unwrap()).unwrap();
        p.display().to_string()
    };
    add(
        "1 NaN",
        "NaN head weight of an F32 model (and norm 3e38): kl",
        s(&[
            "kl",
            "-m",
            &f32_nan,
            "-f",
            &text,
            "--base-config",
            "none",
            "--test-config",
            "none",
            "-t",
            "1",
            "--decode-tokens",
            "0",
        ]),
        err(&["output.weight", "not a finite number"]),
    );
    let f32_big = {
        let src = GgufFile::open(&f32m).unwrap();
        let mut w = GgufWriter::new();
        for (k, val) in src.metadata() {
            w.add_kv(k.clone(), val.clone()).unwrap();
        }
        for t in src.tensors() {
            let mut data = src.tensor_bytes(t).unwrap().to_vec();
            if t.name == "output_norm.weight" {
                for c in data.chunks_exact_mut(4) {
                    c.copy_from_slice(&3e38f32.to_le_bytes());
                }
            }
            w.add_tensor(t.name.clone(), t.dtype, &t.ne, data).unwrap();
        }
        let p = dir.join("f32-big.gguf");
        std::fs::write(&p, w.to_bytes().unwrap()).unwrap();
        p.display().to_string()
    };
    add(
        "1 NaN",
        "F32 model whose logits overflow to infinity: kl",
        s(&[
            "kl",
            "-m",
            &f32_big,
            "-f",
            &text,
            "--base-config",
            "none",
            "--test-config",
            "none",
            "-t",
            "1",
            "--decode-tokens",
            "0",
        ]),
        err(&["non-finite"]),
    );
    for (key, val, name) in [
        (
            "deepseek4.attention.layer_norm_rms_epsilon",
            Value::F32(f32::NAN),
            "NaN RMS epsilon",
        ),
        (
            "deepseek4.hyper_connection.epsilon",
            Value::F32(f32::INFINITY),
            "infinite HC epsilon",
        ),
        (
            "deepseek4.rope.freq_base",
            Value::F32(-1.0),
            "negative RoPE base",
        ),
        (
            "deepseek4.expert_weights_scale",
            Value::F32(f32::NAN),
            "NaN routed scale",
        ),
        (
            "deepseek4.swiglu_clamp_exp",
            Value::F32(f32::NEG_INFINITY),
            "-inf SwiGLU clamp",
        ),
    ] {
        let p = gguf_variant(dir, &format!("{}.gguf", name.replace(' ', "-")), |_, w| {
            w.set_kv(key, val).unwrap()
        });
        add("1 NaN", name, run(&p), err(&[key]));
    }
    let tid = gguf_bytes_variant(dir, "tid2eid.gguf", "blk.1.ffn_gate_tid2eid.weight", |b| {
        b[40..44].copy_from_slice(&99i32.to_le_bytes())
    });
    add(
        "1 NaN",
        "tid2eid entry 99 of 16 experts",
        run(&tid),
        err(&["tid2eid", "entry 10 is 99"]),
    );
    let nan_base = dir.join("nan-base.st");
    {
        // a --save-base file of the right shape whose logits hold a NaN
        let st = run_limited(
            &s(&[
                "kl",
                "-m",
                &q2,
                "-f",
                &text,
                "--base-config",
                "none",
                "--test-config",
                "none",
                "-t",
                "1",
                "--decode-tokens",
                "0",
                "--save-base",
                nan_base.to_str().unwrap(),
            ]),
            &[],
        );
        assert_eq!(st.0, Some(0), "{}", st.1);
        let bytes = std::fs::read(&nan_base).unwrap();
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
        let mut b = bytes.clone();
        let at = 8 + n + 4 * 700; // inside the data (logits come first)
        b[at..at + 4].copy_from_slice(&f32::NAN.to_le_bytes());
        std::fs::write(&nan_base, b).unwrap();
    }
    add(
        "1 NaN",
        "--base-logits holding a NaN",
        s(&[
            "kl",
            "-m",
            &q2,
            "-f",
            &text,
            "--base-logits",
            nan_base.to_str().unwrap(),
            "--test-config",
            "none",
            "-t",
            "1",
            "--decode-tokens",
            "0",
        ]),
        err(&["not finite"]),
    );

    // ---- 2. unbounded sizes: refused before anything is allocated
    for (key, val, name) in [
        (
            "deepseek4.block_count",
            Value::U64(u64::MAX),
            "2^64-1 layers",
        ),
        (
            "deepseek4.block_count",
            Value::U32(100_000),
            "100000 layers",
        ),
        (
            "deepseek4.attention.sliding_window",
            Value::U32(2_000_000),
            "window past the context",
        ),
        (
            "deepseek4.attention.indexer.top_k",
            Value::U32(u32::MAX),
            "indexer top-k 2^32-1",
        ),
        (
            "deepseek4.embedding_length",
            Value::U64(1 << 40),
            "hidden size 2^40",
        ),
        ("deepseek4.attention.head_count", Value::U32(0), "0 heads"),
        ("deepseek4.expert_count", Value::U32(0), "0 experts"),
        (
            "deepseek4.expert_used_count",
            Value::U32(17),
            "17 of 16 experts used",
        ),
        (
            "deepseek4.context_length",
            Value::U64(u64::MAX),
            "context 2^64-1",
        ),
        (
            "deepseek4.hash_layer_count",
            Value::U32(9),
            "9 hash layers of 6",
        ),
    ] {
        let p = gguf_variant(
            dir,
            &format!("{}.gguf", name.replace([' ', '^'], "-")),
            |_, w| w.set_kv(key, val).unwrap(),
        );
        add("2 sizes", name, run(&p), err(&[key]));
    }
    let empty_vocab = gguf_variant(dir, "empty-vocab.gguf", |_, w| {
        w.set_kv(
            "tokenizer.ggml.tokens",
            Value::Array(Array::Str(Vec::new())),
        )
        .unwrap()
    });
    add(
        "2 sizes",
        "empty vocabulary",
        run(&empty_vocab),
        err(&["vocab"]),
    );
    add(
        "2 sizes",
        "--ctx 100000000",
        with(run(&q2), &["--ctx", "100000000"]),
        err(&["need", "GiB", "--ctx"]),
    );
    add(
        "2 sizes",
        "--ctx 2^63",
        with(run(&q2), &["--ctx", "9223372036854775808"]),
        err(&["context length"]),
    );
    add(
        "2 sizes",
        "bench -p 10^12",
        s(&[
            "bench",
            "-m",
            &q2,
            "-p",
            "1000000000000",
            "-n",
            "0",
            "-r",
            "1",
            "-t",
            "1",
        ]),
        err(&["context length"]),
    );
    add(
        "2 sizes",
        "bench -n 2^64-1",
        s(&[
            "bench",
            "-m",
            &q2,
            "-p",
            "0",
            "-n",
            "18446744073709551615",
            "-r",
            "1",
            "-t",
            "1",
        ]),
        err(&["context length"]),
    );
    add(
        "2 sizes",
        "kl --decode-tokens 2^62",
        s(&[
            "kl",
            "-m",
            &q2,
            "-f",
            &text,
            "--base-config",
            "none",
            "--test-config",
            "none",
            "-t",
            "1",
            "--decode-tokens",
            "4611686018427387904",
        ]),
        err(&["context length"]),
    );
    add(
        "2 sizes",
        "logits --ctx 3000000000",
        with(logits(&q2), &[&out, "--ctx", "3000000000"]),
        err(&["GiB"]),
    );

    // ---- 3. hangs: iteration counts, non-regular files, threads
    let sinkhorn = gguf_variant(dir, "sinkhorn.gguf", |_, w| {
        w.set_kv(
            "deepseek4.hyper_connection.sinkhorn_iterations",
            Value::U32(1 << 31),
        )
        .unwrap()
    });
    add(
        "3 hangs",
        "2^31 Sinkhorn iterations",
        run(&sinkhorn),
        err(&["sinkhorn_iterations"]),
    );
    let fifo = mkfifo(&dir.join("fifo"));
    add("3 hangs", "FIFO as the model", run(&fifo), err(&["FIFO"]));
    add(
        "3 hangs",
        "FIFO as the prompt file",
        s(&["run", "-n", "1", "-t", "1", "-f", &fifo]),
        err(&["FIFO"]),
    );
    add(
        "3 hangs",
        "FIFO as kl's text",
        s(&[
            "kl",
            "-m",
            &q2,
            "-f",
            &fifo,
            "--base-config",
            "none",
            "--test-config",
            "none",
        ]),
        err(&["FIFO"]),
    );
    add(
        "3 hangs",
        "FIFO as inspect's file",
        s(&["inspect", &fifo]),
        err(&["FIFO"]),
    );
    add(
        "3 hangs",
        "FIFO as --base-config",
        s(&[
            "kl",
            "-m",
            &q2,
            "-f",
            &text,
            "--base-config",
            &fifo,
            "--test-config",
            "none",
            "-t",
            "1",
        ]),
        err(&["FIFO"]),
    );
    add(
        "3 hangs",
        "FIFO as --moe-config (rejected, run goes on)",
        with(run(&q2), &["--moe-config", &fifo]),
        ran(&["rejected", "FIFO"]),
    );
    for victim in [
        "config.json",
        "model.safetensors.index.json",
        "model-00002-of-00002.safetensors",
    ] {
        let d = ckpt_variant(dir, &format!("ck-fifo-{victim}"), |d| {
            std::fs::remove_file(d.join(victim)).unwrap();
            mkfifo(&d.join(victim));
        });
        add(
            "3 hangs",
            &format!("FIFO as checkpoint {victim}"),
            with(logits(&d), &[&out]),
            err(&["FIFO", victim]),
        );
    }
    add(
        "3 hangs",
        "a directory as the prompt file",
        s(&["run", "-n", "1", "-t", "1", "-f", dir.to_str().unwrap()]),
        err(&["directory"]),
    );
    add(
        "3 hangs",
        "-t 100000",
        s(&["run", "-n", "2", "-t", "100000", "--temp", "0"]),
        ran(&["note: -t 100000"]),
    );

    // ---- 4. unbounded reads
    add(
        "4 reads",
        "-f /dev/zero",
        s(&["run", "-n", "1", "-t", "1", "-f", "/dev/zero"]),
        err(&["character device"]),
    );
    add(
        "4 reads",
        "-f /dev/urandom",
        s(&["run", "-n", "1", "-t", "1", "-f", "/dev/urandom"]),
        err(&["character device"]),
    );
    add(
        "4 reads",
        "/dev/zero as the model",
        run("/dev/zero"),
        err(&["character device"]),
    );
    let zlink = dir.join("moe-link.toml");
    std::os::unix::fs::symlink("/dev/zero", &zlink).unwrap();
    add(
        "4 reads",
        "MoE config linked to /dev/zero (rejected, run goes on)",
        with(run(&q2), &["--moe-config", zlink.to_str().unwrap()]),
        ran(&["rejected", "character device"]),
    );
    add(
        "4 reads",
        "--base-logits /dev/zero",
        s(&[
            "kl",
            "-m",
            &q2,
            "-f",
            &text,
            "--base-logits",
            "/dev/zero",
            "--test-config",
            "none",
            "-t",
            "1",
        ]),
        err(&["character device"]),
    );
    let big_prompt = dir.join("big.txt");
    std::fs::File::create(&big_prompt)
        .unwrap()
        .set_len(300 << 20)
        .unwrap();
    add(
        "4 reads",
        "a 300 MiB prompt file",
        s(&[
            "run",
            "-n",
            "1",
            "-t",
            "1",
            "-f",
            big_prompt.to_str().unwrap(),
        ]),
        err(&["MiB at most"]),
    );
    let big_cfg = ckpt_variant(dir, "ck-big-config", |d| {
        std::fs::File::create(d.join("config.json"))
            .unwrap()
            .set_len(64 << 20)
            .unwrap();
    });
    add(
        "4 reads",
        "a 64 MiB config.json",
        with(logits(&big_cfg), &[&out]),
        err(&["config.json", "MiB at most"]),
    );
    let big_base = dir.join("big-base.st");
    std::fs::File::create(&big_base)
        .unwrap()
        .set_len(2 << 30)
        .unwrap();
    add(
        "4 reads",
        "a 2 GiB --base-logits file",
        s(&[
            "kl",
            "-m",
            &q2,
            "-f",
            &text,
            "--base-logits",
            big_base.to_str().unwrap(),
            "--test-config",
            "none",
            "-t",
            "1",
        ]),
        err(&["MiB at most"]),
    );

    // ---- 5. files cut short (the while-mapped cases are `changed_while_mapped` below)
    let src = std::fs::read(fixture("dsv4-tiny-Q2_0.gguf")).unwrap();
    for (cut, name) in [
        (20usize, "GGUF cut in its header"),
        (5000, "GGUF cut in its metadata"),
        (src.len() - 1000, "GGUF cut in its data"),
    ] {
        let p = dir.join(format!("cut-{cut}.gguf"));
        std::fs::write(&p, &src[..cut]).unwrap();
        add(
            "5 truncated",
            name,
            run(p.to_str().unwrap()),
            err(&["cut-"]),
        );
    }
    let cut_shard = ckpt_variant(dir, "ck-cut", |d| {
        let p = d.join("model-00001-of-00002.safetensors");
        let b = std::fs::read(&p).unwrap();
        std::fs::write(&p, &b[..b.len() / 2]).unwrap();
    });
    add(
        "5 truncated",
        "checkpoint shard cut in half",
        with(logits(&cut_shard), &[&out]),
        err(&["model-00001-of-00002.safetensors"]),
    );

    // ---- 8. unclear messages: every value used or refused by name
    let shape = ckpt_variant(dir, "ck-shape", |d| {
        edit_json(&d.join("config.json"), |c| {
            c.insert("q_lora_rank".into(), serde_json::json!(96));
        })
    });
    add(
        "8 messages",
        "checkpoint shape off the config",
        with(logits(&shape), &[&out]),
        err(&["layers.0.attn.wq_a.weight", "model-0000", "expected"]),
    );
    let shared = ckpt_variant(dir, "ck-shared", |d| {
        edit_json(&d.join("config.json"), |c| {
            c.insert("n_shared_experts".into(), serde_json::json!(2));
        })
    });
    add(
        "8 messages",
        "n_shared_experts 2 (the tensors hold 1)",
        with(logits(&shared), &[&out]),
        err(&["shared_experts", "expected"]),
    );
    let extra_layer = ckpt_variant(dir, "ck-layers", |d| {
        edit_json(&d.join("config.json"), |c| {
            c.insert("num_hidden_layers".into(), serde_json::json!(4));
            c.insert("compress_ratios".into(), serde_json::json!([0, 4, 128, 4]));
        })
    });
    add(
        "8 messages",
        "checkpoint layers past the config",
        with(logits(&extra_layer), &[&out]),
        err(&["layers.4.", "4 layers"]),
    );
    let rope = ckpt_variant(dir, "ck-rope", |d| {
        edit_json(&d.join("config.json"), |c| {
            c.insert(
                "rope_scaling".into(),
                serde_json::json!({"type": "linear", "factor": 4.0}),
            );
        })
    });
    add(
        "8 messages",
        "rope_scaling type linear",
        with(logits(&rope), &[&out]),
        err(&["rope_scaling.type"]),
    );
    let topk = ckpt_variant(dir, "ck-norm", |d| {
        edit_json(&d.join("config.json"), |c| {
            c.insert("norm_topk_prob".into(), serde_json::json!("yes"));
        })
    });
    add(
        "8 messages",
        "norm_topk_prob \"yes\"",
        with(logits(&topk), &[&out]),
        err(&["norm_topk_prob"]),
    );
    let neg = ckpt_variant(dir, "ck-neg", |d| {
        edit_json(&d.join("config.json"), |c| {
            c.insert("hidden_size".into(), serde_json::json!(-256));
        })
    });
    add(
        "8 messages",
        "hidden_size -256",
        with(logits(&neg), &[&out]),
        err(&["hidden_size"]),
    );
    for (key, val, name, says) in [
        (
            "general.architecture",
            Value::Str("llama".into()),
            "architecture llama",
            "llama",
        ),
        (
            "deepseek4.nextn_predict_layers",
            Value::U32(1),
            "an MTP GGUF",
            "MTP",
        ),
        (
            "deepseek4.hyper_connection.count",
            Value::U32(3),
            "3 HC streams",
            "hyper_connection.count",
        ),
        (
            "deepseek4.rope.dimension_count",
            Value::U32(15),
            "15 rope dims",
            "rope.dimension_count",
        ),
        (
            "tokenizer.ggml.bos_token_id",
            Value::U32(512),
            "BOS 512 of 512 tokens",
            "bos_token_id",
        ),
        (
            "deepseek4.expert_weights_norm",
            Value::U32(1),
            "a number as a bool",
            "expert_weights_norm",
        ),
        (
            "deepseek4.attention.compress_ratios",
            Value::Array(Array::I32(vec![0, 4, 64, 4, 128, 0])),
            "compress ratio 64",
            "ratio 64",
        ),
    ] {
        let p = gguf_variant(
            dir,
            &format!("msg-{}.gguf", name.replace(' ', "-")),
            |_, w| w.set_kv(key, val).unwrap(),
        );
        add("8 messages", name, run(&p), err(&[says]));
    }
    let no_tokens = {
        let src = GgufFile::open(&q2).unwrap();
        let mut w = GgufWriter::new();
        for (k, val) in src.metadata() {
            if k != "tokenizer.ggml.tokens" && k != "deepseek4.vocab_size" {
                w.add_kv(k.clone(), val.clone()).unwrap();
            }
        }
        let p = dir.join("no-tokens.gguf");
        std::fs::write(&p, w.to_bytes().unwrap()).unwrap();
        p.display().to_string()
    };
    add(
        "8 messages",
        "no token list",
        run(&no_tokens),
        err(&["tokenizer.ggml.tokens"]),
    );
    let dup_vocab = gguf_variant(dir, "dup-vocab.gguf", |src, w| {
        let n = src
            .get("tokenizer.ggml.tokens")
            .and_then(|v| v.as_array())
            .unwrap()
            .len();
        w.set_kv(
            "tokenizer.ggml.tokens",
            Value::Array(Array::Str(vec!["a".into(); n])),
        )
        .unwrap()
    });
    add(
        "8 messages",
        "all-duplicate vocabulary",
        run(&dup_vocab),
        err(&["no token for byte"]),
    );
    let extra = gguf_variant(dir, "extra-tensor.gguf", |_, w| {
        w.add_tensor(
            "blk.6.attn_norm.weight",
            quant::DType::F32,
            &[256],
            vec![0u8; 1024],
        )
        .unwrap()
    });
    add(
        "8 messages",
        "a tensor of layer 6 of 6",
        run(&extra),
        err(&["blk.6.attn_norm.weight", "layer 6"]),
    );
    let mut env_cases = Vec::new();
    for (name, var, val, says) in [
        (
            "FATHOM_ST_WEIGHTS=bogus",
            "FATHOM_ST_WEIGHTS",
            "bogus",
            &["FATHOM_ST_WEIGHTS"][..],
        ),
        (
            "FATHOM_CPUS=999",
            "FATHOM_CPUS",
            "999",
            &["FATHOM_CPUS", "not available"],
        ),
        (
            "FATHOM_FORCE_SCALAR=yes",
            "FATHOM_FORCE_SCALAR",
            "yes",
            &["FATHOM_FORCE_SCALAR"],
        ),
    ] {
        env_cases.push(Case {
            class: "8 messages",
            name: name.into(),
            args: s(&["run", "-n", "1", "-t", "1"]),
            env: vec![(var, val.into())],
            expect: err(says),
        });
    }
    add(
        "8 messages",
        "token id past the vocabulary",
        s(&["logits", "-m", &q2, "--tokens", "1,512", "--out", &out]),
        err(&["512", "vocabulary"]),
    );
    add(
        "8 messages",
        "--ubatch 0",
        s(&[
            "kl",
            "-m",
            &q2,
            "-f",
            &text,
            "--base-config",
            "none",
            "--test-config",
            "none",
            "-u",
            "0",
        ]),
        err(&["--ubatch 0"]),
    );
    let index = ckpt_variant(dir, "ck-index", |d| {
        edit_json(&d.join("model.safetensors.index.json"), |c| {
            let wm = c.get_mut("weight_map").unwrap().as_object_mut().unwrap();
            wm.insert("embed.weight".into(), serde_json::json!("../../etc/passwd"));
        })
    });
    add(
        "8 messages",
        "index shard path outside the checkpoint",
        with(logits(&index), &[&out]),
        err(&["not a relative path inside"]),
    );
    let many = ckpt_variant(dir, "ck-many-shards", |d| {
        let wm: serde_json::Map<String, serde_json::Value> = (0..200_000)
            .map(|i| {
                (
                    format!("t{i}"),
                    serde_json::json!(format!("s{i}.safetensors")),
                )
            })
            .collect();
        std::fs::write(
            d.join("model.safetensors.index.json"),
            serde_json::json!({ "weight_map": wm }).to_string(),
        )
        .unwrap();
    });
    add(
        "8 messages",
        "index naming 200000 shards",
        with(logits(&many), &[&out]),
        err(&["does not exist"]),
    );
    v.extend(env_cases);
    v
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
