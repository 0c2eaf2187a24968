//! The validating parser: turns the bytes of one GGUF file into checked metadata and tensor
//! infos ([`ParsedShard`]), or a [`GgufError`] naming the file, item and offset.
//!
//! The parser never allocates in proportion to a count it has not yet checked against the
//! bytes that remain, never indexes the buffer unchecked, and recurses into nested arrays at
//! most [`MAX_NESTING`] levels deep. Rules are listed in the [module docs](super).

use std::collections::HashMap;
use std::path::Path;

use quant::DType;

use super::tensor::{tensor_nbytes, ShapeError, TensorInfo, MAX_DIMS};
use super::value::{Array, Value, ValueType};
use super::{
    GgufError, DEFAULT_ALIGNMENT, GGUF_MAGIC, KEY_ALIGNMENT, MAX_ALIGNMENT, MAX_ARRAY_LEN,
    MAX_KEY_LEN, MAX_KV_COUNT, MAX_NESTING, MAX_STRING_LEN, MAX_TENSOR_COUNT, MAX_TENSOR_NAME_LEN,
};

/// Size of the fixed header: magic, version, tensor count, kv count.
const HEADER_LEN: u64 = 24;
/// Smallest possible key-value pair: 8-byte key length, 1-byte key, 4-byte type, 1-byte value.
const MIN_KV_LEN: u64 = 14;
/// Smallest possible tensor info: 8-byte name length, 1-byte name, n_dims, one ne, type, offset.
const MIN_TENSOR_INFO_LEN: u64 = 8 + 1 + 4 + 8 + 4 + 8;

/// The validated contents of one GGUF file (tensor data stays in the caller's buffer).
#[derive(Debug)]
pub(crate) struct ParsedShard {
    /// Format version (2 or 3).
    pub(crate) version: u32,
    /// Data alignment.
    pub(crate) alignment: u64,
    /// Absolute offset of the data section.
    pub(crate) data_offset: u64,
    /// Metadata in file order.
    pub(crate) metadata: Vec<(String, Value)>,
    /// Key → index into `metadata`.
    pub(crate) key_index: HashMap<String, usize>,
    /// Tensor infos in file order (`shard` = 0; the caller renumbers).
    pub(crate) tensors: Vec<TensorInfo>,
}

/// A read of `needed` bytes at `offset` ran past the end of the buffer.
#[derive(Clone, Copy, Debug)]
struct Short {
    offset: u64,
    needed: u64,
}

/// Copy up to `N` bytes into an array (never panics; callers pass exactly `N`).
fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    for (d, s) in a.iter_mut().zip(b) {
        *d = *s;
    }
    a
}

/// Decode little-endian fixed-width elements.
fn decode<T, const N: usize>(bytes: &[u8], f: fn([u8; N]) -> T) -> Vec<T> {
    bytes.chunks_exact(N).map(|c| f(arr(c))).collect()
}

/// `x` rounded up to a multiple of `align` (a non-zero power of two), checked.
pub(crate) fn align_up(x: u64, align: u64) -> Option<u64> {
    let mask = align.checked_sub(1)?;
    x.checked_add(mask).map(|v| v & !mask)
}

/// Short lossy form of bytes for an error message.
fn lossy(bytes: &[u8]) -> String {
    let cut = bytes.get(..64).unwrap_or(bytes);
    let s = String::from_utf8_lossy(cut).into_owned();
    if cut.len() < bytes.len() {
        s + "..."
    } else {
        s
    }
}

struct Parser<'a> {
    buf: &'a [u8],
    pos: usize,
    file: &'a Path,
}

impl<'a> Parser<'a> {
    fn len(&self) -> u64 {
        self.buf.len() as u64
    }

    fn pos(&self) -> u64 {
        self.pos as u64
    }

    fn remaining(&self) -> u64 {
        self.len().saturating_sub(self.pos())
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8], Short> {
        let short = Short {
            offset: self.pos(),
            needed: n,
        };
        if n > self.remaining() {
            return Err(short);
        }
        let n = usize::try_from(n).map_err(|_| short)?;
        let end = self.pos.checked_add(n).ok_or(short)?;
        let bytes = self.buf.get(self.pos..end).ok_or(short)?;
        self.pos = end;
        Ok(bytes)
    }

    fn u32(&mut self) -> Result<u32, Short> {
        self.take(4).map(|b| u32::from_le_bytes(arr(b)))
    }

    fn u64(&mut self) -> Result<u64, Short> {
        self.take(8).map(|b| u64::from_le_bytes(arr(b)))
    }

