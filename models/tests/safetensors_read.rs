//! Safetensors reader tests: good files, ≥ 12 kinds of malformed header, unknown dtypes isolated
//! to their tensor, sharded checkpoints (good, missing shard, tensor missing from its shard,
//! tensor in two shards), the copied dsv4-tiny-fp8 checkpoint and the quant fixtures.
//!
//! Every file is written by the test itself into `CARGO_TARGET_TMPDIR`, header JSON and data
//! bytes by hand, so that malformed ones can be made.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use fathom_models::safetensors::{
    SafetensorsError, SafetensorsFile, SafetensorsModel, StDtype, TensorDtype, INDEX_FILE_NAME,
};

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A fresh, empty directory under the target's tmp dir.
fn tmp_dir(tag: &str) -> PathBuf {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("safetensors_read")
        .join(format!("{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Raw file bytes: little-endian header length, the header text, the data.
fn raw(header: &str, data: &[u8]) -> Vec<u8> {
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(header.as_bytes());
    v.extend_from_slice(data);
    v
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A well-formed file: `a` F32 [2, 3] then `b` BF16 [4], with __metadata__.
fn good_bytes() -> Vec<u8> {
    let header = r#"{"__metadata__":{"format":"pt","note":"hi"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]}}"#;
    let data: Vec<u8> = (0u8..32).collect();
    raw(header, &data)
}

fn open_err(tag: &str, bytes: &[u8]) -> (PathBuf, SafetensorsError) {
    let d = tmp_dir(tag);
    let p = write(&d, "x.safetensors", bytes);
    let e = SafetensorsFile::open(&p).expect_err("must fail");
    (p, e)
}

/// The message must name the file (and the tensor when given).
fn assert_names(e: &SafetensorsError, p: &Path, tensor: Option<&str>) {
    let m = e.to_string();
    assert!(m.contains(&p.display().to_string()), "{m}");
    if let Some(t) = tensor {
        assert!(m.contains(&format!("`{t}`")), "{m}");
    }
}

#[test]
fn good_file_reads_zero_copy() {
    let d = tmp_dir("good");
    let p = write(&d, "good.safetensors", &good_bytes());
    let f = SafetensorsFile::open(&p).unwrap();
    assert_eq!(f.tensors().len(), 2);
    assert_eq!(
        f.metadata(),
        &[("format".into(), "pt".into()), ("note".into(), "hi".into())]
    );
    let a = f.tensor("a").unwrap();
    assert_eq!(a.dtype, TensorDtype::Known(StDtype::F32));
    assert_eq!(a.shape, vec![2, 3]);
    assert_eq!(a.data_offsets, (0, 24));
    assert_eq!(a.file_offset, f.data_start());
    assert_eq!(a.n_elements(), Some(6));
    assert_eq!(
        f.tensor_data("a").unwrap(),
        &(0u8..24).collect::<Vec<_>>()[..]
    );
    assert_eq!(
        f.tensor_data("b").unwrap(),
        &(24u8..32).collect::<Vec<_>>()[..]
    );
    assert!(f.warnings().is_empty(), "{:?}", f.warnings());
    // Zero copy: both slices lie inside one mapping, at their file offsets.
    let base = f.tensor_data("a").unwrap().as_ptr() as usize - a.file_offset as usize;
    let b = f.tensor("b").unwrap();
    assert_eq!(
        f.tensor_data("b").unwrap().as_ptr() as usize,
        base + b.file_offset as usize
    );
    // Unknown names.
    let e = f.tensor_data("nope").unwrap_err();
    assert!(matches!(e, SafetensorsError::TensorNotFound { .. }));
    assert_names(&e, &p, Some("nope"));
    // The model view of a lone file.
    let m = SafetensorsModel::open(&p).unwrap();
    assert_eq!(m.len(), 2);
    assert_eq!(m.shards().len(), 1);
    assert_eq!(m.tensor_data("b").unwrap().len(), 8);
    assert_eq!(m.metadata().len(), 2);
}

#[test]
fn good_edge_cases() {
    let d = tmp_dir("edge");
    // Empty header object, no data.
    let p = write(&d, "empty.safetensors", &raw("{}", &[]));
    let f = SafetensorsFile::open(&p).unwrap();
    assert!(f.tensors().is_empty());
    assert!(f.metadata().is_empty());
    // Header padded with spaces (as the reference writer does), zero-sized and scalar tensors,
    // tensors listed out of offset order, every dtype the format knows.
    let mut entries = vec![
        r#""z":{"dtype":"F32","shape":[0,5],"data_offsets":[0,0]}"#.to_string(),
        r#""s":{"dtype":"I64","shape":[],"data_offsets":[0,8]}"#.to_string(),
    ];
    let mut off = 8u64;
    // safetensors 0.7 does not know the FNUZ types; they are checked separately below.
    let crate_known: Vec<StDtype> = StDtype::ALL
        .iter()
        .copied()
        .filter(|d| !matches!(d, StDtype::F8_E4M3FNUZ | StDtype::F8_E5M2FNUZ))
        .collect();
    for (i, dt) in crate_known.iter().enumerate() {
        let n = 16u64; // 16 elements: whole bytes even for F4 / F6
        let len = dt.byte_len(n).unwrap();
        entries.push(format!(
            r#""t{i}":{{"dtype":"{}","shape":[4,4],"data_offsets":[{off},{}]}}"#,
            dt.name(),
            off + len
        ));
        off += len;
    }
    entries.reverse();
    let mut header = format!("{{{}}}", entries.join(","));
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let p = write(
        &d,
        "all.safetensors",
        &raw(&header, &vec![7u8; off as usize]),
    );
    let f = SafetensorsFile::open(&p).unwrap();
    assert_eq!(f.tensors().len(), crate_known.len() + 2);
    assert_eq!(f.tensors()[0].name, "z", "ordered by offset, empty first");
    assert_eq!(f.tensor_data("z").unwrap().len(), 0);
    assert_eq!(f.tensor_data("s").unwrap().len(), 8);
    let f4 = crate_known.iter().position(|d| *d == StDtype::F4).unwrap();
    assert_eq!(f.tensor_data(&format!("t{f4}")).unwrap().len(), 8);
    // The crate knows all of these too: no warnings.
    assert!(f.warnings().is_empty(), "{:?}", f.warnings());
    // Dtypes fathom knows but the crate may not: readable, with at most a warning.
    let header = r#"{"a":{"dtype":"F8_E4M3FNUZ","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"F8_E5M2FNUZ","shape":[2],"data_offsets":[2,4]}}"#;
    let p = write(&d, "fnuz.safetensors", &raw(header, &[1, 2, 3, 4]));
    let f = SafetensorsFile::open(&p).unwrap();
    assert_eq!(
        f.tensor("a").unwrap().dtype.known(),
        Some(StDtype::F8_E4M3FNUZ)
    );
    assert_eq!(f.tensor_data("b").unwrap(), &[3, 4]);
    // Holes and trailing bytes are accepted with warnings (the crate would refuse them).
    let header = r#"{"a":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}}"#;
    let p = write(&d, "holes.safetensors", &raw(header, &[0u8; 10]));
    let f = SafetensorsFile::open(&p).unwrap();
    assert_eq!(f.tensor_data("a").unwrap().len(), 2);
    let w = f.warnings().join("\n");
    assert!(w.contains("4 unused bytes before tensor `a`"), "{w}");
    assert!(w.contains("4 unused bytes after the last tensor"), "{w}");
    assert!(w.contains("safetensors crate rejects"), "{w}");
}

#[test]
fn dtype_table() {
    assert_eq!(StDtype::from_name("F8_E4M3"), Some(StDtype::F8_E4M3));
    assert_eq!(StDtype::from_name("F8_E8M0"), Some(StDtype::F8_E8M0));
    assert_eq!(
        StDtype::from_name("f32"),
        None,
        "dtype names are case-sensitive"
    );
    for d in StDtype::ALL {
        assert_eq!(StDtype::from_name(d.name()), Some(*d));
    }
    assert_eq!(StDtype::BF16.ggml(), Some(quant::DType::BF16));
    assert_eq!(StDtype::I64.ggml(), Some(quant::DType::I64));
    assert_eq!(StDtype::F8_E4M3.ggml(), None);
    assert_eq!(StDtype::F4.byte_len(3), None);
    assert_eq!(StDtype::F4.byte_len(4), Some(2));
    assert_eq!(StDtype::F64.byte_len(u64::MAX), None);
}

#[test]
fn unknown_dtype_is_isolated_to_its_tensor() {
    let header = r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"q":{"dtype":"Q4_FANCY","shape":[3,7],"data_offsets":[8,20]}}"#;
    let d = tmp_dir("unknown");
    let p = write(&d, "u.safetensors", &raw(header, &[1u8; 20]));
    let f = SafetensorsFile::open(&p).expect("one unknown dtype must not fail the file");
    assert_eq!(f.tensors().len(), 2);
    assert_eq!(f.tensor_data("a").unwrap().len(), 8);
    let q = f.tensor("q").unwrap();
    assert_eq!(q.dtype, TensorDtype::Unknown("Q4_FANCY".into()));
    assert_eq!(q.dtype.known(), None);
    assert_eq!(q.byte_len(), 12);
    assert!(q.unsupported_reason().unwrap().contains("Q4_FANCY"));
    let e = f.tensor_data("q").unwrap_err();
    assert!(
        matches!(e, SafetensorsError::UnsupportedDtype { .. }),
        "{e:?}"
    );
    assert_names(&e, &p, Some("q"));
    assert!(e.to_string().contains("Q4_FANCY"));
    assert_eq!(f.raw_tensor_data("q").unwrap().len(), 12);
    assert!(f
        .warnings()
        .iter()
        .any(|w| w.contains("does not know every dtype")));
    // An unknown dtype still gets its offsets validated.
    let header = r#"{"q":{"dtype":"Q4_FANCY","shape":[3],"data_offsets":[0,99]}}"#;
    let (p, e) = open_err("unknown-oob", &raw(header, &[0u8; 4]));
    assert!(
        matches!(e, SafetensorsError::OffsetsOutOfRange { .. }),
        "{e:?}"
    );
    assert_names(&e, &p, Some("q"));
}

#[test]
fn malformed_file_too_short() {
    for len in [0usize, 1, 7] {
        let (p, e) = open_err("short", &vec![0u8; len]);
        assert!(matches!(e, SafetensorsError::FileTooShort { .. }), "{e:?}");
        assert_names(&e, &p, None);
    }
}

#[test]
fn malformed_header_length_past_eof() {
    let mut b = good_bytes();
    let n = b.len() as u64;
    b[..8].copy_from_slice(&n.to_le_bytes());
    let (p, e) = open_err("past-eof", &b);
    assert!(matches!(e, SafetensorsError::HeaderPastEof { .. }), "{e:?}");
    assert_names(&e, &p, None);
    // Truncated file: the header says more than is there.
    let b = good_bytes();
    let (_, e) = open_err("truncated", &b[..20]);
    assert!(matches!(e, SafetensorsError::HeaderPastEof { .. }), "{e:?}");
}

#[test]
fn malformed_header_length_huge() {
    for n in [u64::MAX, u64::MAX - 7, 100_000_001, 1 << 40] {
        let mut b = n.to_le_bytes().to_vec();
        b.extend_from_slice(b"{}");
        let (p, e) = open_err("huge", &b);
        assert!(
            matches!(e, SafetensorsError::HeaderTooLarge { .. }),
            "{e:?}"
        );
        assert_names(&e, &p, None);
    }
}

#[test]
fn malformed_header_not_json() {
    for h in [
        "{\"a\":",
        "not json at all",
        "{\"a\":{\"dtype\":\"F32\",}}",
        "",
        "{} trailing",
    ] {
        let (p, e) = open_err("notjson", &raw(h, &[]));
        assert!(
            matches!(e, SafetensorsError::HeaderJson { .. }),
            "{h:?}: {e:?}"
        );
        assert_names(&e, &p, None);
    }
    // Not UTF-8.
    let mut b = 4u64.to_le_bytes().to_vec();
    b.extend_from_slice(&[b'{', 0xff, 0xfe, b'}']);
    let (_, e) = open_err("notutf8", &b);
    assert!(matches!(e, SafetensorsError::HeaderJson { .. }), "{e:?}");
}

#[test]
fn malformed_header_not_object() {
    for h in ["[1,2,3]", "\"str\"", "42", "null", "  true"] {
        let (p, e) = open_err("notobj", &raw(h, &[]));
        assert!(
            matches!(e, SafetensorsError::HeaderNotObject { .. }),
            "{h:?}: {e:?}"
        );
        assert_names(&e, &p, None);
    }
}

#[test]
fn malformed_metadata() {
    for h in [
        r#"{"__metadata__":[1]}"#,
        r#"{"__metadata__":{"k":1}}"#,
        r#"{"__metadata__":{},"__metadata__":{}}"#,
    ] {
        let (p, e) = open_err("meta", &raw(h, &[]));
        assert!(
            matches!(e, SafetensorsError::BadMetadata { .. }),
            "{h:?}: {e:?}"
        );
        assert_names(&e, &p, None);
    }
}

#[test]
fn malformed_tensor_entries() {
    for h in [
        r#"{"t":5}"#,
        r#"{"t":{"shape":[1],"data_offsets":[0,4]}}"#,
        r#"{"t":{"dtype":3,"shape":[1],"data_offsets":[0,4]}}"#,
        r#"{"t":{"dtype":"F32","data_offsets":[0,4]}}"#,
        r#"{"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}"#,
        r#"{"t":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}"#,
        r#"{"t":{"dtype":"F32","shape":"1","data_offsets":[0,4]}}"#,
        r#"{"t":{"dtype":"F32","shape":[1]}}"#,
        r#"{"t":{"dtype":"F32","shape":[1],"data_offsets":[0]}}"#,
        r#"{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}}"#,
        r#"{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,-4]}}"#,
    ] {
        let (p, e) = open_err("entry", &raw(h, &[0u8; 8]));
        assert!(
            matches!(e, SafetensorsError::BadTensorEntry { .. }),
            "{h}: {e:?}"
        );
        assert_names(&e, &p, Some("t"));
    }
}

#[test]
fn malformed_begin_after_end() {
    let h = r#"{"t":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}}"#;
    let (p, e) = open_err("beginend", &raw(h, &[0u8; 8]));
    assert!(
        matches!(
            e,
            SafetensorsError::InvalidOffsets {
                begin: 4,
                end: 0,
                ..
            }
        ),
        "{e:?}"
    );
    assert_names(&e, &p, Some("t"));
}

#[test]
fn malformed_offsets_out_of_range() {
    for h in [
        r#"{"t":{"dtype":"U8","shape":[9],"data_offsets":[0,9]}}"#,
        r#"{"t":{"dtype":"U8","shape":[1],"data_offsets":[8,9]}}"#,
        r#"{"t":{"dtype":"U8","shape":[0],"data_offsets":[18446744073709551615,18446744073709551615]}}"#,
    ] {
        let (p, e) = open_err("oob", &raw(h, &[0u8; 8]));
        assert!(
            matches!(e, SafetensorsError::OffsetsOutOfRange { data_len: 8, .. }),
            "{h}: {e:?}"
        );
        assert_names(&e, &p, Some("t"));
    }
}

#[test]
fn malformed_shape_size_mismatch() {
    for h in [
        // 2×3 F32 = 24 bytes, span 20.
        r#"{"t":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}}"#,
        // Scalar F32 with no bytes.
        r#"{"t":{"dtype":"F32","shape":[],"data_offsets":[0,0]}}"#,
        // Element count overflows u64.
        r#"{"t":{"dtype":"U8","shape":[4294967296,4294967296,2],"data_offsets":[0,8]}}"#,
        // Byte count overflows u64.
        r#"{"t":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]}}"#,
        // F4 with an odd element count is not a whole number of bytes.
        r#"{"t":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}"#,
    ] {
        let (p, e) = open_err("size", &raw(h, &[0u8; 24]));
        assert!(
            matches!(e, SafetensorsError::SizeMismatch { .. }),
            "{h}: {e:?}"
        );
        assert_names(&e, &p, Some("t"));
    }
}

#[test]
fn malformed_overlap() {
    for h in [
        r#"{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}}"#,
        r#"{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}}"#,
        r#"{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}"#,
    ] {
        let (p, e) = open_err("overlap", &raw(h, &[0u8; 8]));
        assert!(matches!(e, SafetensorsError::Overlap { .. }), "{h}: {e:?}");
        assert_names(&e, &p, None);
        let m = e.to_string();
        assert!(m.contains("`a`") && m.contains("`b`"), "{m}");
    }
}

#[test]
fn malformed_duplicate_tensor_name() {
    let h = r#"{"t":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"t":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}}"#;
    let (p, e) = open_err("dup", &raw(h, &[0u8; 8]));
    assert!(
        matches!(e, SafetensorsError::DuplicateTensor { .. }),
        "{e:?}"
    );
    assert_names(&e, &p, Some("t"));
}

#[test]
fn missing_file_is_io_error_naming_it() {
    let d = tmp_dir("missing");
    let p = d.join("nope.safetensors");
    let e = SafetensorsFile::open(&p).unwrap_err();
    assert!(matches!(e, SafetensorsError::Io { .. }));
    assert_names(&e, &p, None);
    let e = SafetensorsModel::open(&p).unwrap_err();
    assert_names(&e, &p, None);
    let e = SafetensorsModel::open(&d).unwrap_err();
    assert!(matches!(e, SafetensorsError::NoCheckpoint { .. }), "{e:?}");
}

/// Never panic: every prefix of a good file and many byte flips of it open or fail cleanly, and
/// whatever opens serves in-range slices.
#[test]
fn no_panic_on_mutations() {
    let d = tmp_dir("fuzz");
    let good = good_bytes();
    let p = d.join("f.safetensors");
    let check = |bytes: &[u8]| {
        std::fs::write(&p, bytes).unwrap();
        if let Ok(f) = SafetensorsFile::open(&p) {
            for t in f.tensors() {
                if let Ok(s) = f.tensor_data(&t.name) {
                    assert_eq!(s.len() as u64, t.byte_len());
                }
            }
        }
    };
    for n in 0..good.len() {
        check(&good[..n]);
    }
    let mut state = 0x9e3779b97f4a7c15u64;
    for _ in 0..600 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut b = good.clone();
        let i = (state % b.len() as u64) as usize;
        b[i] = (state >> 32) as u8;
        check(&b);
    }
}

/// Write a sharded checkpoint: shard files with the given tensors (name, U8 length), and an
/// index with the given weight map.
fn write_shard(dir: &Path, name: &str, tensors: &[(&str, u64)]) {
    let mut off = 0;
    let mut entries = Vec::new();
    for (t, n) in tensors {
        entries.push(format!(
            r#""{t}":{{"dtype":"U8","shape":[{n}],"data_offsets":[{off},{}]}}"#,
            off + n
        ));
        off += n;
    }
    let header = format!("{{{}}}", entries.join(","));
    let data: Vec<u8> = (0..off).map(|i| i as u8).collect();
    write(dir, name, &raw(&header, &data));
}

fn write_index(dir: &Path, map: &[(&str, &str)]) -> PathBuf {
    let entries: Vec<String> = map.iter().map(|(t, s)| format!(r#""{t}":"{s}""#)).collect();
    let text = format!(
        r#"{{"metadata":{{"total_size":123}},"weight_map":{{{}}}}}"#,
        entries.join(",")
    );
    write(dir, INDEX_FILE_NAME, text.as_bytes())
}

fn sharded(tag: &str) -> PathBuf {
    let d = tmp_dir(tag);
    write_shard(&d, "m-1.safetensors", &[("a", 4), ("b", 6)]);
    write_shard(&d, "m-2.safetensors", &[("c", 3)]);
    d
}

#[test]
fn sharded_good() {
    let d = sharded("shard-good");
    let idx = write_index(
        &d,
        &[
            ("a", "m-1.safetensors"),
            ("b", "m-1.safetensors"),
            ("c", "m-2.safetensors"),
        ],
    );
    for open in [idx.clone(), d.clone()] {
        let m = SafetensorsModel::open(&open).unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m.shards().len(), 2);
        assert_eq!(m.index_path(), Some(idx.as_path()));
        assert_eq!(m.index_metadata().unwrap()["total_size"], 123);
        assert_eq!(m.tensor("c").unwrap().shard, 1);
        assert_eq!(m.tensor_data("c").unwrap(), &[0, 1, 2]);
        assert_eq!(m.tensor_data("b").unwrap(), &[4, 5, 6, 7, 8, 9]);
        let names: Vec<_> = m.tensors().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert!(m.warnings().is_empty(), "{:?}", m.warnings());
    }
    // A directory of shards without an index is one model too.
    std::fs::remove_file(&idx).unwrap();
    let m = SafetensorsModel::open(&d).unwrap();
    assert_eq!(m.len(), 3);
    assert_eq!(m.index_path(), None);
}

#[test]
fn sharded_missing_shard() {
    let d = sharded("shard-missing");
    let idx = write_index(&d, &[("a", "m-1.safetensors"), ("c", "m-9.safetensors")]);
    let e = SafetensorsModel::open(&idx).unwrap_err();
    assert!(matches!(e, SafetensorsError::MissingShard { .. }), "{e:?}");
    let m = e.to_string();
    assert!(
        m.contains("m-9.safetensors")
            && m.contains(&idx.display().to_string())
            && m.contains("`c`"),
        "{m}"
    );
}

#[test]
fn sharded_tensor_missing_from_shard() {
    let d = sharded("shard-absent");
    let idx = write_index(
        &d,
        &[
            ("a", "m-1.safetensors"),
            ("b", "m-1.safetensors"),
            ("c", "m-1.safetensors"),
        ],
    );
    let e = SafetensorsModel::open(&idx).unwrap_err();
    assert!(
        matches!(e, SafetensorsError::TensorMissingFromShard { .. }),
        "{e:?}"
    );
    let m = e.to_string();
    assert!(m.contains("`c`") && m.contains("m-1.safetensors"), "{m}");
}

#[test]
fn sharded_tensor_in_two_shards() {
    // In two shard files.
    let d = tmp_dir("shard-dup");
    write_shard(&d, "m-1.safetensors", &[("a", 4)]);
    write_shard(&d, "m-2.safetensors", &[("a", 4), ("c", 1)]);
    let idx = write_index(&d, &[("a", "m-1.safetensors"), ("c", "m-2.safetensors")]);
    let e = SafetensorsModel::open(&idx).unwrap_err();
    assert!(
        matches!(e, SafetensorsError::TensorInTwoShards { .. }),
        "{e:?}"
    );
    let m = e.to_string();
    assert!(
        m.contains("`a`") && m.contains("m-1.safetensors") && m.contains("m-2.safetensors"),
        "{m}"
    );
    // Or twice in the index with different shards.
    let d = sharded("shard-dup-index");
    let idx = write_index(&d, &[("a", "m-1.safetensors"), ("a", "m-2.safetensors")]);
    let e = SafetensorsModel::open(&idx).unwrap_err();
    assert!(
        matches!(e, SafetensorsError::TensorInTwoShards { .. }),
        "{e:?}"
    );
}

#[test]
fn sharded_bad_index() {
    let d = sharded("shard-badindex");
    for text in [
        "nope",
        "[]",
        r#"{"metadata":{}}"#,
        r#"{"weight_map":[]}"#,
        r#"{"weight_map":{"a":1}}"#,
        r#"{"weight_map":{"a":"../m-1.safetensors"}}"#,
        r#"{"weight_map":{"a":"/etc/passwd"}}"#,
    ] {
        let idx = write(&d, INDEX_FILE_NAME, text.as_bytes());
        let e = SafetensorsModel::open(&idx).unwrap_err();
        assert!(
            matches!(e, SafetensorsError::BadIndex { .. }),
            "{text}: {e:?}"
        );
        assert!(e.to_string().contains(&idx.display().to_string()));
    }
    // A malformed shard is reported with the shard's path.
    write(&d, "m-1.safetensors", b"garbage!garbage");
    let idx = write_index(&d, &[("a", "m-1.safetensors")]);
    let e = SafetensorsModel::open(&idx).unwrap_err();
    assert!(e.to_string().contains("m-1.safetensors"), "{e}");
}

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

#[test]
fn dsv4_tiny_fp8_sharded_checkpoint() {
    let dir = fixture("dsv4-tiny-fp8");
    let index_text = std::fs::read_to_string(dir.join(INDEX_FILE_NAME)).unwrap();
    let index: serde_json::Value = serde_json::from_str(&index_text).unwrap();
    let weight_map = index["weight_map"].as_object().unwrap();
    assert_eq!(weight_map.len(), 786);
    for open in [dir.clone(), dir.join(INDEX_FILE_NAME)] {
        let m = SafetensorsModel::open(&open).unwrap();
        assert_eq!(m.len(), weight_map.len());
        assert_eq!(m.shards().len(), 2);
        assert!(m.warnings().is_empty(), "{:?}", m.warnings());
        assert_eq!(m.index_metadata().unwrap()["total_size"], 5767608);
        assert_eq!(m.metadata(), &[("format".to_string(), "pt".to_string())]);
        for (name, shard) in weight_map {
            let t = m.tensor(name).unwrap();
            let shard_path = m.shards()[t.shard].path();
            assert_eq!(
                shard_path.file_name().unwrap().to_str().unwrap(),
                shard.as_str().unwrap()
            );
        }
        let mut counts = std::collections::BTreeMap::new();
        for t in m.tensors() {
            *counts.entry(t.dtype.known().unwrap()).or_insert(0) += 1;
        }
        use StDtype::*;
        let expect = [
            (I8, 288),
            (F8_E4M3, 50),
            (F8_E8M0, 338),
            (BF16, 53),
            (F32, 54),
            (I64, 3),
        ];
        assert_eq!(counts, expect.into_iter().collect());
        let total: u64 = m.tensors().map(|t| t.byte_len()).sum();
        assert_eq!(total, 5767608);
        let w = m.tensor("layers.0.attn.wq_a.weight").unwrap();
        assert_eq!(
            (w.dtype.known(), w.shape.as_slice(), w.shard),
            (Some(F8_E4M3), &[128u64, 256][..], 0)
        );
        assert_eq!(
            m.tensor_data("layers.0.attn.wq_a.weight").unwrap().len(),
            128 * 256
        );
        let s = m.tensor("layers.0.attn.wq_a.scale").unwrap();
        assert_eq!(
            (s.dtype.known(), s.shape.as_slice()),
            (Some(F8_E8M0), &[1u64, 2][..])
        );
        // Scale bytes of the FP8 weights are 116–118 (fixture README §3).
        assert!(m
            .tensor_data("layers.0.attn.wq_a.scale")
            .unwrap()
            .iter()
            .all(|b| (116..=118).contains(b)));
        let e = m.tensor("layers.3.ffn.experts.5.w2.weight").unwrap();
        assert_eq!(
            (e.dtype.known(), e.shape.as_slice(), e.shard),
            (Some(I8), &[256u64, 16][..], 1)
        );
        let tid = m.tensor("layers.0.ffn.gate.tid2eid").unwrap();
        assert_eq!(
            (tid.dtype.known(), tid.shape.as_slice()),
            (Some(I64), &[512u64, 6][..])
        );
        assert_eq!(m.tensor("head.weight").unwrap().shard, 1);
        assert_eq!(m.tensor("embed.weight").unwrap().shard, 0);
    }
    // A single shard opens on its own.
    let f = SafetensorsFile::open(dir.join("model-00002-of-00002.safetensors")).unwrap();
    assert_eq!(f.tensors().len(), 395);
}

#[test]
fn quant_fixtures_open() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../quant/tests/fixtures");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "safetensors") {
            let f = SafetensorsFile::open(&p).unwrap_or_else(|e| panic!("{e}"));
            assert!(!f.tensors().is_empty());
            for t in f.tensors() {
                assert_eq!(f.tensor_data(&t.name).unwrap().len() as u64, t.byte_len());
            }
            assert!(
                f.warnings().is_empty(),
                "{}: {:?}",
                p.display(),
                f.warnings()
            );
            n += 1;
        }
    }
    assert!(n >= 16, "found {n} quant fixtures");
    let f = SafetensorsFile::open(dir.join("Q4_K.safetensors")).unwrap();
    let b = f.tensor("blocks").unwrap();
    assert_eq!(b.dtype.known(), Some(StDtype::U8));
    assert_eq!(b.shape, vec![16, 512 / 256 * 144]);
}
