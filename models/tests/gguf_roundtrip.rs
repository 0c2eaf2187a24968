//! Writer tests: every value type (nested arrays included) and several tensor types survive
//! write → read → write unchanged, alignment is honoured, getters are typed, and the writer
//! refuses what the reader would refuse.

mod gguf_support;

use fathom_models::gguf::{Array, GgufError, GgufFile, GgufWriter, Value, ValueType};
use gguf_support::*;
use quant::DType;

/// Compare two files' metadata, tensor infos and tensor bytes.
fn assert_same(a: &GgufFile, b: &GgufFile) {
    assert_eq!(a.version(), b.version());
    assert_eq!(a.alignment(), b.alignment());
    assert_eq!(a.metadata(), b.metadata());
    assert_eq!(a.tensors().len(), b.tensors().len());
    for (x, y) in a.tensors().iter().zip(b.tensors()) {
        assert_eq!(
            (&x.name, x.dtype, &x.ne, x.offset, x.n_bytes),
            (&y.name, y.dtype, &y.ne, y.offset, y.n_bytes)
        );
        assert_eq!(a.tensor_bytes(x).unwrap(), b.tensor_bytes(y).unwrap());
    }
}

#[test]
fn all_types_round_trip() {
    let w = sample_writer(false);
    let bytes = w.to_bytes().unwrap();
    let f = GgufFile::parse(&bytes[..]).unwrap();
    assert_eq!(f.metadata(), w.metadata());
    let types: Vec<ValueType> = f.metadata().iter().map(|(_, v)| v.value_type()).collect();
    for t in ValueType::ALL {
        assert!(types.contains(&t), "sample lacks {t}");
    }
    // Typed getters.
    assert_eq!(f.get_str("general.architecture").unwrap(), "deepseek4");
    assert_eq!(f.get_u8("t.u8").unwrap(), 200);
    assert_eq!(f.get_i8("t.i8").unwrap(), -5);
    assert_eq!(f.get_u16("t.u16").unwrap(), 65000);
    assert_eq!(f.get_i16("t.i16").unwrap(), -30000);
    assert_eq!(f.get_u32("t.u32").unwrap(), 4_000_000_000);
    assert_eq!(f.get_i32("t.i32").unwrap(), -2_000_000_000);
    assert_eq!(f.get_f32("t.f32").unwrap(), 1.5);
    assert!(f.get_bool("t.bool").unwrap());
    assert_eq!(f.get_u64("t.u64").unwrap(), u64::MAX - 1);
    assert_eq!(f.get_i64("t.i64").unwrap(), i64::MIN + 1);
    assert_eq!(f.get_f64("t.f64").unwrap(), -2.25);
    assert_eq!(f.get_str_array("t.arr.str").unwrap(), ["a", "", "ünï"]);
    assert_eq!(f.get_f32_array("t.arr.f32").unwrap(), [0.5, -1.0, 3.25]);
    assert_eq!(f.get_i32_array("t.arr.i32").unwrap(), [1, -2, 3]);
    assert_eq!(f.get_bool_array("t.arr.bool").unwrap(), [true, false]);
    assert_eq!(f.get_u8_array("t.arr.u8").unwrap(), [1, 2, 3, 4]);
    assert_eq!(f.get_u64_array("t.arr.empty").unwrap(), &[] as &[u64]);
    let nested = f.get_nested_array("t.arr.nested").unwrap();
    assert_eq!(nested.len(), 3);
    assert_eq!(nested[2].as_nested().unwrap()[1], Array::Bool(vec![]));
    assert_eq!(f.get_array("t.arr.nested").unwrap().depth(), 3);
    // Wrong type and missing key are errors naming the key.
    let e = f.get_f32_array("t.arr.i32").unwrap_err();
    assert!(matches!(e, GgufError::WrongType { .. }));
    assert!(e
        .to_string()
        .contains("'t.arr.i32' is array<i32>, expected array<f32>"));
    let e = f.get_u32("t.i32").unwrap_err();
    assert!(
        e.to_string().contains("'t.i32' is i32, expected u32"),
        "{e}"
    );
    let e = f.get_str("nope").unwrap_err();
    assert!(matches!(e, GgufError::KeyNotFound { .. }));
    assert!(e.to_string().contains("'nope'"));
    assert_eq!(f.get("t.u16").and_then(Value::as_u64), Some(65000));
    // Tensors.
    let t = f.tensor("blk.0.a.weight").unwrap();
    assert_eq!(
        (t.dtype, t.ne.as_slice(), t.n_bytes, t.offset),
        (DType::F32, &[4u64, 3, 2][..], 96, 0)
    );
    assert_eq!(t.n_elements(), 24);
    let data = f.tensor_data("blk.0.a.weight").unwrap();
    assert_eq!(&data[4..8], &1.0f32.to_le_bytes());
    assert_eq!(f.tensor("blk.0.q.weight").unwrap().offset, 96);
    assert_eq!(f.tensor("empty").unwrap().n_bytes, 0);
    assert_eq!(f.tensor("out.weight").unwrap().offset, 160);
    let e = f.tensor_data("missing").unwrap_err();
    assert!(matches!(e, GgufError::TensorNotFound { .. }) && e.to_string().contains("'missing'"));
    // Write again: byte-identical.
    let again = GgufWriter::from_file(&f).unwrap().to_bytes().unwrap();
    assert_eq!(again, bytes);
    assert_same(&f, &GgufFile::parse(again).unwrap());
    // The data section and the file end are aligned (last tensor padded too).
    assert_eq!(f.data_offset() % 32, 0);
    assert_eq!(bytes.len() % 32, 0);
}

