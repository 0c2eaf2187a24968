//! Hostile-input cases of class 2. unbounded sizes: refused before anything is allocated (see `../hostile_cli.rs`).

use super::*;

/// Adds this class's cases to `c`.
pub fn cases(c: &mut Corpus) {
    let dir = c.dir.clone();
    let dir = dir.as_path();
    let q2 = c.q2.clone();
    let text = c.text.clone();
    let out = c.out.clone();
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
        c.add("2 sizes", name, run(&p), err(&[key]));
    }
    let empty_vocab = gguf_variant(dir, "empty-vocab.gguf", |_, w| {
        w.set_kv(
            "tokenizer.ggml.tokens",
            Value::Array(Array::Str(Vec::new())),
        )
        .unwrap()
    });
    c.add(
        "2 sizes",
        "empty vocabulary",
        run(&empty_vocab),
        err(&["vocab"]),
    );
    c.add(
        "2 sizes",
        "--ctx 100000000",
        with(run(&q2), &["--ctx", "100000000"]),
        err(&["need", "GiB", "--ctx"]),
    );
    c.add(
        "2 sizes",
        "--ctx 2^63",
        with(run(&q2), &["--ctx", "9223372036854775808"]),
        err(&["context length"]),
    );
    c.add(
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
    c.add(
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
    c.add(
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
    c.add(
        "2 sizes",
        "logits --ctx 3000000000",
        with(logits(&q2), &[&out, "--ctx", "3000000000"]),
        err(&["GiB"]),
    );
}
