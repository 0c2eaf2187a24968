//! Tokenizer against the dsv4-tiny fixtures: the GGUF metadata path and the tokenizer.json
//! path must both reproduce the reference prompt ids, round-trip text, stream-decode exactly
//! like `decode`, and match special tokens written in the text.

use std::path::{Path, PathBuf};

use fathom_models::gguf::{Array, GgufFile, GgufWriter, Value};
use fathom_models::tokenizer::{Tokenizer, TokenizerError, DEEPSEEK_V3_SPLITS};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn tiny_gguf() -> GgufFile {
    GgufFile::open(fixtures().join("dsv4-tiny-Q2_0.gguf")).unwrap()
}

fn tiny_dir() -> PathBuf {
    fixtures().join("tokenizer/dsv4-tiny")
}

fn trained_dir() -> PathBuf {
    fixtures().join("tokenizer/dsv4-tiny-trained")
}

fn both_tiny() -> [(&'static str, Tokenizer); 2] {
    [
        ("gguf", Tokenizer::from_gguf(&tiny_gguf()).unwrap()),
        ("json", Tokenizer::from_dir(tiny_dir()).unwrap()),
    ]
}

struct Prompts {
    text: String,
    prompts: Vec<Vec<u32>>,
}

fn prompts() -> Prompts {
    let raw = std::fs::read(tiny_dir().join("prompts.json")).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&raw).unwrap();
    let text = v["text"].as_str().unwrap().to_owned();
    let prompts = v["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            p["tokens"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| u32::try_from(x.as_u64().unwrap()).unwrap())
                .collect()
        })
        .collect();
    Prompts { text, prompts }
}

/// Texts that exercise the split regexes, multi-byte UTF-8 and whitespace edge cases.
const SAMPLES: &[&str] = &[
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "  leading spaces and trailing   ",
    "tabs\tand\nnewlines\r\n\r\nand blank lines\n\n\n",
    "numbers 1234567 and 3.14159, 1e-9, 118 steps",
    "punctuation!!! ... ??? \"quoted\" 'single' (parens) [brackets] {braces}",
    "café naïve résumé — “curly quotes” … ñ",
    "中文字符和日本語のテキスト、カタカナ",
    "emoji 😀🎉👍🏽 mixed with text",
    "code: fn main() { println!(\"{}\", x.y_z); } // comment",
    "a",
    " ",
    "",
    "\u{0}\u{1}\u{7f} control bytes",
];

#[test]
fn splits_are_the_fixture_regexes_verbatim() {
    for dir in [tiny_dir(), trained_dir()] {
        let raw = std::fs::read(dir.join("tokenizer.json")).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&raw).unwrap();
        let pre = v["pre_tokenizer"]["pretokenizers"].as_array().unwrap();
        let regexes: Vec<&str> = pre
            .iter()
            .filter(|p| p["type"] == "Split")
            .map(|p| p["pattern"]["Regex"].as_str().unwrap())
            .collect();
        assert_eq!(regexes, DEEPSEEK_V3_SPLITS, "{}", dir.display());
        let bl = pre.last().unwrap();
        assert_eq!(bl["type"], "ByteLevel");
        assert_eq!(bl["add_prefix_space"], false);
        assert_eq!(bl["use_regex"], false);
    }
}

#[test]
fn gguf_metadata() {
    let t = Tokenizer::from_gguf(&tiny_gguf()).unwrap();
    assert_eq!(t.vocab_size(), 512);
    assert_eq!(t.bos(), Some(0));
    assert_eq!(t.eos(), Some(1));
    assert!(t.add_bos());
    assert!(t.is_special(0) && t.is_special(1));
    assert!((2..512).all(|i| !t.is_special(i)));
    assert!(!t.is_special(512) && !t.is_special(u32::MAX));
    assert_eq!(t.token_to_id("<｜begin▁of▁sentence｜>"), Some(0));
    assert_eq!(t.token_to_id("<｜end▁of▁sentence｜>"), Some(1));
    assert_eq!(t.token_to_id("<｜User｜>"), None);
}

