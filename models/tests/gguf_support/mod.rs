//! Shared helpers for the GGUF tests: a raw byte builder for hand-made (often broken) files,
//! a valid sample file built with the writer, and error assertions.

#![allow(dead_code)]

use fathom_models::gguf::{Array, GgufError, GgufFile, GgufWriter, Value};
use quant::DType;

/// Value type ids.
pub const T_U8: u32 = 0;
pub const T_U32: u32 = 4;
pub const T_I32: u32 = 5;
pub const T_BOOL: u32 = 7;
pub const T_STR: u32 = 8;
pub const T_ARRAY: u32 = 9;

/// ggml type ids.
pub const G_F32: u32 = 0;
pub const G_Q4_0: u32 = 2;
pub const G_I8: u32 = 24;

/// Little-endian byte builder for hand-made GGUF files.
#[derive(Clone, Debug, Default)]
pub struct Raw(pub Vec<u8>);

impl Raw {
    /// "GGUF", version, tensor count, kv count.
    pub fn header(version: u32, n_tensors: u64, n_kv: u64) -> Raw {
        Raw::default()
            .bytes(b"GGUF")
            .u32(version)
            .u64(n_tensors)
            .u64(n_kv)
    }
    pub fn bytes(mut self, b: &[u8]) -> Raw {
        self.0.extend_from_slice(b);
        self
    }
    pub fn u8(self, v: u8) -> Raw {
        self.bytes(&[v])
    }
    pub fn u32(self, v: u32) -> Raw {
        self.bytes(&v.to_le_bytes())
    }
    pub fn i32(self, v: i32) -> Raw {
        self.bytes(&v.to_le_bytes())
    }
    pub fn u64(self, v: u64) -> Raw {
        self.bytes(&v.to_le_bytes())
    }
    /// GGUF string: u64 length + bytes.
    pub fn str(self, s: &[u8]) -> Raw {
        self.u64(s.len() as u64).bytes(s)
    }
    /// Key + value type id (value follows).
    pub fn key(self, key: &str, ty: u32) -> Raw {
        self.str(key.as_bytes()).u32(ty)
    }
    pub fn kv_u32(self, key: &str, v: u32) -> Raw {
        self.key(key, T_U32).u32(v)
    }
    pub fn kv_str(self, key: &str, v: &str) -> Raw {
        self.key(key, T_STR).str(v.as_bytes())
    }
    /// Tensor info: name, n_dims, ne, type, offset.
    pub fn tensor(self, name: &str, ne: &[u64], ty: u32, offset: u64) -> Raw {
        let mut r = self.str(name.as_bytes()).u32(ne.len() as u32);
        for &d in ne {
            r = r.u64(d);
        }
        r.u32(ty).u64(offset)
    }
    /// Zero padding up to a multiple of `align`.
    pub fn pad(mut self, align: usize) -> Raw {
        while !self.0.len().is_multiple_of(align) {
            self.0.push(0);
        }
        self
    }
    /// `n` bytes of value `v`.
    pub fn fill(mut self, n: usize, v: u8) -> Raw {
        self.0.resize(self.0.len() + n, v);
        self
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

/// Parse bytes that must be rejected.
pub fn parse_err(bytes: &[u8]) -> GgufError {
    match GgufFile::parse(bytes) {
        Ok(_) => panic!("malformed file was accepted"),
        Err(e) => e,
    }
}

/// Assert the message contains every needle.
pub fn assert_msg(e: &GgufError, needles: &[&str]) {
    let msg = e.to_string();
    for n in needles {
        assert!(msg.contains(n), "message {msg:?} does not contain {n:?}");
    }
}

/// Deterministic pseudo-random bytes (xorshift64).
pub fn xorshift(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    x
}

/// A writer holding one value of every metadata type (nested arrays included) and tensors of
/// several types and ranks. With `aligned_end`, the last tensor's size is a multiple of the
/// alignment, so the file ends exactly at the end of its data (no trailing padding): cutting
/// even one byte then makes the file invalid.
pub fn sample_writer(aligned_end: bool) -> GgufWriter<'static> {
    let mut w = GgufWriter::new();
    let kvs = vec![
        ("general.architecture", Value::Str("deepseek4".into())),
        ("general.name", Value::Str("tiny ✓".into())),
        ("t.u8", Value::U8(200)),
        ("t.i8", Value::I8(-5)),
        ("t.u16", Value::U16(65000)),
        ("t.i16", Value::I16(-30000)),
        ("t.u32", Value::U32(4_000_000_000)),
        ("t.i32", Value::I32(-2_000_000_000)),
        ("t.f32", Value::F32(1.5)),
        ("t.bool", Value::Bool(true)),
        ("t.u64", Value::U64(u64::MAX - 1)),
        ("t.i64", Value::I64(i64::MIN + 1)),
        ("t.f64", Value::F64(-2.25)),
        (
            "t.arr.str",
            Value::Array(Array::Str(vec!["a".into(), "".into(), "ünï".into()])),
        ),
        ("t.arr.f32", Value::Array(Array::F32(vec![0.5, -1.0, 3.25]))),
        ("t.arr.i32", Value::Array(Array::I32(vec![1, -2, 3]))),
        ("t.arr.bool", Value::Array(Array::Bool(vec![true, false]))),
        ("t.arr.u8", Value::Array(Array::U8(vec![1, 2, 3, 4]))),
        ("t.arr.empty", Value::Array(Array::U64(vec![]))),
        (
            "t.arr.nested",
            Value::Array(Array::Nested(vec![
                Array::I16(vec![1, 2]),
                Array::Str(vec!["x".into()]),
                Array::Nested(vec![Array::F64(vec![1.0]), Array::Bool(vec![])]),
            ])),
        ),
    ];
    for (k, v) in kvs {
        w.add_kv(k, v).unwrap();
    }
    let f32s: Vec<u8> = (0..24u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
    w.add_tensor("blk.0.a.weight", DType::F32, &[4, 3, 2], f32s)
        .unwrap();
    let q: Vec<u8> = (0..2 * 18).map(|i| i as u8).collect();
    w.add_tensor("blk.0.q.weight", DType::Q4_0, &[32, 2], q)
        .unwrap();
    w.add_tensor("empty", DType::F16, &[0, 3], Vec::new())
        .unwrap();
    let last = if aligned_end { 64 } else { 10 };
    let bytes: Vec<u8> = (0..last).map(|i| (i * 7) as u8).collect();
    w.add_tensor("out.weight", DType::I8, &[last as u64], bytes)
        .unwrap();
    w
}

/// Bytes of [`sample_writer`]`(true)`.
pub fn sample_bytes() -> Vec<u8> {
    sample_writer(true).to_bytes().unwrap()
}

/// A directory under the cargo target dir for one test.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
