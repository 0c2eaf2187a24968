//! [`GgufFile`]: an opened, fully validated GGUF model (one file or a split set) with typed
//! metadata getters and zero-copy tensor views; [`Shard`]: one file of it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::reader::{self, ParsedShard};
use super::split;
use super::tensor::TensorInfo;
use super::value::{Array, Value};
use super::{GgufError, KEY_SPLIT_COUNT};

/// Label used in errors for files parsed from memory.
pub(crate) const MEMORY_LABEL: &str = "<memory>";

/// Where a shard's bytes live.
#[derive(Debug)]
enum Storage {
    /// A read-only memory map of the file.
    Mapped(crate::files::Mapping),
    /// Bytes handed to [`GgufFile::parse`].
    Owned(Vec<u8>),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Mapped(m) => m,
            Storage::Owned(v) => v,
        }
    }
}

/// Map `path` read-only.
fn map_file(path: &Path) -> Result<Storage, GgufError> {
    let io = |source| GgufError::Io {
        file: path.to_path_buf(),
        source,
    };
    let file = crate::files::open_regular(path).map_err(io)?;
    // Model files are never modified in place while in use (as llama.cpp requires): they are
    // replaced by rename, which leaves this mapping on the old inode. A truncation underneath
    // us raises SIGBUS, which the CLI reports naming the file; every offset we read is
    // checked against the length observed at map time.
    let map = crate::files::map_readonly(&file, path).map_err(io)?;
    Ok(Storage::Mapped(map))
}

/// One file of a GGUF model: its bytes, header fields and metadata.
#[derive(Debug)]
pub struct Shard {
    path: PathBuf,
    storage: Storage,
    version: u32,
    alignment: u64,
    data_offset: u64,
    metadata: Vec<(String, Value)>,
    key_index: HashMap<String, usize>,
    tensor_count: usize,
}

macro_rules! shard_getters {
    ($( $fn:ident, $var:ident, $t:ty, $name:literal; )*) => {
        impl Shard {
            $(
                #[doc = concat!("The `", $name, "` value of `key`; an error if the key is ",
                    "missing or holds another type.")]
                pub fn $fn(&self, key: &str) -> Result<$t, GgufError> {
                    match self.value(key)? {
                        Value::$var(v) => Ok(*v),
                        other => Err(self.wrong_type(key, $name, other)),
                    }
                }
            )*
        }
        impl GgufFile {
            $(
                #[doc = concat!("The `", $name, "` value of `key` in the (first shard's) ",
                    "metadata; an error if the key is missing or holds another type.")]
                pub fn $fn(&self, key: &str) -> Result<$t, GgufError> {
                    self.first().$fn(key)
                }
            )*
        }
    };
}

shard_getters! {
    get_u8, U8, u8, "u8";
    get_i8, I8, i8, "i8";
    get_u16, U16, u16, "u16";
    get_i16, I16, i16, "i16";
    get_u32, U32, u32, "u32";
    get_i32, I32, i32, "i32";
    get_f32, F32, f32, "f32";
    get_bool, Bool, bool, "bool";
    get_u64, U64, u64, "u64";
    get_i64, I64, i64, "i64";
    get_f64, F64, f64, "f64";
}

macro_rules! array_getters {
    ($( $fn:ident, $acc:ident, $t:ty, $name:literal; )*) => {
        impl Shard {
            $(
                #[doc = concat!("The elements of the `", $name, "` array at `key`; an error ",
                    "if the key is missing or holds another type.")]
                pub fn $fn(&self, key: &str) -> Result<&[$t], GgufError> {
                    let v = self.value(key)?;
                    v.as_array()
                        .and_then(Array::$acc)
                        .ok_or_else(|| self.wrong_type(key, $name, v))
                }
            )*
        }
        impl GgufFile {
            $(
                #[doc = concat!("The elements of the `", $name, "` array at `key` in the ",
                    "(first shard's) metadata.")]
                pub fn $fn(&self, key: &str) -> Result<&[$t], GgufError> {
                    self.first().$fn(key)
                }
            )*
        }
    };
}

array_getters! {
    get_u8_array, as_u8, u8, "array<u8>";
    get_i32_array, as_i32, i32, "array<i32>";
    get_u32_array, as_u32, u32, "array<u32>";
    get_i64_array, as_i64, i64, "array<i64>";
    get_u64_array, as_u64, u64, "array<u64>";
    get_f32_array, as_f32, f32, "array<f32>";
    get_bool_array, as_bool, bool, "array<bool>";
    get_str_array, as_str, String, "array<string>";
    get_nested_array, as_nested, Array, "array<array>";
}