#[test]
fn custom_alignment_and_version_2() {
    for align in [1u32, 8, 64, 4096] {
        let mut w = sample_writer(false);
        w.set_version(2).unwrap();
        w.add_kv("general.alignment", Value::U32(align)).unwrap();
        assert_eq!(w.alignment(), u64::from(align));
        let bytes = w.to_bytes().unwrap();
        let f = GgufFile::parse(&bytes[..]).unwrap();
        assert_eq!((f.version(), f.alignment()), (2, u64::from(align)));
        assert_eq!(f.data_offset() % u64::from(align), 0);
        for t in f.tensors() {
            assert_eq!(t.offset % u64::from(align), 0, "{}", t.name);
        }
        let again = GgufWriter::from_file(&f).unwrap().to_bytes().unwrap();
        assert_eq!(again, bytes);
    }
}

#[test]
fn write_to_path_and_open() {
    let dir = temp_dir("gguf_roundtrip_path");
    let path = dir.join("sample.gguf");
    let w = sample_writer(true);
    let n = w.write_to_path(&path).unwrap();
    assert_eq!(n, std::fs::metadata(&path).unwrap().len());
    let f = GgufFile::open(&path).unwrap();
    assert_eq!(f.path(), path);
    assert_eq!(f.shards().len(), 1);
    assert_same(&f, &GgufFile::parse(w.to_bytes().unwrap()).unwrap());
    // Errors from a path name the path.
    let bad = dir.join("bad.gguf");
    std::fs::write(&bad, b"GGUF\x01\0\0\0").unwrap();
    let e = GgufFile::open(&bad).unwrap_err();
    assert!(
        e.to_string().starts_with(&format!("{}: ", bad.display())),
        "{e}"
    );
    let e = GgufFile::open(dir.join("none.gguf")).unwrap_err();
    assert!(matches!(e, GgufError::Io { .. }) && e.to_string().contains("none.gguf"));
    // An empty file on disk.
    let empty = dir.join("empty.gguf");
    std::fs::write(&empty, b"").unwrap();
    assert!(matches!(
        GgufFile::open(&empty),
        Err(GgufError::Truncated { .. })
    ));
}

#[test]
fn writer_refuses_invalid_input() {
    let mut w = GgufWriter::new();
    w.add_kv("a", Value::U8(1)).unwrap();
    let bad = |e: GgufError, needle: &str| {
        assert!(matches!(e, GgufError::InvalidInput { .. }), "{e}");
        assert!(e.to_string().contains(needle), "{e} lacks {needle}");
    };
    bad(w.add_kv("a", Value::U8(2)).unwrap_err(), "duplicate key");
    bad(w.add_kv("", Value::U8(2)).unwrap_err(), "ASCII");
    bad(w.add_kv("ключ", Value::U8(2)).unwrap_err(), "ASCII");
    for v in [
        Value::U32(0),
        Value::U32(3),
        Value::I32(32),
        Value::U32(1 << 20),
    ] {
        bad(
            w.add_kv("general.alignment", v).unwrap_err(),
            "general.alignment",
        );
    }
    let mut deep = Array::U8(vec![]);
    for _ in 0..20 {
        deep = Array::Nested(vec![deep]);
    }
    bad(
        w.add_kv("deep", Value::Array(deep)).unwrap_err(),
        "nested deeper",
    );
    bad(w.set_version(1).unwrap_err(), "version");
    bad(
        w.add_tensor("t", DType::F32, &[4], vec![0; 15])
            .unwrap_err(),
        "15 data bytes",
    );
    bad(
        w.add_tensor("t", DType::Q4_0, &[33], vec![0; 18])
            .unwrap_err(),
        "block size 32",
    );
    bad(
        w.add_tensor("t", DType::F32, &[1; 5], vec![0; 4])
            .unwrap_err(),
        "5 dimensions",
    );
    bad(
        w.add_tensor("t", DType::F32, &[], vec![]).unwrap_err(),
        "0 dimensions",
    );
    bad(
        w.add_tensor("t", DType::F32, &[1 << 32, 1 << 32], vec![])
            .unwrap_err(),
        "overflows",
    );
    bad(
        w.add_tensor("n".repeat(64), DType::F32, &[1], vec![0; 4])
            .unwrap_err(),
        "1 to 63",
    );
    w.add_tensor("t", DType::F32, &[1], vec![0; 4]).unwrap();
    bad(
        w.add_tensor("t", DType::F32, &[1], vec![0; 4]).unwrap_err(),
        "duplicate tensor",
    );
    // set_kv replaces in place.
    w.set_kv("a", Value::Str("x".into())).unwrap();
    w.set_kv("general.alignment", Value::U32(64)).unwrap();
    assert_eq!(w.metadata()[0], ("a".to_string(), Value::Str("x".into())));
    let f = GgufFile::parse(w.to_bytes().unwrap()).unwrap();
    assert_eq!((f.alignment(), f.get_str("a").unwrap()), (64, "x"));
}

#[test]
fn write_to_any_writer() {
    struct Counting(usize);
    impl std::io::Write for Counting {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let w = sample_writer(true);
    let mut c = Counting(0);
    let n = w.write_to(&mut c).unwrap();
    assert_eq!(n as usize, c.0);
    assert_eq!(c.0, w.to_bytes().unwrap().len());
}

#[test]
fn file_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<GgufFile>();
    check::<GgufError>();
}