    fn truncated(&self, s: Short, what: String) -> GgufError {
        GgufError::Truncated {
            file: self.file.to_path_buf(),
            what,
            offset: s.offset,
            needed: s.needed,
            remaining: self.len().saturating_sub(s.offset),
        }
    }

    /// Check `count` elements of at least `min_size` bytes each against the remaining bytes
    /// and `cap`.
    fn check_count(
        &self,
        count: u64,
        min_size: u64,
        cap: u64,
        offset: u64,
        what: impl FnOnce() -> String,
    ) -> Result<(), GgufError> {
        let max = cap.min(self.remaining() / min_size.max(1));
        if count > max {
            return Err(GgufError::CountTooLarge {
                file: self.file.to_path_buf(),
                what: what(),
                count,
                offset,
                max,
            });
        }
        Ok(())
    }

    /// Read a string's length prefix and bytes (not yet UTF-8 checked). The length must fit
    /// in the remaining bytes and `cap`.
    fn str_bytes(&mut self, cap: u64, what: &dyn Fn() -> String) -> Result<&'a [u8], GgufError> {
        let offset = self.pos();
        let len = self
            .u64()
            .map_err(|s| self.truncated(s, format!("length of {}", what())))?;
        let max = cap.min(self.remaining());
        if len > max {
            return Err(GgufError::StringTooLong {
                file: self.file.to_path_buf(),
                what: what(),
                len,
                offset,
                max,
            });
        }
        self.take(len).map_err(|s| self.truncated(s, what()))
    }

    fn utf8(&self, bytes: &[u8], what: &dyn Fn() -> String) -> Result<String, GgufError> {
        let start = self.pos().saturating_sub(bytes.len() as u64);
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(GgufError::InvalidUtf8 {
                file: self.file.to_path_buf(),
                what: what(),
                offset: start.saturating_add(e.valid_up_to() as u64),
            }),
        }
    }

    fn string(&mut self, what: &dyn Fn() -> String) -> Result<String, GgufError> {
        let bytes = self.str_bytes(MAX_STRING_LEN, what)?;
        self.utf8(bytes, what)
    }

    fn key(&mut self, index: u64) -> Result<String, GgufError> {
        let offset = self.pos();
        let what = || format!("key of kv #{index}");
        let bytes = self.str_bytes(u64::MAX, &what)?;
        let invalid = |reason: String| GgufError::InvalidKey {
            file: self.file.to_path_buf(),
            index,
            offset,
            reason,
        };
        if bytes.is_empty() {
            return Err(invalid("empty key".into()));
        }
        if bytes.len() as u64 > MAX_KEY_LEN {
            return Err(invalid(format!(
                "length {} exceeds {MAX_KEY_LEN} bytes",
                bytes.len()
            )));
        }
        if let Some(i) = bytes.iter().position(|b| !b.is_ascii()) {
            let byte = bytes.get(i).copied().unwrap_or(0);
            return Err(invalid(format!(
                "key '{}' is not ASCII (byte {byte:#04x} at offset {})",
                lossy(bytes),
                offset + 8 + i as u64
            )));
        }
        self.utf8(bytes, &what)
    }

    fn bools(&mut self, bytes: &[u8], key: &str) -> Result<Vec<bool>, GgufError> {
        let start = self.pos().saturating_sub(bytes.len() as u64);
        let mut out = Vec::new();
        for (i, &b) in bytes.iter().enumerate() {
            match b {
                0 => out.push(false),
                1 => out.push(true),
                byte => {
                    return Err(GgufError::InvalidBool {
                        file: self.file.to_path_buf(),
                        key: key.to_owned(),
                        byte,
                        offset: start + i as u64,
                    })
                }
            }
        }
        Ok(out)
    }

    fn value(&mut self, ty: ValueType, key: &str) -> Result<Value, GgufError> {
        let what = || format!("value of key '{key}'");
        if let Some(size) = ty.fixed_size() {
            let b = self.take(size).map_err(|s| self.truncated(s, what()))?;
            return Ok(match ty {
                ValueType::U8 => Value::U8(u8::from_le_bytes(arr(b))),
                ValueType::I8 => Value::I8(i8::from_le_bytes(arr(b))),
                ValueType::U16 => Value::U16(u16::from_le_bytes(arr(b))),
                ValueType::I16 => Value::I16(i16::from_le_bytes(arr(b))),
                ValueType::U32 => Value::U32(u32::from_le_bytes(arr(b))),
                ValueType::I32 => Value::I32(i32::from_le_bytes(arr(b))),
                ValueType::F32 => Value::F32(f32::from_le_bytes(arr(b))),
                ValueType::U64 => Value::U64(u64::from_le_bytes(arr(b))),
                ValueType::I64 => Value::I64(i64::from_le_bytes(arr(b))),
                ValueType::F64 => Value::F64(f64::from_le_bytes(arr(b))),
                _ => {
                    // Bool is the only remaining fixed-size type.
                    let v = self.bools(b, key)?;
                    Value::Bool(v.first().copied().unwrap_or(false))
                }
            });
        }
        match ty {
            ValueType::Str => self.string(&what).map(Value::Str),
            _ => self.array(key, 1).map(Value::Array),
        }
    }

    /// Read an array at nesting level `depth` (1 = the top-level array of a key).
    fn array(&mut self, key: &str, depth: usize) -> Result<Array, GgufError> {
        let offset = self.pos();
        if depth > MAX_NESTING {
            return Err(GgufError::NestingTooDeep {
                file: self.file.to_path_buf(),
                key: key.to_owned(),
                offset,
                max: MAX_NESTING,
            });
        }
        let type_id = self
            .u32()
            .map_err(|s| self.truncated(s, format!("array element type of key '{key}'")))?;
        let ty = ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
            file: self.file.to_path_buf(),
            key: key.to_owned(),
            type_id,
            offset,
        })?;
        let count_offset = self.pos();
        let count = self
            .u64()
            .map_err(|s| self.truncated(s, format!("array length of key '{key}'")))?;
        self.check_count(
            count,
            ty.min_encoded_size(),
            MAX_ARRAY_LEN,
            count_offset,
            || format!("array '{key}' ({ty}) element"),
        )?;
        let what = || format!("elements of array '{key}'");
        if let Some(size) = ty.fixed_size() {
            // count × size ≤ remaining was checked above, so this cannot overflow.
            let total = count.saturating_mul(size);
            let b = self.take(total).map_err(|s| self.truncated(s, what()))?;
            return Ok(match ty {
                ValueType::U8 => Array::U8(b.to_vec()),
                ValueType::I8 => Array::I8(decode(b, i8::from_le_bytes)),
                ValueType::U16 => Array::U16(decode(b, u16::from_le_bytes)),
                ValueType::I16 => Array::I16(decode(b, i16::from_le_bytes)),
                ValueType::U32 => Array::U32(decode(b, u32::from_le_bytes)),
                ValueType::I32 => Array::I32(decode(b, i32::from_le_bytes)),
                ValueType::F32 => Array::F32(decode(b, f32::from_le_bytes)),
                ValueType::U64 => Array::U64(decode(b, u64::from_le_bytes)),
                ValueType::I64 => Array::I64(decode(b, i64::from_le_bytes)),
                ValueType::F64 => Array::F64(decode(b, f64::from_le_bytes)),
                _ => Array::Bool(self.bools(b, key)?),
            });
        }
        if ty == ValueType::Str {
            let mut out = Vec::new();
            for j in 0..count {
                out.push(self.string(&|| format!("element {j} of array '{key}'"))?);
            }
            return Ok(Array::Str(out));
        }
        let mut out = Vec::new();
        for _ in 0..count {
            out.push(self.array(key, depth + 1)?);
        }
        Ok(Array::Nested(out))
    }

    fn tensor_info(&mut self, index: u64, alignment: u64) -> Result<TensorInfo, GgufError> {
        let info_offset = self.pos();
        let what = || format!("name of tensor #{index}");
        let bytes = self.str_bytes(u64::MAX, &what)?;
        if bytes.is_empty() || bytes.len() as u64 > MAX_TENSOR_NAME_LEN {
            return Err(GgufError::InvalidTensorName {
                file: self.file.to_path_buf(),
                index,
                name: lossy(bytes),
                offset: info_offset,
                reason: format!(
                    "name length {} is not between 1 and {MAX_TENSOR_NAME_LEN} bytes",
                    bytes.len()
                ),
            });
        }
        let name = self.utf8(bytes, &what)?;
        let dims_offset = self.pos();
        let n_dims = self
            .u32()
            .map_err(|s| self.truncated(s, format!("n_dims of tensor '{name}'")))?;
        if n_dims == 0 || n_dims as usize > MAX_DIMS {
            return Err(GgufError::BadDims {
                file: self.file.to_path_buf(),
                tensor: name,
                n_dims,
                offset: dims_offset,
            });
        }
        let mut ne = Vec::new();
        for dim in 0..n_dims as usize {
            let offset = self.pos();
            let value = self
                .u64()
                .map_err(|s| self.truncated(s, format!("ne[{dim}] of tensor '{name}'")))?;
            if i64::try_from(value).is_err() {
                return Err(GgufError::BadDimension {
                    file: self.file.to_path_buf(),
                    tensor: name,
                    dim,
                    value,
                    offset,
                });
            }
            ne.push(value);
        }
        let type_offset = self.pos();
        let type_id = self
            .u32()
            .map_err(|s| self.truncated(s, format!("type of tensor '{name}'")))?;
        let dtype = match DType::from_gguf_id(type_id) {
            Ok(t) => t,
            Err(source) => {
                return Err(GgufError::BadTensorType {
                    file: self.file.to_path_buf(),
                    tensor: name,
                    offset: type_offset,
                    source,
                })
            }
        };
        let offset = self
            .u64()
            .map_err(|s| self.truncated(s, format!("data offset of tensor '{name}'")))?;
        let n_bytes = match tensor_nbytes(dtype, &ne) {
            Ok(n) => n,
            Err(e) => return Err(self.shape_error(e, name, dtype, ne, info_offset)),
        };
        if offset % alignment != 0 {
            return Err(GgufError::MisalignedTensor {
                file: self.file.to_path_buf(),
                tensor: name,
                data_offset: offset,
                alignment,
            });
        }
        Ok(TensorInfo {
            name,
            dtype,
            ne,
            offset,
            n_bytes,
            shard: 0,
        })
    }

    fn shape_error(
        &self,
        e: ShapeError,
        tensor: String,
        dtype: DType,
        ne: Vec<u64>,
        offset: u64,
    ) -> GgufError {
        let file = self.file.to_path_buf();
        match e {
            ShapeError::Row { ne0, block } => GgufError::BadRowSize {
                file,
                tensor,
                dtype,
                ne0,
                block_size: block,
                offset,
            },
            ShapeError::ElementOverflow | ShapeError::Dims(_) | ShapeError::Dim { .. } => {
                GgufError::SizeOverflow {
                    file,
                    tensor,
                    what: "element count",
                    ne,
                    offset,
                }
            }
            ShapeError::ByteOverflow => GgufError::SizeOverflow {
                file,
                tensor,
                what: "byte size",
                ne,
                offset,
            },
        }
    }
}