#[test]
fn json_metadata() {
    let t = Tokenizer::from_dir(tiny_dir()).unwrap();
    assert_eq!(t.vocab_size(), 512);
    assert_eq!((t.bos(), t.eos(), t.add_bos()), (Some(0), Some(1), true));
    assert!(t.is_special(0) && t.is_special(1) && !t.is_special(2));
    // The file path works as well as the directory.
    let f = Tokenizer::from_dir(tiny_dir().join("tokenizer.json")).unwrap();
    assert_eq!(f.vocab_size(), 512);
}

#[test]
fn prompts_match_reference_ids() {
    let p = prompts();
    for (name, t) in both_tiny() {
        // As make_dsv4_tiny.py: full = encode(text) with BOS, prompt i of n tokens =
        // [BOS] + full[1 + off .. off + n], off = (i * 37) % max(1, len - n).
        let full = t.encode(&p.text, true).unwrap();
        assert_eq!(full[0], 0, "{name}: BOS first");
        assert_eq!(
            full.iter().filter(|&&x| x == 0).count(),
            1,
            "{name}: one BOS"
        );
        for (i, want) in p.prompts.iter().enumerate() {
            let n = want.len();
            let off = (i * 37) % (full.len() - n).max(1);
            let mut got = vec![0];
            got.extend_from_slice(&full[1 + off..off + n]);
            assert_eq!(&got, want, "{name}: prompt {i}");
        }
        // Without BOS: the same ids minus the BOS.
        assert_eq!(t.encode(&p.text, false).unwrap(), full[1..], "{name}");
        assert_eq!(t.decode(&full[1..]), p.text, "{name}");
        assert_eq!(
            t.decode(&full),
            format!("<｜begin▁of▁sentence｜>{}", p.text),
            "{name}"
        );
        assert_eq!(t.decode_with(&full, true), p.text, "{name}");
    }
}

#[test]
fn gguf_and_json_agree_and_round_trip() {
    let [(_, g), (_, j)] = both_tiny();
    for tok in [&g, &j] {
        assert_eq!(tok.vocab_size(), 512);
    }
    for s in SAMPLES {
        let a = g.encode(s, false).unwrap();
        let b = j.encode(s, false).unwrap();
        assert_eq!(a, b, "{s:?}");
        assert_eq!(g.decode(&a), *s, "{s:?}");
        assert_eq!(j.decode(&b), *s, "{s:?}");
        // Same as the tokenizers crate's own decoder.
        assert_eq!(j.inner().decode(&b, false).unwrap(), *s, "{s:?}");
        for id in 0..512 {
            assert_eq!(g.token_bytes(id), j.token_bytes(id), "id {id}");
        }
    }
}

#[test]
fn streaming_equals_decode() {
    let p = prompts();
    for (name, t) in both_tiny() {
        let mut texts: Vec<String> = SAMPLES.iter().map(|s| (*s).to_owned()).collect();
        texts.push(p.text.clone());
        let mut split_seen = false;
        for s in &texts {
            let ids = t.encode(s, true).unwrap();
            let mut st = t.streamer();
            let mut out = String::new();
            for &id in &ids {
                if let Some(piece) = st.push(id) {
                    out.push_str(&piece);
                }
                split_seen |= !st.pending().is_empty();
            }
            assert!(st.finish().is_none(), "{name}: {s:?} left bytes");
            assert_eq!(out, t.decode(&ids), "{name}: {s:?}");
        }
        // The tiny vocab splits multi-byte characters across tokens.
        assert!(split_seen, "{name}: no token ever split a character");
    }
}