impl Shard {
    /// Parse and validate `storage`, labelling errors with `path`.
    fn new(path: PathBuf, storage: Storage) -> Result<(Shard, Vec<TensorInfo>), GgufError> {
        let ParsedShard {
            version,
            alignment,
            data_offset,
            metadata,
            key_index,
            tensors,
        } = reader::parse(storage.bytes(), &path)?;
        let shard = Shard {
            path,
            storage,
            version,
            alignment,
            data_offset,
            metadata,
            key_index,
            tensor_count: tensors.len(),
        };
        Ok((shard, tensors))
    }

    /// Map and validate the file at `path`.
    pub(crate) fn open(path: &Path) -> Result<(Shard, Vec<TensorInfo>), GgufError> {
        let storage = map_file(path)?;
        Shard::new(path.to_path_buf(), storage)
    }

    /// The file's path (`<memory>` for parsed bytes).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Data alignment in bytes (`general.alignment`, default 32).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Absolute file offset where the data section starts.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Length of the file in bytes.
    pub fn file_len(&self) -> u64 {
        self.bytes().len() as u64
    }

    /// The whole file's bytes (borrowed from the map).
    pub fn bytes(&self) -> &[u8] {
        self.storage.bytes()
    }

    /// Number of tensors stored in this shard.
    pub fn tensor_count(&self) -> usize {
        self.tensor_count
    }

    /// This shard's metadata, in file order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.metadata
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.key_index
            .get(key)
            .and_then(|&i| self.metadata.get(i))
            .map(|(_, v)| v)
    }

    /// The value of `key`, or [`GgufError::KeyNotFound`].
    pub fn value(&self, key: &str) -> Result<&Value, GgufError> {
        self.get(key).ok_or_else(|| GgufError::KeyNotFound {
            file: self.path.clone(),
            key: key.to_owned(),
        })
    }

    /// The string value of `key`; an error if the key is missing or not a string.
    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        let v = self.value(key)?;
        v.as_str().ok_or_else(|| self.wrong_type(key, "string", v))
    }

    /// The array at `key`, of any element type.
    pub fn get_array(&self, key: &str) -> Result<&Array, GgufError> {
        let v = self.value(key)?;
        v.as_array().ok_or_else(|| self.wrong_type(key, "array", v))
    }

    fn wrong_type(&self, key: &str, expected: &'static str, found: &Value) -> GgufError {
        let found = match found {
            Value::Array(a) => format!("array<{}>", a.elem_type()),
            other => other.value_type().name().to_owned(),
        };
        GgufError::WrongType {
            file: self.path.clone(),
            key: key.to_owned(),
            expected,
            found,
        }
    }
}

/// A validated GGUF model: one file, or all shards of a split set merged into one tensor
/// index. Tensor data is borrowed from read-only memory maps.
///
/// ```no_run
/// # fn main() -> Result<(), fathom_models::gguf::GgufError> {
/// use fathom_models::gguf::GgufFile;
/// let f = GgufFile::open("model-00001-of-00003.gguf")?; // finds shards 2 and 3
/// assert_eq!(f.get_str("general.architecture")?, "deepseek4");
/// for t in f.tensors() {
///     let bytes: &[u8] = f.tensor_data(&t.name)?;
///     assert_eq!(bytes.len() as u64, t.n_bytes);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct GgufFile {
    /// Never empty.
    shards: Vec<Shard>,
    tensors: Vec<TensorInfo>,
    index: HashMap<String, usize>,
}

impl GgufFile {
    /// Map and validate a GGUF file. A name of the form `NAME-0000K-of-0000N.gguf` opens all
    /// N shards of a split set (see [`split_path`](super::split_path)); any other name must be
    /// a complete model (a `split.count` above 1 is an error).
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile, GgufError> {
        let path = path.as_ref();
        if let Some(name) = split::parse_split_name(path) {
            return split::open_split(&name);
        }
        let file = GgufFile::open_single(path)?;
        if let Some(v) = file.get(KEY_SPLIT_COUNT) {
            let count = v.as_u64().unwrap_or(u64::MAX);
            if count > 1 {
                return Err(GgufError::SplitNotNamed {
                    file: path.to_path_buf(),
                    count,
                });
            }
        }
        Ok(file)
    }

    /// Map and validate exactly one file, without looking for other shards or checking
    /// `split.*` keys (for inspecting a single shard).
    pub fn open_single(path: impl AsRef<Path>) -> Result<GgufFile, GgufError> {
        let shard = Shard::open(path.as_ref())?;
        GgufFile::from_shards(vec![shard])
    }

