//! [`GgufError`]: every way reading, validating or writing a GGUF file can fail.
//!
//! Each message starts with the file (its path, `<memory>` for [`GgufFile::parse`], or
//! `<writer>` for the writer), then names the key or tensor and the byte offset where parsing
//! stopped, following llama.cpp's style (`shared/spec/hostile-inputs.md` §0.5), e.g.
//! `model.gguf: tensor 'blk.0.attn_q.weight': data [1000, 5000) extends past end of file (4096 bytes)`.
//!
//! [`GgufFile::parse`]: super::GgufFile::parse

use std::path::PathBuf;

use quant::{DType, QuantError};

/// Errors from the GGUF reader, the split loader and the writer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GgufError {
    /// Opening, mapping, reading or writing a file failed.
    #[error("{}: I/O error: {source}", file.display())]
    Io {
        /// The file.
        file: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A field runs past the end of the file.
    #[error("{}: {what} at offset {offset} is truncated: needs {needed} bytes, {remaining} remain", file.display())]
    Truncated {
        /// The file.
        file: PathBuf,
        /// Which field (`"header"`, `"value of key 'general.name'"`, ...).
        what: String,
        /// Byte offset of the field.
        offset: u64,
        /// Bytes the field needs.
        needed: u64,
        /// Bytes left in the file at `offset`.
        remaining: u64,
    },
    /// The file does not start with `GGUF`.
    #[error("{}: bad magic {found:02x?} (expected \"GGUF\"): not a GGUF file", file.display())]
    BadMagic {
        /// The file.
        file: PathBuf,
        /// The first four bytes.
        found: [u8; 4],
    },
    /// The version field reads as a byte-swapped small number: a big-endian file.
    #[error("{}: big-endian GGUF not supported (version field at offset 4 reads {version:#010x})", file.display())]
    BigEndian {
        /// The file.
        file: PathBuf,
        /// The version as read little-endian.
        version: u32,
    },
    /// A version other than 2 or 3.
    #[error("{}: unsupported GGUF version {version} at offset 4 (supported: 2 and 3{})",
        file.display(), if *version == 1 { "; v1 used 32-bit counts, re-convert the model" } else { "" })]
    UnsupportedVersion {
        /// The file.
        file: PathBuf,
        /// The version read.
        version: u32,
    },
    /// A count (key-values, tensors, array elements) larger than the remaining bytes could
    /// hold, or larger than the hard cap.
    #[error("{}: {what} count {count} at offset {offset} exceeds the limit {max} (bounded by the remaining file bytes and a hard cap)", file.display())]
    CountTooLarge {
        /// The file.
        file: PathBuf,
        /// What is counted.
        what: String,
        /// The count read.
        count: u64,
        /// Byte offset of the count.
        offset: u64,
        /// The largest count allowed here.
        max: u64,
    },
    /// A string length larger than the remaining bytes or the cap.
    #[error("{}: {what}: string length {len} at offset {offset} exceeds the limit {max}", file.display())]
    StringTooLong {
        /// The file.
        file: PathBuf,
        /// Which string.
        what: String,
        /// The length read.
        len: u64,
        /// Byte offset of the length prefix.
        offset: u64,
        /// The largest length allowed here (remaining bytes or cap).
        max: u64,
    },
    /// A string that is not valid UTF-8.
    #[error("{}: {what}: invalid UTF-8 at offset {offset}", file.display())]
    InvalidUtf8 {
        /// The file.
        file: PathBuf,
        /// Which string.
        what: String,
        /// Byte offset of the string bytes.
        offset: u64,
    },
    /// A metadata key that is empty, not ASCII or too long.
    #[error("{}: key of kv #{index} at offset {offset}: {reason}", file.display())]
    InvalidKey {
        /// The file.
        file: PathBuf,
        /// Index of the key-value pair.
        index: u64,
        /// Byte offset of the key.
        offset: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// The same key appears twice.
    #[error("{}: duplicate key '{key}' at offset {offset}", file.display())]
    DuplicateKey {
        /// The file.
        file: PathBuf,
        /// The key.
        key: String,
        /// Byte offset of the second occurrence.
        offset: u64,
    },
    /// A value (or array element) type id ≥ 13.
    #[error("{}: key '{key}': unknown metadata value type {type_id} at offset {offset}", file.display())]
    UnknownValueType {
        /// The file.
        file: PathBuf,
        /// The key.
        key: String,
        /// The type id read.
        type_id: u32,
        /// Byte offset of the type id.
        offset: u64,
    },
    /// A bool byte other than 0 or 1.
    #[error("{}: key '{key}': invalid bool byte {byte:#04x} at offset {offset}", file.display())]
    InvalidBool {
        /// The file.
        file: PathBuf,
        /// The key.
        key: String,
        /// The byte read.
        byte: u8,
        /// Its offset.
        offset: u64,
    },
    /// Arrays nested deeper than [`MAX_NESTING`](super::MAX_NESTING).
    #[error("{}: key '{key}': arrays nested deeper than {max} levels at offset {offset}", file.display())]
    NestingTooDeep {
        /// The file.
        file: PathBuf,
        /// The key.
        key: String,
        /// Byte offset of the too-deep array.
        offset: u64,
        /// The cap.
        max: usize,
    },
    /// `general.alignment` has the wrong type, is zero, not a power of two or too large.
    #[error("{}: general.alignment at offset {offset} is {found}; it must be a u32 power of two from 1 to {max}", file.display())]
    BadAlignment {
        /// The file.
        file: PathBuf,
        /// The value found (type and value).
        found: String,
        /// Byte offset of the key-value pair.
        offset: u64,
        /// The largest alignment accepted.
        max: u64,
    },
    /// A tensor name that is empty or too long.
    #[error("{}: tensor #{index} '{name}' at offset {offset}: {reason}", file.display())]
    InvalidTensorName {
        /// The file.
        file: PathBuf,
        /// Index of the tensor info.
        index: u64,
        /// The name (possibly cut).
        name: String,
        /// Byte offset of the tensor info.
        offset: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// The same tensor name appears twice in one file.
    #[error("{}: duplicate tensor name '{name}' at offset {offset}", file.display())]
    DuplicateTensor {
        /// The file.
        file: PathBuf,
        /// The name.
        name: String,
        /// Byte offset of the second tensor info.
        offset: u64,
    },
    /// `n_dims` outside 1..=4.
    #[error("{}: tensor '{tensor}': n_dims {n_dims} at offset {offset} is not between 1 and 4", file.display())]
    BadDims {
        /// The file.
        file: PathBuf,
        /// The tensor.
        tensor: String,
        /// The value read.
        n_dims: u32,
        /// Byte offset of `n_dims`.
        offset: u64,
    },
    /// A dimension above `i64::MAX` (negative as ggml's `int64_t`).
    #[error("{}: tensor '{tensor}': ne[{dim}] = {value} at offset {offset} exceeds i64::MAX", file.display())]
    BadDimension {
        /// The file.
        file: PathBuf,
        /// The tensor.
        tensor: String,
        /// Which dimension.
        dim: usize,
        /// The value read.
        value: u64,
        /// Byte offset of the dimension.
        offset: u64,
    },
    /// An unknown or retired ggml type id.
    #[error("{}: tensor '{tensor}': type at offset {offset}: {source}", file.display())]
    BadTensorType {
        /// The file.
        file: PathBuf,
        /// The tensor.
        tensor: String,
        /// Byte offset of the type id.
        offset: u64,
        /// Why the id was refused (carries the id).
        source: QuantError,
    },
    /// The row length `ne[0]` is not a multiple of the type's block size.
    #[error("{}: tensor '{tensor}' at offset {offset}: row length ne[0] = {ne0} is not a multiple of the {dtype} block size {block_size}", file.display())]
    BadRowSize {
        /// The file.
        file: PathBuf,
        /// The tensor.
        tensor: String,
        /// Its type.
        dtype: DType,
        /// The row length.
        ne0: u64,
        /// The type's block size.
        block_size: u64,
        /// Byte offset of the tensor info.
        offset: u64,
    },
    /// The element count or byte size of a tensor (or the padded running total) overflows.
    #[error("{}: tensor '{tensor}' at offset {offset}: {what} of shape {ne:?} overflows", file.display())]
    SizeOverflow {
        /// The file.
        file: PathBuf,
        /// The tensor.
        tensor: String,
        /// Which quantity (`"element count"`, `"byte size"`, `"data range"`).
        what: &'static str,
        /// The shape.
        ne: Vec<u64>,
        /// Byte offset of the tensor info.
        offset: u64,
    },
    /// A tensor offset that is not a multiple of the alignment.
    #[error("{}: tensor '{tensor}': data offset {data_offset} is not a multiple of the alignment {alignment}", file.display())]
    MisalignedTensor {
        /// The file.
        file: PathBuf,
        /// The tensor.
        tensor: String,
        /// The offset relative to the data section.
        data_offset: u64,
        /// The file's alignment.
        alignment: u64,
    },
    /// Tensor data that ends past the end of the file.
    #[error("{}: tensor '{tensor}': data [{start}, {end}) extends past end of file ({file_len} bytes)", file.display())]
    TensorOutOfBounds {
        /// The file.
        file: PathBuf,
        /// The tensor.
        tensor: String,
        /// Absolute start offset (saturated at `u64::MAX`).
        start: u64,
        /// Absolute end offset, exclusive (saturated at `u64::MAX`).
        end: u64,
        /// File length.
        file_len: u64,
    },
    /// Two tensors whose data ranges overlap.
    #[error("{}: tensor '{tensor}' data [{start}, {end}) overlaps tensor '{other}' data [{other_start}, {other_end})", file.display())]
    TensorOverlap {
        /// The file.
        file: PathBuf,
        /// The later tensor (by offset).
        tensor: String,
        /// Its absolute start.
        start: u64,
        /// Its absolute end.
        end: u64,
        /// The tensor it overlaps.
        other: String,
        /// Its absolute start.
        other_start: u64,
        /// Its absolute end.
        other_end: u64,
    },
    /// No tensor of that name.
    #[error("{}: no tensor named '{name}'", file.display())]
    TensorNotFound {
        /// The file (first shard).
        file: PathBuf,
        /// The name asked for.
        name: String,
    },
    /// No metadata key of that name.
    #[error("{}: no metadata key '{key}'", file.display())]
    KeyNotFound {
        /// The file (first shard).
        file: PathBuf,
        /// The key asked for.
        key: String,
    },
    /// A typed getter found a value of another type.
    #[error("{}: metadata key '{key}' is {found}, expected {expected}", file.display())]
    WrongType {
        /// The file.
        file: PathBuf,
        /// The key.
        key: String,
        /// The type asked for.
        expected: &'static str,
        /// The type found.
        found: String,
    },
    /// A shard of a split model is missing.
    #[error("{}: shard {no} of {count} is missing", file.display())]
    MissingShard {
        /// The path where the shard was looked for.
        file: PathBuf,
        /// Its 1-based number.
        no: u32,
        /// Number of shards.
        count: u32,
    },
    /// A shard's `split.*` key disagrees with its file name or with the other shards.
    #[error("{}: split key '{key}' is {found}, expected {expected}", file.display())]
    SplitMismatch {
        /// The shard.
        file: PathBuf,
        /// The key (`split.no`, `split.count`, `split.tensors.count`).
        key: &'static str,
        /// The value expected.
        expected: u64,
        /// The value found (or `missing`).
        found: String,
    },
    /// A file declares `split.count > 1` but its name does not follow the shard pattern.
    #[error("{}: file declares split.count = {count} but its name does not follow NAME-00001-of-{count:05}.gguf", file.display())]
    SplitNotNamed {
        /// The file.
        file: PathBuf,
        /// The declared shard count.
        count: u64,
    },
    /// The same tensor name appears in two shards.
    #[error("{}: tensor '{name}' also appears in shard {}", file.display(), first.display())]
    DuplicateTensorAcrossShards {
        /// The later shard.
        file: PathBuf,
        /// The tensor name.
        name: String,
        /// The earlier shard holding the same name.
        first: PathBuf,
    },
    /// The writer was given something it cannot encode or that a reader would refuse.
    #[error("{}: {item}: {reason}", file.display())]
    InvalidInput {
        /// The output (`<writer>` before a path is known).
        file: PathBuf,
        /// The key or tensor concerned.
        item: String,
        /// What is wrong.
        reason: String,
    },
}