/// Validate `general.alignment`.
fn check_alignment(value: &Value, offset: u64, file: &Path) -> Result<u64, GgufError> {
    match *value {
        Value::U32(a) if a.is_power_of_two() && u64::from(a) <= MAX_ALIGNMENT => Ok(a.into()),
        _ => Err(GgufError::BadAlignment {
            file: file.to_path_buf(),
            found: value.to_string(),
            offset,
            max: MAX_ALIGNMENT,
        }),
    }
}

/// Check the version field: 2 and 3 are accepted; a byte-swapped small number means a
/// big-endian file.
fn check_version(version: u32, file: &Path) -> Result<(), GgufError> {
    match version {
        2 | 3 => Ok(()),
        v if v != 0 && v & 0xFFFF == 0 => Err(GgufError::BigEndian {
            file: file.to_path_buf(),
            version: v,
        }),
        v => Err(GgufError::UnsupportedVersion {
            file: file.to_path_buf(),
            version: v,
        }),
    }
}

/// Parse and fully validate one GGUF file held in `buf`. `file` labels error messages.
pub(crate) fn parse(buf: &[u8], file: &Path) -> Result<ParsedShard, GgufError> {
    let mut p = Parser { buf, pos: 0, file };
    let magic = p
        .take(4)
        .map_err(|s| p.truncated(s, "header (magic)".into()))?;
    if magic != GGUF_MAGIC {
        return Err(GgufError::BadMagic {
            file: file.to_path_buf(),
            found: arr(magic),
        });
    }
    let version = p
        .u32()
        .map_err(|s| p.truncated(s, "header (version)".into()))?;
    check_version(version, file)?;
    let n_tensors = p
        .u64()
        .map_err(|s| p.truncated(s, "header (tensor count)".into()))?;
    let n_kv = p
        .u64()
        .map_err(|s| p.truncated(s, "header (key-value count)".into()))?;
    debug_assert_eq!(p.pos(), HEADER_LEN);
    p.check_count(n_kv, MIN_KV_LEN, MAX_KV_COUNT, 16, || {
        "metadata key-value".into()
    })?;
    // Early check with what the key-values leave at least; repeated exactly below.
    let left = p
        .remaining()
        .saturating_sub(n_kv.saturating_mul(MIN_KV_LEN));
    if n_tensors > MAX_TENSOR_COUNT.min(left / MIN_TENSOR_INFO_LEN) {
        return Err(GgufError::CountTooLarge {
            file: file.to_path_buf(),
            what: "tensor".into(),
            count: n_tensors,
            offset: 8,
            max: MAX_TENSOR_COUNT.min(left / MIN_TENSOR_INFO_LEN),
        });
    }

    let mut metadata = Vec::new();
    let mut key_index = HashMap::new();
    let mut alignment = DEFAULT_ALIGNMENT;
    for i in 0..n_kv {
        let kv_offset = p.pos();
        let key = p.key(i)?;
        if key_index.contains_key(&key) {
            return Err(GgufError::DuplicateKey {
                file: file.to_path_buf(),
                key,
                offset: kv_offset,
            });
        }
        let type_offset = p.pos();
        let type_id = p
            .u32()
            .map_err(|s| p.truncated(s, format!("value type of key '{key}'")))?;
        let ty = ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
            file: file.to_path_buf(),
            key: key.clone(),
            type_id,
            offset: type_offset,
        })?;
        let value = p.value(ty, &key)?;
        if key == KEY_ALIGNMENT {
            alignment = check_alignment(&value, kv_offset, file)?;
        }
        key_index.insert(key.clone(), metadata.len());
        metadata.push((key, value));
    }

    p.check_count(n_tensors, MIN_TENSOR_INFO_LEN, MAX_TENSOR_COUNT, 8, || {
        "tensor".into()
    })?;
    let mut tensors: Vec<TensorInfo> = Vec::new();
    let mut names: HashMap<String, usize> = HashMap::new();
    for i in 0..n_tensors {
        let info_offset = p.pos();
        let info = p.tensor_info(i, alignment)?;
        if names.contains_key(&info.name) {
            return Err(GgufError::DuplicateTensor {
                file: file.to_path_buf(),
                name: info.name,
                offset: info_offset,
            });
        }
        names.insert(info.name.clone(), tensors.len());
        tensors.push(info);
    }

    let infos_end = p.pos();
    let data_offset = align_up(infos_end, alignment).unwrap_or(u64::MAX);
    if !tensors.is_empty() && data_offset > p.len() {
        return Err(p.truncated(
            Short {
                offset: infos_end,
                needed: data_offset - infos_end,
            },
            "padding before the data section".into(),
        ));
    }
    check_ranges(&tensors, data_offset, p.len(), file)?;
    Ok(ParsedShard {
        version,
        alignment,
        data_offset,
        metadata,
        key_index,
        tensors,
    })
}

