//! [`GgufWriter`]: builds a GGUF file from metadata and tensors and writes it to any
//! [`std::io::Write`] or to a path.
//!
//! Layout matches llama.cpp's `gguf_write_to_buf`: header, key-values in insertion order,
//! tensor infos in insertion order with offsets assigned back to back, zero padding to the
//! alignment, then each tensor's bytes followed by zero padding to the alignment (the last one
//! included). A file written by llama.cpp therefore round-trips byte for byte through
//! [`GgufWriter::from_file`]. Everything the reader would refuse is refused here first, so the
//! writer never produces a file its own reader rejects.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use quant::DType;

use super::reader::align_up;
use super::tensor::{tensor_nbytes, ShapeError};
use super::value::{Array, Value};
use super::{
    GgufError, GgufFile, DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUF_VERSION, KEY_ALIGNMENT, MAX_ALIGNMENT,
    MAX_ARRAY_LEN, MAX_KEY_LEN, MAX_KV_COUNT, MAX_NESTING, MAX_STRING_LEN, MAX_TENSOR_COUNT,
    MAX_TENSOR_NAME_LEN,
};

/// Label used in errors before an output path is known.
const WRITER_LABEL: &str = "<writer>";

/// Zero bytes used for padding (alignment ≤ `MAX_ALIGNMENT`).
const ZEROS: [u8; 4096] = [0; 4096];

/// One tensor queued for writing; its bytes are borrowed where possible.
#[derive(Clone, Debug)]
pub(crate) struct PendingTensor<'a> {
    pub(crate) name: String,
    pub(crate) dtype: DType,
    pub(crate) ne: Vec<u64>,
    pub(crate) data: Cow<'a, [u8]>,
}

/// Builds a GGUF file. Tensor bytes may be borrowed (e.g. from a [`GgufFile`]'s map) for the
/// lifetime `'a`.
///
/// ```
/// use fathom_models::gguf::{GgufFile, GgufWriter, Value};
/// use quant::DType;
/// # fn main() -> Result<(), fathom_models::gguf::GgufError> {
/// let mut w = GgufWriter::new();
/// w.add_kv("general.architecture", Value::Str("deepseek4".into()))?;
/// w.add_tensor("x", DType::F32, &[2, 1], vec![0u8; 8])?;
/// let f = GgufFile::parse(w.to_bytes()?)?;
/// assert_eq!(f.tensor_data("x")?.len(), 8);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct GgufWriter<'a> {
    version: u32,
    alignment: u64,
    metadata: Vec<(String, Value)>,
    keys: HashMap<String, usize>,
    pub(crate) tensors: Vec<PendingTensor<'a>>,
    names: HashSet<String>,
}

impl Default for GgufWriter<'_> {
    fn default() -> Self {
        GgufWriter::new()
    }
}

fn invalid(item: impl Into<String>, reason: impl Into<String>) -> GgufError {
    GgufError::InvalidInput {
        file: PathBuf::from(WRITER_LABEL),
        item: item.into(),
        reason: reason.into(),
    }
}

