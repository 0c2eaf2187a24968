//! Split models, llama.cpp `gguf-split` convention: shards named
//! `NAME-00001-of-00003.gguf` … `NAME-00003-of-00003.gguf`, each carrying `split.no` (0-based,
//! u16), `split.count` (u16) and `split.tensors.count` (i32, the total over all shards). The
//! first shard holds the model metadata; every shard holds its own tensor infos and data.
//!
//! Opening any shard opens all of them. Shard paths are always built from the opened path's
//! prefix, never taken from metadata (`shared/spec/hostile-inputs.md` §1.3). Every shard is
//! validated on its own, then its `split.*` keys are checked against its name, and the tensor
//! names must be unique across shards.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::file::{GgufFile, Shard};
use super::value::Value;
use super::writer::GgufWriter;
use super::{GgufError, KEY_ALIGNMENT, KEY_SPLIT_COUNT, KEY_SPLIT_NO, KEY_SPLIT_TENSORS_COUNT};

/// Most shards a set may have (five digits in the file name).
pub const MAX_SHARDS: u32 = 99_999;

/// The parts of a shard file name `PREFIX-0000K-of-0000N.gguf`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitName {
    /// Directory plus `PREFIX` (the path without `-0000K-of-0000N.gguf`).
    pub prefix: PathBuf,
    /// 1-based shard number `K`.
    pub no: u32,
    /// Shard count `N`.
    pub count: u32,
}

/// Recognise a shard file name: `PREFIX-KKKKK-of-NNNNN.gguf` with five-digit numbers,
/// 1 ≤ K ≤ N and a non-empty prefix. `None` for any other name.
pub fn parse_split_name(path: &Path) -> Option<SplitName> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".gguf")?;
    // "-KKKKK-of-NNNNN" is 15 ASCII bytes.
    let cut = stem.len().checked_sub(15)?;
    if cut == 0 || !stem.is_char_boundary(cut) {
        return None;
    }
    let (prefix, tail) = stem.split_at(cut);
    let tail = tail.as_bytes();
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        let b = tail.get(r)?;
        if !b.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(b).ok()?.parse().ok()
    };
    if tail.first() != Some(&b'-') || tail.get(6..10) != Some(b"-of-".as_slice()) {
        return None;
    }
    let no = digits(1..6)?;
    let count = digits(10..15)?;
    if no == 0 || no > count {
        return None;
    }
    Some(SplitName {
        prefix: path.with_file_name(prefix),
        no,
        count,
    })
}

/// The path of shard `no` (1-based) of `count`: `PREFIX-0000K-of-0000N.gguf`
/// (llama.cpp's `llama_split_path`).
pub fn split_path(prefix: &Path, no: u32, count: u32) -> PathBuf {
    let mut s = OsString::from(prefix.as_os_str());
    s.push(format!("-{no:05}-of-{count:05}.gguf"));
    PathBuf::from(s)
}

/// Check an integer `split.*` key of `shard` against `expected`. A missing key is accepted only
/// for unsplit sets (`count == 1`).
fn check_key(shard: &Shard, key: &'static str, expected: u64, count: u32) -> Result<(), GgufError> {
    let mismatch = |found: String| GgufError::SplitMismatch {
        file: shard.path().to_path_buf(),
        key,
        expected,
        found,
    };
    match shard.get(key) {
        None if count == 1 => Ok(()),
        None => Err(mismatch("missing".into())),
        Some(v) if v.as_u64() == Some(expected) => Ok(()),
        Some(v) => Err(mismatch(v.to_string())),
    }
}

