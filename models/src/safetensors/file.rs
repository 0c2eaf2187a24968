//! One safetensors file: its header parsed and validated against the file, its data mapped.

use super::{Result, SafetensorsError, StDtype, TensorDtype, TensorInfo, MAX_HEADER_LEN};
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// One memory-mapped, validated safetensors file.
pub struct SafetensorsFile {
    pub(super) path: PathBuf,
    mmap: Bytes,
    header_len: u64,
    metadata: Vec<(String, String)>,
    /// Ordered by `data_offsets`.
    pub(super) tensors: Vec<TensorInfo>,
    pub(super) by_name: HashMap<String, usize>,
    pub(super) warnings: Vec<String>,
}

/// Where a file's bytes live: mapped, or handed over in memory ([`SafetensorsFile::from_bytes`]).
enum Bytes {
    Mapped(crate::files::Mapping),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

impl fmt::Debug for SafetensorsFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SafetensorsFile")
            .field("path", &self.path)
            .field("file_len", &self.mmap.len())
            .field("tensors", &self.tensors.len())
            .finish_non_exhaustive()
    }
}

/// JSON object entries in document order, duplicates kept (serde_json's map would silently keep
/// only the last of a duplicated key).
pub(super) struct Entries(pub(super) Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut m: A,
            ) -> std::result::Result<Entries, A::Error> {
                let mut v = Vec::with_capacity(m.size_hint().unwrap_or(0));
                while let Some((k, val)) = m.next_entry::<String, Value>()? {
                    v.push((k, val));
                }
                Ok(Entries(v))
            }
        }
        d.deserialize_map(V)
    }
}

/// Parse a JSON object keeping key order and duplicates. `Err(None)`: valid start but not an
/// object; `Err(Some(msg))`: syntax error.
fn parse_object(bytes: &[u8]) -> std::result::Result<Vec<(String, Value)>, Option<String>> {
    let first = bytes.iter().find(|b| !b" \t\r\n".contains(b));
    if first != Some(&b'{') {
        // Tell "valid JSON of another kind" from garbage.
        return Err(
            match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
                Ok(_) => None,
                Err(e) => Some(e.to_string()),
            },
        );
    }
    serde_json::from_slice::<Entries>(bytes)
        .map(|e| e.0)
        .map_err(|e| Some(e.to_string()))
}

pub(super) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SafetensorsError + '_ {
    move |source| SafetensorsError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn u64_array(v: &Value) -> Option<Vec<u64>> {
    v.as_array()?.iter().map(Value::as_u64).collect()
}

impl SafetensorsFile {
    /// Map and validate one safetensors file (see the module docs for what is checked).
    pub fn open(path: impl AsRef<Path>) -> Result<SafetensorsFile> {
        Self::open_shard(path.as_ref(), 0)
    }

    pub(super) fn open_shard(path: &Path, shard: usize) -> Result<SafetensorsFile> {
        let file = crate::files::open_regular(path).map_err(io_err(path))?;
        let file_len = file.metadata().map_err(io_err(path))?.len();
        if file_len < 8 {
            return Err(SafetensorsError::FileTooShort {
                path: path.to_path_buf(),
                len: file_len,
            });
        }
        // checkpoints are treated as immutable while mapped (see `files::map_readonly`)
        let mmap = crate::files::map_readonly(&file, path).map_err(io_err(path))?;
        let mut f = Self::parse(path.to_path_buf(), Bytes::Mapped(mmap), shard)?;
        f.cross_check();
        Ok(f)
    }

    /// Parse and validate a file's bytes held in memory (`label` names it in errors), as
    /// [`SafetensorsFile::open`] does a file.
    pub fn from_bytes(label: &str, bytes: Vec<u8>) -> Result<SafetensorsFile> {
        if bytes.len() < 8 {
            return Err(SafetensorsError::FileTooShort {
                path: PathBuf::from(label),
                len: bytes.len() as u64,
            });
        }
        let mut f = Self::parse(PathBuf::from(label), Bytes::Owned(bytes), 0)?;
        f.cross_check();
        Ok(f)
    }

