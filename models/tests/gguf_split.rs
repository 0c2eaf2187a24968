//! Split sets (`NAME-0000K-of-0000N.gguf`): written by `GgufWriter::write_split`, opened from
//! any shard, merged into one index; missing shards, mismatched `split.*` keys, a tensor in two
//! shards and an unsplit-looking file that claims to be split are errors naming the shard.

mod gguf_support;

use fathom_models::gguf::{split_path, GgufError, GgufFile, GgufWriter, Value};
use gguf_support::*;
use quant::DType;

/// A writer with `n` small F32 tensors and some metadata.
fn writer(n: usize) -> GgufWriter<'static> {
    let mut w = GgufWriter::new();
    w.add_kv("general.architecture", Value::Str("deepseek4".into()))
        .unwrap();
    w.add_kv("general.alignment", Value::U32(64)).unwrap();
    for i in 0..n {
        let data: Vec<u8> = (0..16).map(|b| (b + i) as u8).collect();
        w.add_tensor(format!("t.{i}"), DType::F32, &[4], data)
            .unwrap();
    }
    w
}

#[test]
fn write_and_open_split() {
    let dir = temp_dir("gguf_split_ok");
    let prefix = dir.join("model");
    let w = writer(7);
    let paths = w.write_split(&prefix, 3).unwrap();
    assert_eq!(paths[0], dir.join("model-00001-of-00003.gguf"));
    assert_eq!(paths[2], split_path(&prefix, 3, 3));
    for p in &paths {
        let f = GgufFile::open(p).unwrap();
        assert_eq!(f.shards().len(), 3);
        assert_eq!(f.tensors().len(), 7);
        assert_eq!(f.get_str("general.architecture").unwrap(), "deepseek4");
        assert_eq!(f.alignment(), 64);
        let shards: Vec<usize> = f.tensors().iter().map(|t| t.shard).collect();
        assert_eq!(shards, [0, 0, 0, 1, 1, 1, 2]);
        assert_eq!(f.tensor_data("t.6").unwrap()[0], 6);
        assert_eq!(f.shards()[2].get("split.no"), Some(&Value::U16(2)));
        assert_eq!(f.shards()[1].alignment(), 64);
    }
    // Each shard alone, with open_single, is a valid file.
    let one = GgufFile::open_single(&paths[1]).unwrap();
    assert_eq!(one.tensors().len(), 3);
    assert_eq!(one.get_u16("split.count").unwrap(), 3);
    assert_eq!(one.get_i32("split.tensors.count").unwrap(), 7);
    // More shards than tensors: trailing shards are empty but valid.
    let paths = writer(2).write_split(dir.join("sparse"), 4).unwrap();
    let f = GgufFile::open(&paths[0]).unwrap();
    assert_eq!((f.shards().len(), f.tensors().len()), (4, 2));
    // One shard.
    let paths = writer(2).write_split(dir.join("single"), 1).unwrap();
    assert_eq!(GgufFile::open(&paths[0]).unwrap().tensors().len(), 2);
    // Joined back into one file: identical to writing it directly.
    let f = GgufFile::open(dir.join("model-00002-of-00003.gguf")).unwrap();
    let joined = GgufWriter::from_file(&f).unwrap().to_bytes().unwrap();
    assert_eq!(joined, writer(7).to_bytes().unwrap());
}

