//! The bodies of the fuzz targets (`fuzz/`, run with `cargo fuzz`), one per format fathom
//! reads from a user: GGUF files, safetensors headers and indexes, `config.json`,
//! `tokenizer.json`, MoE configs (TOML and binary), and the model's replies (the DSML
//! tool-call parser; the chat request bodies are `fathom_server::fuzz`). Each takes arbitrary bytes and must
//! return (any error is fine) without a panic, an abort, a hang or an unbounded allocation.
//! `models/tests/fuzz_corpus.rs` replays every committed corpus entry through them in
//! `cargo test`, so CI re-checks the corpora on stable without fuzzing.

use crate::gguf::GgufFile;
use crate::model::{open_gguf, LoadOptions, MoeShape};
use crate::moe_config::MoeConfig;
use crate::safetensors::{SafetensorsFile, SafetensorsModel};
use crate::tokenizer::Tokenizer;
use std::path::Path;
use std::sync::Arc;

/// A fuzz target's body.
pub type Body = fn(&[u8]);

/// The fuzz targets by name (the names of `fuzz/fuzz_targets/*.rs` and of the corpus
/// folders).
pub const TARGETS: &[(&str, Body)] = &[
    ("gguf", gguf),
    ("safetensors", safetensors),
    ("safetensors_index", safetensors_index),
    ("config_json", config_json),
    ("tokenizer", tokenizer),
    ("moe_config", moe_config),
    ("dsml", dsml),
];

/// A GGUF file: parsed and validated, then its hyperparameters, tokenizer and model.
pub fn gguf(data: &[u8]) {
    let Ok(f) = GgufFile::parse(data.to_vec()) else {
        return;
    };
    for t in f.tensors() {
        let _ = f.tensor_bytes(t);
    }
    let _ = crate::deepseek4::Hparams::from_gguf(&f);
    if let Ok(t) = Tokenizer::from_gguf(&f) {
        if let Ok(ids) = t.encode("Hello, world! 你好 \u{1F600}", true) {
            let _ = t.decode(&ids);
        }
    }
    let opts = LoadOptions {
        exec: backends::ExecConfig {
            threads: 1,
            pin: false,
            ..Default::default()
        },
        ..Default::default()
    };
    if let Ok(m) = open_gguf(Arc::new(f), &opts) {
        let _ = m.state_tensors(16);
    }
}

/// One safetensors file held in memory: header parsed and validated, every tensor read.
pub fn safetensors(data: &[u8]) {
    let Ok(f) = SafetensorsFile::from_bytes("fuzz.safetensors", data.to_vec()) else {
        return;
    };
    for t in f.tensors() {
        let _ = f.tensor_data(&t.name);
    }
}

/// A `model.safetensors.index.json` (its shards do not exist: the structure is checked up to
/// the point of opening them).
pub fn safetensors_index(data: &[u8]) {
    let _ = SafetensorsModel::from_index_bytes(
        Path::new("/nonexistent/fathom-fuzz/model.safetensors.index.json"),
        data,
    );
}

/// A checkpoint's `config.json`.
pub fn config_json(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = crate::deepseek4::Hparams::from_config_json(text, "config.json");
    }
}

/// A `tokenizer.json` (written to a per-process temporary folder, removed afterwards, and
/// loaded as a checkpoint tokenizer), then used.
pub fn tokenizer(data: &[u8]) {
    let dir = std::env::temp_dir().join(format!("fathom-fuzz-tok-{}", std::process::id()));
    if std::fs::create_dir_all(&dir).is_ok()
        && std::fs::write(dir.join("tokenizer.json"), data).is_ok()
    {
        if let Ok(t) = Tokenizer::from_dir(&dir) {
            if let Ok(ids) = t.encode("Hello, world! 你好", true) {
                let _ = t.decode(&ids);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A MoE config: the first byte chooses the binary form (odd) or TOML (even); resolved
/// against a 43-layer, top-6 model with 3 hash layers.
pub fn moe_config(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let shape = MoeShape {
        n_layer: 43,
        n_expert_used: 6,
        n_hash_layers: 3,
    };
    let c = if sel % 2 == 1 {
        MoeConfig::from_bin(rest, "fuzz.bin")
    } else {
        match std::str::from_utf8(rest) {
            Ok(t) => MoeConfig::from_toml(t, "fuzz.toml"),
            Err(_) => return,
        }
    };
    if let Ok(c) = c {
        let _ = c.resolve(&shape, "fuzz");
        let _ = c.to_string();
    }
}

/// A model reply: the first byte chooses thinking mode and a split point; the rest is the
/// text. Parsed whole and in two pushes split there, which must give the same reply, with
/// every tool call rendering back to a block that parses to itself.
pub fn dsml(data: &[u8]) {
    use crate::chat::dsml::{parse_reply, Reply, ReplyParser};
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let thinking = sel & 1 == 1;
    let whole = parse_reply(&text, thinking);
    let mut at = (usize::from(sel >> 1) * text.len() / 127).min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let mut p = ReplyParser::new(thinking);
    let mut split = Reply::default();
    for e in p.push(&text[..at]).into_iter().chain(p.push(&text[at..])) {
        split.push(e);
    }
    for e in p.finish() {
        split.push(e);
    }
    assert_eq!(whole, split, "split at {at} differs from the whole text");
    if !whole.tool_calls.is_empty() {
        let again = parse_reply(&crate::chat::render_tool_calls(&whole.tool_calls), false);
        assert_eq!(
            again.tool_calls, whole.tool_calls,
            "a parsed call does not round-trip"
        );
    }
}