    /// Validate a GGUF file held in memory (errors are labelled `<memory>`). `split.*` keys
    /// are not checked.
    pub fn parse(bytes: impl Into<Vec<u8>>) -> Result<GgufFile, GgufError> {
        let shard = Shard::new(PathBuf::from(MEMORY_LABEL), Storage::Owned(bytes.into()))?;
        GgufFile::from_shards(vec![shard])
    }

    /// Merge parsed shards (in order) into one tensor index; a name in two shards is an error.
    pub(crate) fn from_shards(parts: Vec<(Shard, Vec<TensorInfo>)>) -> Result<GgufFile, GgufError> {
        let mut shards = Vec::new();
        let mut tensors: Vec<TensorInfo> = Vec::new();
        let mut index = HashMap::new();
        for (no, (shard, infos)) in parts.into_iter().enumerate() {
            for mut t in infos {
                if let Some(&prev) = index.get(&t.name) {
                    let first = tensors
                        .get(prev)
                        .and_then(|p: &TensorInfo| shards.get(p.shard))
                        .map(|s: &Shard| s.path.clone())
                        .unwrap_or_default();
                    return Err(GgufError::DuplicateTensorAcrossShards {
                        file: shard.path.clone(),
                        name: t.name,
                        first,
                    });
                }
                t.shard = no;
                index.insert(t.name.clone(), tensors.len());
                tensors.push(t);
            }
            shards.push(shard);
        }
        if shards.is_empty() {
            return Err(GgufError::InvalidInput {
                file: PathBuf::from(MEMORY_LABEL),
                item: "shards".into(),
                reason: "no shard given".into(),
            });
        }
        Ok(GgufFile {
            shards,
            tensors,
            index,
        })
    }

    /// The first (or only) shard; it holds the model's metadata.
    fn first(&self) -> &Shard {
        // `from_shards` refuses an empty list, so index 0 always exists.
        &self.shards[0]
    }

    /// Path of the first (or only) file.
    pub fn path(&self) -> &Path {
        self.first().path()
    }

    /// GGUF version of the first file.
    pub fn version(&self) -> u32 {
        self.first().version()
    }

    /// Data alignment of the first file.
    pub fn alignment(&self) -> u64 {
        self.first().alignment()
    }

    /// Absolute offset of the first file's data section.
    pub fn data_offset(&self) -> u64 {
        self.first().data_offset()
    }

    /// All shards, in order (one for an unsplit file).
    pub fn shards(&self) -> &[Shard] {
        &self.shards
    }

    /// The model's metadata in file order (the first shard's: gguf-split writes the model
    /// keys only there; other shards carry only `split.*`).
    pub fn metadata(&self) -> &[(String, Value)] {
        self.first().metadata()
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.first().get(key)
    }

    /// The value of `key`, or [`GgufError::KeyNotFound`].
    pub fn value(&self, key: &str) -> Result<&Value, GgufError> {
        self.first().value(key)
    }

    /// The string value of `key`; an error if the key is missing or not a string.
    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        self.first().get_str(key)
    }

    /// The array at `key`, of any element type.
    pub fn get_array(&self, key: &str) -> Result<&Array, GgufError> {
        self.first().get_array(key)
    }

    /// Every tensor, shard by shard in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor called `name`, if any.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.index.get(name).and_then(|&i| self.tensors.get(i))
    }

    /// The bytes of tensor `name`, borrowed from the map (length = its `n_bytes`).
    pub fn tensor_data(&self, name: &str) -> Result<&[u8], GgufError> {
        let info = self.tensor(name).ok_or_else(|| GgufError::TensorNotFound {
            file: self.path().to_path_buf(),
            name: name.to_owned(),
        })?;
        self.tensor_bytes(info)
    }

    /// The bytes described by `info` (one of [`tensors`](Self::tensors)).
    pub fn tensor_bytes(&self, info: &TensorInfo) -> Result<&[u8], GgufError> {
        let shard = self.shards.get(info.shard);
        let bytes = shard.and_then(|s| {
            let start = s.data_offset.checked_add(info.offset)?;
            let end = start.checked_add(info.n_bytes)?;
            let start = usize::try_from(start).ok()?;
            let end = usize::try_from(end).ok()?;
            s.bytes().get(start..end)
        });
        bytes.ok_or_else(|| GgufError::TensorNotFound {
            file: shard
                .map_or_else(|| self.path(), |s| s.path())
                .to_path_buf(),
            name: info.name.clone(),
        })
    }
}