#[test]
fn missing_shard() {
    let dir = temp_dir("gguf_split_missing");
    let paths = writer(6).write_split(dir.join("m"), 3).unwrap();
    std::fs::remove_file(&paths[1]).unwrap();
    let e = GgufFile::open(&paths[0]).unwrap_err();
    assert!(
        matches!(
            e,
            GgufError::MissingShard {
                no: 2,
                count: 3,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("m-00002-of-00003.gguf: shard 2 of 3 is missing"),
        "{e}"
    );
}

/// Overwrite shard `no` (0-based) of a 3-shard set with one whose metadata is edited.
fn tamper(
    name: &str,
    no: usize,
    edit: impl Fn(&mut GgufWriter),
) -> (Vec<std::path::PathBuf>, GgufError) {
    let dir = temp_dir(name);
    let paths = writer(6).write_split(dir.join("m"), 3).unwrap();
    let shard = GgufFile::open_single(&paths[no]).unwrap();
    let mut w = GgufWriter::from_file(&shard).unwrap();
    edit(&mut w);
    let bytes = w.to_bytes().unwrap();
    drop(w);
    drop(shard);
    std::fs::write(&paths[no], bytes).unwrap();
    let e = GgufFile::open(&paths[0]).unwrap_err();
    (paths, e)
}

#[test]
fn mismatched_split_count() {
    let (_, e) = tamper("gguf_split_count", 1, |w| {
        w.set_kv("split.count", Value::U16(4)).unwrap();
    });
    assert!(matches!(
        e,
        GgufError::SplitMismatch {
            key: "split.count",
            expected: 3,
            ..
        }
    ));
    assert!(
        e.to_string()
            .contains("m-00002-of-00003.gguf: split key 'split.count' is u16 4, expected 3"),
        "{e}"
    );
}

#[test]
fn mismatched_split_no() {
    let (_, e) = tamper("gguf_split_no", 2, |w| {
        w.set_kv("split.no", Value::U16(0)).unwrap();
    });
    assert!(
        matches!(
            e,
            GgufError::SplitMismatch {
                key: "split.no",
                expected: 2,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("m-00003-of-00003.gguf"), "{e}");
}

#[test]
fn missing_split_key() {
    let dir = temp_dir("gguf_split_nokey");
    let paths = writer(6).write_split(dir.join("m"), 2).unwrap();
    // Replace shard 2 with a file that has no split keys at all.
    writer(0).write_to_path(&paths[1]).unwrap();
    let e = GgufFile::open(&paths[0]).unwrap_err();
    assert!(
        matches!(&e, GgufError::SplitMismatch { found, .. } if found == "missing"),
        "{e}"
    );
    assert!(e.to_string().contains("'split.count' is missing"), "{e}");
}

#[test]
fn wrong_total_tensor_count() {
    let (_, e) = tamper("gguf_split_total", 0, |w| {
        w.set_kv("split.tensors.count", Value::I32(5)).unwrap();
    });
    assert!(
        matches!(
            e,
            GgufError::SplitMismatch {
                key: "split.tensors.count",
                expected: 6,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn tensor_in_two_shards() {
    let (paths, e) = tamper("gguf_split_dup", 2, |w| {
        w.add_tensor("t.0", DType::F32, &[1], vec![0; 4]).unwrap();
    });
    assert!(matches!(&e, GgufError::DuplicateTensorAcrossShards { name, .. } if name == "t.0"));
    let msg = e.to_string();
    assert!(msg.contains("tensor 't.0' also appears in shard"), "{msg}");
    assert!(msg.contains(&paths[0].display().to_string()), "{msg}");
    assert!(msg.starts_with(&paths[2].display().to_string()), "{msg}");
}

#[test]
fn split_file_without_split_name() {
    let dir = temp_dir("gguf_split_renamed");
    let paths = writer(4).write_split(dir.join("m"), 2).unwrap();
    let renamed = dir.join("model.gguf");
    std::fs::rename(&paths[0], &renamed).unwrap();
    let e = GgufFile::open(&renamed).unwrap_err();
    assert!(
        matches!(e, GgufError::SplitNotNamed { count: 2, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("split.count = 2"), "{e}");
    // open_single still inspects it.
    assert_eq!(GgufFile::open_single(&renamed).unwrap().tensors().len(), 2);
}

#[test]
fn corrupt_shard_names_the_shard() {
    let dir = temp_dir("gguf_split_corrupt");
    let paths = writer(4).write_split(dir.join("m"), 2).unwrap();
    let mut b = std::fs::read(&paths[1]).unwrap();
    // Trailing padding may be missing; cut into the last tensor's data itself.
    b.truncate(b.len() - 54);
    std::fs::write(&paths[1], b).unwrap();
    let e = GgufFile::open(&paths[0]).unwrap_err();
    assert!(matches!(e, GgufError::TensorOutOfBounds { .. }), "{e}");
    assert!(
        e.to_string().starts_with(&paths[1].display().to_string()),
        "{e}"
    );
}
