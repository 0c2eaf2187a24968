//! Zero-copy reading of safetensors checkpoints: single files, sharded checkpoints described by
//! a `model.safetensors.index.json`, and checkpoint directories.
//!
//! # Format
//!
//! A safetensors file is an 8-byte little-endian header length `n`, `n` bytes of UTF-8 JSON (an
//! object mapping tensor names to `{"dtype", "shape", "data_offsets"}`, plus an optional
//! `"__metadata__"` string→string map), then the data buffer. `data_offsets` are `[begin, end)`
//! byte offsets relative to the start of the data buffer.
//!
//! # Why the header is parsed here and not by the `safetensors` crate
//!
//! [`safetensors::SafeTensors::deserialize`] rejects the *whole file* when a single tensor has a
//! dtype string it does not know, and it reports most problems without naming the file or the
//! tensor. fathom must be able to open a checkpoint in which one tensor uses a dtype that is
//! newer than the crate (and report that tensor as unsupported when it is accessed), so the
//! header is parsed and validated here, with [`serde_json`]: the header length against the file
//! size and a 100 MB cap, the JSON object, `__metadata__`, and for every tensor its shape,
//! `shape product × dtype size == end − begin` (checked arithmetic), `begin ≤ end ≤ data length`
//! and that no two tensors overlap. After this validation every tensor's byte range lies inside
//! the mapping, which is all that [`SafetensorsFile::tensor_data`] relies on.
//!
//! When every dtype in a file is one the crate knows, the file is also passed to
//! [`safetensors::SafeTensors::deserialize`] as a cross-check. The crate is stricter than the
//! validation here — it also requires the data buffer to be covered exactly, without holes or
//! trailing bytes — so a disagreement is not fatal: it is recorded in
//! [`SafetensorsFile::warnings`] (and shown by `fathom inspect`).
//!
//! # Memory
//!
//! Files are memory-mapped read-only; tensor data are `&[u8]` slices into the mapping, so opening
//! a checkpoint touches only its headers, whatever its size.

use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::path::{Component, Path, PathBuf};

use memmap2::Mmap;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// Largest accepted JSON header, in bytes (the same cap as the `safetensors` crate).
pub const MAX_HEADER_LEN: u64 = 100_000_000;

/// The conventional name of a sharded checkpoint's index file.
pub const INDEX_FILE_NAME: &str = "model.safetensors.index.json";