#[test]
fn streaming_lossy_and_skip_special() {
    let [(_, t), _] = both_tiny();
    // "é" = C3 A9; the tiny vocab has every single byte as a token.
    let ids = t.encode("é", false).unwrap();
    let mut st = t.streamer();
    let mut pieces = Vec::new();
    for &id in &ids {
        pieces.push(st.push(id));
    }
    assert_eq!(pieces.concat_some(), "é");
    // A lone lead byte followed by ASCII: U+FFFD then the text, like from_utf8_lossy.
    let lead = byte_token(&t, 0xC3);
    let a = t.token_to_id("a").unwrap();
    let mut st = t.streamer();
    assert_eq!(st.push(lead), None);
    assert_eq!(st.pending(), &[0xC3]);
    assert_eq!(st.push(a).as_deref(), Some("\u{FFFD}a"));
    assert_eq!(t.decode(&[lead, a]), "\u{FFFD}a");
    // An incomplete character at the end is flushed by finish().
    let mut st = t.streamer();
    assert_eq!(st.push(lead), None);
    assert_eq!(st.finish().as_deref(), Some("\u{FFFD}"));
    assert_eq!(t.decode(&[lead]), "\u{FFFD}");
    // Special tokens can be skipped.
    let mut st = t.streamer().skip_special(true);
    assert_eq!(st.push(0), None);
    assert_eq!(st.push(a).as_deref(), Some("a"));
    assert_eq!(st.push(1), None);
    // Unknown ids decode to nothing.
    assert_eq!(t.decode(&[a, 9999, a]), "aa");
}

trait ConcatSome {
    fn concat_some(&self) -> String;
}

impl ConcatSome for Vec<Option<String>> {
    fn concat_some(&self) -> String {
        self.iter().flatten().map(String::as_str).collect()
    }
}

/// The id of the vocabulary token standing for the single byte `b`.
fn byte_token(t: &Tokenizer, b: u8) -> u32 {
    (0..t.vocab_size() as u32)
        .find(|&id| t.token_bytes(id) == [b] && !t.is_special(id))
        .unwrap()
}

#[test]
fn special_tokens_in_text() {
    for (name, t) in both_tiny() {
        let hello = t.encode("Hello", false).unwrap();
        let ids = t
            .encode("<｜begin▁of▁sentence｜>Hello<｜end▁of▁sentence｜>", false)
            .unwrap();
        let mut want = vec![0];
        want.extend(&hello);
        want.push(1);
        assert_eq!(ids, want, "{name}");
        // In the middle of text, next to spaces, twice in a row.
        let ids = t
            .encode("a <｜end▁of▁sentence｜><｜end▁of▁sentence｜> b", false)
            .unwrap();
        assert_eq!(ids.iter().filter(|&&x| x == 1).count(), 2, "{name}");
        assert_eq!(
            t.decode(&ids),
            "a <｜end▁of▁sentence｜><｜end▁of▁sentence｜> b",
            "{name}"
        );
        // A near-miss is plain text.
        let ids = t.encode("<｜end of sentence｜>", false).unwrap();
        assert!(!ids.contains(&1), "{name}");
    }
}

#[test]
fn trained_tokenizer_json() {
    let t = Tokenizer::from_dir(trained_dir()).unwrap();
    assert_eq!(t.vocab_size(), 4096);
    assert_eq!((t.bos(), t.eos(), t.add_bos()), (Some(0), Some(1), true));
    for s in SAMPLES {
        let ids = t.encode(s, true).unwrap();
        assert_eq!(ids.first(), Some(&0));
        assert_eq!(t.decode_with(&ids, true), *s);
        assert_eq!(t.inner().decode(&ids[1..], false).unwrap(), *s);
    }
    // A trained vocabulary has whole-word tokens.
    let ids = t.encode("This program is free software", false).unwrap();
    assert!(ids.len() <= 6, "{ids:?}");
}

/// Rewrite the tiny GGUF's metadata (`edit` gets the writer) and build a tokenizer from it.
fn from_edited(edit: impl FnOnce(&mut GgufWriter)) -> Result<Tokenizer, TokenizerError> {
    let f = tiny_gguf();
    let mut w = GgufWriter::from_file(&f).unwrap();
    edit(&mut w);
    let g = GgufFile::parse(w.to_bytes().unwrap()).unwrap();
    Tokenizer::from_gguf(&g)
}