/// Check a value against the reader's limits.
fn check_value(key: &str, value: &Value) -> Result<(), GgufError> {
    fn check_array(key: &str, a: &Array, depth: usize) -> Result<(), GgufError> {
        if depth > MAX_NESTING {
            return Err(invalid(
                format!("key '{key}'"),
                format!("arrays nested deeper than {MAX_NESTING} levels"),
            ));
        }
        if a.len() as u64 > MAX_ARRAY_LEN {
            return Err(invalid(
                format!("key '{key}'"),
                format!("array of {} elements exceeds {MAX_ARRAY_LEN}", a.len()),
            ));
        }
        match a {
            Array::Str(v) => v.iter().try_for_each(|s| check_str(key, s)),
            Array::Nested(v) => v.iter().try_for_each(|x| check_array(key, x, depth + 1)),
            _ => Ok(()),
        }
    }
    fn check_str(key: &str, s: &str) -> Result<(), GgufError> {
        if s.len() as u64 > MAX_STRING_LEN {
            return Err(invalid(
                format!("key '{key}'"),
                format!("string of {} bytes exceeds {MAX_STRING_LEN}", s.len()),
            ));
        }
        Ok(())
    }
    match value {
        Value::Str(s) => check_str(key, s),
        Value::Array(a) => check_array(key, a, 1),
        _ => Ok(()),
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I8(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => out.push(u8::from(*x)),
        Value::Str(s) => put_str(out, s),
        Value::Array(a) => put_array(out, a),
        Value::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
    }
}

fn put_array(out: &mut Vec<u8>, a: &Array) {
    out.extend_from_slice(&a.elem_type().id().to_le_bytes());
    out.extend_from_slice(&(a.len() as u64).to_le_bytes());
    macro_rules! each {
        ($v:expr) => {
            for x in $v {
                out.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    match a {
        Array::U8(v) => out.extend_from_slice(v),
        Array::I8(v) => each!(v),
        Array::U16(v) => each!(v),
        Array::I16(v) => each!(v),
        Array::U32(v) => each!(v),
        Array::I32(v) => each!(v),
        Array::F32(v) => each!(v),
        Array::Bool(v) => out.extend(v.iter().map(|&b| u8::from(b))),
        Array::Str(v) => v.iter().for_each(|s| put_str(out, s)),
        Array::Nested(v) => v.iter().for_each(|x| put_array(out, x)),
        Array::U64(v) => each!(v),
        Array::I64(v) => each!(v),
        Array::F64(v) => each!(v),
    }
}

fn write_padding(w: &mut dyn Write, mut n: u64) -> std::io::Result<()> {
    while n > 0 {
        let k = n.min(ZEROS.len() as u64);
        w.write_all(ZEROS.get(..k as usize).unwrap_or(&ZEROS))?;
        n -= k;
    }
    Ok(())
}

impl<'a> GgufWriter<'a> {
    /// An empty GGUF v3 file with the default alignment (32).
    pub fn new() -> GgufWriter<'a> {
        GgufWriter {
            version: GGUF_VERSION,
            alignment: DEFAULT_ALIGNMENT,
            metadata: Vec::new(),
            keys: HashMap::new(),
            tensors: Vec::new(),
            names: HashSet::new(),
        }
    }

    /// A writer holding everything in `file`: its version, the first shard's metadata (less
    /// `split.*` keys when `file` has several shards) and every tensor, its bytes borrowed.
    pub fn from_file(file: &'a GgufFile) -> Result<GgufWriter<'a>, GgufError> {
        let mut w = GgufWriter::new();
        w.set_version(file.version())?;
        let multi = file.shards().len() > 1;
        for (key, value) in file.metadata() {
            if multi && key.starts_with("split.") {
                continue;
            }
            w.add_kv(key.clone(), value.clone())?;
        }
        for t in file.tensors() {
            let data = file.tensor_bytes(t)?;
            w.add_tensor(t.name.clone(), t.dtype, &t.ne, data)?;
        }
        Ok(w)
    }

    /// Set the version written to the header (2 or 3; the layout is the same).
    pub fn set_version(&mut self, version: u32) -> Result<(), GgufError> {
        if !(2..=3).contains(&version) {
            return Err(invalid("version", format!("{version} is not 2 or 3")));
        }
        self.version = version;
        Ok(())
    }

    /// The version that will be written.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The data alignment that will be used (from `general.alignment`, default 32).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Metadata queued so far, in order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.metadata
    }

    /// Number of tensors queued so far.
    pub fn tensor_count(&self) -> usize {
        self.tensors.len()
    }

    fn check_kv(&self, key: &str, value: &Value) -> Result<(), GgufError> {
        if key.is_empty() || key.len() as u64 > MAX_KEY_LEN || !key.is_ascii() {
            return Err(invalid(
                format!("key '{key}'"),
                format!("keys must be 1 to {MAX_KEY_LEN} ASCII bytes"),
            ));
        }
        check_value(key, value)?;
        if key == KEY_ALIGNMENT {
            match *value {
                Value::U32(a) if a.is_power_of_two() && u64::from(a) <= MAX_ALIGNMENT => {}
                _ => {
                    return Err(invalid(
                        KEY_ALIGNMENT,
                        format!("{value} is not a u32 power of two from 1 to {MAX_ALIGNMENT}"),
                    ))
                }
            }
        }
        Ok(())
    }

    /// Append a key-value pair; a duplicate key is an error. Setting `general.alignment`
    /// (a u32 power of two ≤ 65536) changes the data alignment.
    pub fn add_kv(&mut self, key: impl Into<String>, value: Value) -> Result<(), GgufError> {
        let key = key.into();
        if self.keys.contains_key(&key) {
            return Err(invalid(format!("key '{key}'"), "duplicate key"));
        }
        if self.metadata.len() as u64 >= MAX_KV_COUNT {
            return Err(invalid(format!("key '{key}'"), "too many key-value pairs"));
        }
        self.check_kv(&key, &value)?;
        if let (true, Value::U32(a)) = (key == KEY_ALIGNMENT, &value) {
            self.alignment = u64::from(*a);
        }
        self.keys.insert(key.clone(), self.metadata.len());
        self.metadata.push((key, value));
        Ok(())
    }

    /// Set `key` to `value`, replacing an existing value in place or appending a new pair.
    pub fn set_kv(&mut self, key: impl Into<String>, value: Value) -> Result<(), GgufError> {
        let key = key.into();
        match self.keys.get(&key).copied() {
            None => self.add_kv(key, value),
            Some(i) => {
                self.check_kv(&key, &value)?;
                if let (true, Value::U32(a)) = (key == KEY_ALIGNMENT, &value) {
                    self.alignment = u64::from(*a);
                }
                if let Some(slot) = self.metadata.get_mut(i) {
                    slot.1 = value;
                }
                Ok(())
            }
        }
    }

    /// Queue a tensor: `ne` in GGUF order (`ne[0]` = row length, 1..=4 dims), `data` exactly
    /// the tensor's byte size. Names must be unique and 1..=63 bytes.
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        dtype: DType,
        ne: &[u64],
        data: impl Into<Cow<'a, [u8]>>,
    ) -> Result<(), GgufError> {
        let name = name.into();
        let item = || format!("tensor '{name}'");
        if name.is_empty() || name.len() as u64 > MAX_TENSOR_NAME_LEN {
            return Err(invalid(
                item(),
                format!("names must be 1 to {MAX_TENSOR_NAME_LEN} bytes"),
            ));
        }
        if self.names.contains(&name) {
            return Err(invalid(item(), "duplicate tensor name"));
        }
        if !dtype.is_gguf() {
            return Err(invalid(
                item(),
                format!("{dtype} is a fathom load-time layout, not a GGUF type"),
            ));
        }
        if self.tensors.len() as u64 >= MAX_TENSOR_COUNT {
            return Err(invalid(item(), "too many tensors"));
        }
        let n_bytes = tensor_nbytes(dtype, ne).map_err(|e| {
            let reason = match e {
                ShapeError::Dims(n) => format!("{n} dimensions, expected 1 to 4"),
                ShapeError::Dim { dim, value } => format!("ne[{dim}] = {value} exceeds i64::MAX"),
                ShapeError::ElementOverflow => format!("element count of {ne:?} overflows"),
                ShapeError::Row { ne0, block } => {
                    format!("ne[0] = {ne0} is not a multiple of the {dtype} block size {block}")
                }
                ShapeError::ByteOverflow => format!("byte size of {ne:?} overflows"),
            };
            invalid(item(), reason)
        })?;
        let data = data.into();
        if data.len() as u64 != n_bytes {
            return Err(invalid(
                item(),
                format!(
                    "{} data bytes given, {dtype} {ne:?} needs {n_bytes}",
                    data.len()
                ),
            ));
        }
        self.names.insert(name.clone());
        self.tensors.push(PendingTensor {
            name,
            dtype,
            ne: ne.to_vec(),
            data,
        });
        Ok(())
    }

    /// Encode header, metadata and tensor infos (everything before the data padding).
    fn encode_head(&self) -> Result<Vec<u8>, GgufError> {
        let mut out = Vec::new();
        out.extend_from_slice(&GGUF_MAGIC);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in &self.metadata {
            put_str(&mut out, key);
            out.extend_from_slice(&value.value_type().id().to_le_bytes());
            put_value(&mut out, value);
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            put_str(&mut out, &t.name);
            out.extend_from_slice(&(t.ne.len() as u32).to_le_bytes());
            for d in &t.ne {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&t.dtype.gguf_id().to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offset = (t.data.len() as u64)
                .checked_add(offset)
                .and_then(|end| align_up(end, self.alignment))
                .ok_or_else(|| invalid(format!("tensor '{}'", t.name), "data offset overflows"))?;
        }
        Ok(out)
    }

    fn write_impl(&self, w: &mut dyn Write, label: &Path) -> Result<u64, GgufError> {
        let io = |source| GgufError::Io {
            file: label.to_path_buf(),
            source,
        };
        let head = self.encode_head()?;
        let mut total = head.len() as u64;
        w.write_all(&head).map_err(io)?;
        let pad = |at: u64| align_up(at, self.alignment).map_or(0, |a| a - at);
        let p = pad(total);
        write_padding(w, p).map_err(io)?;
        total += p;
        for t in &self.tensors {
            w.write_all(&t.data).map_err(io)?;
            let n = t.data.len() as u64;
            let p = pad(n);
            write_padding(w, p).map_err(io)?;
            total = total.saturating_add(n).saturating_add(p);
        }
        w.flush().map_err(io)?;
        Ok(total)
    }

    /// Write the file to `w`; returns the number of bytes written. Wrap files in a
    /// [`std::io::BufWriter`].
    pub fn write_to<W: Write>(&self, mut w: W) -> Result<u64, GgufError> {
        self.write_impl(&mut w, Path::new(WRITER_LABEL))
    }

    /// Write the file at `path`, whole or not at all (a temporary file beside it, renamed
    /// when complete); returns the bytes written.
    pub fn write_to_path(&self, path: impl AsRef<Path>) -> Result<u64, GgufError> {
        let path = path.as_ref();
        let mut n = 0;
        let mut failed = None;
        let r = crate::files::write_atomic(path, |f| match self.write_impl(f, path) {
            Ok(k) => {
                n = k;
                Ok(())
            }
            Err(e) => {
                let msg = e.to_string();
                failed = Some(e);
                Err(std::io::Error::other(msg))
            }
        });
        match (r, failed) {
            (_, Some(e)) => Err(e),
            (Err(source), None) => Err(GgufError::Io {
                file: path.to_path_buf(),
                source,
            }),
            (Ok(()), None) => Ok(n),
        }
    }

    /// The whole file as bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, GgufError> {
        let mut out = Vec::new();
        self.write_impl(&mut out, Path::new(WRITER_LABEL))?;
        Ok(out)
    }
}