/// Errors from reading safetensors files and sharded checkpoints. Every variant names the file
/// and, where there is one, the tensor.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SafetensorsError {
    /// The file could not be opened, read or mapped.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file is shorter than the 8-byte header length.
    #[error("{}: file is {len} bytes, too short for the 8-byte safetensors header length", path.display())]
    FileTooShort {
        /// The file.
        path: PathBuf,
        /// Its length in bytes.
        len: u64,
    },
    /// The header length exceeds [`MAX_HEADER_LEN`].
    #[error("{}: header length {header_len} exceeds the {max}-byte limit", path.display())]
    HeaderTooLarge {
        /// The file.
        path: PathBuf,
        /// The declared header length.
        header_len: u64,
        /// The limit.
        max: u64,
    },
    /// The header length points past the end of the file.
    #[error("{}: header length {header_len} runs past the end of the file ({file_len} bytes)", path.display())]
    HeaderPastEof {
        /// The file.
        path: PathBuf,
        /// The declared header length.
        header_len: u64,
        /// The file length.
        file_len: u64,
    },
    /// The header is not valid UTF-8 JSON.
    #[error("{}: header is not valid JSON: {message}", path.display())]
    HeaderJson {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
    /// The header is valid JSON but not an object.
    #[error("{}: header is JSON but not an object", path.display())]
    HeaderNotObject {
        /// The file.
        path: PathBuf,
    },
    /// `__metadata__` is not a string→string map.
    #[error("{}: __metadata__ {message}", path.display())]
    BadMetadata {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A tensor's header entry is malformed (not an object, missing or mistyped fields).
    #[error("{}: tensor `{tensor}`: {message}", path.display())]
    BadTensorEntry {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// What is wrong.
        message: String,
    },
    /// The same tensor name appears twice in one header.
    #[error("{}: tensor `{tensor}` appears twice in the header", path.display())]
    DuplicateTensor {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
    },
    /// `data_offsets` has `begin > end`.
    #[error("{}: tensor `{tensor}`: data_offsets [{begin}, {end}] has begin > end", path.display())]
    InvalidOffsets {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// Declared begin.
        begin: u64,
        /// Declared end.
        end: u64,
    },
    /// `data_offsets` reaches past the end of the data buffer.
    #[error("{}: tensor `{tensor}`: data_offsets [{begin}, {end}] out of range of the {data_len}-byte data buffer", path.display())]
    OffsetsOutOfRange {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// Declared begin.
        begin: u64,
        /// Declared end.
        end: u64,
        /// Length of the data buffer (file length − 8 − header length).
        data_len: u64,
    },
    /// The byte length of `data_offsets` does not match `shape × dtype size`.
    #[error("{}: tensor `{tensor}`: {dtype} {shape:?} needs {} bytes but data_offsets span {actual}",
        path.display(), expected.map_or_else(|| "more than 2^64 bits of".to_string(), |e| e.to_string()))]
    SizeMismatch {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// Its dtype.
        dtype: StDtype,
        /// Its shape.
        shape: Vec<u64>,
        /// Bytes the shape needs (`None`: overflow, or not a whole number of bytes).
        expected: Option<u64>,
        /// Bytes `data_offsets` spans.
        actual: u64,
    },
    /// Two tensors' byte ranges overlap.
    #[error("{}: tensors `{tensor}` and `{other}` overlap in the data buffer", path.display())]
    Overlap {
        /// The file.
        path: PathBuf,
        /// One tensor.
        tensor: String,
        /// The other.
        other: String,
    },
    /// The tensor's dtype is not one fathom knows; its bytes cannot be interpreted.
    #[error("{}: tensor `{tensor}` has unsupported dtype `{dtype}`", path.display())]
    UnsupportedDtype {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// The dtype string from the header.
        dtype: String,
    },
    /// No tensor of that name.
    #[error("{}: no tensor named `{tensor}`", path.display())]
    TensorNotFound {
        /// The file, index or directory.
        path: PathBuf,
        /// The tensor.
        tensor: String,
    },
    /// The index file is malformed.
    #[error("{}: bad safetensors index: {message}", path.display())]
    BadIndex {
        /// The index file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The index names a shard file that does not exist.
    #[error("{}: shard `{shard}` (holding `{tensor}`) does not exist", index.display())]
    MissingShard {
        /// The index file.
        index: PathBuf,
        /// The shard file name as written in the index.
        shard: String,
        /// The first tensor the index puts in it.
        tensor: String,
    },
    /// A tensor the index puts in a shard is not in that shard.
    #[error("{}: tensor `{tensor}` is listed in the index but absent from shard {}", index.display(), shard.display())]
    TensorMissingFromShard {
        /// The index file.
        index: PathBuf,
        /// The tensor.
        tensor: String,
        /// The shard.
        shard: PathBuf,
    },
    /// A tensor appears in two shards (or twice in the index with different shards).
    #[error("tensor `{tensor}` appears in two shards: {} and {}", first.display(), second.display())]
    TensorInTwoShards {
        /// The tensor.
        tensor: String,
        /// One shard.
        first: PathBuf,
        /// The other.
        second: PathBuf,
    },
    /// A directory holds neither an index nor any `.safetensors` file.
    #[error("{}: no model.safetensors.index.json or .safetensors file in this directory", path.display())]
    NoCheckpoint {
        /// The directory.
        path: PathBuf,
    },
}

/// Result alias for this module.
pub type Result<T, E = SafetensorsError> = std::result::Result<T, E>;

