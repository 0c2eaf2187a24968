//! Hostile-input cases of class 1. silent wrong output: NaN and out-of-range values anywhere are errors naming them (see `../hostile_cli.rs`).

use super::*;

/// Adds this class's cases to `c`.
pub fn cases(c: &mut Corpus) {
    let dir = c.dir.clone();
    let dir = dir.as_path();
    let q2 = c.q2.clone();
    let f32m = c.f32m.clone();
    let text = c.text.clone();
    let out = c.out.clone();
    let nan16 = 0x7E00u16.to_le_bytes();
    // ---- 1. silent wrong output: NaN anywhere is an error naming the position
    let nan_norm = gguf_bytes_variant(dir, "nan-norm.gguf", "output_norm.weight", |b| {
        b[8..12].copy_from_slice(&f32::NAN.to_le_bytes())
    });
    c.add(
        "1 NaN",
        "NaN output norm: run",
        run(&nan_norm),
        err(&["output_norm.weight", "not a finite number"]),
    );
    c.add(
        "1 NaN",
        "NaN output norm: logits",
        with(logits(&nan_norm), &[&out]),
        err(&["output_norm.weight", "not a finite number"]),
    );
    c.add(
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
    c.add(
        "1 NaN",
        "NaN q-projection scales (all-NaN attention rows)",
        run(&nan_attn),
        err(&["non-finite", "position"]),
    );
    let inf_sink = gguf_bytes_variant(dir, "inf-sink.gguf", "blk.2.attn_sinks.weight", |b| {
        b[..4].copy_from_slice(&f32::INFINITY.to_le_bytes())
    });
    c.add(
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
    c.add(
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
    c.add(
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
    c.add(
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
    c.add(
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
        c.add("1 NaN", name, run(&p), err(&[key]));
    }
    let tid = gguf_bytes_variant(dir, "tid2eid.gguf", "blk.1.ffn_gate_tid2eid.weight", |b| {
        b[40..44].copy_from_slice(&99i32.to_le_bytes())
    });
    c.add(
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
    c.add(
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
}