    fn parse(path: PathBuf, mmap: Bytes, shard: usize) -> Result<SafetensorsFile> {
        let bytes: &[u8] = &mmap;
        let file_len = bytes.len() as u64;
        let mut len8 = [0u8; 8];
        len8.copy_from_slice(&bytes[..8]);
        let header_len = u64::from_le_bytes(len8);
        if header_len > MAX_HEADER_LEN {
            return Err(SafetensorsError::HeaderTooLarge {
                path,
                header_len,
                max: MAX_HEADER_LEN,
            });
        }
        if header_len > file_len - 8 {
            return Err(SafetensorsError::HeaderPastEof {
                path,
                header_len,
                file_len,
            });
        }
        let data_start = 8 + header_len;
        let data_len = file_len - data_start;
        let header = &bytes[8..data_start as usize];
        if let Err(e) = std::str::from_utf8(header) {
            return Err(SafetensorsError::HeaderJson {
                path,
                message: format!("not UTF-8: {e}"),
            });
        }
        let entries = match parse_object(header) {
            Ok(e) => e,
            Err(None) => return Err(SafetensorsError::HeaderNotObject { path }),
            Err(Some(message)) => return Err(SafetensorsError::HeaderJson { path, message }),
        };

        let mut metadata = Vec::new();
        let mut seen_metadata = false;
        let mut tensors: Vec<TensorInfo> = Vec::with_capacity(entries.len());
        let mut by_name: HashMap<String, usize> = HashMap::with_capacity(entries.len());
        for (name, value) in entries {
            if name == "__metadata__" {
                if seen_metadata {
                    return Err(SafetensorsError::BadMetadata {
                        path,
                        message: "appears twice".into(),
                    });
                }
                seen_metadata = true;
                let Value::Object(m) = value else {
                    return Err(SafetensorsError::BadMetadata {
                        path,
                        message: "is not an object".into(),
                    });
                };
                for (k, v) in m {
                    let Value::String(s) = v else {
                        return Err(SafetensorsError::BadMetadata {
                            path,
                            message: format!("value of `{k}` is not a string"),
                        });
                    };
                    metadata.push((k, s));
                }
                continue;
            }
            let bad = |message: String| SafetensorsError::BadTensorEntry {
                path: path.clone(),
                tensor: name.clone(),
                message,
            };
            let Value::Object(obj) = &value else {
                return Err(bad("entry is not an object".into()));
            };
            let dtype = match obj.get("dtype") {
                Some(Value::String(s)) => match StDtype::from_name(s) {
                    Some(d) => TensorDtype::Known(d),
                    None => TensorDtype::Unknown(s.clone()),
                },
                Some(_) => return Err(bad("`dtype` is not a string".into())),
                None => return Err(bad("missing `dtype`".into())),
            };
            let shape = match obj.get("shape") {
                Some(v) => u64_array(v).ok_or_else(|| {
                    bad("`shape` is not an array of non-negative integers".into())
                })?,
                None => return Err(bad("missing `shape`".into())),
            };
            let offsets = match obj.get("data_offsets") {
                Some(v) => u64_array(v).filter(|a| a.len() == 2).ok_or_else(|| {
                    bad("`data_offsets` is not an array of two non-negative integers".into())
                })?,
                None => return Err(bad("missing `data_offsets`".into())),
            };
            let (begin, end) = (offsets[0], offsets[1]);
            if begin > end {
                return Err(SafetensorsError::InvalidOffsets {
                    path,
                    tensor: name,
                    begin,
                    end,
                });
            }
            if end > data_len {
                return Err(SafetensorsError::OffsetsOutOfRange {
                    path,
                    tensor: name,
                    begin,
                    end,
                    data_len,
                });
            }
            if let TensorDtype::Known(d) = &dtype {
                let expected = shape
                    .iter()
                    .try_fold(1u64, |a, &x| a.checked_mul(x))
                    .and_then(|n| d.byte_len(n));
                if expected != Some(end - begin) {
                    return Err(SafetensorsError::SizeMismatch {
                        path,
                        tensor: name,
                        dtype: *d,
                        shape,
                        expected,
                        actual: end - begin,
                    });
                }
            }
            if by_name.contains_key(&name) {
                return Err(SafetensorsError::DuplicateTensor { path, tensor: name });
            }
            by_name.insert(name.clone(), tensors.len());
            tensors.push(TensorInfo {
                name,
                dtype,
                shape,
                data_offsets: (begin, end),
                file_offset: data_start + begin,
                shard,
            });
        }

        tensors.sort_by(|a, b| {
            a.data_offsets
                .cmp(&b.data_offsets)
                .then_with(|| a.name.cmp(&b.name))
        });
        let mut warnings = Vec::new();
        let mut covered_to = 0u64;
        let mut last_nonempty: Option<usize> = None;
        for (i, t) in tensors.iter().enumerate() {
            let (b, e) = t.data_offsets;
            if b == e {
                continue;
            }
            if let Some(j) = last_nonempty {
                if b < covered_to {
                    return Err(SafetensorsError::Overlap {
                        path,
                        tensor: t.name.clone(),
                        other: tensors[j].name.clone(),
                    });
                }
            }
            if b > covered_to {
                warnings.push(format!(
                    "{} unused bytes before tensor `{}`",
                    b - covered_to,
                    t.name
                ));
            }
            covered_to = e;
            last_nonempty = Some(i);
        }
        if covered_to < data_len {
            warnings.push(format!(
                "{} unused bytes after the last tensor",
                data_len - covered_to
            ));
        }
        by_name = tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        Ok(SafetensorsFile {
            path,
            mmap,
            header_len,
            metadata,
            tensors,
            by_name,
            warnings,
        })
    }