macro_rules! st_dtypes {
    ($( $var:ident = $s:literal, $bits:literal, $doc:literal; )*) => {
        /// A safetensors element type (the header's `dtype` string).
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum StDtype { $( #[doc = $doc] $var, )* }

        impl StDtype {
            /// Every dtype, in order of element size.
            pub const ALL: &'static [StDtype] = &[$(StDtype::$var),*];

            /// The header spelling, e.g. `"F8_E4M3"`.
            pub fn name(self) -> &'static str {
                match self { $( StDtype::$var => $s, )* }
            }

            /// Bits per element (4 and 6 for the sub-byte MX types).
            pub fn bits(self) -> u32 {
                match self { $( StDtype::$var => $bits, )* }
            }

            /// Parse a header dtype string (exact, case-sensitive, as the format specifies).
            pub fn from_name(s: &str) -> Option<StDtype> {
                match s { $( $s => Some(StDtype::$var), )* _ => None }
            }
        }
    };
}

st_dtypes! {
    BOOL = "BOOL", 8, "Boolean, one byte.";
    F4 = "F4", 4, "MX FP4 (e2m1), two per byte.";
    F6_E2M3 = "F6_E2M3", 6, "MX FP6 e2m3.";
    F6_E3M2 = "F6_E3M2", 6, "MX FP6 e3m2.";
    U8 = "U8", 8, "Unsigned 8-bit integer.";
    I8 = "I8", 8, "Signed 8-bit integer (DeepSeek stores packed FP4 codes as I8).";
    F8_E5M2 = "F8_E5M2", 8, "FP8 e5m2.";
    F8_E4M3 = "F8_E4M3", 8, "FP8 e4m3fn (DeepSeek dense weights).";
    F8_E8M0 = "F8_E8M0", 8, "E8M0 power-of-two scale (DeepSeek weight scales).";
    F8_E4M3FNUZ = "F8_E4M3FNUZ", 8, "FP8 e4m3 FNUZ.";
    F8_E5M2FNUZ = "F8_E5M2FNUZ", 8, "FP8 e5m2 FNUZ.";
    I16 = "I16", 16, "Signed 16-bit integer.";
    U16 = "U16", 16, "Unsigned 16-bit integer.";
    F16 = "F16", 16, "IEEE half precision.";
    BF16 = "BF16", 16, "bfloat16.";
    I32 = "I32", 32, "Signed 32-bit integer.";
    U32 = "U32", 32, "Unsigned 32-bit integer.";
    F32 = "F32", 32, "IEEE single precision.";
    C64 = "C64", 64, "Complex with two f32 parts.";
    F64 = "F64", 64, "IEEE double precision.";
    I64 = "I64", 64, "Signed 64-bit integer.";
    U64 = "U64", 64, "Unsigned 64-bit integer.";
}

impl StDtype {
    /// The ggml type with the same element encoding, where there is one.
    pub fn ggml(self) -> Option<quant::DType> {
        Some(match self {
            StDtype::F32 => quant::DType::F32,
            StDtype::F16 => quant::DType::F16,
            StDtype::BF16 => quant::DType::BF16,
            StDtype::F64 => quant::DType::F64,
            StDtype::I8 => quant::DType::I8,
            StDtype::I16 => quant::DType::I16,
            StDtype::I32 => quant::DType::I32,
            StDtype::I64 => quant::DType::I64,
            _ => return None,
        })
    }

    /// Bytes needed for `n_elements` elements; `None` on overflow or when the sub-byte total is
    /// not a whole number of bytes.
    pub fn byte_len(self, n_elements: u64) -> Option<u64> {
        let bits = n_elements.checked_mul(u64::from(self.bits()))?;
        (bits % 8 == 0).then_some(bits / 8)
    }
}

impl fmt::Display for StDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A tensor's dtype as read from the header: known, or a string fathom does not understand.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TensorDtype {
    /// A dtype fathom knows.
    Known(StDtype),
    /// An unknown dtype string; the tensor is listed but its data cannot be accessed.
    Unknown(String),
}

impl TensorDtype {
    /// The dtype, if known.
    pub fn known(&self) -> Option<StDtype> {
        match self {
            TensorDtype::Known(d) => Some(*d),
            TensorDtype::Unknown(_) => None,
        }
    }

    /// The header spelling.
    pub fn as_str(&self) -> &str {
        match self {
            TensorDtype::Known(d) => d.name(),
            TensorDtype::Unknown(s) => s,
        }
    }
}