#[test]
fn gguf_errors_name_key_and_value() {
    let e = from_edited(|w| {
        w.set_kv("tokenizer.ggml.pre", Value::Str("deepseek-llm".into()))
            .unwrap()
    })
    .unwrap_err();
    assert!(matches!(e, TokenizerError::UnsupportedPre { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("tokenizer.ggml.pre") && msg.contains("deepseek-llm"),
        "{msg}"
    );

    let e = from_edited(|w| {
        w.set_kv("tokenizer.ggml.model", Value::Str("llama".into()))
            .unwrap()
    })
    .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("tokenizer.ggml.model") && msg.contains("llama"),
        "{msg}"
    );

    let e = from_edited(|w| {
        w.set_kv(
            "tokenizer.ggml.merges",
            Value::Array(Array::Str(vec!["x".into()])),
        )
        .unwrap()
    })
    .unwrap_err();
    assert!(e.to_string().contains("tokenizer.ggml.merges"), "{e}");

    let e = from_edited(|w| {
        w.set_kv("tokenizer.ggml.bos_token_id", Value::U32(512))
            .unwrap()
    })
    .unwrap_err();
    assert!(e.to_string().contains("tokenizer.ggml.bos_token_id"), "{e}");

    let e = from_edited(|w| {
        w.set_kv(
            "tokenizer.ggml.token_type",
            Value::Array(Array::I32(vec![1; 3])),
        )
        .unwrap()
    })
    .unwrap_err();
    assert!(e.to_string().contains("tokenizer.ggml.token_type"), "{e}");

    // A merge whose parts are not in the vocabulary can never fire: like llama.cpp, it is
    // ignored (the synthetic real-dimension GGUF has one) rather than failing the file.
    let t = from_edited(|w| {
        w.set_kv(
            "tokenizer.ggml.merges",
            Value::Array(Array::Str(vec!["zz qq".into()])),
        )
        .unwrap()
    })
    .unwrap();
    assert!(!t.encode("the", false).unwrap().is_empty());
}

#[test]
fn gguf_accepts_joyai_and_add_bos_false() {
    let t = from_edited(|w| {
        w.set_kv("tokenizer.ggml.pre", Value::Str("joyai-llm".into()))
            .unwrap();
        w.set_kv("tokenizer.ggml.add_bos_token", Value::Bool(false))
            .unwrap();
    })
    .unwrap();
    assert!(!t.add_bos());
    let ids = t.encode("Hello", true).unwrap();
    assert_ne!(ids[0], 0);
}

#[test]
fn dir_errors_name_the_file() {
    let e = Tokenizer::from_dir(fixtures().join("no-such-dir")).unwrap_err();
    assert!(matches!(e, TokenizerError::Io { .. }), "{e}");
    assert!(e.to_string().contains("no-such-dir"), "{e}");
    // A directory whose tokenizer.json is not a tokenizer.
    let e = Tokenizer::from_dir(fixtures().join("dsv4-tiny-fp8/config.json")).unwrap_err();
    assert!(matches!(e, TokenizerError::BadFile { .. }), "{e}");
    assert!(e.to_string().contains("config.json"), "{e}");
}

/// The trained model's GGUF (the built-in model, `tools/assets/`) against its
/// tokenizer.json: the same vocabulary, specials, BOS/EOS and encodings.
#[test]
fn trained_gguf_matches_tokenizer_json() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/assets/dsv4-tiny-trained-Q8_0.gguf");
    let g = Tokenizer::from_gguf(&GgufFile::open(path).unwrap()).unwrap();
    let j = Tokenizer::from_dir(trained_dir()).unwrap();
    assert_eq!(g.vocab_size(), j.vocab_size());
    assert_eq!(
        (g.bos(), g.eos(), g.add_bos()),
        (j.bos(), j.eos(), j.add_bos())
    );
    for id in 0..u32::try_from(g.vocab_size()).unwrap() {
        assert_eq!(g.token_bytes(id), j.token_bytes(id), "id {id}");
        assert_eq!(g.is_special(id), j.is_special(id), "id {id}");
    }
    let p = prompts();
    let mut texts: Vec<&str> = SAMPLES.to_vec();
    texts.extend([
        p.text.as_str(),
        "The software is provided \"as is\" without express or implied warranty.",
        "This program is free software; you can redistribute it and/or modify it.",
        "In the beginning of the file, the file is a file-like object.",
    ]);
    let mut n = 0;
    for s in texts {
        let a = g.encode(s, true).unwrap();
        assert_eq!(a, j.encode(s, true).unwrap(), "{s:?}");
        assert_eq!(g.decode_with(&a, true), s);
        n += a.len();
    }
    eprintln!("trained GGUF == tokenizer.json on {n} tokens");
}