    /// Cross-check with the `safetensors` crate when it knows every dtype; disagreements become
    /// warnings (see the module docs).
    fn cross_check(&mut self) {
        let all_known_to_crate = self.tensors.iter().all(|t| {
            serde_json::from_value::<safetensors::Dtype>(Value::String(
                t.dtype.as_str().to_string(),
            ))
            .is_ok()
        });
        if !all_known_to_crate {
            self.warnings
                .push("the safetensors crate does not know every dtype in this file; validated by fathom only".into());
            return;
        }
        match safetensors::SafeTensors::deserialize(&self.mmap) {
            Ok(st) => {
                if st.len() != self.tensors.len() {
                    self.warnings.push(format!(
                        "the safetensors crate sees {} tensors, fathom {}",
                        st.len(),
                        self.tensors.len()
                    ));
                }
            }
            Err(e) => self
                .warnings
                .push(format!("the safetensors crate rejects this file: {e}")),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Total file length in bytes.
    pub fn file_len(&self) -> u64 {
        self.mmap.len() as u64
    }

    /// The JSON header length (the first 8 bytes of the file).
    pub fn header_len(&self) -> u64 {
        self.header_len
    }

    /// Absolute offset of the data buffer (`8 + header_len`).
    pub fn data_start(&self) -> u64 {
        8 + self.header_len
    }

    /// The `__metadata__` map, in header order (empty when absent).
    pub fn metadata(&self) -> &[(String, String)] {
        &self.metadata
    }

    /// Tensors ordered by position in the data buffer.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// Look a tensor up by name.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.by_name.get(name).map(|&i| &self.tensors[i])
    }

    /// Non-fatal findings: unused bytes, disagreement with the `safetensors` crate.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The tensor's bytes, a slice of the mapping (no copy). Fails for unknown names and for
    /// tensors with an unsupported dtype.
    pub fn tensor_data(&self, name: &str) -> Result<&[u8]> {
        let t = self
            .tensor(name)
            .ok_or_else(|| SafetensorsError::TensorNotFound {
                path: self.path.clone(),
                tensor: name.to_string(),
            })?;
        self.data_of(t)
    }

    pub(super) fn data_of(&self, t: &TensorInfo) -> Result<&[u8]> {
        if let TensorDtype::Unknown(dtype) = &t.dtype {
            return Err(SafetensorsError::UnsupportedDtype {
                path: self.path.clone(),
                tensor: t.name.clone(),
                dtype: dtype.clone(),
            });
        }
        Ok(self.raw_data_of(t))
    }

    fn raw_data_of(&self, t: &TensorInfo) -> &[u8] {
        // Validated at open: file_offset + byte_len <= file length.
        let start = t.file_offset as usize;
        &self.mmap[start..start + t.byte_len() as usize]
    }

    /// The tensor's bytes whatever its dtype (also for unsupported ones).
    pub fn raw_tensor_data(&self, name: &str) -> Result<&[u8]> {
        let t = self
            .tensor(name)
            .ok_or_else(|| SafetensorsError::TensorNotFound {
                path: self.path.clone(),
                tensor: name.to_string(),
            })?;
        Ok(self.raw_data_of(t))
    }
}