/// Every tensor's data lies inside the file, and no two non-empty tensors overlap.
fn check_ranges(
    tensors: &[TensorInfo],
    data_offset: u64,
    file_len: u64,
    file: &Path,
) -> Result<(), GgufError> {
    let range = |t: &TensorInfo| {
        let start = data_offset.checked_add(t.offset);
        let end = start.and_then(|s| s.checked_add(t.n_bytes));
        (start.unwrap_or(u64::MAX), end.unwrap_or(u64::MAX))
    };
    for t in tensors {
        let (start, end) = range(t);
        if end > file_len {
            return Err(GgufError::TensorOutOfBounds {
                file: file.to_path_buf(),
                tensor: t.name.clone(),
                start,
                end,
                file_len,
            });
        }
    }
    let mut order: Vec<&TensorInfo> = tensors.iter().filter(|t| t.n_bytes > 0).collect();
    order.sort_by_key(|t| t.offset);
    let mut furthest: Option<&TensorInfo> = None;
    for t in order {
        let (start, end) = range(t);
        if let Some(prev) = furthest {
            let (prev_start, prev_end) = range(prev);
            if start < prev_end {
                return Err(GgufError::TensorOverlap {
                    file: file.to_path_buf(),
                    tensor: t.name.clone(),
                    start,
                    end,
                    other: prev.name.clone(),
                    other_start: prev_start,
                    other_end: prev_end,
                });
            }
        }
        // Sorted by start and non-overlapping so far, so the latest tensor ends furthest.
        furthest = Some(t);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn align() {
        assert_eq!(align_up(0, 32), Some(0));
        assert_eq!(align_up(1, 32), Some(32));
        assert_eq!(align_up(32, 32), Some(32));
        assert_eq!(align_up(u64::MAX, 32), None);
        assert_eq!(align_up(5, 0), None);
    }

    #[test]
    fn versions() {
        let f = Path::new("x");
        assert!(check_version(3, f).is_ok());
        assert!(check_version(2, f).is_ok());
        assert!(matches!(
            check_version(0x0300_0000, f),
            Err(GgufError::BigEndian { .. })
        ));
        assert!(matches!(
            check_version(1, f),
            Err(GgufError::UnsupportedVersion { version: 1, .. })
        ));
    }
}