/// Open every shard named by `name`'s prefix and count, verify them and merge them.
pub(crate) fn open_split(name: &SplitName) -> Result<GgufFile, GgufError> {
    if name.count > MAX_SHARDS {
        return Err(GgufError::SplitMismatch {
            file: split_path(&name.prefix, name.no, name.count),
            key: KEY_SPLIT_COUNT,
            expected: MAX_SHARDS.into(),
            found: name.count.to_string(),
        });
    }
    // Find missing shards before mapping anything.
    let paths: Vec<PathBuf> = (1..=name.count)
        .map(|no| split_path(&name.prefix, no, name.count))
        .collect();
    for (no, path) in (1..).zip(&paths) {
        if !path.is_file() {
            return Err(GgufError::MissingShard {
                file: path.clone(),
                no,
                count: name.count,
            });
        }
    }
    let mut parts = Vec::new();
    for (i, path) in (0u64..).zip(&paths) {
        let (shard, tensors) = Shard::open(path)?;
        check_key(&shard, KEY_SPLIT_COUNT, name.count.into(), name.count)?;
        check_key(&shard, KEY_SPLIT_NO, i, name.count)?;
        parts.push((shard, tensors));
    }
    let file = GgufFile::from_shards(parts)?;
    if let Some(first) = file.shards().first() {
        if first.get(KEY_SPLIT_TENSORS_COUNT).is_some() {
            let total = file.tensors().len() as u64;
            check_key(first, KEY_SPLIT_TENSORS_COUNT, total, name.count)?;
        }
    }
    Ok(file)
}

impl GgufWriter<'_> {
    /// Write this file as `n_shards` shards at [`split_path`]`(prefix, k, n_shards)`, the way
    /// `gguf-split --split-max-tensors` does: tensors are dealt out in order, ⌈n/shards⌉ per
    /// shard; the first shard gets all metadata (less any existing `split.*` keys), every
    /// shard gets `general.alignment` (if set) and `split.no` / `split.count` /
    /// `split.tensors.count`. Returns the shard paths.
    pub fn write_split(
        &self,
        prefix: impl AsRef<Path>,
        n_shards: u32,
    ) -> Result<Vec<PathBuf>, GgufError> {
        let prefix = prefix.as_ref();
        let bad = |reason: String| GgufError::InvalidInput {
            file: prefix.to_path_buf(),
            item: "split".into(),
            reason,
        };
        if n_shards == 0 || n_shards > MAX_SHARDS {
            return Err(bad(format!(
                "shard count {n_shards} is not between 1 and {MAX_SHARDS}"
            )));
        }
        let shard_count = u16::try_from(n_shards)
            .map_err(|_| bad(format!("{n_shards} shards do not fit split.count (u16)")))?;
        let total = i32::try_from(self.tensors.len())
            .map_err(|_| bad("tensor count does not fit split.tensors.count (i32)".into()))?;
        let per = self.tensors.len().div_ceil(n_shards as usize).max(1);
        let mut chunks = self.tensors.chunks(per);
        let mut paths = Vec::new();
        for no in 0..shard_count {
            let mut w = GgufWriter::new();
            w.set_version(self.version())?;
            for (key, value) in self.metadata() {
                let keep = if no == 0 {
                    !key.starts_with("split.")
                } else {
                    key == KEY_ALIGNMENT
                };
                if keep {
                    w.add_kv(key.clone(), value.clone())?;
                }
            }
            w.add_kv(KEY_SPLIT_NO, Value::U16(no))?;
            w.add_kv(KEY_SPLIT_COUNT, Value::U16(shard_count))?;
            w.add_kv(KEY_SPLIT_TENSORS_COUNT, Value::I32(total))?;
            for t in chunks.next().unwrap_or(&[]) {
                w.add_tensor(t.name.clone(), t.dtype, &t.ne, &t.data[..])?;
            }
            let path = split_path(prefix, u32::from(no) + 1, n_shards);
            w.write_to_path(&path)?;
            paths.push(path);
        }
        Ok(paths)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let n = parse_split_name(Path::new("/m/dsv4-00002-of-00003.gguf")).unwrap();
        assert_eq!(n.prefix, Path::new("/m/dsv4"));
        assert_eq!((n.no, n.count), (2, 3));
        assert_eq!(
            split_path(&n.prefix, 1, 3),
            Path::new("/m/dsv4-00001-of-00003.gguf")
        );
        for bad in [
            "dsv4.gguf",
            "-00001-of-00003.gguf",
            "x-00000-of-00003.gguf",
            "x-00004-of-00003.gguf",
            "x-0001-of-00003.gguf",
            "x-00001-of-00003.bin",
            "x-00001_of-00003.gguf",
            "x-0000a-of-00003.gguf",
        ] {
            assert_eq!(parse_split_name(Path::new(bad)), None, "{bad}");
        }
    }
}