impl fmt::Display for TensorDtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One tensor of a safetensors file (or of a sharded checkpoint).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// Tensor name.
    pub name: String,
    /// Element type.
    pub dtype: TensorDtype,
    /// Shape as stored (row-major, outermost first).
    pub shape: Vec<u64>,
    /// `[begin, end)` relative to the start of the data buffer, as in the header.
    pub data_offsets: (u64, u64),
    /// Absolute byte offset of the data in its file.
    pub file_offset: u64,
    /// Index of the shard holding it ([`SafetensorsModel::shards`]); 0 for a lone file.
    pub shard: usize,
}

impl TensorInfo {
    /// Byte length of the data.
    pub fn byte_len(&self) -> u64 {
        self.data_offsets.1 - self.data_offsets.0
    }

    /// Number of elements (`None` on overflow).
    pub fn n_elements(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
    }

    /// Why the data cannot be accessed, if it cannot (unknown dtype).
    pub fn unsupported_reason(&self) -> Option<String> {
        match &self.dtype {
            TensorDtype::Known(_) => None,
            TensorDtype::Unknown(s) => Some(format!("unsupported dtype `{s}`")),
        }
    }
}

/// One memory-mapped, validated safetensors file.
pub struct SafetensorsFile {
    path: PathBuf,
    mmap: Mmap,
    header_len: u64,
    metadata: Vec<(String, String)>,
    /// Ordered by `data_offsets`.
    tensors: Vec<TensorInfo>,
    by_name: HashMap<String, usize>,
    warnings: Vec<String>,
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
struct Entries(Vec<(String, Value)>);

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

/// The parts of an index file fathom reads; `weight_map` keeps order and duplicated keys.
struct IndexJson {
    metadata: Option<Value>,
    weight_map: Option<Entries>,
}

impl<'de> Deserialize<'de> for IndexJson {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = IndexJson;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an index object with a `weight_map` object")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut m: A,
            ) -> std::result::Result<IndexJson, A::Error> {
                let mut out = IndexJson {
                    metadata: None,
                    weight_map: None,
                };
                while let Some(k) = m.next_key::<String>()? {
                    match k.as_str() {
                        "metadata" => out.metadata = Some(m.next_value()?),
                        "weight_map" => {
                            if out.weight_map.is_some() {
                                return Err(serde::de::Error::custom("`weight_map` appears twice"));
                            }
                            out.weight_map = Some(m.next_value().map_err(|e: A::Error| {
                                serde::de::Error::custom(format!("`weight_map`: {e}"))
                            })?);
                        }
                        _ => {
                            m.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(V)
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SafetensorsError + '_ {
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

    fn open_shard(path: &Path, shard: usize) -> Result<SafetensorsFile> {
        let file = File::open(path).map_err(io_err(path))?;
        let file_len = file.metadata().map_err(io_err(path))?.len();
        if file_len < 8 {
            return Err(SafetensorsError::FileTooShort {
                path: path.to_path_buf(),
                len: file_len,
            });
        }
        // SAFETY: the map is read-only and private to this process. Its soundness relies on the
        // file not being truncated or modified while mapped (which would be a SIGBUS or changing
        // bytes, not undefined behaviour in our code's view); checkpoints are treated as
        // immutable, which is the usual contract of every mmap-based model loader.
        let mmap = unsafe { Mmap::map(&file) }.map_err(io_err(path))?;
        let mut f = Self::parse(path.to_path_buf(), mmap, shard)?;
        f.cross_check();
        Ok(f)
    }

    fn parse(path: PathBuf, mmap: Mmap, shard: usize) -> Result<SafetensorsFile> {
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

    fn data_of(&self, t: &TensorInfo) -> Result<&[u8]> {
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

/// A checkpoint: one safetensors file, or several shards with one tensor index over all.
#[derive(Debug)]
pub struct SafetensorsModel {
    path: PathBuf,
    index_path: Option<PathBuf>,
    index_metadata: Option<Value>,
    shards: Vec<SafetensorsFile>,
    /// (shard, index within the shard), ordered by shard then offset.
    order: Vec<(usize, usize)>,
    by_name: HashMap<String, usize>,
    warnings: Vec<String>,
}

/// Is this file name a safetensors index (`*.safetensors.index.json` or any `.json`)?
fn is_index_name(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "json")
}

impl SafetensorsModel {
    /// Open a checkpoint given a `.safetensors` file, an index `.json`, or a directory holding
    /// `model.safetensors.index.json` (or another single `*.safetensors.index.json`), else its
    /// `.safetensors` files (one, or several taken as shards of one model, in name order).
    pub fn open(path: impl AsRef<Path>) -> Result<SafetensorsModel> {
        let path = path.as_ref();
        let meta = std::fs::metadata(path).map_err(io_err(path))?;
        if meta.is_dir() {
            return Self::open_dir(path);
        }
        if is_index_name(path) {
            return Self::open_index(path);
        }
        Self::from_files(path.to_path_buf(), None, None, &[path.to_path_buf()], None)
    }

    fn open_dir(dir: &Path) -> Result<SafetensorsModel> {
        let index = dir.join(INDEX_FILE_NAME);
        if index.is_file() {
            return Self::open_index(&index);
        }
        let mut indexes = Vec::new();
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io_err(dir))? {
            let entry = entry.map_err(io_err(dir))?;
            let p = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if !p.is_file() {
                continue;
            }
            if name.ends_with(".safetensors.index.json") {
                indexes.push(p);
            } else if name.ends_with(".safetensors") {
                files.push(p);
            }
        }
        if indexes.len() == 1 {
            return Self::open_index(&indexes[0]);
        }
        if files.is_empty() {
            return Err(SafetensorsError::NoCheckpoint {
                path: dir.to_path_buf(),
            });
        }
        files.sort();
        Self::from_files(dir.to_path_buf(), None, None, &files, None)
    }

    /// Open a sharded checkpoint from its index file.
    pub fn open_index(index: impl AsRef<Path>) -> Result<SafetensorsModel> {
        let index = index.as_ref();
        let bad = |message: String| SafetensorsError::BadIndex {
            path: index.to_path_buf(),
            message,
        };
        let text = std::fs::read(index).map_err(io_err(index))?;
        let first = text.iter().find(|b| !b" \t\r\n".contains(b));
        if first != Some(&b'{') {
            return Err(
                match serde_json::from_slice::<serde::de::IgnoredAny>(&text) {
                    Ok(_) => bad("not a JSON object".into()),
                    Err(e) => bad(format!("not valid JSON: {e}")),
                },
            );
        }
        let parsed: IndexJson = serde_json::from_slice(&text).map_err(|e| bad(format!("{e}")))?;
        let metadata = parsed.metadata;
        let weight_map = parsed
            .weight_map
            .ok_or_else(|| bad("missing `weight_map`".into()))?;
        let dir = index.parent().unwrap_or(Path::new("."));
        let mut shard_names: Vec<String> = Vec::new();
        let mut wanted: Vec<(String, usize)> = Vec::with_capacity(weight_map.0.len());
        let mut first_tensor_of: Vec<String> = Vec::new();
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (tensor, shard) in weight_map.0 {
            let Value::String(shard) = shard else {
                return Err(bad(format!("`weight_map[\"{tensor}\"]` is not a string")));
            };
            let rel = Path::new(&shard);
            if shard.is_empty() || rel.components().any(|c| !matches!(c, Component::Normal(_))) {
                return Err(bad(format!(
                    "shard name `{shard}` for `{tensor}` is not a relative path inside the checkpoint"
                )));
            }
            let si = match shard_names.iter().position(|s| *s == shard) {
                Some(i) => i,
                None => {
                    shard_names.push(shard.clone());
                    first_tensor_of.push(tensor.clone());
                    shard_names.len() - 1
                }
            };
            if let Some(&prev) = seen.get(&tensor) {
                if prev != si {
                    return Err(SafetensorsError::TensorInTwoShards {
                        tensor,
                        first: dir.join(&shard_names[prev]),
                        second: dir.join(&shard_names[si]),
                    });
                }
                continue;
            }
            seen.insert(tensor.clone(), si);
            wanted.push((tensor, si));
        }
        let mut paths = Vec::with_capacity(shard_names.len());
        for (i, s) in shard_names.iter().enumerate() {
            let p = dir.join(s);
            if !p.is_file() {
                return Err(SafetensorsError::MissingShard {
                    index: index.to_path_buf(),
                    shard: s.clone(),
                    tensor: first_tensor_of[i].clone(),
                });
            }
            paths.push(p);
        }
        Self::from_files(
            index.to_path_buf(),
            Some(index.to_path_buf()),
            metadata,
            &paths,
            Some(&wanted),
        )
    }

    fn from_files(
        path: PathBuf,
        index_path: Option<PathBuf>,
        index_metadata: Option<Value>,
        paths: &[PathBuf],
        wanted: Option<&[(String, usize)]>,
    ) -> Result<SafetensorsModel> {
        let mut shards = Vec::with_capacity(paths.len());
        for (i, p) in paths.iter().enumerate() {
            shards.push(SafetensorsFile::open_shard(p, i)?);
        }
        let mut order: Vec<(usize, usize)> = Vec::new();
        let mut by_name: HashMap<String, usize> = HashMap::new();
        for (si, s) in shards.iter().enumerate() {
            for (ti, t) in s.tensors.iter().enumerate() {
                if let Some(&prev) = by_name.get(&t.name) {
                    let (ps, _) = order[prev];
                    return Err(SafetensorsError::TensorInTwoShards {
                        tensor: t.name.clone(),
                        first: shards[ps].path.clone(),
                        second: s.path.clone(),
                    });
                }
                by_name.insert(t.name.clone(), order.len());
                order.push((si, ti));
            }
        }
        let mut warnings = Vec::new();
        if let (Some(wanted), Some(index)) = (wanted, &index_path) {
            for (name, si) in wanted {
                if !shards[*si].by_name.contains_key(name) {
                    return Err(SafetensorsError::TensorMissingFromShard {
                        index: index.clone(),
                        tensor: name.clone(),
                        shard: shards[*si].path.clone(),
                    });
                }
            }
            if order.len() > wanted.len() {
                warnings.push(format!(
                    "{} tensors in the shards are not listed in the index",
                    order.len() - wanted.len()
                ));
            }
        }
        Ok(SafetensorsModel {
            path,
            index_path,
            index_metadata,
            shards,
            order,
            by_name,
            warnings,
        })
    }

    /// The path given to [`SafetensorsModel::open`] (or the index path).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The index file, for a sharded checkpoint opened through one.
    pub fn index_path(&self) -> Option<&Path> {
        self.index_path.as_deref()
    }

    /// The index's `"metadata"` value (e.g. `{"total_size": …}`), if any.
    pub fn index_metadata(&self) -> Option<&Value> {
        self.index_metadata.as_ref()
    }

    /// The shard files, in index order of first appearance (or name order for a directory).
    pub fn shards(&self) -> &[SafetensorsFile] {
        &self.shards
    }

    /// The first shard's `__metadata__` (for a lone file: its metadata).
    pub fn metadata(&self) -> &[(String, String)] {
        self.shards.first().map_or(&[], |s| s.metadata())
    }

    /// Number of tensors over all shards.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether the checkpoint has no tensors.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// All tensors, ordered by shard then position in the shard.
    pub fn tensors(&self) -> impl ExactSizeIterator<Item = &TensorInfo> + '_ {
        self.order.iter().map(|&(s, t)| &self.shards[s].tensors[t])
    }

    /// Look a tensor up by name.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.by_name.get(name).map(|&i| {
            let (s, t) = self.order[i];
            &self.shards[s].tensors[t]
        })
    }

    /// The tensor's bytes, a slice of its shard's mapping (no copy).
    pub fn tensor_data(&self, name: &str) -> Result<&[u8]> {
        let t = self
            .tensor(name)
            .ok_or_else(|| SafetensorsError::TensorNotFound {
                path: self.path.clone(),
                tensor: name.to_string(),
            })?;
        self.shards[t.shard].data_of(t)
    }

    /// Non-fatal findings of the checkpoint and of every shard (prefixed by the shard path).
    pub fn warnings(&self) -> Vec<String> {
        let mut w = self.warnings.clone();
        for s in &self.shards {
            w.extend(
                s.warnings
                    .iter()
                    .map(|m| format!("{}: {m}", s.path.display())),
            );
        }
        w
    }
}
